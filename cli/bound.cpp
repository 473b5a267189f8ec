#include "bound.hpp"
#include "report.hpp"

#include "filkit/base/summary.hpp"

#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <stdexcept>

namespace filkit::cli {

namespace {

// A file of diameters: numbers separated by commas or white space.
VectorXd read_diameters(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--diameter '" + path + "': neither a number nor a readable file");
  std::vector<double> values;
  std::string token;
  while (in >> token) {
    std::string piece;
    std::stringstream pieces(token);
    while (std::getline(pieces, piece, ',')) {
      if (piece.empty()) continue;
      char* end = nullptr;
      const double value = std::strtod(piece.c_str(), &end);
      if (end == piece.c_str() || *end != '\0')
        throw std::invalid_argument(path + ": expected a number, got '" + piece + "' (entry " +
                                    std::to_string(values.size() + 1) + ")");
      values.push_back(value);
    }
  }
  if (values.empty()) throw std::invalid_argument(path + ": no diameters");
  return Eigen::Map<const VectorXd>(values.data(), static_cast<Index>(values.size()));
}

void set_diameters(const std::string& spec, ReconstructionBoundOptions& bounds) {
  char* end = nullptr;
  const double value = std::strtod(spec.c_str(), &end);
  if (end != spec.c_str() && *end == '\0') bounds.diameter = value;
  else bounds.diameters = read_diameters(spec);
}

void print_quantiles(std::ostream& out, const std::string& name, const VectorXd& values) {
  out << "  " << std::left << std::setw(20) << name << std::right << std::scientific << std::setprecision(3);
  for (double level : {0.0, 0.05, 0.5, 0.95, 1.0}) out << std::setw(11) << quantile(values, level);
  out << std::defaultfloat << std::setprecision(6) << "\n";
}

}  // namespace

DataFlags reconstruction_data_flags() {
  DataFlags flags;
  flags.data = "mnist";
  flags.pca = "0";
  flags.scale = "none";
  return flags;
}

ModelFlags reconstruction_model_flags() {
  ModelFlags flags;
  flags.l2 = 1e-2;
  flags.intercept = true;
  return flags;
}

void add_bound_flags(CLI::App& command, BoundCommandOptions& options, const std::string& out_description) {
  add_data_flags(command, options.data);
  add_model_flags(command, options.model);
  command.add_option("--sigma", options.sigma, "Standard deviation of the output perturbation, > 0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command.add_option("--diameter", options.diameter,
                     "Range of each private coordinate for the RDP bound and the perfect-privacy line: one number "
                     "for every coordinate, or a file of d numbers")
      ->capture_default_str();
  command.add_option("--norm-bound", options.norm_bound,
                     "R of the assumption ||x~|| <= R under which eps = 4 R^2 / (n lambda sigma)^2 is stated")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  add_run_flags(command, options.run, out_description);
}

void setup_bound(CLI::App& app) {
  auto options = std::make_shared<BoundCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "bound",
      "Lower bounds on the MSE of reconstructing each training example from an output-perturbed logistic "
      "regression: the (2, eps)-RDP bound (Theorem 1) and the per-example dFIL and FIL bounds (Theorem 2) of "
      "Guo et al. 2022. Defaults: their setting, MNIST 0 vs 1, pixels / 255, intercept, lambda = sigma = 1e-2 "
      "(use --intercept=false to drop the intercept).");
  add_bound_flags(*command, *options, "Per-example CSV: index, label, eta, dfil, fil_bound, dfil_bound");
  auto report = std::make_shared<std::string>();
  add_report_flag(*command, *report);
  command->callback([options, report] {
    run_with_report(*report, options->run, [&] { run_bound(*options, std::cout); }, std::cout);
  });
}

BoundJobOptions to_bound_job_options(const BoundCommandOptions& options) {
  BoundJobOptions job;
  job.data = to_data_options(options.data, options.run.seed);
  job.preprocess = to_preprocess_options(options.data);
  job.fit = to_fit_options(options.model, options.data.regression);
  job.bounds.sigma = options.sigma;
  job.bounds.norm_bound = options.norm_bound;
  set_diameters(options.diameter, job.bounds);
  job.seed = options.run.seed;
  job.progress = !options.run.quiet;
  return job;
}

void print_bound_summary(std::ostream& out, const BoundCommandOptions& options, const BoundJobResult& result) {
  const ReconstructionBounds& b = result.bounds;
  out << "filkit " << options.data.data << ", n = " << result.data.train.n() << ", d = " << result.data.train.d()
      << ", logistic" << (options.model.intercept ? " + intercept" : "") << ", lambda = " << options.model.l2
      << ", sigma = " << options.sigma << "\n";
  out << "  (2, eps)-RDP: eps = " << b.rdp_epsilon << " (R = " << b.norm_check.bound
      << "), MSE bound 1/(4(e^eps-1)) = " << b.rdp_mse_bound << "\n";
  if (!b.norm_check.satisfied())
    out << "  at the data's row norm " << b.norm_check.max_norm << ": eps = " << b.rdp_epsilon_at_data_norm
        << ", MSE bound = " << b.rdp_mse_bound_at_data_norm << "\n";
  out << "  " << std::left << std::setw(20) << "" << std::right << std::setw(11) << "min" << std::setw(11) << "q05"
      << std::setw(11) << "median" << std::setw(11) << "q95" << std::setw(11) << "max" << "\n";
  print_quantiles(out, "dFIL bound 1/dfil^2", b.dfil_bound);
  print_quantiles(out, "FIL bound 1/eta^2", b.fil_bound);
  out << "  perfect-privacy line MSE = " << b.perfect_privacy_mse << ": dFIL bound at or above it for "
      << 100.0 * b.share_dfil_bound_above_line << "% of examples (FIL bound: " << 100.0 * b.share_fil_bound_above_line
      << "%)\n";
  out << std::fixed << std::setprecision(2) << "  accuracy (%): train " << 100.0 * result.train_accuracy << ", test "
      << 100.0 * result.test_accuracy << ", released model test " << 100.0 * result.release_test_accuracy << "\n"
      << std::defaultfloat << std::setprecision(6);
}

void print_seconds(std::ostream& out, const std::map<std::string, double>& seconds) {
  out << "  seconds:";
  for (const auto& [stage, value] : seconds) out << " " << stage << " " << std::setprecision(3) << value;
  out << "\n";
}

void print_warnings(const std::string& command, const std::vector<std::string>& warnings) {
  for (const std::string& warning : warnings) std::cerr << "filkit " << command << ": warning: " << warning << "\n";
}

BoundJobResult run_bound(const BoundCommandOptions& options, std::ostream& out) {
  apply_threads(options.run.threads);
  const BoundJobOptions job = to_bound_job_options(options);
  const BoundJobResult result = run_bound_job(job);
  print_warnings("bound", result.warnings);
  if (!options.run.out.empty()) write_table(options.run.out, result.table_header(), result.table_rows());
  if (!options.run.json.empty()) write_json(options.run.json, result.summary(job));
  if (!options.run.quiet) {
    print_bound_summary(out, options, result);
    print_seconds(out, result.seconds);
  }
  return result;
}

}  // namespace filkit::cli
