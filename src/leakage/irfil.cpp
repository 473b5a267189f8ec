#include "filkit/leakage/irfil.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/data/text_table.hpp"

#include "filkit/base/io.hpp"
#include "base/parsing.hpp"

#include <nlohmann/json.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

namespace filkit {

void IrfilOptions::validate() const {
  fit.validate();
  fil.validate();
  require_non_negative("iterations", iterations);
  require_non_negative("min_weight", min_weight);
  if (!(max_weight > min_weight))
    option_error("max_weight", shown_value(max_weight),
                 "must be greater than " + option_name("min_weight") + " = " + shown_value(min_weight));
}

VectorXd irfil_update(const VectorXd& u, const VectorXd& eta, double min_weight, double max_weight,
                      const Communicator& comm) {
  // The loop passes vectors of one length: a bug otherwise.
  if (u.size() != eta.size())
    throw std::logic_error("irfil_update: " + std::to_string(u.size()) + " weights but " + std::to_string(eta.size()) +
                           " eta values");
  for (Index i = 0; i < eta.size(); ++i)
    if (!(eta(i) > 0.0) || !std::isfinite(eta(i)))
      throw NumericalError("IRFIL: example " + std::to_string(i) + " has eta = " + shown_value(eta(i)) +
                           "; the update divides by eta, which must be finite and > 0");
  const VectorXd ratio = u.cwiseQuotient(eta);
  const auto n = static_cast<double>(comm.sum(u.size()));
  const VectorXd normalised = (n / comm.sum(ratio.sum())) * ratio;
  return normalised.cwiseMax(min_weight).cwiseMin(max_weight);
}

VectorXd irfil_training_weights(const VectorXd& u, const VectorXd& labels, IrfilWeighting weighting,
                                const Communicator& comm) {
  if (weighting == IrfilWeighting::kExample) return u;
  // The loop passes vectors of one length: a bug otherwise.
  if (labels.size() != u.size())
    throw std::logic_error("irfil_training_weights: " + std::to_string(u.size()) + " weights but " +
                           std::to_string(labels.size()) + " labels");
  std::map<double, std::pair<double, Index>> classes;  // label -> (sum of u, count)
  for (Index i = 0; i < u.size(); ++i) {
    auto& [sum, count] = classes[labels(i)];
    sum += u(i);
    ++count;
  }
  if (comm.distributed()) {  // the classes of every rank: labels are class indices 0..K-1 here
    const Index K = comm.max(classes.empty() ? Index{0} : static_cast<Index>(classes.rbegin()->first) + 1);
    VectorXd sums = VectorXd::Zero(K), counts = VectorXd::Zero(K);
    for (const auto& [label, entry] : classes) {
      sums(static_cast<Index>(label)) = entry.first;
      counts(static_cast<Index>(label)) = static_cast<double>(entry.second);  // exact below 2^53
    }
    comm.sum(sums);
    comm.sum(counts);
    for (auto& [label, entry] : classes)
      entry = {sums(static_cast<Index>(label)), static_cast<Index>(counts(static_cast<Index>(label)))};
  }
  VectorXd omega(u.size());
  for (Index i = 0; i < u.size(); ++i) {
    const auto& [sum, count] = classes[labels(i)];
    const double class_mean = sum / static_cast<double>(count);
    omega(i) = weighting == IrfilWeighting::kClass ? class_mean : u(i) * class_mean;
  }
  return omega;
}

namespace {

using Clock = std::chrono::steady_clock;

void check_data(const Dataset& train, const IrfilOptions& options) {
  if (options.weighting != IrfilWeighting::kExample && options.fit.regression)
    throw OptionError::with_text("weighting",
                                 "IrfilOptions.weighting = '" + to_string(options.weighting) +
                                     "' averages weights over classes, but the task is a regression; use 'example'");
  for (Index j : options.attribute_columns)
    if (j < 0 || j >= train.d())
      throw OptionError::with_text("attribute_columns", "IrfilOptions.attribute_columns: column " + std::to_string(j) +
                                                            " is outside 0.." + std::to_string(train.d() - 1));
}

VectorXd driving_eta(const Model& model, const Dataset& train, const VectorXd& omega, const IrfilOptions& options,
                     const Communicator& comm) {
  const FisherInformationLoss fil(model, train, omega, options.fil, comm);
  if (options.attribute_columns.empty()) return fil.per_example().eta;
  return fil.per_example_selection(CoordinateSelection::columns(options.attribute_columns));
}

IrfilIteration evaluate(int t, const Model& model, const Dataset& train, const Dataset& test, const VectorXd& eta,
                        const VectorXd& u, const VectorXd& omega, const IrfilOptions& options,
                        const Communicator& comm) {
  IrfilIteration record;
  record.iteration = t;
  const VectorXd all_eta = comm.gather(eta);  // the median needs them all: at rank 0
  if (comm.is_root()) record.eta = summarize(all_eta);
  const double largest = std::numeric_limits<double>::infinity();
  record.weight_min = -comm.max(omega.size() ? -omega.minCoeff() : -largest);
  record.weight_max = comm.max(omega.size() ? omega.maxCoeff() : -largest);
  record.clamped = comm.sum(
      static_cast<Index>((u.array() <= options.min_weight).count() + (u.array() >= options.max_weight).count()));
  const bool classification = !model.regression;
  const bool tested = comm.sum(test.n()) > 0;
  record.train_accuracy = classification ? accuracy_over_ranks(model, train, comm) : std::nan("");
  record.test_accuracy = classification && tested ? accuracy_over_ranks(model, test, comm) : std::nan("");
  record.train_mse = mean_squared_error_over_ranks(model, train, comm);
  record.test_mse = tested ? mean_squared_error_over_ranks(model, test, comm) : std::nan("");
  record.fit_iterations = model.iterations;
  return record;
}

}  // namespace

IrfilResult irfil(const Dataset& train, const Dataset& test, const IrfilOptions& options, const Communicator& comm) {
  options.validate();
  check_data(train, options);
  IrfilResult result;
  Progress progress("irfil", options.iterations + 1, !options.progress || !comm.is_root());
  VectorXd u = VectorXd::Ones(train.n());
  for (int t = 0; t <= options.iterations; ++t) {
    const auto start = Clock::now();
    const VectorXd omega = irfil_training_weights(u, train.y, options.weighting, comm);
    // Warm start from the previous iterate: consecutive weightings differ little.
    result.model = t == 0 ? fit(train, options.fit, omega, comm) : refit(train, options.fit, result.model, omega, comm);
    const VectorXd eta = driving_eta(result.model, train, omega, options, comm);
    result.iterations.push_back(evaluate(t, result.model, train, test, eta, u, omega, options, comm));
    result.iterations.back().seconds = std::chrono::duration<double>(Clock::now() - start).count();
    result.weights.push_back(comm.gather(omega));
    if (t == 0) result.eta_before = comm.gather(eta);
    if (t == options.iterations) result.eta_after = comm.gather(eta);
    if (t < options.iterations) u = irfil_update(u, eta, options.min_weight, options.max_weight, comm);
    progress.advance();
  }
  progress.finish();
  return result;
}

namespace {
std::vector<double> to_vector(const VectorXd& v) { return {v.data(), v.data() + v.size()}; }
}  // namespace

nlohmann::json IrfilResult::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const IrfilIteration& it : iterations) {
    list.push_back({{"iteration", it.iteration},
                    {"eta", it.eta.to_json()},
                    {"weight_min", it.weight_min},
                    {"weight_max", it.weight_max},
                    {"clamped", it.clamped},
                    {"train_accuracy", number_or_null(it.train_accuracy)},
                    {"test_accuracy", number_or_null(it.test_accuracy)},
                    {"train_mse", number_or_null(it.train_mse)},
                    {"test_mse", number_or_null(it.test_mse)},
                    {"fit_iterations", it.fit_iterations},
                    {"seconds", it.seconds}});
  }
  return {{"iterations", list},
          {"final_weights", to_vector(weights.back())},
          {"eta_before", to_vector(eta_before)},
          {"eta_after", to_vector(eta_after)}};
}

VectorXd read_example_weights(const std::string& path, const std::string& column, Index n, ByteSize max_memory) {
  const TextTable table = read_csv(path, max_memory);
  const auto find = [&](const std::string& name) {
    return static_cast<std::size_t>(std::find(table.header.begin(), table.header.end(), name) - table.header.begin());
  };
  const std::size_t j = find(column), index = find("index");
  if (j == table.header.size())
    throw DataError("'" + path + "' has no column '" + column + "'; its columns: " + detail::quoted_list(table.header));
  if (static_cast<Index>(table.rows.size()) != n)
    throw DataError("'" + path + "' has " + std::to_string(table.rows.size()) + " rows but the training set has " +
                    std::to_string(n) + " examples");
  VectorXd omega(n);
  for (std::size_t row = 0; row < table.rows.size(); ++row) {
    const std::string where = "'" + path + "' line " + std::to_string(table.lines[row]) + ": ";
    const auto value = detail::parse_number(table.rows[row][j]);
    if (!value || !std::isfinite(*value) || *value < 0.0)
      throw DataError(where + "column '" + column + "' holds '" + table.rows[row][j] +
                      "'; a weight is a finite number >= 0");
    if (index < table.header.size() && detail::parse_number(table.rows[row][index]) != static_cast<double>(row))
      throw DataError(where + "index '" + table.rows[row][index] + "' should be " + std::to_string(row) +
                      "; the rows must list the training examples in order");
    omega(static_cast<Index>(row)) = *value;
  }
  return omega;
}

}  // namespace filkit
