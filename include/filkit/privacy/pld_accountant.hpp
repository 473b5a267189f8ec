// The PLD accountant of DP-SGD's sampled Gaussian mechanism: the recorded events, composed into one
// PLD per direction when eps or delta is asked for, and their state_dict. The mathematics (the
// pessimistic discretisation of one step, composition by FFT, the conversion to (eps, delta)) is in
// privacy_loss_distribution.hpp.
#pragma once

#include "filkit/privacy/privacy_accountant.hpp"
#include "filkit/privacy/privacy_loss_distribution.hpp"

#include <cstdint>
#include <string>

namespace filkit {

/// The PLD accountant. step() records; the composition is computed (once, then cached) when
/// epsilon() or delta() is asked for, event by event, each self-composed by one FFT (self_compose).
class PldAccountant final : public PrivacyAccountant {
 public:
  explicit PldAccountant(NeighbouringRelation relation = NeighbouringRelation::kAddRemove, PldSettings settings = {});

  void step(double noise_multiplier, double sample_rate, std::int64_t steps = 1) override;
  double epsilon(double delta) const override;
  double delta(double epsilon) const override;
  nlohmann::json state_dict() const override;
  void load_state_dict(const nlohmann::json& state) override;
  std::string description() const override;
  std::unique_ptr<PrivacyAccountant> empty_like() const override;

  /// The composed PLDs of the directions (add/remove; both for replace-one as well).
  const DiscretePld& composed(PldDirection direction) const;
  /// The larger mass at L = inf of the two directions: what truncation added to every delta.
  double infinity_mass() const;
  const PldSettings& settings() const { return settings_; }
  NeighbouringRelation relation() const { return relation_; }

 private:
  void update() const;
  NeighbouringRelation relation_;
  PldSettings settings_;
  mutable bool current_ = true;
  mutable DiscretePld remove_;
  mutable DiscretePld add_;
};

}  // namespace filkit
