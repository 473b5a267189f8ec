#include "filkit/privacy/rdp_accountant.hpp"

#include "filkit/base/checks.hpp"
#include "privacy/log_space.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

namespace filkit {

using detail::kInf;

RdpAccountant::RdpAccountant(std::vector<double> orders, NeighbouringRelation relation)
    : orders_(std::move(orders)), relation_(relation) {
  validate_orders(orders_);
  rdp_.assign(orders_.size(), 0.0);
}

void RdpAccountant::compose(double noise_multiplier, double sample_rate, std::int64_t steps) {
  require_non_negative("steps", steps);
  // Training steps repeat one (sigma, q): reuse its curve rather than re-summing every series.
  if (!(noise_multiplier == cached_noise_multiplier_ && sample_rate == cached_sample_rate_)) {
    cached_rdp_ =
        relation_ == NeighbouringRelation::kAddRemove
            ? subsampled_gaussian_rdp(noise_multiplier, sample_rate, orders_)
            : sampled_without_replacement_gaussian_rdp(noise_multiplier / kReplaceOneSensitivity, sample_rate, orders_);
    cached_noise_multiplier_ = noise_multiplier;
    cached_sample_rate_ = sample_rate;
  }
  const std::vector<double>& step_rdp = cached_rdp_;
  if (steps == 0) return;  // 0 * inf would poison the curve with NaN
  for (std::size_t k = 0; k < orders_.size(); ++k) rdp_[k] += static_cast<double>(steps) * step_rdp[k];
}

PrivacySpent RdpAccountant::get_privacy_spent(double delta) const {
  return privacy_spent_from_rdp(orders_, rdp_, delta);
}

void RdpAccountant::step(double noise_multiplier, double sample_rate, std::int64_t steps) {
  record(noise_multiplier, sample_rate, steps);
  compose(noise_multiplier, sample_rate, steps);
}

bool RdpAccountant::empty() const {
  return std::all_of(rdp_.begin(), rdp_.end(), [](double r) { return r == 0; });
}

double RdpAccountant::epsilon(double delta) const {
  require_in_interval("delta", delta, 0.0, End::kOpen, 1.0, End::kOpen);
  // Nothing released: the conversion's floor (> 0 for r = 0) would be an artefact.
  return empty() ? 0.0 : get_privacy_spent(delta).eps;
}

double RdpAccountant::delta(double epsilon) const {
  require_non_negative("epsilon", epsilon);
  return empty() ? 0.0 : delta_from_rdp(orders_, rdp_, epsilon);
}

nlohmann::json RdpAccountant::state_dict() const {
  nlohmann::json rdp = nlohmann::json::array();
  for (double r : rdp_) rdp.push_back(std::isfinite(r) ? nlohmann::json(r) : nlohmann::json("inf"));
  return {{"accountant", "rdp"},
          {"neighbouring_relation", to_string(relation_)},
          {"orders", orders_},
          {"rdp", rdp},
          {"history", history_json()}};
}

void RdpAccountant::load_state_dict(const nlohmann::json& state) {
  if (!state.is_object() || state.value("accountant", "") != "rdp") {
    throw DataError("accountant state: expected {\"accountant\": \"rdp\", ...}");
  }
  std::vector<AccountantEvent> history = history_from_json(state);
  const NeighbouringRelation relation = relation_from_json(state);
  try {
    std::vector<double> orders = state.at("orders").get<std::vector<double>>();
    validate_orders(orders);
    std::vector<double> rdp;
    for (const nlohmann::json& r : state.at("rdp")) rdp.push_back(r.is_string() && r == "inf" ? kInf : r.get<double>());
    if (rdp.size() != orders.size()) throw DataError("accountant state: rdp and orders differ in length");
    relation_ = relation;
    orders_ = std::move(orders);
    rdp_ = std::move(rdp);
    cached_noise_multiplier_ = std::numeric_limits<double>::quiet_NaN();
    history_ = std::move(history);
  } catch (const nlohmann::json::exception& error) {
    throw DataError(std::string("accountant state: ") + error.what());
  } catch (const OptionError& error) {  // a value in the state breaks an argument's rule
    throw DataError(std::string("accountant state: ") + error.what());
  }
}

std::unique_ptr<PrivacyAccountant> RdpAccountant::empty_like() const {
  return std::make_unique<RdpAccountant>(orders_, relation_);
}

std::string RdpAccountant::description() const {
  return "RDP accountant, " + describe(relation_) + ", " + std::to_string(orders_.size()) + " orders";
}

void RdpAccountant::require_reachable(double target_eps, double delta) const {
  // As sigma -> inf every r(alpha) -> 0 and eps falls to this floor, which no noise gets below.
  const double eps_floor = privacy_spent_from_rdp(orders_, std::vector<double>(orders_.size(), 0.0), delta).eps;
  if (target_eps <= eps_floor) {
    throw OptionError::with_text("target_eps", "target_eps = " + shown_value(target_eps) + " is unreachable: with " +
                                                   "delta = " + shown_value(delta) + " no noise brings eps below " +
                                                   shown_value(eps_floor) +
                                                   " on this order grid (add larger orders or raise delta)");
  }
}

}  // namespace filkit
