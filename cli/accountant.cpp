#include "accountant.hpp"

#include "commands.hpp"
#include "filkit/dpsgd/rdp_accountant.hpp"
#include "filkit/base/io.hpp"
#include "filkit/base/types.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <sstream>
#include <stdexcept>

namespace filkit::cli {
namespace {

struct Mechanism {
  double q;
  double noise_multiplier;
  std::int64_t steps;
};

template <typename Number>
Number parse_number(const std::string& text, const std::string& what) {
  Number value{};
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    throw std::invalid_argument(what + ": '" + text + "' is not a number");
  }
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
  for (const std::string& field : split_commas(text)) orders.push_back(parse_number<double>(field, "--orders"));
  return orders;
}

Mechanism parse_mechanism(const std::string& text) {
  const std::vector<std::string> fields = split_commas(text);
  if (fields.size() != 3) {
    throw std::invalid_argument("--mechanism '" + text + "' must be q,sigma,steps (three comma-separated numbers)");
  }
  return {parse_number<double>(fields[0], "--mechanism q"), parse_number<double>(fields[1], "--mechanism sigma"),
          parse_number<std::int64_t>(fields[2], "--mechanism steps")};
}

bool has_single_mechanism(const AccountantOptions& options) {
  return options.q || options.batch_size || options.n || options.sigma || options.steps || options.epochs;
}

double sampling_rate(const AccountantOptions& options) {
  if (options.q) return *options.q;
  if (*options.batch_size < 1 || *options.batch_size > *options.n) {
    throw std::invalid_argument("--batch-size = " + std::to_string(*options.batch_size) + " must be in [1, --n = " +
                                std::to_string(*options.n) + "]");
  }
  return static_cast<double>(*options.batch_size) / static_cast<double>(*options.n);
}

// ceil(epochs n / B) or ceil(epochs / q), except that a quotient within 1e-9 of an integer counts as
// that integer: the binary rounding of q could otherwise turn 15 / 0.0025 into 6001 steps.
std::int64_t steps_from_epochs(const AccountantOptions& options) {
  if (!(*options.epochs > 0)) throw std::invalid_argument("--epochs must be > 0");
  const double steps = options.q ? *options.epochs / *options.q
                                 : *options.epochs * static_cast<double>(*options.n) /
                                       static_cast<double>(*options.batch_size);
  const double nearest = std::round(steps);
  return static_cast<std::int64_t>(std::abs(steps - nearest) <= 1e-9 * nearest ? nearest : std::ceil(steps));
}

std::int64_t step_count(const AccountantOptions& options) {
  return options.steps ? *options.steps : steps_from_epochs(options);
}

std::vector<Mechanism> mechanisms(const AccountantOptions& options) {
  std::vector<Mechanism> all;
  if (has_single_mechanism(options)) all.push_back({sampling_rate(options), *options.sigma, step_count(options)});
  for (const std::string& text : options.mechanisms) all.push_back(parse_mechanism(text));
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

nlohmann::json json_inputs(const AccountantOptions& options) {
  nlohmann::json inputs{{"delta", options.delta}, {"orders", options.orders}};
  if (options.q) inputs["q"] = *options.q;
  if (options.batch_size) inputs["batch_size"] = *options.batch_size;
  if (options.n) inputs["n"] = *options.n;
  if (options.sigma) inputs["sigma"] = *options.sigma;
  if (options.steps) inputs["steps"] = *options.steps;
  if (options.epochs) inputs["epochs"] = *options.epochs;
  if (options.target_eps) inputs["target_eps"] = *options.target_eps;
  if (!options.mechanisms.empty()) inputs["mechanism"] = options.mechanisms;
  return inputs;
}

nlohmann::json json_result(const AccountantOptions& options, const std::vector<Mechanism>& composed,
                           const PrivacySpent& spent) {
  nlohmann::json mechanisms_json = nlohmann::json::array();
  for (const Mechanism& m : composed) {
    mechanisms_json.push_back({{"q", m.q}, {"noise_multiplier", json_number(m.noise_multiplier)}, {"steps", m.steps}});
  }
  return {{"command", "accountant"},
          {"version", version()},
          {"inputs", json_inputs(options)},
          {"mechanisms", mechanisms_json},
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

void print_summary(const std::vector<Mechanism>& composed, const PrivacySpent& spent, const std::string& grid) {
  std::cout << "RDP accountant, sampled Gaussian mechanism, " << spent.orders.size() << " orders (" << grid
            << "), delta = " << short_number(spent.delta) << "\n";
  for (std::size_t k = 0; k < composed.size(); ++k) {
    std::cout << "  mechanism " << k + 1 << ": q = " << short_number(composed[k].q)
              << ", sigma = " << short_number(composed[k].noise_multiplier) << ", steps = " << composed[k].steps
              << "\n";
  }
  std::cout << "eps = " << short_number(spent.eps) << " (optimal order " << short_number(spent.optimal_order)
            << ")\n";
  if (!spent.warning.empty()) std::cerr << "filkit accountant: warning: " << spent.warning << "\n";
}

}  // namespace

void AccountantOptions::validate() const {
  if (q && (batch_size || n)) throw std::invalid_argument("give either --q or --batch-size with --n, not both");
  if (batch_size.has_value() != n.has_value()) throw std::invalid_argument("--batch-size and --n go together");
  if (steps && epochs) throw std::invalid_argument("give either --steps or --epochs, not both");
  if (target_eps) {
    if (sigma) throw std::invalid_argument("--target-eps solves for --sigma; do not give both");
    if (!mechanisms.empty()) throw std::invalid_argument("--target-eps searches one mechanism; drop --mechanism");
  } else if (has_single_mechanism(*this) && !sigma) {
    throw std::invalid_argument("--sigma is required (or --target-eps to solve for it)");
  }
  const bool needs_single = target_eps || has_single_mechanism(*this);
  if (needs_single && !q && !batch_size) throw std::invalid_argument("give --q, or --batch-size with --n");
  if (needs_single && !steps && !epochs) throw std::invalid_argument("give --steps or --epochs");
  if (!needs_single && mechanisms.empty()) {
    throw std::invalid_argument("nothing to account: give --q/--sigma/--steps or --mechanism q,sigma,steps");
  }
  if (orders.empty()) throw std::invalid_argument("--orders must not be empty");
}

void setup_accountant(CLI::App& app) {
  auto options = std::make_shared<AccountantOptions>();
  CLI::App* command = app.add_subcommand(
      "accountant", "RDP accountant of the sampled Gaussian mechanism (DP-SGD): eps for given noise, or the "
                    "noise multiplier for a target eps");
  command->add_option("--q", options->q, "sampling rate in [0, 1] (or --batch-size with --n)");
  command->add_option("--batch-size", options->batch_size, "expected batch size B; q = B / n");
  command->add_option("--n", options->n, "number of training examples");
  command->add_option("--sigma", options->sigma, "noise multiplier (noise std / clipping norm)");
  command->add_option("--steps", options->steps, "number of steps");
  command->add_option("--epochs", options->epochs, "epochs; steps = ceil(epochs / q)");
  command->add_option("--delta", options->delta, "target delta in (0, 1)")->capture_default_str();
  command->add_option("--orders", options->orders, "order grid: opacus, tf-privacy (tf), or a list like 2,4.5,8")
      ->capture_default_str();
  command->add_option("--mechanism", options->mechanisms, "a further mechanism q,sigma,steps (repeatable)");
  command->add_option("--target-eps", options->target_eps, "solve for the noise multiplier that reaches this eps");
  command->add_option("--json", options->json_path, "write inputs, eps, optimal order and RDP curve here");
  command->callback([options]() { run_accountant(*options); });
}

void run_accountant(const AccountantOptions& options) {
  options.validate();
  const std::vector<double> orders = parse_orders(options.orders);
  std::vector<Mechanism> composed;
  PrivacySpent spent;
  if (options.target_eps) {
    NoiseSearchOptions search;
    search.target_eps = *options.target_eps;
    search.delta = options.delta;
    search.q = sampling_rate(options);
    search.steps = step_count(options);
    search.orders = orders;
    NoiseSearchResult found = noise_multiplier_for_epsilon(search);
    composed.push_back({search.q, found.noise_multiplier, search.steps});
    spent = std::move(found.privacy);
  } else {
    RdpAccountant accountant(orders);
    composed = mechanisms(options);
    for (const Mechanism& m : composed) accountant.compose(m.q, m.noise_multiplier, m.steps);
    spent = accountant.get_privacy_spent(options.delta);
  }
  print_summary(composed, spent, options.orders);
  if (options.target_eps) {
    std::cout << "noise multiplier sigma = " << short_number(composed.front().noise_multiplier)
              << " reaches eps <= target " << short_number(*options.target_eps) << "\n";
  }
  if (!options.json_path.empty()) {
    nlohmann::json result = json_result(options, composed, spent);
    if (options.target_eps) result["noise_multiplier"] = composed.front().noise_multiplier;
    write_file_atomically(options.json_path, result.dump(2) + "\n");
  }
}

}  // namespace filkit::cli
