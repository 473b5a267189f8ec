#include "filkit/dpsgd/rdp_accountant.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace filkit {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kMaxOrder = 1e6;
// From here the asymptotic series of erfc is exact to double precision within ten terms (erfc
// itself underflows past 26.5).
constexpr double kAsymptoticErfcFrom = 20.0;
// The series stops once its error in log A is below kSeriesTolerance log A, or below 1e-16 (about
// the resolution of a log-space sum of terms near 1) once log A < kSeriesTinyLogA.
constexpr double kSeriesTolerance = 1e-12;
constexpr double kSeriesTinyLogA = 1e-4;
// A hard stop beyond every case we know: the slowest, q = 1/2 (no geometric decay) at order 1.1,
// takes 3e4 terms at sigma = 4, 4e5 at sigma = 1e3 and 8e5 at sigma = 1e4.
constexpr std::int64_t kMaxSeriesTerms = 10'000'000;

// log(exp(a) + exp(b)).
double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -kInf || a == kInf) return a;
  return a + std::log1p(std::exp(b - a));
}

// log(exp(a) - exp(b)) for a >= b; the two branches keep full precision for a - b near 0 and
// large (Maechler 2012, "Accurately computing log(1 - exp(-|a|))").
double log_sub(double a, double b) {
  if (b == -kInf) return a;
  const double gap = a - b;
  return a + (gap < std::numbers::ln2 ? std::log(-std::expm1(-gap)) : std::log1p(-std::exp(-gap)));
}

bool is_integer(double x) { return x == std::floor(x); }

// log|C(alpha, i)| and its sign for i = 0, 1, ... by C(alpha, i) = C(alpha, i-1) (alpha - i + 1) / i.
// Unlike lgamma differences this needs no care where alpha - i + 1 < 0, and accumulates only one
// rounding a step.
class BinomialCoefficient {
 public:
  explicit BinomialCoefficient(double alpha) : alpha_(alpha) {}
  double log_magnitude() const { return log_magnitude_; }
  bool negative() const { return negative_; }
  void advance() {
    ++i_;
    const double factor = (alpha_ - static_cast<double>(i_) + 1) / static_cast<double>(i_);
    log_magnitude_ += std::log(std::abs(factor));
    if (factor < 0) negative_ = !negative_;
  }

 private:
  double alpha_;
  std::int64_t i_ = 0;
  double log_magnitude_ = 0.0;
  bool negative_ = false;
};

// A number for messages: short, but enough digits to tell neighbouring orders apart.
std::string short_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.10g", value);
  return buffer;
}

std::string describe(const std::string& name, double value) { return name + " = " + short_number(value); }

void validate_sampling_rate(double q) {
  if (!(q >= 0 && q <= 1)) throw std::invalid_argument(describe("q", q) + " must be in [0, 1]");
}

void validate_noise_multiplier(double noise_multiplier) {
  if (!(noise_multiplier >= 0 && std::isfinite(noise_multiplier))) {
    throw std::invalid_argument(describe("noise_multiplier (sigma)", noise_multiplier) +
                                " must be finite and >= 0");
  }
}

void validate_steps(std::int64_t steps, std::int64_t minimum) {
  if (steps < minimum) {
    throw std::invalid_argument("steps = " + std::to_string(steps) + " must be >= " +
                                std::to_string(minimum));
  }
}

void validate_delta(double delta) {
  if (!(delta > 0 && delta < 1)) throw std::invalid_argument(describe("delta", delta) + " must be in (0, 1)");
}

void validate_orders(const std::vector<double>& orders) {
  if (orders.empty()) throw std::invalid_argument("orders must not be empty");
  for (std::size_t k = 0; k < orders.size(); ++k) {
    if (!(orders[k] > 1 && orders[k] <= kMaxOrder)) {
      throw std::invalid_argument(describe("orders[" + std::to_string(k) + "]", orders[k]) +
                                  " must be in (1, 1e6]");
    }
  }
}

// 1 / (2 sigma^2), the exponent scale of every term; infinite for sigma = 0 and for sigma < 7.5e-155.
double inverse_twice_variance(double noise_multiplier) { return 1 / (2 * noise_multiplier * noise_multiplier); }

void validate_series_arguments(double q, double noise_multiplier) {
  if (!(q > 0 && q < 1)) throw std::invalid_argument(describe("q", q) + " must be in (0, 1) for the sums");
  if (!(noise_multiplier > 0 && std::isfinite(noise_multiplier) &&
        std::isfinite(inverse_twice_variance(noise_multiplier)))) {
    throw std::invalid_argument(describe("noise_multiplier (sigma)", noise_multiplier) +
                                " must be finite and > 7.5e-155 (1 / (2 sigma^2) finite) for the sums");
  }
}

// Adds the signed term exp(log_term) to the positive sum exp(log_sum).
double add_signed(double log_sum, double log_term, bool negative) {
  if (!negative) return log_add(log_sum, log_term);
  if (log_term > log_sum) {
    // Cannot happen for an alternating tail with decreasing terms; report rather than return NaN.
    throw std::runtime_error("the erfc series of the sampled Gaussian RDP lost positivity");
  }
  return log_sub(log_sum, log_term);
}

double rdp_at_order(double q, double noise_multiplier, double alpha) {
  if (q == 0) return 0.0;
  // sigma = 0, or so small that even the q = 1 value alpha / (2 sigma^2) overflows.
  if (std::isinf(inverse_twice_variance(noise_multiplier))) return kInf;
  if (q == 1) return alpha / (2 * noise_multiplier * noise_multiplier);
  const double log_a = is_integer(alpha)
                           ? sampled_gaussian_log_a_integer(q, noise_multiplier, static_cast<std::int64_t>(alpha))
                           : sampled_gaussian_log_a_series(q, noise_multiplier, alpha);
  if (std::isnan(log_a)) {
    throw std::runtime_error("RDP is NaN at " + describe("q", q) + ", " +
                             describe("noise_multiplier", noise_multiplier) + ", " + describe("order", alpha));
  }
  // A_alpha >= 1 (Jensen), so a negative log A_alpha is rounding in a sum of terms near 1.
  return std::max(log_a, 0.0) / (alpha - 1);
}

std::string edge_warning(OptimalOrderStatus status, double order) {
  switch (status) {
    case OptimalOrderStatus::kInterior:
      return "";
    case OptimalOrderStatus::kSmallest:
      return "the optimal order " + short_number(order) +
             " is the smallest order of the grid; add smaller orders (> 1) for a possibly smaller eps";
    case OptimalOrderStatus::kLargest:
      return "the optimal order " + short_number(order) +
             " is the largest order of the grid; add larger orders for a possibly smaller eps";
    case OptimalOrderStatus::kNoFiniteBound:
      return "every order has infinite RDP (noise_multiplier = 0?), so eps is infinite";
  }
  return "";
}

OptimalOrderStatus locate_order(const std::vector<double>& orders, double order) {
  if (order == *std::min_element(orders.begin(), orders.end())) return OptimalOrderStatus::kSmallest;
  if (order == *std::max_element(orders.begin(), orders.end())) return OptimalOrderStatus::kLargest;
  return OptimalOrderStatus::kInterior;
}

}  // namespace



std::vector<double> rdp_orders(OrderGrid grid) {
  // Built exactly as the Python originals, 1 + x / 10.0, so the orders agree bit for bit.
  std::vector<double> orders;
  for (int x = 1; x < 100; ++x) orders.push_back(1 + x / 10.0);
  const int first_integer = grid == OrderGrid::kOpacus ? 12 : 11;
  for (int order = first_integer; order < 64; ++order) orders.push_back(order);
  if (grid == OrderGrid::kTfPrivacy) orders.insert(orders.end(), {128.0, 256.0, 512.0});
  return orders;
}

double log_erfc(double x) {
  if (x <= kAsymptoticErfcFrom) return std::log(std::erfc(x));
  // erfc(x) = exp(-x^2) / (x sqrt(pi)) * sum_k (-1)^k (2k - 1)!! / (2 x^2)^k.
  const double two_x_squared = 2 * x * x;
  double term = 1.0;
  double sum = 1.0;
  for (int k = 1; std::abs(term) > 1e-17; ++k) {
    term *= -(2 * k - 1) / two_x_squared;
    sum += term;
  }
  return -x * x - std::log(x) - 0.5 * std::log(std::numbers::pi) + std::log(sum);
}

double sampled_gaussian_log_a_integer(double q, double noise_multiplier, std::int64_t alpha) {
  validate_series_arguments(q, noise_multiplier);
  if (alpha < 2) throw std::invalid_argument("integer order alpha = " + std::to_string(alpha) + " must be >= 2");
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double exponent_scale = inverse_twice_variance(noise_multiplier);
  BinomialCoefficient coefficient(static_cast<double>(alpha));
  double log_a = -kInf;
  for (std::int64_t i = 0; i <= alpha; ++i, coefficient.advance()) {
    const double k = static_cast<double>(i);
    log_a = log_add(log_a, coefficient.log_magnitude() + k * log_q +
                               static_cast<double>(alpha - i) * log_1mq + (k * k - k) * exponent_scale);
  }
  return log_a;
}

double sampled_gaussian_log_a_series(double q, double noise_multiplier, double alpha) {
  validate_series_arguments(q, noise_multiplier);
  if (!(alpha > 1 && alpha <= kMaxOrder)) throw std::invalid_argument(describe("alpha", alpha) + " must be in (1, 1e6]");
  const double log_q = std::log(q);
  const double log_1mq = std::log1p(-q);
  const double exponent_scale = inverse_twice_variance(noise_multiplier);
  const double z0 = noise_multiplier * noise_multiplier * (log_1mq - log_q) + 0.5;
  const double erfc_scale = 1 / (std::numbers::sqrt2 * noise_multiplier);
  BinomialCoefficient coefficient(alpha);
  double log_a0 = -kInf;
  double log_a1 = -kInf;
  for (std::int64_t n = 0; n < kMaxSeriesTerms; ++n, coefficient.advance()) {
    const double i = static_cast<double>(n);
    const double j = alpha - i;
    const double log_s0 = coefficient.log_magnitude() + i * log_q + j * log_1mq + (i * i - i) * exponent_scale -
                          std::numbers::ln2 + log_erfc((i - z0) * erfc_scale);
    const double log_s1 = coefficient.log_magnitude() + j * log_q + i * log_1mq + (j * j - j) * exponent_scale -
                          std::numbers::ln2 + log_erfc((z0 - j) * erfc_scale);
    log_a0 = add_signed(log_a0, log_s0, coefficient.negative());
    log_a1 = add_signed(log_a1, log_s1, coefficient.negative());
    const double log_a = log_add(log_a0, log_a1);
    // Past i > alpha the terms alternate and shrink, so the next term bounds the error of
    // stopping; it must be small relative to log A (or absolutely, when log A is tiny).
    if (i > alpha &&
        std::max(log_s0, log_s1) < log_a + std::log(kSeriesTolerance * std::max(log_a, kSeriesTinyLogA))) {
      return log_a;
    }
  }
  throw std::runtime_error("the erfc series of the sampled Gaussian RDP did not converge at " + describe("q", q) +
                           ", " + describe("noise_multiplier", noise_multiplier) + ", " + describe("alpha", alpha));
}

std::vector<double> subsampled_gaussian_rdp(double q, double noise_multiplier, const std::vector<double>& orders) {
  validate_sampling_rate(q);
  validate_noise_multiplier(noise_multiplier);
  validate_orders(orders);
  std::vector<double> rdp(orders.size());
  std::transform(orders.begin(), orders.end(), rdp.begin(),
                 [&](double alpha) { return rdp_at_order(q, noise_multiplier, alpha); });
  return rdp;
}



bool PrivacySpent::optimal_order_at_edge() const {
  return status == OptimalOrderStatus::kSmallest || status == OptimalOrderStatus::kLargest;
}

PrivacySpent privacy_spent_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp, double delta) {
  validate_orders(orders);
  validate_delta(delta);
  if (rdp.size() != orders.size()) {
    throw std::invalid_argument("rdp has " + std::to_string(rdp.size()) + " values but orders has " +
                                std::to_string(orders.size()));
  }
  PrivacySpent spent{kInf, delta, std::numeric_limits<double>::quiet_NaN(), orders, rdp,
                     OptimalOrderStatus::kNoFiniteBound, ""};
  const double log_delta = std::log(delta);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double alpha = orders[k];
    if (!(rdp[k] >= 0)) throw std::invalid_argument(describe("rdp[" + std::to_string(k) + "]", rdp[k]) + " must be >= 0");
    const double eps = rdp[k] + std::log1p(-1 / alpha) - (log_delta + std::log(alpha)) / (alpha - 1);
    if (eps < spent.eps) {
      spent.eps = eps;
      spent.optimal_order = alpha;
    }
  }
  if (std::isfinite(spent.eps)) {
    // The bound can dip below 0 for tiny RDP; eps < 0 means nothing, so report 0.
    spent.eps = std::max(spent.eps, 0.0);
    spent.status = locate_order(orders, spent.optimal_order);
  }
  spent.warning = edge_warning(spent.status, spent.optimal_order);
  return spent;
}

RdpAccountant::RdpAccountant(std::vector<double> orders) : orders_(std::move(orders)) {
  validate_orders(orders_);
  rdp_.assign(orders_.size(), 0.0);
}

void RdpAccountant::compose(double q, double noise_multiplier, std::int64_t steps) {
  validate_steps(steps, 0);
  const std::vector<double> step_rdp = subsampled_gaussian_rdp(q, noise_multiplier, orders_);
  if (steps == 0) return;  // 0 * inf would poison the curve with NaN
  for (std::size_t k = 0; k < orders_.size(); ++k) rdp_[k] += static_cast<double>(steps) * step_rdp[k];
}

PrivacySpent RdpAccountant::get_privacy_spent(double delta) const { return privacy_spent_from_rdp(orders_, rdp_, delta); }

void NoiseSearchOptions::validate() const {
  if (!(target_eps > 0 && std::isfinite(target_eps))) {
    throw std::invalid_argument(describe("target_eps", target_eps) + " must be finite and > 0");
  }
  validate_delta(delta);
  if (!(q > 0 && q <= 1)) {
    throw std::invalid_argument(describe("q", q) + " must be in (0, 1] for a noise search (q = 0 needs no noise)");
  }
  validate_steps(steps, 1);
  validate_orders(orders);
  if (!(max_noise_multiplier > 0 && std::isfinite(max_noise_multiplier))) {
    throw std::invalid_argument(describe("max_noise_multiplier", max_noise_multiplier) + " must be finite and > 0");
  }
  if (!(eps_tolerance > 0 && eps_tolerance < 1)) {
    throw std::invalid_argument(describe("eps_tolerance", eps_tolerance) + " must be in (0, 1)");
  }
}

namespace {

// eps of the searched mechanism at one noise multiplier, counting evaluations.
class NoiseEvaluator {
 public:
  explicit NoiseEvaluator(const NoiseSearchOptions& options) : options_(options) {}
  PrivacySpent operator()(double noise_multiplier) {
    ++evaluations_;
    RdpAccountant accountant(options_.orders);
    accountant.compose(options_.q, noise_multiplier, options_.steps);
    return accountant.get_privacy_spent(options_.delta);
  }
  int evaluations() const { return evaluations_; }

 private:
  const NoiseSearchOptions& options_;
  int evaluations_ = 0;
};

struct Bracket {
  double low;              // eps(low) > target
  double high;             // eps(high) <= target
  PrivacySpent at_high;
};

// Doubles (or halves) sigma from 1 until eps crosses the target. Halving ends because eps -> inf
// as sigma -> 0 when q > 0 and steps >= 1.
Bracket bracket_target(const NoiseSearchOptions& options, NoiseEvaluator& evaluate) {
  double high = std::min(1.0, options.max_noise_multiplier);
  PrivacySpent at_high = evaluate(high);
  if (at_high.eps <= options.target_eps) {
    double low = high / 2;
    for (PrivacySpent at_low = evaluate(low); at_low.eps <= options.target_eps; at_low = evaluate(low)) {
      high = low;
      at_high = std::move(at_low);
      low /= 2;
    }
    return {low, high, std::move(at_high)};
  }
  double low = 0.0;
  while (at_high.eps > options.target_eps) {
    if (high >= options.max_noise_multiplier) {
      throw std::invalid_argument(describe("target_eps", options.target_eps) + " needs more noise than " +
                                  describe("max_noise_multiplier", options.max_noise_multiplier) +
                                  ", which gives " + describe("eps", at_high.eps));
    }
    low = high;
    high = std::min(2 * high, options.max_noise_multiplier);
    at_high = evaluate(high);
  }
  return {low, high, std::move(at_high)};
}

}  // namespace

NoiseSearchResult noise_multiplier_for_epsilon(const NoiseSearchOptions& options) {
  options.validate();
  // As sigma -> inf every r(alpha) -> 0 and eps falls to this floor, which no noise gets below.
  const double eps_floor =
      privacy_spent_from_rdp(options.orders, std::vector<double>(options.orders.size(), 0.0), options.delta).eps;
  if (options.target_eps <= eps_floor) {
    throw std::invalid_argument(describe("target_eps", options.target_eps) + " is unreachable: with " +
                                describe("delta", options.delta) + " no noise brings eps below " +
                                short_number(eps_floor) + " on this order grid (add larger orders or raise delta)");
  }
  NoiseEvaluator evaluate(options);
  Bracket bracket = bracket_target(options, evaluate);
  while (options.target_eps - bracket.at_high.eps > options.eps_tolerance * options.target_eps) {
    const double middle = 0.5 * (bracket.low + bracket.high);
    if (middle <= bracket.low || middle >= bracket.high) {
      throw std::runtime_error("noise search bracket [" + short_number(bracket.low) + ", " +
                               short_number(bracket.high) + "] collapsed before eps reached the tolerance");
    }
    PrivacySpent at_middle = evaluate(middle);
    if (at_middle.eps <= options.target_eps) {
      bracket.high = middle;
      bracket.at_high = std::move(at_middle);
    } else {
      bracket.low = middle;
    }
  }
  return {bracket.high, std::move(bracket.at_high), evaluate.evaluations()};
}

}  // namespace filkit
