#include "reconstruct.hpp"
#include "report.hpp"

#include "filkit/base/index_list.hpp"
#include "filkit/jobs/measure.hpp"

#include <iostream>
#include <memory>
#include <stdexcept>

namespace filkit::cli {

BoundCommandOptions attack_bound_flags() {
  BoundCommandOptions options;
  options.sigma = 1e-5;
  return options;
}

void setup_reconstruct(CLI::App& app) {
  auto options = std::make_shared<ReconstructCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "reconstruct",
      "The GLM reconstruction attack (Balle et al. 2022) on output-perturbed logistic regression with an "
      "intercept: the adversary knows lambda and every other example. Per-example MSE averaged over --trials "
      "noise draws, against the dFIL bound. Defaults: Guo et al. 2022's setting, MNIST 0 vs 1, pixels / 255, "
      "lambda 1e-2, sigma 1e-5, 10000 trials.");
  add_bound_flags(*command, options->bound,
                  "Per-example CSV: index, label, eta, dfil, fil_bound, dfil_bound, attack_mse, linearised_mse, "
                  "guarded_trials");
  command->add_option("--trials", options->trials, "Noise draws (independent releases), >= 1")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--rows", options->rows, "Examples attacked: all, or 0-based indices such as 0,5,17")
      ->capture_default_str();
  command->add_option("--save-reconstructions", options->save_reconstructions,
                      "0-based indices of examples whose mean reconstruction is written to --reconstructions-out");
  command->add_option("--reconstructions-out", options->reconstructions_out,
                      "CSV: per saved example two rows (kind 0 = original, 1 = mean reconstruction): index, label, "
                      "kind, attack_mse, x0..x{d-1}");
  command->add_option("--divisor-guard", options->divisor_guard,
                      "A trial with |B_i[0]| below this (or a non-finite error) is excluded and counted")
      ->capture_default_str();
  auto report = std::make_shared<std::string>();
  add_report_flag(*command, *report);
  command->callback([options, report] {
    run_with_report(*report, options->bound.run, [&] { run_reconstruct(*options, std::cout); }, std::cout);
  });
}

ReconstructJobOptions to_reconstruct_job_options(const ReconstructCommandOptions& options) {
  if (!options.save_reconstructions.empty() && options.reconstructions_out.empty())
    throw std::invalid_argument("--save-reconstructions needs --reconstructions-out FILE");
  ReconstructJobOptions job;
  job.bound = to_bound_job_options(options.bound);
  job.trials = options.trials;
  if (options.rows != "all") job.rows = parse_index_list(options.rows, "--rows");
  if (!options.save_reconstructions.empty())
    job.keep_reconstructions = parse_index_list(options.save_reconstructions, "--save-reconstructions");
  job.divisor_guard = options.divisor_guard;
  return job;
}

namespace {

void print_attack_summary(std::ostream& out, const nlohmann::json& attack) {
  const auto number = [](const nlohmann::json& value) { return value.is_null() ? std::nan("") : value.get<double>(); };
  out << "  GLM attack, " << attack["trials"] << " trials, " << attack["examples"] << " examples: MSE median "
      << number(attack["mse"].value("median", nlohmann::json())) << " (linearised prediction "
      << number(attack["linearised_mse"].value("median", nlohmann::json())) << ")\n";
  out << "  attack MSE at or above its dFIL bound: " << 100.0 * number(attack["above_dfil_bound"]["share"])
      << "% of examples; where the bound is below the perfect-privacy line: "
      << 100.0 * number(attack["above_dfil_bound_where_bound_below_perfect_privacy"]["share"]) << "%\n";
  out << "  correlation of log10 dFIL bound and log10 attack MSE: "
      << number(attack["log10_correlation_dfil_bound_vs_mse"]) << "; guarded trials " << attack["guarded_trials"]
      << "\n";
}

}  // namespace

ReconstructJobResult run_reconstruct(const ReconstructCommandOptions& options, std::ostream& out) {
  apply_threads(options.bound.run.threads);
  const ReconstructJobOptions job = to_reconstruct_job_options(options);
  const ReconstructJobResult result = run_reconstruct_job(job);
  print_warnings("reconstruct", result.bound.warnings);
  const nlohmann::json summary = result.summary(job);
  const RunFlags& run = options.bound.run;
  if (!run.out.empty()) write_table(run.out, result.table_header(), result.table_rows());
  if (!run.json.empty()) write_json(run.json, summary);
  if (!options.reconstructions_out.empty())
    write_table(options.reconstructions_out, result.reconstruction_header(), result.reconstruction_rows());
  if (!run.quiet) {
    print_bound_summary(out, options.bound, result.bound);
    print_attack_summary(out, summary["attack"]);
    print_seconds(out, result.bound.seconds);
  }
  return result;
}

}  // namespace filkit::cli
