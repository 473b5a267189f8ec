#include "attack.hpp"
#include "report.hpp"

#include "filkit/leakage/irfil.hpp"

#include <algorithm>
#include <iomanip>
#include <iostream>
#include <memory>

namespace filkit::cli {

void setup_attack(CLI::App& app) {
  auto options = std::make_shared<AttackCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "attack",
      "Attribute inference against output-perturbed releases w' = w* + N(0, sigma^2 I): prior, black-box "
      "(Fredrikson et al. 2014) and white-box (the FIL threat model), by sigma and by decile of attribute FIL. "
      "E.g. --data income-regression --intercept --sigmas 1e-3,1e-2.");
  add_data_flags(*command, options->data);
  add_model_flags(*command, options->model);
  command->add_option("--attribute", options->attribute,
                      "The categorical attribute to infer (a name of the column map, or its one-hot columns 3,4,5); "
                      "default: the built-in dataset's sensitive attribute");
  command->add_option("--sigmas", options->sigmas, "Noise scales of the release, each > 0")
      ->delimiter(',')
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--trials", options->trials, "Noise draws per sigma (the same draws at every sigma)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--attacks", options->attacks, "Attacks besides the prior: white-box, black-box")
      ->delimiter(',')
      ->check(CLI::IsMember({"white-box", "black-box"}))
      ->capture_default_str();
  command->add_option("--white-box-solver", options->solver,
                      "White-box candidate minimisers: update (rank-2 updates / chord Newton) or refit (naive)")
      ->check(CLI::IsMember({"update", "refit"}))
      ->capture_default_str();
  command->add_option("--examples", options->examples, "Attack a seeded subset of this many training examples; 0 = all")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--compare-naive", options->compare_naive,
                      "Also refit naively for this many attacked examples: time it, check it agrees (in the JSON)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--groups", options->groups, "Quantile groups of attribute FIL (10 = deciles)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--weights", options->weights,
                      "CSV of training example weights (e.g. filkit irfil --out or --history-out)");
  command->add_option("--weights-column", options->weights_column, "Column of --weights to use")
      ->capture_default_str();
  command->add_option("--examples-out", options->examples_out,
                      "Per-example CSV: index, level, group, sigma, eta, nearest_shift (white-box margin), prior_correct, "
                      "white/black-box accuracy");
  add_run_flags(*command, options->run,
                "CSV by sigma and eta group (-1 = all): eta, prior, white-box and black-box accuracy, release MSE");
  auto report = std::make_shared<std::string>();
  add_report_flag(*command, *report);
  command->callback([options, report] {
    run_with_report(*report, options->run, [&] { run_attack(*options, std::cout); }, std::cout);
  });
}

namespace {

AttackOptions to_attack_options(const AttackCommandOptions& options, const LoadedTask& task) {
  AttackOptions attack;
  attack.fit = task.fit;
  attack.sigmas = options.sigmas;
  attack.trials = options.trials;
  attack.seed = options.run.seed;
  const auto wanted = [&](const char* name) {
    return std::find(options.attacks.begin(), options.attacks.end(), name) != options.attacks.end();
  };
  attack.white_box = wanted("white-box");
  attack.black_box = wanted("black-box");
  attack.solver = white_box_solver_from_string(options.solver);
  attack.max_examples = static_cast<Index>(options.examples);
  attack.naive_examples = static_cast<Index>(options.compare_naive);
  attack.groups = options.groups;
  attack.progress = !options.run.quiet;
  return attack;
}

void print_table(std::ostream& out, const AttackCommandOptions& options, const LoadedTask& task,
                 const AttackResult& result) {
  const bool regression = task.fit.regression;
  out << "filkit attack: " << options.data.data << ", n = " << task.data.train.n() << ", d = " << task.data.train.d()
      << ", " << to_string(task.fit.kind) << ", lambda = " << task.fit.l2 << ", attribute " << result.candidates.name
      << " (" << result.candidates.num_levels() << " levels), " << result.examples.size() << " examples, "
      << options.trials << " trials\n";
  out << "  prior accuracy " << result.prior_accuracy << "\n";
  out << std::setw(12) << "sigma" << std::setw(12) << "eta mean" << std::setw(12) << "white-box" << std::setw(12)
      << "black-box" << std::setw(14) << (regression ? "release MSE" : "release acc") << "\n";
  for (const SigmaAccuracy& s : result.sigmas) {
    out << std::scientific << std::setprecision(3) << std::setw(12) << s.sigma << std::setw(12) << s.eta_mean
        << std::defaultfloat << std::setprecision(4) << std::setw(12) << s.white_box << std::setw(12) << s.black_box
        << std::setw(14) << (regression ? s.test_mse : s.test_accuracy) << "\n";
  }
  out << "  seconds:";
  for (const auto& [stage, seconds] : result.seconds) out << " " << stage << " " << std::setprecision(3) << seconds;
  out << "\n";
  if (result.naive.examples > 0)
    out << "  naive refit: " << result.naive.seconds << " s for " << result.naive.examples << " examples (update "
        << result.naive.fast_seconds << " s), estimated " << result.naive.estimated_seconds_all
        << " s for all; largest difference " << result.naive.max_difference << "\n";
}

}  // namespace

AttackResult run_attack(const AttackCommandOptions& options, std::ostream& out) {
  apply_threads(options.run.threads);
  const std::string attribute_spec = attacked_attribute(options.data, options.attribute);
  const LoadedTask task = load_task(options.data, options.model, options.run.seed);
  const AttackOptions attack = to_attack_options(options, task);
  const AttributeColumns attribute = find_attribute(task.data.train, attribute_spec);
  const VectorXd omega = options.weights.empty()
                             ? VectorXd()
                             : read_example_weights(options.weights, options.weights_column, task.data.train.n());
  const AttackResult result = attribute_inference(task.data.train, task.data.test, attribute, attack, omega);
  if (!options.run.out.empty()) write_table(options.run.out, result.table_header(), result.table_rows());
  if (!options.examples_out.empty()) write_table(options.examples_out, result.example_header(), result.example_rows());
  if (!options.run.json.empty()) {
    nlohmann::json json = result.to_json();
    json["filkit_version"] = version();
    json["command"] = "attack";
    json["seed"] = options.run.seed;
    json["settings"] = task_json(options.data, task);
    json["settings"]["sigmas"] = attack.sigmas;
    json["settings"]["trials"] = attack.trials;
    json["settings"]["attacks"] = options.attacks;
    json["settings"]["solver"] = to_string(attack.solver);
    json["settings"]["examples"] = attack.max_examples;
    json["settings"]["groups"] = attack.groups;
    json["settings"]["weights"] = options.weights.empty() ? "" : options.weights + ":" + options.weights_column;
    write_json(options.run.json, json);
  }
  if (!options.run.quiet) print_table(out, options, task, result);
  return result;
}

}  // namespace filkit::cli
