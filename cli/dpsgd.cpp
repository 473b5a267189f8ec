#include "dpsgd.hpp"
#include "report.hpp"

#include "filkit/base/summary.hpp"

#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>

namespace filkit::cli {

DataFlags DpSgdCommandOptions::default_data_flags() {
  DataFlags flags;
  flags.data = "mnist";
  flags.pca = "0";
  flags.scale = "none";
  return flags;
}

namespace {

void add_training_flags(CLI::App& command, DpSgdCommandOptions& o) {
  command.add_option("--model", o.model,
                     "logistic or softmax (GLMs, G in closed form), mlp (tanh) or cnn (the paper's MNIST ConvNet) "
                     "through LibTorch; mlp and cnn use every class unless --classes says otherwise")
      ->check(CLI::IsMember({"logistic", "softmax", "mlp", "cnn"}))
      ->capture_default_str();
  command.add_option("--engine", o.engine,
                     "How G = d g~/dx is differentiated: closed-form (GLMs), torch (LibTorch autodiff; softmax, mlp, "
                     "cnn), or auto (closed form where there is one)")
      ->check(CLI::IsMember({"auto", "closed-form", "torch"}))
      ->capture_default_str();
  command.add_option("--hidden", o.hidden, "mlp: hidden layer widths")->delimiter(',')->capture_default_str();
  command.add_option("--chunk", o.chunk, "Networks: examples differentiated together (memory vs speed)")
      ->capture_default_str();
  command.add_option("--optimizer", o.optimizer, "sgd (with --momentum) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  command.add_option("--adam-beta1", o.adam_beta1, "Adam: first-moment decay")->capture_default_str();
  command.add_option("--adam-beta2", o.adam_beta2, "Adam: second-moment decay")->capture_default_str();
  command.add_option("--adam-epsilon", o.adam_epsilon, "Adam: epsilon")->capture_default_str();
  command.add_flag("--intercept", o.intercept, "Add a public constant-1 coordinate");
  command.add_option("--label", o.label, "Whether labels are private coordinates: private or public")
      ->check(CLI::IsMember({"private", "public"}))
      ->capture_default_str();
  command.add_option("--batch-size", o.batch_size, "B: batch size (expected size with Poisson sampling)")
      ->capture_default_str();
  command.add_option("--sampling", o.sampling, "uniform (B without replacement) or poisson (rate B/n)")
      ->check(CLI::IsMember({"uniform", "poisson"}))
      ->capture_default_str();
  command.add_option("--steps", o.steps, "T: number of steps")->capture_default_str();
  command.add_option("--step-size", o.step_size, "rho: step size, > 0")->capture_default_str();
  command.add_option("--clip", o.clip_norm, "C: clip norm of the GELU clipping, > 0")->capture_default_str();
  command.add_option("--sigma", o.sigma, "Noise multiplier: noise N(0, sigma^2 C^2 I) on the clipped sum, > 0")
      ->capture_default_str();
  command.add_option("--momentum", o.momentum, "Momentum mass in [0, 1)")->capture_default_str();
  command.add_option("--weight-decay", o.weight_decay, "Weight decay, >= 0")->capture_default_str();
  command.add_option("--init-scale", o.init_scale, "w_0 ~ N(0, init_scale^2 I); 0 starts at zero")
      ->capture_default_str();
}

void add_accounting_flags(CLI::App& command, DpSgdCommandOptions& o) {
  command.add_option("--kappa", o.kappa, "Subsampling factor: amplified (q/(q+(1-q)e^-eps0)) or one")
      ->check(CLI::IsMember({"amplified", "one"}))
      ->capture_default_str();
  command.add_option("--kappa-delta", o.kappa_delta, "delta of the per-step DP guarantee behind kappa")
      ->capture_default_str();
  command.add_option("--trace", o.trace,
                     "Tr(G^T G) per step: exact, coordinates or gaussian (estimates); auto = exact for GLMs, "
                     "gaussian for networks")
      ->check(CLI::IsMember({"auto", "exact", "coordinates", "gaussian"}))
      ->capture_default_str();
  command.add_option("--probes", o.probes,
                     "Probes per example and step of an estimated trace; auto = 50 for GLMs, 1 for networks (the "
                     "sum over the steps that sample an example averages their noise)")
      ->capture_default_str();
  command.add_option("--spectral", o.spectral,
                     "||G||_2 per step: exact, power-iteration or none; auto = exact for GLMs, none for networks")
      ->check(CLI::IsMember({"auto", "exact", "power-iteration", "none"}))
      ->capture_default_str();
  command.add_option("--power-iterations", o.power_iterations, "Power iterations per example and step")
      ->capture_default_str();
  command.add_option("--runs", o.runs, "Independent runs averaged by the accountant")->capture_default_str();
  command.add_option("--epochs", o.epochs, "Also report at these epochs (multiples of n/B steps)")->delimiter(',');
  command.add_option("--rdp-delta", o.rdp_delta, "delta of the reported (eps, delta)-DP guarantee")
      ->capture_default_str();
  command.add_option("--checkpoint", o.checkpoint,
                     "Save the training state to this file (atomically) and resume from it when it exists; removed "
                     "when the job finishes");
  command.add_option("--checkpoint-every", o.checkpoint_every, "Save the state every this many steps (0: only "
                     "when stopping)")->capture_default_str();
  command.add_option("--stop-after", o.stop_after,
                     "Stop after this many steps in this invocation, saving the state to --checkpoint (0: run to "
                     "the end)")->capture_default_str();
}

}  // namespace

void setup_dpsgd(CLI::App& app) {
  auto options = std::make_shared<DpSgdCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "dpsgd",
      "Train logistic or softmax regression, a tanh MLP or the paper's ConvNet by DP-SGD (GELU clipping, "
      "Gaussian noise) and account every training example's Fisher information loss (Algorithm 1 of Guo et "
      "al. 2022): per-example dFIL and eta with their reconstruction MSE bounds. Without --data: MNIST (0 vs 1 "
      "for GLMs, all digits for networks), pixels in [0, 1], 784 features.");
  add_data_flags(*command, options->data);
  add_training_flags(*command, *options);
  add_accounting_flags(*command, *options);
  add_run_flags(*command, options->run,
                "Per-example CSV at every reported step: eta, dFIL, their MSE bounds, times sampled");
  auto report = std::make_shared<std::string>();
  add_report_flag(*command, *report);
  command->callback([options, report] {
    run_with_report(*report, options->run, [&] { run_dpsgd(*options, std::cout); }, std::cout);
  });
}

namespace {

/// --model and --engine: a closed-form GLM, or a network through LibTorch.
void set_model(const DpSgdCommandOptions& options, DpSgdOptions& d) {
  const bool glm = options.model == "logistic" || options.model == "softmax";
  const bool torch = options.engine == "torch" || (options.engine == "auto" && !glm);
  if (!glm && options.engine == "closed-form")
    throw CLI::ValidationError("--engine", "closed-form: the " + options.model + " has no closed form; use torch");
  if (options.model == "logistic" && torch)
    throw CLI::ValidationError("--engine", "torch: logistic is closed-form only (the softmax network with 2 "
                                           "classes is its autodiff counterpart)");
  if (!torch) {
    d.kind = parse_enum<ModelKind>(options.model);
    return;
  }
  NetworkOptions network;
  network.architecture = parse_enum<NetworkArchitecture>(options.model);
  network.hidden = options.hidden;
  network.chunk = options.chunk;
  d.network = network;
}

}  // namespace

DpSgdJobOptions to_dpsgd_job_options(const DpSgdCommandOptions& options) {
  DpSgdJobOptions job;
  const bool network_model = options.model == "mlp" || options.model == "cnn";
  DataFlags data = options.data;
  if (network_model && data.classes == "auto") data.classes = "all";
  job.data = to_data_options(data, options.run.seed);
  job.preprocess = to_preprocess_options(options.data);
  DpSgdOptions& d = job.dpsgd;
  set_model(options, d);
  d.intercept = options.intercept;
  d.label = parse_enum<LabelPrivacy>(options.label);
  d.batch_size = options.batch_size;
  d.sampling = parse_enum<BatchSampling>(options.sampling);
  d.steps = options.steps;
  d.step_size = options.step_size;
  d.clip_norm = options.clip_norm;
  d.noise_multiplier = options.sigma;
  d.optimizer = parse_enum<Optimizer>(options.optimizer);
  d.momentum = options.momentum;
  d.adam_beta1 = options.adam_beta1;
  d.adam_beta2 = options.adam_beta2;
  d.adam_epsilon = options.adam_epsilon;
  d.weight_decay = options.weight_decay;
  d.init_scale = options.init_scale;
  d.subsampling = parse_enum<SubsamplingFactor>(options.kappa);
  d.kappa_delta = options.kappa_delta;
  const bool autodiff = d.network.has_value();
  d.trace = parse_enum<TraceMethod>(options.trace != "auto" ? options.trace : autodiff ? "gaussian" : "exact");
  d.spectral = parse_enum<SpectralMethod>(options.spectral != "auto" ? options.spectral : autodiff ? "none" : "exact");
  if (options.probes == "auto") {
    d.probes = autodiff ? 1 : 50;
  } else {
    try {
      std::size_t used = 0;
      d.probes = std::stoi(options.probes, &used);
      if (used != options.probes.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw CLI::ValidationError("--probes", "'" + options.probes + "' is neither a count nor auto");
    }
  }
  d.power_iterations = options.power_iterations;
  d.runs = options.runs;
  d.seed = options.run.seed;
  d.report_epochs = options.epochs;
  d.rdp_delta = options.rdp_delta;
  d.checkpoint_path = options.checkpoint;
  d.checkpoint_every = options.checkpoint_every;
  d.stop_after = options.stop_after;
  job.progress = !options.run.quiet;
  return job;
}

namespace {

void print_summary(std::ostream& out, const DpSgdCommandOptions& options, const DpSgdJobResult& result) {
  const DpSgdResult& t = result.training;
  out << "filkit dpsgd: " << options.data.data << ", n = " << t.n << ", d = " << result.data.train.d() << ", "
      << options.model << ", B = " << options.batch_size << " (" << options.sampling << ", q = " << t.sampling_rate
      << "), T = " << options.steps << ", rho = " << options.step_size << ", C = " << options.clip_norm
      << ", sigma = " << options.sigma << ", kappa = " << t.kappa << ", label " << options.label << ", "
      << options.runs << " run(s), " << t.parameter_count << " parameters" << (t.resumed ? ", resumed" : "")
      << "\n";
  out << "  " << std::setw(7) << "step" << std::setw(8) << "epoch" << std::setw(10) << "test acc" << std::setw(13)
      << "median dFIL" << std::setw(11) << "max dFIL" << std::setw(13) << "median eta" << std::setw(11) << "max eta"
      << std::setw(14) << "1/maxdFIL^2" << std::setw(11) << "RDP eps" << std::setw(11) << "eps2" << std::setw(11)
      << "RDP bound" << "\n";
  for (const DpSgdCheckpoint& c : t.checkpoints) {
    const Summary dfil = summarize(c.dfil(t.private_dims));
    const VectorXd eta = c.eta();
    const bool has_eta = !eta.hasNaN();
    out << "  " << std::setw(7) << c.step << std::fixed << std::setprecision(2) << std::setw(8) << c.epoch
        << std::setprecision(4) << std::setw(10) << c.mean_test_accuracy() << std::scientific << std::setprecision(3)
        << std::setw(13) << dfil.median << std::setw(11) << dfil.max << std::setw(13)
        << (has_eta ? summarize(eta).median : std::nan("")) << std::setw(11) << (has_eta ? eta.maxCoeff() : std::nan("")) << std::setw(14)
        << 1.0 / (dfil.max * dfil.max) << std::setw(11) << c.privacy.eps << std::setw(11) << c.rdp_order2
        << std::setw(11) << c.rdp_mse_bound() << std::defaultfloat << "\n";
    if (!c.privacy.warning.empty()) out << "  note: " << c.privacy.warning << "\n";
  }
  out << "  seconds:";
  for (const auto& [stage, seconds] : result.seconds) out << " " << stage << " " << std::setprecision(3) << seconds;
  out << "\n";
}

}  // namespace

DpSgdJobResult run_dpsgd(const DpSgdCommandOptions& options, std::ostream& out) {
  apply_threads(options.run.threads);
  const DpSgdJobOptions job = to_dpsgd_job_options(options);
  const DpSgdJobResult result = run_dpsgd_job(job);
  if (!result.training.complete) {
    if (!options.run.quiet)
      out << "filkit dpsgd: stopped after step " << result.training.steps_done << " of "
          << static_cast<Index>(options.runs) * options.steps << " (all runs); the state is in " << options.checkpoint
          << ": run the same command again to resume\n";
    return result;
  }
  if (!options.run.out.empty()) write_table(options.run.out, result.table_header(), result.table_rows());
  if (!options.run.json.empty()) write_json(options.run.json, result.summary(job));
  if (!options.run.quiet) print_summary(out, options, result);
  return result;
}

}  // namespace filkit::cli
