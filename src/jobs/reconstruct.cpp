#include "filkit/jobs/reconstruct.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/timing.hpp"

#include "jobs/json_numbers.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/base/stage.hpp"

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
          {"share", detail::number_or_null(considered ? static_cast<double>(above) / static_cast<double>(considered) : std::nan(""))}};
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
  Progress progress("filkit reconstruct: GLM attack", options.attack.trials, !show_progress || !comm.is_root());
  Index reported = 0;
  result.attack = evaluate_glm_attack(result.bound.model, result.bound.data.train, options.attack_options(),
                                      [&](Index done, Index) {
                                        progress.advance(done - reported);
                                        reported = done;
                                      },
                                      comm);
  progress.finish();
  result.bound.seconds["attack"] = seconds_since(start);
  if (result.attack.total_guarded > 0)
    result.bound.warnings.push_back(std::to_string(result.attack.total_guarded) +
                                    " attack trial(s) had |B_i[0]| below the guard or a non-finite error and were "
                                    "excluded; " + std::to_string(result.attack.examples_all_guarded) +
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
      {"above_dfil_bound_where_bound_below_perfect_privacy", share_above_bound(attack.mean_mse, bound_of_row, informative)},
      {"log10_correlation_dfil_bound_vs_mse", detail::number_or_null(log_log_correlation(bound_of_row, attack.mean_mse))},
  };
  json["warnings"] = bound.warnings;
  json["seconds"] = bound.seconds;
  return json;
}

NumericTable ReconstructJobResult::table() const {
  const NumericTable bound_table = bound.table();
  const std::vector<std::vector<double>>& bound_rows = bound_table.rows;
  NumericTable table{bound_table.header, {}};
  table.header.insert(table.header.end(), {"attack_mse", "linearised_mse", "guarded_trials"});
  std::vector<std::vector<double>>& rows = table.rows;
  rows.reserve(attack.rows.size());
  for (std::size_t k = 0; k < attack.rows.size(); ++k) {
    std::vector<double> row = bound_rows[static_cast<std::size_t>(attack.rows[k])];
    const auto at = static_cast<Index>(k);
    row.insert(row.end(), {attack.mean_mse(at), attack.linearised_mse(at), static_cast<double>(attack.guarded(at))});
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
