// The RDP accountant of DP-SGD's sampled Gaussian mechanism: the composed RDP curve over a fixed
// grid of orders (RDP adds up order by order over steps), the recorded events, and their
// state_dict. The mathematics (one step's RDP, Poisson or without replacement, and the conversion
// to (eps, delta)) is in sampled_gaussian_rdp.hpp.
#pragma once

#include "filkit/privacy/privacy_accountant.hpp"
#include "filkit/privacy/sampled_gaussian_rdp.hpp"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace filkit {

/// Composes sampled Gaussian mechanisms over a fixed grid of orders.
class RdpAccountant final : public PrivacyAccountant {
 public:
  /// An accountant with zero RDP at each order; orders non-empty, each in (1, 1e6]. Add/remove
  /// (Poisson sampling) uses the sampled Gaussian RDP, replace-one (sampling without replacement)
  /// the bound of Wang et al. with s = sigma / kReplaceOneSensitivity (sampled_gaussian_rdp.hpp).
  explicit RdpAccountant(std::vector<double> orders = rdp_orders(OrderGrid::kOpacus),
                         NeighbouringRelation relation = NeighbouringRelation::kAddRemove);

  /// Adds `steps` steps of the sampled Gaussian mechanism: rdp += steps * r(alpha).
  /// noise_multiplier finite and >= 0 (0 gives inf), sample_rate in [0, 1], steps >= 0. Not
  /// recorded in history() (step() is the incremental API; compose() is kept for sigma = 0).
  void compose(double noise_multiplier, double sample_rate, std::int64_t steps);

  /// The (eps, delta) guarantee of everything composed so far; delta in (0, 1).
  PrivacySpent get_privacy_spent(double delta) const;

  // PrivacyAccountant. An accountant with nothing composed reports eps = 0 and delta = 0.
  void step(double noise_multiplier, double sample_rate, std::int64_t steps = 1) override;
  double epsilon(double delta) const override;
  double delta(double epsilon) const override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  std::string description() const override;
  std::unique_ptr<PrivacyAccountant> empty_like() const override;
  /// Refuses a target at or below the eps that remains as sigma -> inf (r = 0 at every order):
  /// the conversion's floor on this order grid.
  void require_reachable(double target_eps, double delta) const override;

  const std::vector<double>& orders() const { return orders_; }
  const std::vector<double>& rdp() const { return rdp_; }
  NeighbouringRelation relation() const { return relation_; }

 private:
  bool empty() const;
  std::vector<double> orders_;
  std::vector<double> rdp_;
  NeighbouringRelation relation_;
  // The one-step curve of the last (sigma, q) composed (NaN: none yet).
  double cached_noise_multiplier_ = std::numeric_limits<double>::quiet_NaN();
  double cached_sample_rate_ = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> cached_rdp_;
};

}  // namespace filkit
