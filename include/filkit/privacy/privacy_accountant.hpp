// The incremental interface shared by the privacy accountants of DP-SGD's sampled Gaussian
// mechanism (rdp_accountant.hpp, pld_accountant.hpp; docs/accountants.md): step() records steps
// of the mechanism, epsilon(delta) and delta(epsilon) report the guarantee of everything recorded,
// state_dict() / load_state_dict() save and restore it as JSON; noise_multiplier_for_epsilon()
// searches the noise that meets a target eps with any of them.
//
// Units. A step adds N(0, sigma^2 C^2 I) to a sum of per-example terms clipped to L2 norm C;
// sigma is the noise multiplier, q (sample_rate) the sampling rate. Each accountant states its
// guarantee for one neighbouring relation (neighbouring_relation.hpp), which the batch sampling
// fixes.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/privacy/neighbouring_relation.hpp"

#include <nlohmann/json.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace filkit {

/// Which accountant.
enum class AccountantKind { kRdp, kPld };
template <>
struct EnumNames<AccountantKind> {
  static constexpr const char* what = "accountant";
  static constexpr std::pair<AccountantKind, const char*> names[] = {{AccountantKind::kRdp, "rdp"},
                                                                     {AccountantKind::kPld, "pld"}};
};

/// steps steps of the sampled Gaussian mechanism with one noise multiplier and sampling rate.
struct AccountantEvent {
  double noise_multiplier = 0.0;
  double sample_rate = 0.0;
  std::int64_t steps = 0;
};

/// Checks an event's fields (base/checks.hpp's require_* family: an OptionError naming the field):
/// noise_multiplier finite and > 0 (sigma = 0 is no privacy; say so with an infinite epsilon
/// elsewhere, not here), sample_rate in [0, 1], steps >= 0.
void validate_event(const AccountantEvent& event);

/// Checks delta in (0, 1) / epsilon finite and >= 0 (an OptionError naming the value).
void validate_delta(double delta);
void validate_epsilon(double epsilon);

class PrivacyAccountant {
 public:
  virtual ~PrivacyAccountant() = default;
  /// Records `steps` steps with this noise multiplier and sampling rate (see validate_event).
  virtual void step(double noise_multiplier, double sample_rate, std::int64_t steps = 1) = 0;
  /// The smallest eps (an upper bound on it) with an (eps, delta) guarantee; 0 when empty.
  virtual double epsilon(double delta) const = 0;
  /// delta at this eps (an upper bound); 0 when empty.
  virtual double delta(double epsilon) const = 0;
  /// The accountant's kind, settings and the recorded events; load_state_dict restores them
  /// (throws std::invalid_argument when the state is another accountant's or malformed).
  virtual nlohmann::json state_dict() const = 0;
  virtual void load_state_dict(const nlohmann::json& state) = 0;
  /// One line for summaries: accountant, neighbouring relation, and its approximation.
  virtual std::string description() const = 0;
  /// A new accountant of the same kind and settings with nothing recorded (for noise searches).
  virtual std::unique_ptr<PrivacyAccountant> empty_like() const = 0;
  /// Throws OptionError (naming target_eps) when no noise reaches target_eps at this delta; by
  /// default every target > 0 is reachable (noise_multiplier_for_epsilon asks before searching).
  virtual void require_reachable(double target_eps, double delta) const;
  /// The recorded events, consecutive equal (noise multiplier, rate) pairs merged.
  const std::vector<AccountantEvent>& history() const { return history_; }

 protected:
  /// Validates and appends (merging with the last event when sigma and q are equal).
  void record(double noise_multiplier, double sample_rate, std::int64_t steps);
  /// The "history" array of a state_dict, and its inverse (validating each event).
  nlohmann::json history_json() const;
  static std::vector<AccountantEvent> history_from_json(const nlohmann::json& state);
  /// The state's "neighbouring_relation"; for one version also the former key "sampling"
  /// ("poisson", or "uniform" / "without-replacement" for replace-one). Throws DataError.
  static NeighbouringRelation relation_from_json(const nlohmann::json& state);
  std::vector<AccountantEvent> history_;
};

/// The result of a noise search.
struct NoiseMultiplierSearch {
  double noise_multiplier = 0.0;  ///< the upper end of the final bracket: eps(sigma) <= target
  int evaluations = 0;            ///< eps evaluations used
};

/// The smallest noise multiplier (to a tolerance) whose eps meets target_eps for `steps` steps at
/// this sample rate, each sigma accounted by a fresh accountant from `make`: a bracket by
/// doubling / halving from sigma = 1 (eps decreases in sigma and grows without bound as
/// sigma -> 0), then bisection until target_eps - eps <= eps_tolerance * target_eps; the upper end
/// of the final bracket is returned, so eps never exceeds the target. Throws OptionError naming
/// the argument for target_eps <= 0, delta outside (0, 1), sample_rate outside (0, 1], steps < 1,
/// max_noise_multiplier <= 0 or eps_tolerance outside (0, 1), and naming target_eps when it is
/// unreachable (require_reachable) or needs more noise than max_noise_multiplier.
NoiseMultiplierSearch noise_multiplier_for_epsilon(const std::function<std::unique_ptr<PrivacyAccountant>()>& make,
                                                   double target_eps, double delta, double sample_rate,
                                                   std::int64_t steps, double max_noise_multiplier = 1e4,
                                                   double eps_tolerance = 1e-4);

}  // namespace filkit
