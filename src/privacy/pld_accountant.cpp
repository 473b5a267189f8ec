#include "filkit/privacy/pld_accountant.hpp"

#include "filkit/base/checks.hpp"

#include <algorithm>
#include <utility>

namespace filkit {

PldAccountant::PldAccountant(NeighbouringRelation relation, PldSettings settings)
    : relation_(relation), settings_(settings) {
  settings_.validate();
}

void PldAccountant::step(double noise_multiplier, double sample_rate, std::int64_t steps) {
  record(noise_multiplier, sample_rate, steps);
  current_ = false;
}

void PldAccountant::update() const {
  if (current_) return;
  remove_ = DiscretePld{};
  add_ = DiscretePld{};
  const double sensitivity = relation_ == NeighbouringRelation::kAddRemove ? 1.0 : kReplaceOneSensitivity;
  for (const AccountantEvent& event : history_) {
    if (event.sample_rate == 0 || event.steps == 0) continue;
    const double s = event.noise_multiplier / sensitivity;
    for (auto [direction, composed] :
         {std::pair{PldDirection::kRemove, &remove_}, std::pair{PldDirection::kAdd, &add_}}) {
      const DiscretePld one = gaussian_pld(s, event.sample_rate, direction, settings_);
      *composed = compose(*composed, self_compose(one, event.steps, settings_.truncation_mass, settings_.max_memory),
                          settings_.truncation_mass, settings_.max_memory);
    }
  }
  current_ = true;
}

const DiscretePld& PldAccountant::composed(PldDirection direction) const {
  update();
  return direction == PldDirection::kRemove ? remove_ : add_;
}

double PldAccountant::infinity_mass() const {
  update();
  return std::max(remove_.infinity_mass, add_.infinity_mass);
}

double PldAccountant::epsilon(double delta) const {
  validate_delta(delta);
  update();
  return std::max(pld_epsilon(remove_, settings_.discretization, delta),
                  pld_epsilon(add_, settings_.discretization, delta));
}

double PldAccountant::delta(double epsilon) const {
  validate_epsilon(epsilon);
  update();
  return std::max(pld_delta(remove_, settings_.discretization, epsilon),
                  pld_delta(add_, settings_.discretization, epsilon));
}

nlohmann::json PldAccountant::state_dict() const {
  return {{"accountant", "pld"},
          {"neighbouring_relation", to_string(relation_)},
          {"discretization", settings_.discretization},
          {"truncation_mass", settings_.truncation_mass},
          {"history", history_json()}};
}

void PldAccountant::load_state_dict(const nlohmann::json& state) {
  if (!state.is_object() || state.value("accountant", "") != "pld") {
    throw DataError("accountant state: expected {\"accountant\": \"pld\", ...}");
  }
  std::vector<AccountantEvent> history = history_from_json(state);
  const NeighbouringRelation relation = relation_from_json(state);
  try {
    PldSettings settings = settings_;  // the memory budget is this process's, not the state's
    settings.discretization = state.at("discretization").get<double>();
    settings.truncation_mass = state.at("truncation_mass").get<double>();
    settings.validate();
    settings_ = settings;
    relation_ = relation;
  } catch (const nlohmann::json::exception& error) {
    throw DataError(std::string("accountant state: ") + error.what());
  } catch (const OptionError& error) {  // a value in the state breaks a setting's rule
    throw DataError(std::string("accountant state: ") + error.what());
  }
  history_ = std::move(history);
  current_ = false;
}

std::unique_ptr<PrivacyAccountant> PldAccountant::empty_like() const {
  return std::make_unique<PldAccountant>(relation_, settings_);
}

std::string PldAccountant::description() const {
  return "PLD accountant (connect-the-dots, pessimistic), " + describe(relation_) + ", discretisation interval " +
         shown_value(settings_.discretization) + ", tail truncation " + shown_value(settings_.truncation_mass) +
         " per step and composition (moved to L = inf, counted in delta)";
}

}  // namespace filkit
