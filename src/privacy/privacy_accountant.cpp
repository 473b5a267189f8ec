#include "filkit/privacy/privacy_accountant.hpp"

#include "filkit/base/checks.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <utility>

namespace filkit {
namespace {

struct Bracket {
  double low;   // eps(low) > target
  double high;  // eps(high) <= target
  double eps_high;
};

// Doubles (or halves) sigma from 1 until eps crosses the target; halving ends because eps -> inf
// as sigma -> 0.
Bracket bracket_target(const std::function<double(double)>& eps_of, double target, double max_sigma, int& evaluations) {
  auto evaluate = [&](double sigma) {
    ++evaluations;
    return eps_of(sigma);
  };
  double high = std::min(1.0, max_sigma);
  double eps_high = evaluate(high);
  if (eps_high <= target) {
    double low = high / 2;
    for (double eps_low = evaluate(low); eps_low <= target; eps_low = evaluate(low)) {
      if (!(low > 0)) throw NumericalError("noise search: eps stays below the target as sigma -> 0");
      high = low;
      eps_high = eps_low;
      low /= 2;
    }
    return {low, high, eps_high};
  }
  double low = 0.0;
  while (eps_high > target) {
    if (high >= max_sigma) {
      throw OptionError::with_text(
          "target_eps", "target_eps = " + shown_value(target) + " needs more noise than max_noise_multiplier = " +
                            shown_value(max_sigma) + ", which gives eps = " + shown_value(eps_high));
    }
    low = high;
    high = std::min(2 * high, max_sigma);
    eps_high = evaluate(high);
  }
  return {low, high, eps_high};
}

}  // namespace

void validate_event(const AccountantEvent& event) {
  require_positive("noise_multiplier", event.noise_multiplier);
  require_in_interval("sample_rate", event.sample_rate, 0.0, End::kClosed, 1.0, End::kClosed);
  require_non_negative("steps", event.steps);
}

void validate_delta(double delta) { require_in_interval("delta", delta, 0.0, End::kOpen, 1.0, End::kOpen); }

void validate_epsilon(double epsilon) { require_non_negative("epsilon", epsilon); }

void PrivacyAccountant::record(double noise_multiplier, double sample_rate, std::int64_t steps) {
  const AccountantEvent event{noise_multiplier, sample_rate, steps};
  validate_event(event);
  if (steps == 0) return;
  if (!history_.empty() && history_.back().noise_multiplier == noise_multiplier &&
      history_.back().sample_rate == sample_rate) {
    history_.back().steps += steps;
  } else {
    history_.push_back(event);
  }
}

nlohmann::json PrivacyAccountant::history_json() const {
  nlohmann::json events = nlohmann::json::array();
  for (const AccountantEvent& e : history_)
    events.push_back({{"noise_multiplier", e.noise_multiplier}, {"sample_rate", e.sample_rate}, {"steps", e.steps}});
  return events;
}

void PrivacyAccountant::require_reachable(double, double) const {}

NeighbouringRelation PrivacyAccountant::relation_from_json(const nlohmann::json& state) {
  try {
    if (state.contains("neighbouring_relation"))
      return parse_enum<NeighbouringRelation>(state.at("neighbouring_relation").get<std::string>());
    // The former key, written before "neighbouring_relation" and read for one more version: the
    // batch sampling the relation came from.
    const std::string sampling = state.at("sampling").get<std::string>();
    if (sampling == "without-replacement") return NeighbouringRelation::kReplaceOne;
    return neighbouring_relation(require_accountable(parse_enum<BatchSampling>(sampling)));
  } catch (const nlohmann::json::exception& error) {
    throw DataError(std::string("accountant state: ") + error.what());
  } catch (const OptionError& error) {
    throw DataError(std::string("accountant state: ") + error.what());
  }
}

std::vector<AccountantEvent> PrivacyAccountant::history_from_json(const nlohmann::json& state) {
  if (!state.is_object() || !state.contains("history") || !state["history"].is_array()) {
    throw DataError("accountant state: expected an object with a \"history\" array");
  }
  std::vector<AccountantEvent> events;
  for (const nlohmann::json& e : state["history"]) {
    try {
      AccountantEvent event{e.at("noise_multiplier").get<double>(), e.at("sample_rate").get<double>(),
                            e.at("steps").get<std::int64_t>()};
      validate_event(event);
      events.push_back(event);
    } catch (const nlohmann::json::exception& error) {
      throw DataError(std::string("accountant state: bad history event: ") + error.what());
    } catch (const OptionError& error) {
      throw DataError(std::string("accountant state: bad history event: ") + error.what());
    }
  }
  return events;
}

NoiseMultiplierSearch noise_multiplier_for_epsilon(const std::function<std::unique_ptr<PrivacyAccountant>()>& make,
                                                   double target_eps, double delta, double sample_rate,
                                                   std::int64_t steps, double max_noise_multiplier,
                                                   double eps_tolerance) {
  require_positive("target_eps", target_eps);
  validate_delta(delta);
  if (!(sample_rate > 0 && sample_rate <= 1))
    option_error("sample_rate", shown_value(sample_rate),
                 "must lie in (0, 1] for a noise search (q = 0 needs no noise)");
  require_positive("steps", steps);
  require_positive("max_noise_multiplier", max_noise_multiplier);
  require_in_interval("eps_tolerance", eps_tolerance, 0.0, End::kOpen, 1.0, End::kOpen);
  make()->require_reachable(target_eps, delta);
  const auto eps_of = [&](double sigma) {
    std::unique_ptr<PrivacyAccountant> accountant = make();
    accountant->step(sigma, sample_rate, steps);
    try {
      return accountant->epsilon(delta);
    } catch (const OptionError& error) {  // a PLD grid too large for so little noise (issue 50)
      throw OptionError::with_text("target_eps", "the noise search for target_eps = " + shown_value(target_eps) +
                                                     " reached noise multiplier " + shown_value(sigma) +
                                                     ", which the accountant cannot evaluate (" + error.what() +
                                                     "): a target this large needs less noise than its grid "
                                                     "resolves; use the RDP accountant, or a coarser discretization");
    }
  };
  int evaluations = 0;
  Bracket bracket = bracket_target(eps_of, target_eps, max_noise_multiplier, evaluations);
  while (target_eps - bracket.eps_high > eps_tolerance * target_eps) {
    const double middle = 0.5 * (bracket.low + bracket.high);
    if (middle <= bracket.low || middle >= bracket.high) {
      throw NumericalError("noise search bracket [" + shown_value(bracket.low) + ", " + shown_value(bracket.high) +
                           "] collapsed before eps reached the tolerance");
    }
    ++evaluations;
    const double eps_middle = eps_of(middle);
    if (eps_middle <= target_eps) {
      bracket.high = middle;
      bracket.eps_high = eps_middle;
    } else {
      bracket.low = middle;
    }
  }
  return {bracket.high, evaluations};
}

}  // namespace filkit
