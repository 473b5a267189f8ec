// The DP-SGD result as the JSON summary and the per-example table.
#include "filkit/dpsgd/training.hpp"

#include "filkit/base/io.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/dpsgd/step_privacy.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

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

}  // namespace

nlohmann::json DpSgdResult::summary(const DpSgdOptions& options) const {
  nlohmann::json snapshots_json = nlohmann::json::array();
  for (const DpSgdSnapshot& c : snapshots)
    snapshots_json.push_back({{"step", c.step},
                                {"epoch", c.epoch},
                                {"dfil", leakage_summary(c.dfil(private_dims))},
                                {"eta", leakage_summary(c.eta())},
                                {"times_sampled_mean", c.times_sampled.mean()},
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
  return {{"filkit_version", version()},
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
          {"run_seeds", run_seeds},
          {"parameter_count", parameter_count},
          {"architecture", architecture},
          {"resumed", resumed},
          {"snapshots", snapshots_json},
          {"seconds", seconds}};
}

std::vector<std::string> DpSgdResult::table_header() const {
  return {"step", "epoch", "index", "label", "times_sampled", "eta", "dfil", "attribute_mse_bound",
          "example_mse_bound", "fisher_trace", "fisher_trace_standard_error"};
}

std::vector<std::vector<double>> DpSgdResult::table_rows(const Dataset& train) const {
  std::vector<std::vector<double>> rows;
  for (const DpSgdSnapshot& c : snapshots) {
    const VectorXd eta = c.eta(), dfil = c.dfil(private_dims);
    for (Index i = 0; i < n; ++i)
      rows.push_back({static_cast<double>(c.step), c.epoch, static_cast<double>(i), train.y(i), c.times_sampled(i),
                      eta(i), dfil(i), 1.0 / (eta(i) * eta(i)), 1.0 / (dfil(i) * dfil(i)), c.fisher_trace(i),
                      c.fisher_trace_standard_error(i)});
  }
  return rows;
}

}  // namespace filkit
