// The attribute-inference result as JSON and tables (the attack job's outputs).
#include "filkit/leakage/attribute_inference.hpp"

#include "filkit/base/summary.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace filkit {

namespace {

nlohmann::json numbers(const std::vector<double>& values) {
  nlohmann::json list = nlohmann::json::array();
  for (double v : values) list.push_back(number_or_null(v));
  return list;
}

}  // namespace

nlohmann::json AttackResult::to_json() const {
  nlohmann::json by_sigma = nlohmann::json::array();
  for (const SigmaAccuracy& s : sigmas) {
    by_sigma.push_back({{"sigma", s.sigma},
                        {"eta_mean", s.eta_mean},
                        {"white_box", number_or_null(s.white_box)},
                        {"white_box_std", number_or_null(s.white_box_std)},
                        {"black_box", number_or_null(s.black_box)},
                        {"black_box_std", number_or_null(s.black_box_std)},
                        {"white_box_by_group", numbers(s.white_box_by_group)},
                        {"black_box_by_group", numbers(s.black_box_by_group)},
                        {"release_train_mse", number_or_null(s.train_mse)},
                        {"release_test_mse", number_or_null(s.test_mse)},
                        {"release_train_accuracy", number_or_null(s.train_accuracy)},
                        {"release_test_accuracy", number_or_null(s.test_accuracy)}});
  }
  const std::vector<double> prior(candidates.prior.data(), candidates.prior.data() + candidates.prior.size());
  nlohmann::json json;
  json["attribute"] = {{"name", candidates.name},
                       {"columns", candidates.columns},
                       {"levels", candidates.levels},
                       {"prior", prior},
                       {"mode", candidates.levels[static_cast<std::size_t>(candidates.mode)]}};
  json["examples"] = examples.size();
  json["eta_sigma_1"] = summarize(eta).to_json();
  if (nearest_shift.allFinite()) json["nearest_shift"] = summarize(nearest_shift).to_json();
  json["group_eta_sigma_1"] = numbers(group_eta);
  json["prior_accuracy"] = prior_accuracy;
  json["prior_by_group"] = numbers(prior_by_group);
  json["by_sigma"] = by_sigma;
  json["model"] = {{"train_mse", number_or_null(train_mse)},
                   {"test_mse", number_or_null(test_mse)},
                   {"train_accuracy", number_or_null(train_accuracy)},
                   {"test_accuracy", number_or_null(test_accuracy)},
                   {"fit_iterations", model.iterations}};
  json["white_box_fallback_refits"] = fallback_refits;
  if (naive.examples > 0)
    json["naive_refit"] = {{"examples", naive.examples},
                           {"seconds", naive.seconds},
                           {"update_seconds_same_examples", naive.fast_seconds},
                           {"estimated_seconds_all_examples", naive.estimated_seconds_all},
                           {"max_difference", naive.max_difference}};
  json["seconds"] = seconds;
  return json;
}

std::vector<std::string> AttackResult::table_header() const {
  return {"sigma",     "group",         "eta_mean",  "prior",    "white_box",      "white_box_std",
          "black_box", "black_box_std", "train_mse", "test_mse", "train_accuracy", "test_accuracy"};
}

std::vector<std::vector<double>> AttackResult::table_rows() const {
  std::vector<std::vector<double>> rows;
  for (const SigmaAccuracy& s : sigmas) {
    rows.push_back({s.sigma, -1.0, s.eta_mean, prior_accuracy, s.white_box, s.white_box_std, s.black_box,
                    s.black_box_std, s.train_mse, s.test_mse, s.train_accuracy, s.test_accuracy});
    for (std::size_t g = 0; g < group_eta.size(); ++g) {
      const auto at = [&](const std::vector<double>& v) { return v.empty() ? std::nan("") : v[g]; };
      rows.push_back({s.sigma, static_cast<double>(g), group_eta[g] / s.sigma, prior_by_group[g],
                      at(s.white_box_by_group), std::nan(""), at(s.black_box_by_group), std::nan(""), s.train_mse,
                      s.test_mse, s.train_accuracy, s.test_accuracy});
    }
  }
  return rows;
}

std::vector<std::string> AttackResult::example_header() const {
  return {"index",
          "level",
          "group",
          "sigma",
          "eta",
          "nearest_shift",
          "prior_correct",
          "white_box_accuracy",
          "black_box_accuracy"};
}

std::vector<std::vector<double>> AttackResult::example_rows() const {
  std::vector<std::vector<double>> rows;
  for (std::size_t k = 0; k < sigmas.size(); ++k) {
    for (std::size_t e = 0; e < examples.size(); ++e) {
      const Index i = examples[e];
      const Index level = candidates.truth[static_cast<std::size_t>(i)];
      rows.push_back({static_cast<double>(i), static_cast<double>(level), static_cast<double>(group[e]),
                      sigmas[k].sigma, eta(static_cast<Index>(e)) / sigmas[k].sigma,
                      nearest_shift(static_cast<Index>(e)), level == candidates.mode ? 1.0 : 0.0,
                      white_box_correct(static_cast<Index>(e), static_cast<Index>(k)),
                      black_box_correct(static_cast<Index>(e), static_cast<Index>(k))});
    }
  }
  return rows;
}

}  // namespace filkit
