#include "filkit/jobs/accountant.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/options.hpp"
#include "filkit/privacy/pld_accountant.hpp"
#include "filkit/privacy/rdp_accountant.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace filkit {

namespace {

// A number of the list option `option` (orders, mechanism); `what` says which.
template <typename Number>
Number parse_number(const std::string& text, const std::string& option, const std::string& what) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error == std::errc::result_out_of_range) {
    const std::string range = std::is_floating_point_v<Number>
                                  ? "magnitude at most 1.8e308"
                                  : std::to_string(std::numeric_limits<Number>::min()) + ".." +
                                        std::to_string(std::numeric_limits<Number>::max());
    option_error(option, what + "'" + text + "' is out of range (" + range + ")");
  }
  if (error != std::errc() || end != text.data() + text.size())
    option_error(option, what + "'" + text + "' is not a number");
  return value;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> fields;
  std::stringstream stream(text);
  for (std::string field; std::getline(stream, field, ',');) fields.push_back(field);
  return fields;
}

std::vector<double> parse_orders(const std::string& text) {
  if (text.find(',') == std::string::npos && !std::isdigit(static_cast<unsigned char>(text.front()))) {
    return rdp_orders(parse_enum<OrderGrid>(text));
  }
  std::vector<double> orders;
  for (const std::string& field : split_commas(text)) orders.push_back(parse_number<double>(field, "orders", ""));
  return orders;
}

// The further mechanisms, three numbers each (q, noise multiplier, steps). The list's entries may
// each hold one mechanism ("0.01,1,10", as the library takes them) or one number each (as a list
// option reads "--mechanism 0.01,1,10", split at its commas): all are read as one list of numbers.
std::vector<Mechanism> parse_mechanisms(const std::vector<std::string>& texts) {
  std::vector<std::string> fields;
  for (const std::string& text : texts)
    for (std::string& field : split_commas(text)) fields.push_back(std::move(field));
  if (fields.size() % 3 != 0) {
    std::string given;
    for (const std::string& field : fields) given += (given.empty() ? "" : ",") + field;
    option_error("mechanism", "'" + given + "'",
                 "expected sample_rate,noise_multiplier,steps (three numbers) for each mechanism, got " +
                     std::to_string(fields.size()) + " numbers");
  }
  std::vector<Mechanism> all;
  for (std::size_t k = 0; k < fields.size(); k += 3)
    all.push_back({parse_number<double>(fields[k], "mechanism", "sample_rate "),
                   parse_number<double>(fields[k + 1], "mechanism", "noise_multiplier "),
                   parse_number<std::int64_t>(fields[k + 2], "mechanism", "steps ")});
  return all;
}

bool has_single_mechanism(const AccountantOptions& options) {
  return options.sample_rate || options.batch_size || options.n || options.noise_multiplier || options.steps ||
         options.epochs;
}

double sample_rate_of(const AccountantOptions& options) {
  if (options.sample_rate) return *options.sample_rate;
  if (*options.batch_size < 1 || *options.batch_size > *options.n) {
    option_error("batch_size", std::to_string(*options.batch_size),
                 "must be in [1, " + option_name("n") + " = " + std::to_string(*options.n) + "]");
  }
  return static_cast<double>(*options.batch_size) / static_cast<double>(*options.n);
}

// ceil(epochs n / B) or ceil(epochs / q), except that a quotient within 1e-9 of an integer counts as
// that integer: the binary rounding of q could otherwise turn 15 / 0.0025 into 6001 steps.
std::int64_t steps_from_epochs(const AccountantOptions& options) {
  require_positive("epochs", *options.epochs);
  const double steps = options.sample_rate ? *options.epochs / *options.sample_rate
                                           : *options.epochs * static_cast<double>(*options.n) /
                                                 static_cast<double>(*options.batch_size);
  // Beyond 1e15 steps no accounting is meaningful, and beyond 2^63 the count does not fit.
  if (!(steps <= kMaxIterations))
    option_error("epochs", format_double(*options.epochs), "means " + format_double(steps) + " steps, more than 1e15");
  const double nearest = std::round(steps);
  return static_cast<std::int64_t>(std::abs(steps - nearest) <= 1e-9 * nearest ? nearest : std::ceil(steps));
}

std::int64_t step_count(const AccountantOptions& options) {
  return options.steps ? *options.steps : steps_from_epochs(options);
}

std::vector<Mechanism> mechanisms(const AccountantOptions& options) {
  std::vector<Mechanism> all;
  if (has_single_mechanism(options))
    all.push_back({sample_rate_of(options), *options.noise_multiplier, step_count(options)});
  for (const Mechanism& further : parse_mechanisms(options.mechanisms)) all.push_back(further);
  return all;
}

// JSON has no infinity or NaN; write those as the strings "inf" / "nan".
nlohmann::json json_number(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(format_double(value));
}

nlohmann::json json_numbers(const std::vector<double>& values) {
  nlohmann::json array = nlohmann::json::array();
  for (double value : values) array.push_back(json_number(value));
  return array;
}

nlohmann::json json_result(const std::vector<Mechanism>& composed, const PrivacySpent& spent) {
  nlohmann::json mechanisms_json = nlohmann::json::array();
  for (const Mechanism& m : composed) {
    mechanisms_json.push_back(
        {{"q", m.sample_rate}, {"noise_multiplier", json_number(m.noise_multiplier)}, {"steps", m.steps}});
  }
  return {{"mechanisms", mechanisms_json},
          {"eps", json_number(spent.eps)},
          {"optimal_order", json_number(spent.optimal_order)},
          {"optimal_order_status", to_string(spent.status)},
          {"warning", spent.warning},
          {"orders", json_numbers(spent.orders)},
          {"rdp", json_numbers(spent.rdp)}};
}

std::string short_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

void print_mechanisms(std::ostream& out, const std::vector<Mechanism>& composed) {
  for (std::size_t k = 0; k < composed.size(); ++k) {
    out << "  mechanism " << k + 1 << ": q = " << short_number(composed[k].sample_rate)
        << ", noise multiplier = " << short_number(composed[k].noise_multiplier) << ", steps = " << composed[k].steps
        << "\n";
  }
}

void print_spent(std::ostream& out, const std::vector<Mechanism>& composed, const PrivacySpent& spent,
                 const std::string& grid) {
  out << "RDP accountant, sampled Gaussian mechanism, " << spent.orders.size() << " orders (" << grid
      << "), delta = " << short_number(spent.delta) << "\n";
  print_mechanisms(out, composed);
  out << "eps = " << short_number(spent.eps) << " (optimal order " << short_number(spent.optimal_order) << ")\n";
  if (!spent.warning.empty()) std::cerr << "filkit accountant: warning: " << spent.warning << "\n";
}

}  // namespace

void AccountantOptions::validate() const {
  const OptionName Q = option_name("sample_rate"), B = option_name("batch_size"), N = option_name("n"),
                   noise = option_name("noise_multiplier"), T = option_name("steps"), E = option_name("epochs"),
                   mechanism = option_name("mechanism");
  if (sample_rate && (batch_size || n))
    option_error("sample_rate", "give either " + Q + " or " + B + " with " + N + ", not both");
  if (batch_size.has_value() != n.has_value())
    option_error(batch_size ? "batch_size" : "n", B + " and " + N + " go together");
  if (steps && epochs) option_error("steps", "give either " + T + " or " + E + ", not both");
  // As epochs' steps: beyond 1e15 no run would take them, and the curve over the steps (to 2 T)
  // wrapped below 0 at 2^63 - 1 (issue 50).
  if (steps && !(*steps >= 0 && static_cast<double>(*steps) <= kMaxIterations))
    option_error("steps", std::to_string(*steps), "must be from 0 to 1e15");
  if (target_eps) {
    if (noise_multiplier) option_error("target_eps", "solves for " + noise + "; do not give both");
    if (!mechanisms.empty()) option_error("target_eps", "searches one mechanism; drop " + mechanism);
  } else if (has_single_mechanism(*this) && !noise_multiplier) {
    option_error("noise_multiplier", "is required (or " + option_name("target_eps") + " to solve for it)");
  }
  const bool needs_single = target_eps || has_single_mechanism(*this);
  if (needs_single && !sample_rate && !batch_size)
    option_error("sample_rate", "give " + Q + ", or " + B + " with " + N);
  if (needs_single && !steps && !epochs) option_error("steps", "give " + T + " or " + E);
  if (!needs_single && mechanisms.empty())
    option_error("mechanism", "nothing to account: give " + Q + ", " + noise + " and " + T + ", or " + mechanism +
                                  " sample_rate,noise_multiplier,steps");
  if (orders.empty()) option_error("orders", "must not be empty");
  require_accountable(sampling);
  PldSettings{discretization}.validate();
  if (curve_points) require_in_range("curve_points", *curve_points, 0, 1000);
}

namespace {

std::unique_ptr<PrivacyAccountant> make_accountant(const AccountantOptions& options,
                                                   const std::vector<double>& orders) {
  const NeighbouringRelation relation = neighbouring_relation(options.sampling);
  if (options.accountant == AccountantKind::kRdp) return std::make_unique<RdpAccountant>(orders, relation);
  return std::make_unique<PldAccountant>(
      relation, PldSettings{.discretization = options.discretization, .max_memory = options.max_memory});
}

// The accountant's guarantee at delta: the RDP conversion (orders and curve), or the PLD's eps.
PrivacySpent spent_of(const PrivacyAccountant& accountant, double delta) {
  if (const auto* rdp = dynamic_cast<const RdpAccountant*>(&accountant)) return rdp->get_privacy_spent(delta);
  PrivacySpent spent;
  spent.eps = accountant.epsilon(delta);
  spent.delta = delta;
  spent.optimal_order = std::numeric_limits<double>::quiet_NaN();
  return spent;
}

// eps of one mechanism (sample rate, noise multiplier, steps) by the options' accountant, at their delta.
double eps_of(const AccountantOptions& options, const std::vector<double>& orders, const Mechanism& m) {
  const std::unique_ptr<PrivacyAccountant> accountant = make_accountant(options, orders);
  if (auto* rdp = dynamic_cast<RdpAccountant*>(accountant.get()))
    rdp->compose(m.noise_multiplier, m.sample_rate, m.steps);
  else accountant->step(m.noise_multiplier, m.sample_rate, m.steps);
  return accountant->epsilon(options.delta);
}

// `count` points from lo to hi spaced evenly in log scale, with `at` among them.
std::vector<double> log_grid(double lo, double hi, int count, double at) {
  std::vector<double> grid{at};
  for (int k = 0; k < count; ++k) grid.push_back(lo * std::pow(hi / lo, k / static_cast<double>(count - 1)));
  std::sort(grid.begin(), grid.end());
  return grid;
}

// The report's curves around the one mechanism accounted: eps against the steps (1 to 2 T: how
// it grows as training goes on) and against the noise multiplier (sigma / 4 to 4 sigma), each of
// options.curve_points points and a fresh accounting at the options' delta.
void add_eps_curves(const AccountantOptions& options, const std::vector<double>& orders, AccountantJobResult& result) {
  const Mechanism m = result.mechanisms.front();
  const int points = std::max(2, *options.curve_points);
  if (m.steps >= 1) {
    std::vector<std::int64_t> steps;
    for (double t : log_grid(1.0, 2.0 * static_cast<double>(m.steps), points, static_cast<double>(m.steps)))
      if (const auto rounded = static_cast<std::int64_t>(std::llround(t)); steps.empty() || rounded != steps.back())
        steps.push_back(rounded);
    for (std::int64_t t : steps)
      result.eps_by_steps.push_back(
          {static_cast<double>(t), eps_of(options, orders, {m.sample_rate, m.noise_multiplier, t})});
  }
  if (m.noise_multiplier > 0 && std::isfinite(m.noise_multiplier))
    for (double sigma : log_grid(m.noise_multiplier / 4, m.noise_multiplier * 4, points, m.noise_multiplier))
      result.eps_by_noise_multiplier.push_back({sigma, eps_of(options, orders, {m.sample_rate, sigma, m.steps})});
}

}  // namespace

AccountantJobResult run_accountant(const AccountantOptions& options, bool, bool for_report) {
  options.validate();
  AccountantJobResult result;
  result.options = options;
  if (!result.options.curve_points)
    result.options.curve_points = options.accountant == AccountantKind::kRdp ? 40 : for_report ? 8 : 0;
  const std::vector<double> orders = parse_orders(options.orders);
  std::unique_ptr<PrivacyAccountant> accountant = make_accountant(options, orders);
  if (options.target_eps) {
    const double sample_rate = sample_rate_of(options);
    const std::int64_t steps = step_count(options);
    const double noise_multiplier = noise_multiplier_for_epsilon([&] { return make_accountant(options, orders); },
                                                                 *options.target_eps, options.delta, sample_rate, steps)
                                        .noise_multiplier;
    result.mechanisms.push_back({sample_rate, noise_multiplier, steps});
  } else {
    result.mechanisms = mechanisms(options);
  }
  auto* rdp = dynamic_cast<RdpAccountant*>(accountant.get());
  for (const Mechanism& m : result.mechanisms) {
    // compose() keeps sigma = 0 (eps = inf) for the RDP accountant, as before.
    if (rdp) rdp->compose(m.noise_multiplier, m.sample_rate, m.steps);
    else accountant->step(m.noise_multiplier, m.sample_rate, m.steps);
  }
  result.spent = spent_of(*accountant, options.delta);
  if (const auto* pld = dynamic_cast<const PldAccountant*>(accountant.get()))
    result.infinity_mass = pld->infinity_mass();
  result.description = accountant->description();
  result.pld_eps_by_delta.clear();
  if (!rdp) {
    for (double delta = 1e-2; delta > 1e-11; delta /= 10)
      result.pld_eps_by_delta.push_back({delta, accountant->epsilon(delta)});
  }
  if (result.mechanisms.size() == 1 && *result.options.curve_points > 0) add_eps_curves(result.options, orders, result);
  return result;
}

nlohmann::json AccountantJobResult::to_json() const {
  nlohmann::json json = json_result(mechanisms, spent);
  json.update(job_summary_header(AccountantJob::name, 0));
  json.erase("seed");  // nothing here is random
  json["settings"] = settings_json(options);
  if (options.target_eps) json["noise_multiplier"] = mechanisms.front().noise_multiplier;
  json["accountant"] = to_string(options.accountant);
  json["neighbouring_relation"] = describe(neighbouring_relation(options.sampling));
  json["description"] = description;
  const auto curve = [](const std::vector<std::pair<double, double>>& points, const char* x) {
    nlohmann::json xs = nlohmann::json::array(), eps = nlohmann::json::array();
    for (const auto& [value, e] : points) xs.push_back(value), eps.push_back(json_number(e));
    return nlohmann::json{{x, xs}, {"eps", eps}};
  };
  if (!eps_by_steps.empty()) json["eps_by_steps"] = curve(eps_by_steps, "steps");
  if (!eps_by_noise_multiplier.empty())
    json["eps_by_noise_multiplier"] = curve(eps_by_noise_multiplier, "noise_multiplier");
  if (options.accountant == AccountantKind::kPld) {
    json["discretization"] = options.discretization;
    json["infinity_mass"] = infinity_mass;
    for (const char* rdp_only : {"optimal_order", "optimal_order_status", "warning", "orders", "rdp"})
      json.erase(rdp_only);
  }
  return json;
}

NumericTable AccountantJobResult::table() const {
  if (options.accountant == AccountantKind::kPld) {
    NumericTable table{{"delta", "eps"}, {}};
    for (const auto& [delta, eps] : pld_eps_by_delta) table.rows.push_back({delta, eps});
    return table;
  }
  NumericTable table{{"order", "rdp"}, {}};
  for (std::size_t k = 0; k < spent.orders.size(); ++k) table.rows.push_back({spent.orders[k], spent.rdp[k]});
  return table;
}

std::string AccountantJobResult::table_file() const {
  return options.accountant == AccountantKind::kPld ? "eps-by-delta.csv" : "rdp-curve.csv";
}

void AccountantJobResult::print_summary(std::ostream& out) const {
  if (options.accountant == AccountantKind::kRdp) {
    print_spent(out, mechanisms, spent, options.orders);
    out << "neighbouring relation: " << describe(neighbouring_relation(options.sampling)) << "\n";
  } else {
    out << description << ", delta = " << short_number(spent.delta) << "\n";
    print_mechanisms(out, mechanisms);
    out << "eps = " << short_number(spent.eps) << " (an upper bound; mass at infinite loss "
        << short_number(infinity_mass) << " is included in delta)\n";
  }
  if (options.target_eps)
    out << "noise multiplier = " << short_number(mechanisms.front().noise_multiplier) << " reaches eps <= target "
        << short_number(*options.target_eps) << "\n";
}

}  // namespace filkit
