#include "filkit/jobs/reconstruct.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/base/timing.hpp"

#include "jobs/json_numbers.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/stage.hpp"
#include "filkit/leakage/biased_attacker.hpp"

#include <chrono>
#include <cmath>
#include <iostream>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;

// Pearson correlation of log10 a and log10 b over the pairs where both are finite and positive.
double log_log_correlation(const VectorXd& a, const VectorXd& b) {
  std::vector<std::pair<double, double>> pairs;
  for (Index i = 0; i < a.size(); ++i)
    if (std::isfinite(a(i)) && std::isfinite(b(i)) && a(i) > 0 && b(i) > 0)
      pairs.emplace_back(std::log10(a(i)), std::log10(b(i)));
  if (pairs.size() < 2) return std::nan("");
  double mean_a = 0, mean_b = 0;
  for (const auto& [x, y] : pairs) mean_a += x, mean_b += y;
  mean_a /= static_cast<double>(pairs.size());
  mean_b /= static_cast<double>(pairs.size());
  double cov = 0, var_a = 0, var_b = 0;
  for (const auto& [x, y] : pairs) {
    cov += (x - mean_a) * (y - mean_b);
    var_a += (x - mean_a) * (x - mean_a);
    var_b += (y - mean_b) * (y - mean_b);
  }
  return cov / std::sqrt(var_a * var_b);
}

// Share of examples (finite realised MSE, and `include` true) whose MSE is at or above its bound.
nlohmann::json share_above_bound(const VectorXd& mse, const VectorXd& bound, const std::vector<bool>& include) {
  Index considered = 0, above = 0;
  for (Index k = 0; k < mse.size(); ++k) {
    if (!include[static_cast<std::size_t>(k)] || !std::isfinite(mse(k))) continue;
    ++considered;
    if (mse(k) >= bound(k)) ++above;
  }
  return {{"examples", considered},
          {"at_or_above_bound", above},
          {"share",
           number_or_null(considered ? static_cast<double>(above) / static_cast<double>(considered) : std::nan(""))}};
}

// Examples whose attack MSE lies below `bound` (finite both), and those of them below it by more
// than two standard errors of each (the MSE's and the bound's).
nlohmann::json below_bound(const VectorXd& mse, const VectorXd& mse_error, const VectorXd& bound,
                           const VectorXd& bound_error) {
  Index considered = 0, below = 0, clearly_below = 0;
  for (Index k = 0; k < mse.size(); ++k) {
    if (!std::isfinite(mse(k)) || std::isnan(bound(k))) continue;
    ++considered;
    if (mse(k) >= bound(k)) continue;
    ++below;
    if (mse(k) + 2.0 * mse_error(k) < bound(k) - 2.0 * bound_error(k)) ++clearly_below;
  }
  return {{"examples", considered}, {"below", below}, {"below_by_two_standard_errors", clearly_below}};
}

// What the biased bounds say: their inputs' spread and the examples below each bound, and of the
// examples below the unbiased dFIL bound, how many stay below the biased one.
nlohmann::json biased_bounds_json(const ReconstructJobResult& r, const VectorXd& dfil_bound) {
  const GlmAttackResult& a = r.attack;
  const BiasedReconstructionBounds& b = r.biased;
  const VectorXd no_error = VectorXd::Zero(dfil_bound.size());
  Index violations = 0, still_below = 0;
  for (Index k = 0; k < dfil_bound.size(); ++k) {
    if (!std::isfinite(a.mean_mse(k)) || !(a.mean_mse(k) < dfil_bound(k))) continue;
    ++violations;
    if (!(a.mean_mse(k) >= b.dfil(k))) ++still_below;  // a NaN biased bound counts as still below
  }
  const auto examples_estimated = (a.jacobian_trace.array().isFinite() && a.squared_bias.array().isFinite()).count();
  return {{"method",
           "tr J_mu / d by Stein's lemma (the mean over trials of eps^T J_i e / sigma, with the linearised attack's "
           "term as control variate) and ||E x_hat - x||^2 / d by the U-statistic of the trials' errors; docs/"
           "mathematics.md, section 6.7. The RDP form puts the example's tr J_mu / d in place of Theorem 1's "
           "infimum gamma_k: an estimate, not a certified bound"},
          {"examples_estimated", examples_estimated},
          {"squared_bias", detail::quantiles_json(a.squared_bias)},
          {"jacobian_trace", detail::quantiles_json(a.jacobian_trace)},
          {"biased_dfil_bound", detail::quantiles_json(b.dfil)},
          {"below_dfil_bound", below_bound(a.mean_mse, a.mse_standard_error, dfil_bound, no_error)},
          {"below_biased_dfil_bound", below_bound(a.mean_mse, a.mse_standard_error, b.dfil, b.dfil_standard_error)},
          {"below_biased_fil_bound", below_bound(a.mean_mse, a.mse_standard_error, b.fil, b.fil_standard_error)},
          {"below_biased_rdp_bound", below_bound(a.mean_mse, a.mse_standard_error, b.rdp, b.rdp_standard_error)},
          {"below_dfil_bound_and_below_biased_dfil_bound", {{"examples", violations}, {"below", still_below}}}};
}

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
  const nlohmann::json& biased = attack["biased_bounds"];
  const auto median = [&](const char* name) { return number(biased[name].value("median", nlohmann::json())); };
  out << "  attack's bias and Jacobian (" << biased["examples_estimated"] << " examples): median squared bias "
      << median("squared_bias") << ", median tr J_mu / d " << median("jacobian_trace") << "\n";
  const auto below = [&](const char* name) {
    return std::to_string(biased[name]["below"].get<Index>()) + " (" +
           std::to_string(biased[name]["below_by_two_standard_errors"].get<Index>()) + " by 2 standard errors)";
  };
  out << "  examples whose attack MSE is below the dFIL bound: " << biased["below_dfil_bound"]["below"]
      << "; below its biased form: " << below("below_biased_dfil_bound")
      << "; of the first, below both: " << biased["below_dfil_bound_and_below_biased_dfil_bound"]["below"] << "\n";
  out << "  below the biased FIL bound: " << below("below_biased_fil_bound")
      << "; below the biased RDP bound: " << below("below_biased_rdp_bound") << "\n";
}

// The biased bounds of every attacked row (leakage/biased_attacker.hpp).
BiasedReconstructionBounds biased_bounds(const BoundJobResult& bound, const GlmAttackResult& attack) {
  const auto m = static_cast<Index>(attack.rows.size());
  BiasedReconstructionBounds biased;
  for (VectorXd* v : {&biased.rdp, &biased.rdp_standard_error, &biased.dfil, &biased.dfil_standard_error, &biased.fil,
                      &biased.fil_standard_error})
    v->resize(m);
  const ReconstructionBounds& b = bound.bounds;
  for (Index k = 0; k < m; ++k) {
    const Index i = attack.rows[static_cast<std::size_t>(k)];
    const McEstimate trace{attack.jacobian_trace(k), attack.jacobian_trace_standard_error(k)};
    const McEstimate bias{attack.squared_bias(k), attack.squared_bias_standard_error(k)};
    const auto set = [&](double unbiased, VectorXd& value, VectorXd& error) {
      const McEstimate e = biased_mse_bound(unbiased, trace, bias);
      value(k) = e.value;
      error(k) = e.standard_error;
    };
    set(b.rdp_mse_bound, biased.rdp, biased.rdp_standard_error);
    set(b.dfil_bound(i), biased.dfil, biased.dfil_standard_error);
    set(b.fil_bound(i), biased.fil, biased.fil_standard_error);
  }
  return biased;
}

}  // namespace

GlmAttackOptions ReconstructJobOptions::attack_options() const {
  GlmAttackOptions options = attack;
  options.sigma = bound.bounds.sigma;
  options.seed = bound.seed;
  return options;
}

void ReconstructJobOptions::validate() const {
  bound.validate();
  if (!bound.task.fit.intercept)
    option_error("intercept", "false", "the GLM attack divides by the intercept coordinate; fit with an intercept");
  attack_options().validate();
}

ReconstructJobResult run_reconstruct(const ReconstructJobOptions& requested, bool show_progress) {
  requested.validate();
  ReconstructJobResult result;
  result.options = requested;
  result.options.bound.task.resolve();
  const ReconstructJobOptions& options = result.options;
  result.bound = run_bound(options.bound, show_progress);
  const auto start = Clock::now();
  const StageScope stage("running the GLM reconstruction attack");
  const Communicator& comm = Communicator::world();
  // The sums of the errors for the attack's bias: one row of d doubles an attacked example.
  const Index attacked =
      options.attack.rows.empty() ? result.bound.data.train.n() : static_cast<Index>(options.attack.rows.size());
  check_memory(saturating_product(saturating_product(static_cast<std::uint64_t>(attacked),
                                                     static_cast<std::uint64_t>(result.bound.data.train.d())),
                                  sizeof(double)),
               options.bound.task.data.max_memory,
               "the GLM attack's error sums (" + std::to_string(attacked) + " examples x " +
                   std::to_string(result.bound.data.train.d()) + " features; fewer with --rows)");
  Progress progress("filkit reconstruct: GLM attack", options.attack.trials, !show_progress || !comm.is_root());
  Index reported = 0;
  result.attack = evaluate_glm_attack(
      result.bound.model, result.bound.data.train, options.attack_options(),
      [&](Index done, Index) {
        progress.advance(done - reported);
        reported = done;
      },
      comm);
  progress.finish();
  if (comm.is_root()) result.biased = biased_bounds(result.bound, result.attack);
  result.bound.seconds["attack"] = seconds_since(start);
  if (result.attack.total_guarded > 0)
    result.bound.warnings.push_back(std::to_string(result.attack.total_guarded) +
                                    " attack trial(s) had |B_i[0]| below the guard or a non-finite error and were "
                                    "excluded; " +
                                    std::to_string(result.attack.examples_all_guarded) +
                                    " example(s) had no valid trial (their attack_mse is nan)");
  return result;
}

nlohmann::json ReconstructJobResult::to_json() const {
  nlohmann::json json = bound.to_json();
  json.update(job_summary_header(ReconstructJob::name, options.bound.seed));
  json["settings"] = settings_json(options);

  const auto m = static_cast<Index>(attack.rows.size());
  VectorXd bound_of_row(m);
  std::vector<bool> all(static_cast<std::size_t>(m), true), informative(static_cast<std::size_t>(m));
  for (Index k = 0; k < m; ++k) {
    bound_of_row(k) = bound.bounds.dfil_bound(attack.rows[static_cast<std::size_t>(k)]);
    informative[static_cast<std::size_t>(k)] = bound_of_row(k) < bound.bounds.perfect_privacy_mse;
  }
  json["attack"] = {
      {"examples", m},
      {"trials", attack.trials},
      {"guarded_trials", attack.total_guarded},
      {"examples_all_guarded", attack.examples_all_guarded},
      {"mse", detail::quantiles_json(attack.mean_mse)},
      {"linearised_mse", detail::quantiles_json(attack.linearised_mse)},
      {"mse_over_linearised", detail::quantiles_json(attack.mean_mse.cwiseQuotient(attack.linearised_mse))},
      {"above_dfil_bound", share_above_bound(attack.mean_mse, bound_of_row, all)},
      {"above_dfil_bound_where_bound_below_perfect_privacy",
       share_above_bound(attack.mean_mse, bound_of_row, informative)},
      {"log10_correlation_dfil_bound_vs_mse", number_or_null(log_log_correlation(bound_of_row, attack.mean_mse))},
  };
  json["attack"]["biased_bounds"] = biased_bounds_json(*this, bound_of_row);
  json["warnings"] = bound.warnings;
  json["seconds"] = bound.seconds;
  return json;
}

NumericTable ReconstructJobResult::table() const {
  const NumericTable bound_table = bound.table();
  const std::vector<std::vector<double>>& bound_rows = bound_table.rows;
  NumericTable table{bound_table.header, {}};
  table.header.insert(table.header.end(),
                      {"attack_mse", "linearised_mse", "guarded_trials", "attack_mse_standard_error", "squared_bias",
                       "squared_bias_standard_error", "jacobian_trace", "jacobian_trace_standard_error",
                       "biased_rdp_bound", "biased_rdp_bound_standard_error", "biased_dfil_bound",
                       "biased_dfil_bound_standard_error", "biased_fil_bound", "biased_fil_bound_standard_error"});
  std::vector<std::vector<double>>& rows = table.rows;
  rows.reserve(attack.rows.size());
  for (std::size_t k = 0; k < attack.rows.size(); ++k) {
    std::vector<double> row = bound_rows[static_cast<std::size_t>(attack.rows[k])];
    const auto at = static_cast<Index>(k);
    row.insert(row.end(),
               {attack.mean_mse(at), attack.linearised_mse(at), static_cast<double>(attack.guarded(at)),
                attack.mse_standard_error(at), attack.squared_bias(at), attack.squared_bias_standard_error(at),
                attack.jacobian_trace(at), attack.jacobian_trace_standard_error(at), biased.rdp(at),
                biased.rdp_standard_error(at), biased.dfil(at), biased.dfil_standard_error(at), biased.fil(at),
                biased.fil_standard_error(at)});
    rows.push_back(std::move(row));
  }
  return table;
}

NumericTable ReconstructJobResult::extra_table(const std::string& name) const {
  if (name != "reconstructions_out") return JobResult::extra_table(name);
  NumericTable table;
  std::vector<std::string>& header = table.header;
  header = {"index", "label", "kind", "attack_mse"};
  // Appended rather than "x" + ...: GCC 12 reports a false -Wrestrict for the latter.
  for (Index j = 0; j < bound.data.train.d(); ++j) header.push_back(std::string(1, 'x').append(std::to_string(j)));
  std::vector<std::vector<double>>& rows = table.rows;
  for (std::size_t k = 0; k < attack.reconstruction_rows.size(); ++k) {
    const Index i = attack.reconstruction_rows[k];
    // The realised MSE of a kept example, if it was also attacked as a row of the table.
    double mse = std::nan("");
    for (std::size_t r = 0; r < attack.rows.size(); ++r)
      if (attack.rows[r] == i) mse = attack.mean_mse(static_cast<Index>(r));
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> row = {static_cast<double>(i), bound.labels(i), static_cast<double>(kind), mse};
      const auto pixels = RowMatrix((kind == 0 ? attack.originals : attack.reconstructions).row(static_cast<Index>(k)));
      row.insert(row.end(), pixels.data(), pixels.data() + pixels.size());
      rows.push_back(std::move(row));
    }
  }
  return table;
}

void ReconstructJobResult::print_summary(std::ostream& out) const {
  for (const std::string& warning : bound.warnings) std::cerr << "filkit reconstruct: warning: " << warning << "\n";
  bound.print_bounds(out);
  print_attack_summary(out, to_json()["attack"]);
  bound.print_seconds(out);
}

}  // namespace filkit
