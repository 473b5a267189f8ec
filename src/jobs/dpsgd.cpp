#include "filkit/jobs/dpsgd.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/jobs/task.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/sha256.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"

#include <cmath>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <stdexcept>

namespace filkit {

bool is_network(ModelChoice model) { return model != ModelChoice::kLogistic && model != ModelChoice::kSoftmax; }

NetworkArchitecture network_architecture(ModelChoice model) {
  switch (model) {
    case ModelChoice::kSoftmax: return NetworkArchitecture::kSoftmax;
    case ModelChoice::kMlp: return NetworkArchitecture::kMlp;
    case ModelChoice::kCnn: return NetworkArchitecture::kCnn;
    case ModelChoice::kCifarCnn: return NetworkArchitecture::kCifarCnn;
    case ModelChoice::kCustom: return NetworkArchitecture::kCustom;
    case ModelChoice::kLogistic: break;
  }
  throw std::logic_error("network_architecture: " + to_string(model) + " is no network");
}

DpSgdOptions DpSgdJobOptions::training_options() const {
  DpSgdOptions options = dpsgd;
  if (model != ModelChoice::kCustom && !network.layers.empty())
    option_error("arch", "a layer specification needs " + option_name("model") + " = custom (" + option_name("model") +
                             " is " + to_string(model) + ")");
  if (model != ModelChoice::kCustom && !network.torchscript.empty())
    option_error("torchscript", "a TorchScript file needs " + option_name("model") + " = custom (" +
                                    option_name("model") + " is " + to_string(model) + ")");
  const bool glm = !is_network(model);
  const bool torch = engine == DpSgdEngine::kTorch || (engine == DpSgdEngine::kAuto && !glm);
  if (!glm && engine == DpSgdEngine::kClosedForm)
    option_error("engine", "closed-form", "the " + to_string(model) + " has no closed form; use torch");
  if (model == ModelChoice::kLogistic && torch)
    option_error("engine", "torch",
                 "logistic is closed-form only (the softmax network with 2 classes is its autodiff "
                 "counterpart)");
  if (torch) {
    NetworkOptions net = network;
    net.architecture = network_architecture(model);
    options.network = net;
  } else {
    options.kind = model == ModelChoice::kSoftmax ? ModelKind::kSoftmax : ModelKind::kLogistic;
    options.network.reset();
  }
  return options.resolved();
}

void DpSgdJobOptions::resolve() {
  if (!data.classes && is_network(model)) data.classes = std::vector<int>{};  // networks: every class
  data.resolve();
  const DpSgdOptions resolved = training_options();
  engine = resolved.network ? DpSgdEngine::kTorch : DpSgdEngine::kClosedForm;
  dpsgd.trace = resolved.trace;
  dpsgd.spectral = resolved.spectral;
  dpsgd.probes = resolved.probes;
}

void DpSgdJobOptions::validate() const {
  data.validate();
  if (run) {
    check_run_index(dpsgd, *run);
    if (run_dir.empty())
      option_error("run", std::to_string(*run), "writes its run file into " + option_name("run_dir") + ", not given");
  } else if (!run_dir.empty() && (!dpsgd.checkpoint_path.empty() || dpsgd.stop_after > 0)) {
    option_error("run_dir", run_dir,
                 "without " + option_name("run") + " combines the runs' files there and trains nothing: " +
                     option_name("checkpoint") + " and " + option_name("stop_after") + " have nothing to resume");
  }
  // Flags of the networks are checked whatever the model, so that a wrong value is never ignored.
  require_positive("chunk", network.chunk);
  for (Index width : network.hidden) require_positive("hidden", width);
  training_options().validate();
}

std::vector<double> epoch_snapshots(Index n, Index batch_size, Index steps) {
  const double epochs = static_cast<double>(steps) * static_cast<double>(batch_size) / static_cast<double>(n);
  std::vector<double> chosen;
  if (epochs >= 2) {
    // Whole epochs (epoch e is step round(e n / B) <= T), every k-th beyond kMaxEpochSnapshots.
    const auto whole = static_cast<Index>(std::floor(epochs));
    const Index every = (whole + kMaxEpochSnapshots - 1) / kMaxEpochSnapshots;
    for (Index e = every; e <= whole; e += every) chosen.push_back(static_cast<double>(e));
  } else {
    for (int k = 1; k < 10; ++k) chosen.push_back(epochs * k / 10);  // tenths of a run shorter than two epochs
  }
  return chosen;
}

DpSgdJobResult run_dpsgd(const DpSgdJobOptions& requested, bool progress, bool report) {
  requested.validate();
  const std::string& checkpoint = requested.dpsgd.checkpoint_path;  // before loading: train_dpsgd checks it late
  if (!checkpoint.empty()) check_output_path("checkpoint", checkpoint);
  DpSgdJobResult result;
  result.options = requested;
  result.options.resolve();
  const DpSgdJobOptions& options = result.options;
  if (!options.network.torchscript.empty()) result.torchscript_sha256 = file_sha256_hex(options.network.torchscript);
  // On the ranks of an MPI job each loads and trains on its shard of the rows (docs/distributed.md).
  const Communicator& comm = Communicator::world();
  PreparedData prepared = load_and_preprocess(options.data, options.dpsgd.seed, comm);
  result.data = std::move(prepared.data);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
  result.n_test = comm.sum(result.data.test.n());
  // The data's autos, so that the summary's settings record the number used.
  result.options.dpsgd.kappa_delta = result.options.dpsgd.resolved(comm.sum(result.data.train.n())).kappa_delta;
  // A report draws its figures over the snapshots: without a schedule, one each epoch.
  if (report && result.options.dpsgd.report_epochs.empty())
    result.options.dpsgd.report_epochs =
        epoch_snapshots(comm.sum(result.data.train.n()), options.dpsgd.batch_size, options.dpsgd.steps);
  const StageScope stage("training (DP-SGD)");
  DpSgdOptions training = options.training_options();
  training.max_memory = options.data.max_memory;  // also the budget of the per-run traces
  if (options.run) {                              // run K alone, into its run file
    result.run_file = run_file(options.run_dir, *options.run);
    result.training = train_dpsgd_run(result.data.train, result.data.test, training, *options.run, result.run_file,
                                      progress, CheckpointWhenDone::kKeep, comm);
  } else if (!options.run_dir.empty()) {  // the runs' files combined, nothing trained
    std::vector<std::string> paths;
    for (int run = 0; run < training.runs; ++run) paths.push_back(run_file(options.run_dir, run));
    result.training = combine_dpsgd_run_files(result.data.train, result.data.test, training, paths, comm);
  } else {
    result.training =
        train_dpsgd(result.data.train, result.data.test, training, progress, CheckpointWhenDone::kKeep, comm);
  }
  result.labels = comm.gather(result.data.train.y);
  for (const auto& [stage, seconds] : result.training.seconds) result.seconds[stage] = seconds;
  return result;
}

void DpSgdJobResult::outputs_written() const {
  if (!training.complete || options.dpsgd.checkpoint_path.empty()) return;
  std::error_code ignored;  // a file left behind only resumes to the same results
  std::filesystem::remove(options.dpsgd.checkpoint_path, ignored);
}

std::string run_file(const std::string& run_dir, int run) {
  return (std::filesystem::path(run_dir) / ("run" + std::to_string(run) + ".fkrun")).string();
}

DpSgdJobResult DpSgdJob::run(const Options& options, bool progress, const JobOutputs& outputs) {
  if (options.run && !outputs.empty())
    option_error("run", std::to_string(*options.run),
                 "writes only its run file into " + option_name("run_dir") +
                     "; the outputs come from the runs combined: the same command with " + option_name("run_dir") +
                     " and without " + option_name("run"));
  return run_dpsgd(options, progress, !outputs.report.empty());
}

nlohmann::json DpSgdJobResult::to_json() const {
  DpSgdOptions trained = options.training_options();
  if (options.run) {  // the one-run call that trained run K alone
    trained.seed = seed_of_run_alone(trained, *options.run);
    trained.runs = 1;
  }
  nlohmann::json json = training.summary(trained);
  json.update(job_summary_header(DpSgdJob::name, options.dpsgd.seed));
  json["settings"] = settings_json(options);
  if (!torchscript_sha256.empty()) json["settings"]["torchscript_sha256"] = torchscript_sha256;
  json["n_test"] = n_test;
  json["d"] = data.train.d();
  json["source"] = data.train.source;
  json.update(data_rows_json(data));
  json["class_names"] = data.train.class_names;  // label k is class_names[k] (the report's legends)
  json["preprocessing"] = preprocessor.to_json();
  json["seconds"] = seconds;
  return json;
}

NumericTable DpSgdJobResult::extra_table(const std::string& name) const {
  if (name != "models_out") return JobResult::extra_table(name);
  NumericTable table = model_table({"run"}, training.parameter_count);
  for (std::size_t run = 0; run < training.parameters.size(); ++run)
    add_model_row(table, {static_cast<double>(run)}, training.parameters[run]);
  return table;
}

NumericTable DpSgdJobResult::table() const {
  return {training.table_header(),
          training.complete ? training.table_rows(labels) : std::vector<std::vector<double>>{}};
}

namespace {

// The accountant behind the eps column, its neighbouring relation and noise multiplier, and why.
void print_accounting(std::ostream& out, const DpSgdOptions& d) {
  out << "  eps at delta = " << format_double(d.rdp_delta) << ": " << to_string(d.accountant) << " accountant";
  if (d.accountant == AccountantKind::kPld) out << " (loss grid h = " << format_double(d.discretization) << ")";
  out << ", " << describe(neighbouring_relation(d.sampling)) << ", effective noise multiplier "
      << format_double(rdp_noise_multiplier(d.noise_multiplier)) << " = " << format_double(d.noise_multiplier) << " / "
      << format_double(soft_clip_norm_bound()) << " (" << kEffectiveNoiseMultiplierReason << ")\n";
  if (const char* note = sampling_note(d.sampling)) out << "  note: " << note << "\n";
}

}  // namespace

void DpSgdJobResult::print_summary(std::ostream& out) const {
  const DpSgdResult& t = training;
  const DpSgdOptions& d = options.dpsgd;
  if (t.complete && options.run) {
    out << "filkit dpsgd: run " << *options.run << " of " << d.runs << " trained alone (seed "
        << seed_of_run_alone(d, *options.run) << "), written to " << run_file
        << "; once every run's file is there, the same command without the run index combines them into the outputs "
           "of the "
        << d.runs << " runs\n";
    return;
  }
  if (!t.complete) {
    out << "filkit dpsgd: stopped after step " << t.steps_done << " of "
        << static_cast<Index>(options.run ? 1 : d.runs) * d.steps << (options.run ? " (the run)" : " (all runs)")
        << "; the state is in " << d.checkpoint_path << ": run the same command again to resume\n";
    return;
  }
  out << "filkit dpsgd: " << options.data.data << ", n = " << t.n << ", d = " << data.train.d() << ", "
      << to_string(options.model) << ", B = " << d.batch_size << " (" << to_string(d.sampling)
      << ", q = " << t.sampling_rate << "), T = " << d.steps << ", rho = " << d.step_size << ", C = " << d.clip_norm
      << ", noise multiplier = " << d.noise_multiplier << ", kappa = " << t.kappa << ", label " << to_string(d.label)
      << ", " << d.runs << " run(s), " << t.parameter_count << " parameters" << (t.resumed ? ", resumed" : "") << "\n";
  print_accounting(out, d);
  out << "  " << std::setw(7) << "step" << std::setw(8) << "epoch" << std::setw(10) << "test acc" << std::setw(13)
      << "median dFIL" << std::setw(11) << "max dFIL" << std::setw(13) << "median eta" << std::setw(11) << "max eta"
      << std::setw(14) << "1/maxdFIL^2" << std::setw(11)
      << (d.accountant == AccountantKind::kPld ? "PLD eps" : "RDP eps") << std::setw(11) << "eps2" << std::setw(11)
      << "RDP bound"
      << "\n";
  for (const DpSgdSnapshot& c : t.snapshots) {
    const Summary dfil = summarize(c.dfil(t.private_dims));
    const VectorXd eta = c.eta();
    const bool has_eta = !eta.hasNaN();
    out << "  " << std::setw(7) << c.step << std::fixed << std::setprecision(2) << std::setw(8) << c.epoch
        << std::setprecision(4) << std::setw(10) << c.mean_test_accuracy() << std::scientific << std::setprecision(3)
        << std::setw(13) << dfil.median << std::setw(11) << dfil.max << std::setw(13)
        << (has_eta ? summarize(eta).median : std::nan("")) << std::setw(11)
        << (has_eta ? eta.maxCoeff() : std::nan("")) << std::setw(14) << 1.0 / (dfil.max * dfil.max) << std::setw(11)
        << c.epsilon << std::setw(11) << c.rdp_order2 << std::setw(11) << c.rdp_mse_bound() << std::defaultfloat
        << "\n";
    if (!c.privacy.warning.empty()) out << "  note: " << c.privacy.warning << "\n";
  }
  t.print_dfil_over_runs(out);
  out << "  seconds:";
  for (const auto& [stage, value] : seconds) out << " " << stage << " " << std::setprecision(3) << value;
  out << "\n";
}

}  // namespace filkit
