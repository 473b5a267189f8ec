// The incremental interface shared by the privacy accountants of DP-SGD's sampled Gaussian
// mechanism (rdp_accountant.hpp, pld_accountant.hpp; docs/accountants.md): step() records steps
// of the mechanism, epsilon(delta) and delta(epsilon) report the guarantee of everything recorded,
// state_dict() / load_state_dict() save and restore it as JSON.
//
// Units. A step adds N(0, sigma^2 C^2 I) to a sum of per-example terms clipped to L2 norm C;
// sigma is the noise multiplier. The sampling scheme fixes the neighbouring relation:
//   Poisson sampling (rate q)            <-> add/remove one example: the sum moves by <= C;
//   fixed-size batches without replacement (q = B / n)  <-> replace one example: the sum moves
//                                            by <= 2C, so the Gaussian has sigma / 2 per unit of
//                                            sensitivity (kReplaceOneSensitivity).
// These headers depend on nothing else in dpsgd/ (they are to move into a privacy layer).
#pragma once

#include "filkit/base/enum_names.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace filkit {

/// How a batch is drawn, and with it the neighbouring relation the guarantee is stated for.
enum class Sampling {
  kPoisson,             ///< each example independently with probability q; add/remove one
  kWithoutReplacement,  ///< B of n examples uniformly without replacement (q = B / n); replace one
};
template <>
struct EnumNames<Sampling> {
  static constexpr const char* what = "sampling";
  static constexpr std::pair<Sampling, const char*> names[] = {
      {Sampling::kPoisson, "poisson"}, {Sampling::kWithoutReplacement, "uniform"},
      {Sampling::kWithoutReplacement, "without-replacement"}};
};

/// Sensitivity of the clipped sum under replace-one, in units of the clipping norm C.
inline constexpr double kReplaceOneSensitivity = 2.0;

/// "add/remove one example (Poisson sampling)" or "replace one example (...)": for summaries.
std::string neighbouring_relation(Sampling sampling);

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
  /// The recorded events, consecutive equal (noise multiplier, rate) pairs merged.
  const std::vector<AccountantEvent>& history() const { return history_; }

 protected:
  /// Validates and appends (merging with the last event when sigma and q are equal).
  void record(double noise_multiplier, double sample_rate, std::int64_t steps);
  /// The "history" array of a state_dict, and its inverse (validating each event).
  nlohmann::json history_json() const;
  static std::vector<AccountantEvent> history_from_json(const nlohmann::json& state);
  std::vector<AccountantEvent> history_;
};

/// The result of a noise search.
struct NoiseMultiplierSearch {
  double noise_multiplier = 0.0;  ///< the upper end of the final bracket: eps(sigma) <= target
  int evaluations = 0;            ///< eps evaluations used
};

/// The smallest noise multiplier (to a tolerance) whose eps meets a target, for any eps(sigma)
/// that decreases in sigma and grows without bound as sigma -> 0: a bracket by doubling / halving
/// from sigma = 1, then bisection until target - eps <= eps_tolerance * target. Throws
/// std::invalid_argument when max_noise_multiplier is not enough.
NoiseMultiplierSearch search_noise_multiplier(const std::function<double(double)>& eps_of_noise_multiplier,
                                              double target_eps, double max_noise_multiplier = 1e4,
                                              double eps_tolerance = 1e-4);

/// search_noise_multiplier for `steps` steps at rate q with a fresh accountant from `make`.
double noise_multiplier_for_epsilon(const std::function<std::unique_ptr<PrivacyAccountant>()>& make,
                                    double target_eps, double delta, double sample_rate, std::int64_t steps,
                                    double max_noise_multiplier = 1e4, double eps_tolerance = 1e-4);

}  // namespace filkit
