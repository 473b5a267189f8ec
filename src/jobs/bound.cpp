#include "filkit/jobs/bound.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/timing.hpp"

#include "base/parsing.hpp"
#include "jobs/json_numbers.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/leakage/result_checks.hpp"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

// A file of diameters: numbers separated by commas or white space.
VectorXd read_diameters(const std::string& path) {
  std::istringstream in;
  try {
    in.str(detail::read_file_bytes(path));  // within the default memory budget, as any input
  } catch (const std::exception& error) {
    option_error("diameter", "'" + path + "'",
                 std::string("neither a number nor a readable file (") + error.what() + ")");
  }
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
        throw DataError(path + ": expected a number, got '" + piece + "' (entry " + std::to_string(values.size() + 1) +
                        ")");
      values.push_back(value);
    }
  }
  if (values.empty()) throw DataError(path + ": no diameters");
  return Eigen::Map<const VectorXd>(values.data(), static_cast<Index>(values.size()));
}

void print_quantiles(std::ostream& out, const std::string& name, const VectorXd& values) {
  out << "  " << std::left << std::setw(20) << name << std::right << std::scientific << std::setprecision(3);
  for (double level : {0.0, 0.05, 0.5, 0.95, 1.0}) out << std::setw(11) << quantile(values, level);
  out << std::defaultfloat << std::setprecision(6) << "\n";
}

}  // namespace

ReconstructionBoundOptions BoundJobOptions::bound_options() const {
  ReconstructionBoundOptions options = bounds;
  char* end = nullptr;
  const double value = std::strtod(diameter.c_str(), &end);
  if (end != diameter.c_str() && *end == '\0') options.diameter = value;
  else options.diameters = read_diameters(diameter);
  return options;
}

void BoundJobOptions::validate() const {
  task.validate();
  const FitOptions fit = task.fit_options();
  if (fit.kind != ModelKind::kLogistic)
    option_error("model", to_string(fit.kind), "reconstruction bounds of output perturbation need logistic regression");
  bound_options().validate();
}

BoundJobResult run_bound(const BoundJobOptions& requested, bool progress) {
  BoundJobResult result = result_with_resolved_task<BoundJobResult>(requested);
  const BoundJobOptions& options = result.options;
  const Communicator& comm = Communicator::world();
  Progress stages("filkit bound: load, preprocess, fit, FIL", 4, !progress || !comm.is_root());
  const FitOptions fit = move_task_into(prepare_task(options.task, options.seed, comm), result);
  stages.advance(2);
  const Dataset& train = result.data.train;

  result.model = fit_stage(train, fit, comm, result.seconds);
  stages.advance();

  auto start = Clock::now();
  {
    const StageScope stage("computing FIL and the bounds");
    result.bounds = reconstruction_bounds(result.model, train, options.bound_options(), comm);
  }
  require_finite_fil(result.bounds.fil, "FIL");
  result.seconds["bounds"] = seconds_since(start);
  stages.finish();

  if (!result.bounds.norm_check.satisfied()) result.warnings.push_back(result.bounds.norm_check.message());
  result.release = perturb_output(result.model, options.bounds.sigma, options.seed);
  result.train_accuracy = accuracy_over_ranks(result.model, train, comm);
  result.test_accuracy = accuracy_over_ranks(result.model, result.data.test, comm);
  result.release_test_accuracy = accuracy_over_ranks(result.release, result.data.test, comm);
  result.labels = comm.gather(train.y);
  return result;
}

nlohmann::json BoundJobResult::to_json() const {
  const Dataset& train = data.train;
  nlohmann::json json = job_summary_header(BoundJob::name, options.seed);
  json["n"] = n_train;
  json["n_test"] = n_test;
  json["d"] = train.d();
  json["settings"] = settings_json(options);
  json["source"] = train.source;
  json.update(data_rows_json(data));
  json["preprocessing"] = preprocessor.to_json();
  json["label"] = "public";
  json["fit"] = {{"iterations", model.iterations}, {"gradient_norm", model.gradient_norm}};
  const NormCheck& norms = bounds.norm_check;
  json["rdp"] = {{"order", 2},
                 {"epsilon", bounds.rdp_epsilon},
                 {"mse_bound", bounds.rdp_mse_bound},
                 {"epsilon_at_data_norm", bounds.rdp_epsilon_at_data_norm},
                 {"mse_bound_at_data_norm", bounds.rdp_mse_bound_at_data_norm},
                 {"norm_check",
                  {{"bound", norms.bound},
                   {"max_design_row_norm", norms.max_norm},
                   {"worst_row", norms.worst_row},
                   {"violations", norms.violations},
                   {"satisfied", norms.satisfied()}}}};
  json["perfect_privacy_mse"] = bounds.perfect_privacy_mse;
  json["dfil_bound"] = detail::quantiles_json(bounds.dfil_bound);
  json["dfil_bound"]["share_at_or_above_perfect_privacy"] = bounds.share_dfil_bound_above_line;
  json["dfil_bound"]["share_above_rdp_bound"] = share_at_or_above(bounds.dfil_bound, bounds.rdp_mse_bound);
  json["fil_bound"] = detail::quantiles_json(bounds.fil_bound);
  json["fil_bound"]["share_at_or_above_perfect_privacy"] = bounds.share_fil_bound_above_line;
  json["fil_bound"]["share_above_rdp_bound"] = share_at_or_above(bounds.fil_bound, bounds.rdp_mse_bound);
  json["eta"] = summarize(bounds.fil.eta).to_json();
  json["dfil"] = summarize(bounds.fil.dfil).to_json();
  json["train_accuracy"] = number_or_null(train_accuracy);
  json["test_accuracy"] = number_or_null(test_accuracy);
  json["release_test_accuracy"] = number_or_null(release_test_accuracy);
  json["warnings"] = warnings;
  json["seconds"] = seconds;
  return json;
}

NumericTable BoundJobResult::table() const {
  NumericTable table{{"index", "label", "eta", "dfil", "fil_bound", "dfil_bound"}, {}};
  std::vector<std::vector<double>>& rows = table.rows;
  rows.reserve(static_cast<std::size_t>(labels.size()));
  for (Index i = 0; i < labels.size(); ++i)
    rows.push_back({static_cast<double>(i), labels(i), bounds.fil.eta(i), bounds.fil.dfil(i), bounds.fil_bound(i),
                    bounds.dfil_bound(i)});
  return table;
}

void BoundJobResult::print_summary(std::ostream& out) const {
  for (const std::string& warning : warnings) std::cerr << "filkit bound: warning: " << warning << "\n";
  print_bounds(out);
  print_seconds(out);
}

void BoundJobResult::print_bounds(std::ostream& out) const {
  const ReconstructionBounds& b = bounds;
  out << "filkit " << options.task.data.data << ", n = " << n_train << ", d = " << data.train.d() << ", logistic"
      << (options.task.fit.intercept ? " + intercept" : "") << ", lambda = " << options.task.fit.l2
      << ", sigma = " << options.bounds.sigma << "\n";
  out << "  (2, eps)-RDP: eps = " << b.rdp_epsilon << " (R = " << b.norm_check.bound
      << "), MSE bound 1/(4(e^eps-1)) = " << b.rdp_mse_bound << "\n";
  if (!b.norm_check.satisfied())
    out << "  at the data's row norm " << b.norm_check.max_norm << ": eps = " << b.rdp_epsilon_at_data_norm
        << ", MSE bound = " << b.rdp_mse_bound_at_data_norm << "\n";
  out << "  " << std::left << std::setw(20) << "" << std::right << std::setw(11) << "min" << std::setw(11) << "q05"
      << std::setw(11) << "median" << std::setw(11) << "q95" << std::setw(11) << "max"
      << "\n";
  print_quantiles(out, "dFIL bound 1/dfil^2", b.dfil_bound);
  print_quantiles(out, "FIL bound 1/eta^2", b.fil_bound);
  out << "  perfect-privacy line MSE = " << b.perfect_privacy_mse << ": dFIL bound at or above it for "
      << 100.0 * b.share_dfil_bound_above_line << "% of examples (FIL bound: " << 100.0 * b.share_fil_bound_above_line
      << "%)\n";
  out << std::fixed << std::setprecision(2) << "  accuracy (%): train " << 100.0 * train_accuracy << ", test "
      << 100.0 * test_accuracy << ", released model test " << 100.0 * release_test_accuracy << "\n"
      << std::defaultfloat << std::setprecision(6);
}

void BoundJobResult::print_seconds(std::ostream& out) const {
  out << "  seconds:";
  for (const auto& [stage, value] : seconds) out << " " << stage << " " << std::setprecision(3) << value;
  out << "\n";
}

}  // namespace filkit
