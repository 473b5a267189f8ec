#include "filkit/jobs/bound_reconstruct.hpp"
#include "filkit/data/pipeline.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/summary.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>

namespace filkit {

namespace {

using Clock = std::chrono::steady_clock;


nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

VectorXd finite_values(const VectorXd& values) {
  VectorXd kept(values.size());
  Index count = 0;
  for (Index i = 0; i < values.size(); ++i)
    if (std::isfinite(values(i))) kept(count++) = values(i);
  return kept.head(count);
}

// Quantiles of the finite entries (non-finite ones are counted, not ranked).
nlohmann::json quantiles_json(const VectorXd& values) {
  const VectorXd finite = finite_values(values);
  nlohmann::json json = {{"count", finite.size()}, {"non_finite", values.size() - finite.size()}};
  if (finite.size() == 0) return json;
  const std::vector<std::pair<std::string, double>> levels = {{"min", 0.0},  {"q05", 0.05},   {"q25", 0.25}, {"median", 0.5},
                                                              {"q75", 0.75}, {"q95", 0.95}, {"max", 1.0}};
  for (const auto& [name, level] : levels) json[name] = quantile(finite, level);
  json["mean"] = finite.mean();
  return json;
}

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
          {"share", number_or_null(considered ? static_cast<double>(above) / static_cast<double>(considered) : std::nan(""))}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------

void BoundJobOptions::validate() const {
  data.validate();
  preprocess.validate();
  fit.validate();
  bounds.validate();
  if (fit.kind != ModelKind::kLogistic)
    throw std::invalid_argument("BoundJobOptions.fit.kind = " + to_string(fit.kind) +
                                ": reconstruction bounds of output perturbation need logistic regression");
}

BoundJobOptions default_bound_job_options() {
  BoundJobOptions options;
  options.data.data = "mnist";
  options.data.classes = {0, 1};
  options.preprocess.scale_pixels = true;
  options.fit.kind = ModelKind::kLogistic;
  options.fit.l2 = 1e-2;
  options.fit.intercept = true;
  options.bounds.sigma = 1e-2;
  return options;
}

BoundJobResult run_bound_job(const BoundJobOptions& options) {
  options.validate();
  BoundJobResult result;
  Progress stages("filkit bound: load, preprocess, fit, FIL", 4, !options.progress);
  PreparedData prepared = load_and_preprocess(options.data, options.preprocess);
  result.data = std::move(prepared.data);
  result.preprocessor = std::move(prepared.preprocessor);
  result.seconds = std::move(prepared.seconds);
  stages.advance(2);
  const Dataset& train = result.data.train;

  auto start = Clock::now();
  result.model = fit(train, options.fit);
  result.seconds["fit"] = seconds_since(start);
  stages.advance();

  start = Clock::now();
  result.bounds = reconstruction_bounds(result.model, train, options.bounds);
  result.seconds["bounds"] = seconds_since(start);
  stages.finish();

  if (!result.bounds.norm_check.satisfied()) result.warnings.push_back(result.bounds.norm_check.message());
  result.release = perturb_output(result.model, options.bounds.sigma, options.seed);
  result.train_accuracy = accuracy(result.model, train);
  result.test_accuracy = accuracy(result.model, result.data.test);
  result.release_test_accuracy = accuracy(result.release, result.data.test);
  return result;
}

nlohmann::json BoundJobResult::summary(const BoundJobOptions& options) const {
  const Dataset& train = data.train;
  nlohmann::json json;
  json["filkit_version"] = version();
  json["command"] = "bound";
  json["seed"] = options.seed;
  json["n"] = train.n();
  json["n_test"] = data.test.n();
  json["d"] = train.d();
  json["settings"] = {
      {"data", options.data.data},
      {"source", train.source},
      {"classes", options.data.classes},
      {"preprocessing", preprocessor.to_json()},
      {"model", to_string(options.fit.kind)},
      {"l2", options.fit.l2},
      {"intercept", options.fit.intercept},
      {"gradient_tolerance", options.fit.gradient_tolerance},
      {"sigma", options.bounds.sigma},
      {"label", "public"},
      {"diameters", options.bounds.diameters.size()
                        ? nlohmann::json(std::vector<double>(options.bounds.diameters.data(),
                                                             options.bounds.diameters.data() + options.bounds.diameters.size()))
                        : nlohmann::json(options.bounds.diameter)},
      {"norm_bound", options.bounds.norm_bound},
  };
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
  json["dfil_bound"] = quantiles_json(bounds.dfil_bound);
  json["dfil_bound"]["share_at_or_above_perfect_privacy"] = bounds.share_dfil_bound_above_line;
  json["dfil_bound"]["share_above_rdp_bound"] = share_at_or_above(bounds.dfil_bound, bounds.rdp_mse_bound);
  json["fil_bound"] = quantiles_json(bounds.fil_bound);
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

std::vector<std::string> BoundJobResult::table_header() const {
  return {"index", "label", "eta", "dfil", "fil_bound", "dfil_bound"};
}

std::vector<std::vector<double>> BoundJobResult::table_rows() const {
  std::vector<std::vector<double>> rows;
  rows.reserve(static_cast<std::size_t>(data.train.n()));
  for (Index i = 0; i < data.train.n(); ++i)
    rows.push_back({static_cast<double>(i), data.train.y(i), bounds.fil.eta(i), bounds.fil.dfil(i),
                    bounds.fil_bound(i), bounds.dfil_bound(i)});
  return rows;
}

// ---------------------------------------------------------------------------------------------

GlmAttackOptions ReconstructJobOptions::attack_options() const {
  GlmAttackOptions attack;
  attack.sigma = bound.bounds.sigma;
  attack.trials = trials;
  attack.seed = bound.seed;
  attack.rows = rows;
  attack.keep_reconstructions = keep_reconstructions;
  attack.divisor_guard = divisor_guard;
  return attack;
}

void ReconstructJobOptions::validate() const {
  bound.validate();
  if (!bound.fit.intercept)
    throw std::invalid_argument("ReconstructJobOptions.bound.fit.intercept = false: the GLM attack divides by the "
                                "intercept coordinate; fit with an intercept");
  attack_options().validate();
}

ReconstructJobOptions default_reconstruct_job_options() {
  ReconstructJobOptions options;
  options.bound = default_bound_job_options();
  options.bound.bounds.sigma = 1e-5;
  return options;
}

ReconstructJobResult run_reconstruct_job(const ReconstructJobOptions& options) {
  options.validate();
  ReconstructJobResult result;
  result.bound = run_bound_job(options.bound);
  const auto start = Clock::now();
  Progress progress("filkit reconstruct: GLM attack", options.trials, !options.bound.progress);
  Index reported = 0;
  result.attack = evaluate_glm_attack(result.bound.model, result.bound.data.train, options.attack_options(),
                                      [&](Index done, Index) {
                                        progress.advance(done - reported);
                                        reported = done;
                                      });
  progress.finish();
  result.bound.seconds["attack"] = seconds_since(start);
  if (result.attack.total_guarded > 0)
    result.bound.warnings.push_back(std::to_string(result.attack.total_guarded) +
                                    " attack trial(s) had |B_i[0]| below the guard or a non-finite error and were "
                                    "excluded; " + std::to_string(result.attack.examples_all_guarded) +
                                    " example(s) had no valid trial (their attack_mse is nan)");
  return result;
}

nlohmann::json ReconstructJobResult::summary(const ReconstructJobOptions& options) const {
  nlohmann::json json = bound.summary(options.bound);
  json["command"] = "reconstruct";
  json["settings"]["trials"] = options.trials;
  json["settings"]["rows"] = options.rows.empty() ? nlohmann::json("all") : nlohmann::json(options.rows);
  json["settings"]["divisor_guard"] = options.divisor_guard;
  json["settings"]["keep_reconstructions"] = options.keep_reconstructions;

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
      {"mse", quantiles_json(attack.mean_mse)},
      {"linearised_mse", quantiles_json(attack.linearised_mse)},
      {"mse_over_linearised", quantiles_json(attack.mean_mse.cwiseQuotient(attack.linearised_mse))},
      {"above_dfil_bound", share_above_bound(attack.mean_mse, bound_of_row, all)},
      {"above_dfil_bound_where_bound_below_perfect_privacy", share_above_bound(attack.mean_mse, bound_of_row, informative)},
      {"log10_correlation_dfil_bound_vs_mse", number_or_null(log_log_correlation(bound_of_row, attack.mean_mse))},
  };
  json["warnings"] = bound.warnings;
  json["seconds"] = bound.seconds;
  return json;
}

std::vector<std::string> ReconstructJobResult::table_header() const {
  std::vector<std::string> header = bound.table_header();
  header.insert(header.end(), {"attack_mse", "linearised_mse", "guarded_trials"});
  return header;
}

std::vector<std::vector<double>> ReconstructJobResult::table_rows() const {
  const std::vector<std::vector<double>> bound_rows = bound.table_rows();
  std::vector<std::vector<double>> rows;
  rows.reserve(attack.rows.size());
  for (std::size_t k = 0; k < attack.rows.size(); ++k) {
    std::vector<double> row = bound_rows[static_cast<std::size_t>(attack.rows[k])];
    const auto at = static_cast<Index>(k);
    row.insert(row.end(), {attack.mean_mse(at), attack.linearised_mse(at), static_cast<double>(attack.guarded(at))});
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<std::string> ReconstructJobResult::reconstruction_header() const {
  std::vector<std::string> header = {"index", "label", "kind", "attack_mse"};
  // Appended rather than "x" + ...: GCC 12 reports a false -Wrestrict for the latter.
  for (Index j = 0; j < bound.data.train.d(); ++j) header.push_back(std::string(1, 'x').append(std::to_string(j)));
  return header;
}

std::vector<std::vector<double>> ReconstructJobResult::reconstruction_rows() const {
  const Dataset& train = bound.data.train;
  std::vector<std::vector<double>> rows;
  for (std::size_t k = 0; k < attack.reconstruction_rows.size(); ++k) {
    const Index i = attack.reconstruction_rows[k];
    // The realised MSE of a kept example, if it was also attacked as a row of the table.
    double mse = std::nan("");
    for (std::size_t r = 0; r < attack.rows.size(); ++r)
      if (attack.rows[r] == i) mse = attack.mean_mse(static_cast<Index>(r));
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<double> row = {static_cast<double>(i), train.y(i), static_cast<double>(kind), mse};
      const auto pixels = kind == 0 ? RowMatrix(train.X.row(i)) : RowMatrix(attack.reconstructions.row(static_cast<Index>(k)));
      row.insert(row.end(), pixels.data(), pixels.data() + pixels.size());
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace filkit
