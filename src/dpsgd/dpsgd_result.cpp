// The DP-SGD result as the JSON summary and the per-example table.
#include "filkit/dpsgd/training.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/privacy/step_privacy.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iomanip>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>

namespace filkit {

namespace {

/// Summary statistics of a per-example quantity with the MSE bounds 1/v^2 of its median and max
/// (null when not computed).
nlohmann::json leakage_summary(const VectorXd& values) {
  if (values.size() == 0 || values.hasNaN()) return nullptr;
  const Summary s = summarize(values);
  nlohmann::json json = s.to_json();
  json["mse_bound_at_median"] = 1.0 / (s.median * s.median);
  json["mse_bound_at_max"] = 1.0 / (s.max * s.max);
  return json;
}

nlohmann::json interval_json(const std::optional<ConfidenceInterval>& interval) {
  if (!interval) return nullptr;
  return {interval->lower, interval->upper};
}

/// The MSE bound 1/v^2 of a dFIL v: it falls as v grows.
double mse_bound(double dfil) { return 1.0 / (dfil * dfil); }

/// The interval of the MSE bound: the dFIL interval's ends mapped through 1/v^2, swapped.
std::optional<ConfidenceInterval> mse_bound_interval(const std::optional<ConfidenceInterval>& dfil) {
  if (!dfil) return std::nullopt;
  return ConfidenceInterval{mse_bound(dfil->upper), mse_bound(dfil->lower)};
}

/// leakage_summary of the snapshot's dFIL, with each run's max and median and their intervals.
nlohmann::json dfil_summary(const DpSgdSnapshot& c, Index private_dims) {
  nlohmann::json json = leakage_summary(c.dfil(private_dims));
  const RunBootstrap& runs = c.dfil_over_runs;
  std::vector<double> max, median, max_bound, median_bound;
  for (const MaxAndMedian& run : runs.per_run) {
    max.push_back(run.max);
    median.push_back(run.median);
    max_bound.push_back(mse_bound(run.max));
    median_bound.push_back(mse_bound(run.median));
  }
  json["max_interval"] = interval_json(runs.max_interval);
  json["median_interval"] = interval_json(runs.median_interval);
  json["mse_bound_at_max_interval"] = interval_json(mse_bound_interval(runs.max_interval));
  json["mse_bound_at_median_interval"] = interval_json(mse_bound_interval(runs.median_interval));
  json["max_per_run"] = max;
  json["median_per_run"] = median;
  json["mse_bound_at_max_per_run"] = max_bound;
  json["mse_bound_at_median_per_run"] = median_bound;
  return json;
}

std::string scientific(double value, int digits) {
  std::ostringstream text;
  text << std::scientific << std::setprecision(digits) << value;
  return text.str();
}

std::string bracketed(double low, double high) { return "[" + scientific(low, 3) + ", " + scientific(high, 3) + "]"; }

std::string bracketed(const std::optional<ConfidenceInterval>& interval) {
  return interval ? bracketed(interval->lower, interval->upper) : "-";
}

}  // namespace

nlohmann::json DpSgdResult::summary(const DpSgdOptions& options) const {
  nlohmann::json snapshots_json = nlohmann::json::array();
  for (const DpSgdSnapshot& c : snapshots)
    snapshots_json.push_back({{"step", c.step},
                              {"epoch", c.epoch},
                              {"dfil", dfil_summary(c, private_dims)},
                              {"eta", leakage_summary(c.eta())},
                              {"times_sampled_mean", c.times_sampled.mean()},
                              {"epsilon", c.epsilon},
                              {"pld_infinity_mass", c.pld_infinity_mass},
                              {"rdp",
                               {{"eps", c.privacy.eps},
                                {"delta", c.privacy.delta},
                                {"optimal_order", c.privacy.optimal_order},
                                {"order_status", to_string(c.privacy.status)},
                                {"warning", c.privacy.warning},
                                {"noise_multiplier", rdp_noise_multiplier(options.noise_multiplier)},
                                {"order2_eps", c.rdp_order2},
                                {"mse_bound", c.rdp_mse_bound()}}},
                              {"train_accuracy", c.mean_train_accuracy()},
                              {"test_accuracy", c.mean_test_accuracy()},
                              {"train_accuracy_per_run", c.train_accuracy},
                              {"test_accuracy_per_run", c.test_accuracy}});
  nlohmann::json out = {
      {"filkit_version", version()},
      {"filkit_build", build()},
      {"seed", options.seed},
      {"settings", {{"dpsgd", to_json(options)}}},
      {"n", n},
      {"num_classes", num_classes},
      {"private_dims", private_dims},
      {"sampling_rate", sampling_rate},
      {"step_epsilon", step_epsilon},
      {"kappa", kappa},
      {"kappa_delta", kappa_delta},
      {"kappa_failure_probability", std::min(1.0, kappa_delta * static_cast<double>(options.steps))},
      {"soft_clip_norm_bound", soft_clip_norm_bound()},
      {"clipping", "smooth"},  // the GELU clip (filkit.torch's summaries also say "hard")
      {"accounting", accounting_summary(options)},
      {"run_seeds", run_seeds},
      {"bootstrap",
       {{"method",
         "percentile intervals of the max and median dFIL over examples, the runs resampled with "
         "replacement (docs/mathematics.md, section 7.6); MSE-bound intervals are the dFIL interval's "
         "ends mapped through 1/dFIL^2"},
        {"runs", options.runs},
        {"level", options.confidence_level},
        {"resamples", options.bootstrap_resamples},
        {"seed", bootstrap_seed},
        {"intervals", options.runs > 1},
        {"note",
         options.runs > 1 ? "" : "one run: no confidence intervals (nothing varies between runs); use runs > 1"}}},
      {"parameter_count", parameter_count},
      {"architecture", architecture},
      {"resumed", resumed},
      {"snapshots", snapshots_json},
      {"seconds", seconds}};
  if (const char* note = sampling_note(options.sampling)) out["sampling_note"] = note;
  return out;
}

const char* sampling_note(BatchSampling sampling) {
  return sampling == BatchSampling::kShuffle
             ? "shuffled epochs (every example once an epoch): kappa and epsilon (RDP or PLD accountant) are computed "
               "for Poisson sampling at rate B/n and do not cover shuffling, which has no subsampling amplification "
               "guarantee"
             : nullptr;
}

BatchSampling accounted_sampling(BatchSampling sampling) {
  return sampling == BatchSampling::kShuffle ? BatchSampling::kPoisson : sampling;
}

nlohmann::json accounting_summary(const DpSgdOptions& options) {
  const char* note = sampling_note(options.sampling);
  return {{"accountant", to_string(options.accountant)},
          {"discretization", options.accountant == AccountantKind::kPld ? nlohmann::json(options.discretization)
                                                                        : nlohmann::json(nullptr)},
          {"sampling", to_string(accounted_sampling(options.sampling))},
          {"neighbouring_relation", describe(neighbouring_relation(options.sampling))},
          {"delta", options.rdp_delta},
          {"noise_multiplier", options.noise_multiplier},
          {"effective_noise_multiplier", rdp_noise_multiplier(options.noise_multiplier)},
          {"effective_noise_multiplier_reason", kEffectiveNoiseMultiplierReason},
          {"covers_sampler", note == nullptr},
          {"note", note ? nlohmann::json(note) : nlohmann::json(nullptr)}};
}

void DpSgdResult::print_dfil_over_runs(std::ostream& out) const {
  if (snapshots.empty()) return;
  const RunBootstrap& first = snapshots.front().dfil_over_runs;
  const std::size_t runs = first.per_run.size();
  if (runs < 2) {
    out << "  one run: no confidence intervals for the max and median dFIL (they need runs > 1)\n";
    return;
  }
  const std::string percent = format_double(100.0 * first.level) + "%";
  out << "  dFIL over " << runs << " runs. 'averaged': the max (median) over examples of the dFIL of the traces "
      << "averaged over the runs, as in the table above; averaging smooths each run's peaks, so the max is at most "
      << "the root mean square of the runs' own maxima and usually below each of them ('each run': their range). "
      << percent << " bootstrap intervals: " << first.resamples << " resamples of the runs, seed " << bootstrap_seed
      << "\n";
  out << "  " << std::setw(7) << "step" << std::setw(8) << "dFIL" << std::setw(11) << "averaged" << std::setw(26)
      << percent + " interval" << std::setw(26) << "each run" << std::setw(12) << "MSE bound" << std::setw(26)
      << percent + " interval"
      << "\n";
  for (const DpSgdSnapshot& c : snapshots) {
    const RunBootstrap& b = c.dfil_over_runs;
    for (const bool max : {true, false}) {
      double low = std::numeric_limits<double>::infinity(), high = -low;
      for (const MaxAndMedian& run : b.per_run) {
        low = std::min(low, max ? run.max : run.median);
        high = std::max(high, max ? run.max : run.median);
      }
      const double value = max ? b.estimate.max : b.estimate.median;
      const std::optional<ConfidenceInterval>& interval = max ? b.max_interval : b.median_interval;
      out << "  " << std::setw(7) << c.step << std::setw(8) << (max ? "max" : "median") << std::setw(11)
          << scientific(value, 3) << std::setw(26) << bracketed(interval) << std::setw(26) << bracketed(low, high)
          << std::setw(12) << scientific(mse_bound(value), 3) << std::setw(26)
          << bracketed(mse_bound_interval(interval)) << "\n";
    }
  }
}

std::vector<std::string> DpSgdResult::table_header() const {
  std::vector<std::string> header{"step",
                                  "epoch",
                                  "index",
                                  "label",
                                  "times_sampled",
                                  "eta",
                                  "dfil",
                                  "attribute_mse_bound",
                                  "example_mse_bound",
                                  "fisher_trace",
                                  "fisher_trace_standard_error"};
  const Index runs = snapshots.empty() ? 1 : snapshots.front().fisher_trace_per_run.rows();
  for (Index r = 0; runs > 1 && r < runs; ++r) header.push_back("fisher_trace_run" + std::to_string(r));
  return header;
}

std::vector<std::vector<double>> DpSgdResult::table_rows(const VectorXd& labels) const {
  // The result holds one label a row by construction: a bug otherwise.
  if (labels.size() != n)
    throw std::logic_error("DpSgdResult::table_rows: " + std::to_string(labels.size()) + " labels for " +
                           std::to_string(n) + " examples");
  std::vector<std::vector<double>> rows;
  for (const DpSgdSnapshot& c : snapshots) {
    const VectorXd eta = c.eta(), dfil = c.dfil(private_dims);
    const Index runs = c.fisher_trace_per_run.rows();
    for (Index i = 0; i < n; ++i) {
      rows.push_back({static_cast<double>(c.step), c.epoch, static_cast<double>(i), labels(i), c.times_sampled(i),
                      eta(i), dfil(i), 1.0 / (eta(i) * eta(i)), 1.0 / (dfil(i) * dfil(i)), c.fisher_trace(i),
                      c.fisher_trace_standard_error(i)});
      for (Index r = 0; runs > 1 && r < runs; ++r) rows.back().push_back(c.fisher_trace_per_run(r, i));
    }
  }
  return rows;
}

}  // namespace filkit
