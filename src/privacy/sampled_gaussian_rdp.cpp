#include "filkit/privacy/sampled_gaussian_rdp.hpp"

#include "filkit/base/checks.hpp"
#include "privacy/log_space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace filkit {
namespace {

using detail::kInf;
using detail::log_add;
using detail::log_sub;

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

std::string describe(const std::string& name, double value) { return name + " = " + shown_value(value); }

// The checks below use base/checks.hpp's family: an OptionError "<name> = <value>: <rule>".

// The orders and RDP values of one curve, of one length; RDP >= 0 (+inf allowed: no privacy).
void validate_rdp(const std::vector<double>& orders, const std::vector<double>& rdp) {
  if (rdp.size() != orders.size())
    option_error("rdp",
                 "has " + std::to_string(rdp.size()) + " values but orders has " + std::to_string(orders.size()));
  for (std::size_t k = 0; k < rdp.size(); ++k)
    if (!(rdp[k] >= 0))
      option_error("rdp", shown_value(rdp[k]),
                   "rdp[" + std::to_string(k) + "] must be >= 0 (at order " + shown_value(orders[k]) + ")");
}

// 1 / (2 sigma^2), the exponent scale of every term; infinite for sigma = 0 and for sigma < 7.5e-155.
double inverse_twice_variance(double noise_multiplier) { return 1 / (2 * noise_multiplier * noise_multiplier); }

void validate_series_arguments(double noise_multiplier, double sample_rate) {
  require_in_interval("sample_rate", sample_rate, 0.0, End::kOpen, 1.0, End::kOpen);
  require_positive("noise_multiplier", noise_multiplier);
  if (!std::isfinite(inverse_twice_variance(noise_multiplier)))
    option_error("noise_multiplier", shown_value(noise_multiplier),
                 "must be > 7.5e-155 (1 / (2 sigma^2) finite) for the sums");
}

// Adds the signed term exp(log_term) to the positive sum exp(log_sum).
double add_signed(double log_sum, double log_term, bool negative) {
  if (!negative) return log_add(log_sum, log_term);
  if (log_term > log_sum) {
    // Cannot happen for an alternating tail with decreasing terms; report rather than return NaN.
    throw NumericalError("the erfc series of the sampled Gaussian RDP lost positivity");
  }
  return log_sub(log_sum, log_term);
}

double rdp_at_order(double noise_multiplier, double sample_rate, double alpha) {
  if (sample_rate == 0) return 0.0;
  // sigma = 0, or so small that even the q = 1 value alpha / (2 sigma^2) overflows.
  if (std::isinf(inverse_twice_variance(noise_multiplier))) return kInf;
  if (sample_rate == 1) return alpha / (2 * noise_multiplier * noise_multiplier);
  const double log_a = is_integer(alpha) ? sampled_gaussian_log_a_integer(noise_multiplier, sample_rate,
                                                                          static_cast<std::int64_t>(alpha))
                                         : sampled_gaussian_log_a_series(noise_multiplier, sample_rate, alpha);
  if (std::isnan(log_a)) {
    throw NumericalError("RDP is NaN at " + describe("sample_rate", sample_rate) + ", " +
                         describe("noise_multiplier", noise_multiplier) + ", " + describe("order", alpha));
  }
  // A_alpha >= 1 (Jensen), so a negative log A_alpha is rounding in a sum of terms near 1.
  return std::max(log_a, 0.0) / (alpha - 1);
}

std::string edge_warning(OptimalOrderStatus status, double order) {
  switch (status) {
    case OptimalOrderStatus::kInterior: return "";
    case OptimalOrderStatus::kSmallest:
      return "the optimal order " + shown_value(order) +
             " is the smallest order of the grid; add smaller orders (> 1) for a possibly smaller eps";
    case OptimalOrderStatus::kLargest:
      return "the optimal order " + shown_value(order) +
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

// A real number as log|x| and its sign, for differences of numbers far apart in magnitude.
struct SignedLog {
  double log_magnitude;
  bool negative;
};

// b - a.
SignedLog signed_difference(SignedLog b, SignedLog a) {
  if (a.negative != b.negative) return {log_add(a.log_magnitude, b.log_magnitude), b.negative};
  if (a.log_magnitude == b.log_magnitude) return {-kInf, false};
  if (b.log_magnitude > a.log_magnitude) return {log_sub(b.log_magnitude, a.log_magnitude), b.negative};
  return {log_sub(a.log_magnitude, b.log_magnitude), !b.negative};
}

// log|D^k a_0| for k = 0..n, a_j = exp(j (j - 1) / (2 s^2)): n passes of differences in log space.
std::vector<double> log_forward_differences(double noise_multiplier, std::int64_t n) {
  const double exponent_scale = inverse_twice_variance(noise_multiplier);
  std::vector<SignedLog> row(static_cast<std::size_t>(n) + 1);
  for (std::int64_t j = 0; j <= n; ++j) {
    const double k = static_cast<double>(j);
    row[static_cast<std::size_t>(j)] = {k * (k - 1) * exponent_scale, false};
  }
  std::vector<double> log_differences(static_cast<std::size_t>(n) + 1);
  log_differences[0] = row[0].log_magnitude;
  for (std::int64_t pass = 1; pass <= n; ++pass) {
    for (std::int64_t j = 0; j + pass <= n; ++j)
      row[static_cast<std::size_t>(j)] =
          signed_difference(row[static_cast<std::size_t>(j) + 1], row[static_cast<std::size_t>(j)]);
    log_differences[static_cast<std::size_t>(pass)] = row[0].log_magnitude;
  }
  return log_differences;
}

double log_binomial(double n, double k) { return std::lgamma(n + 1) - std::lgamma(k + 1) - std::lgamma(n - k + 1); }

// Above this order the forward differences (O(alpha^2)) are skipped, as in dp_accounting.
constexpr std::int64_t kMaxDifferenceOrder = 256;

// log A of the bound at the top of the header at an integer order alpha >= 1; 0 < q < 1, s > 0.
double without_replacement_log_a(double noise_multiplier, double sample_rate, std::int64_t alpha) {
  if (alpha == 1) return 0.0;
  const double exponent_scale = inverse_twice_variance(noise_multiplier);
  const auto cgf = [&](double x) { return x * (x + 1) * exponent_scale; };
  const double log_q = std::log(sample_rate);
  const double a = static_cast<double>(alpha);
  const double eps2 = 2 * exponent_scale;  // the Gaussian's RDP at order 2, 1 / s^2
  double log_a = 0.0;                      // the leading 1
  log_a = log_add(log_a, 2 * log_q + log_binomial(a, 2) +
                             std::min(std::log(4.0) + eps2 + std::log(-std::expm1(-eps2)), eps2 + std::numbers::ln2));
  const bool exact = alpha <= kMaxDifferenceOrder;
  const std::vector<double> log_d =
      exact ? log_forward_differences(noise_multiplier, alpha + 1) : std::vector<double>{};
  for (std::int64_t i = 3; i <= alpha; ++i) {
    double bound = std::numbers::ln2 + cgf(static_cast<double>(i - 1));
    if (exact) {
      const double low = log_d[static_cast<std::size_t>(2 * (i / 2))];
      const double high = log_d[static_cast<std::size_t>(2 * ((i + 1) / 2))];
      bound = std::min(bound, std::log(4.0) + 0.5 * (low + high));
    }
    log_a = log_add(log_a, bound + static_cast<double>(i) * log_q + log_binomial(a, static_cast<double>(i)));
  }
  return log_a;
}

double without_replacement_rdp_at_order(double noise_multiplier, double sample_rate, double alpha) {
  if (sample_rate == 0) return 0.0;
  if (std::isinf(inverse_twice_variance(noise_multiplier))) return kInf;
  if (sample_rate == 1) return alpha / (2 * noise_multiplier * noise_multiplier);
  const double lower = std::floor(alpha);
  const double log_a_lower = without_replacement_log_a(noise_multiplier, sample_rate, static_cast<std::int64_t>(lower));
  if (alpha == lower) return log_a_lower / (alpha - 1);
  const double t = alpha - lower;
  const double log_a_upper =
      without_replacement_log_a(noise_multiplier, sample_rate, static_cast<std::int64_t>(lower) + 1);
  return ((1 - t) * log_a_lower + t * log_a_upper) / (alpha - 1);
}

}  // namespace

void validate_orders(const std::vector<double>& orders) {
  if (orders.empty()) option_error("orders", "must not be empty");
  for (std::size_t k = 0; k < orders.size(); ++k)
    if (!(orders[k] > 1 && orders[k] <= kMaxOrder))
      option_error("orders", shown_value(orders[k]),
                   "orders[" + std::to_string(k) + "] must lie in (1, " + shown_value(kMaxOrder) + "]");
}

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

double sampled_gaussian_log_a_integer(double noise_multiplier, double sample_rate, std::int64_t alpha) {
  validate_series_arguments(noise_multiplier, sample_rate);
  require_at_least("alpha", alpha, 2);
  const double log_q = std::log(sample_rate);
  const double log_1mq = std::log1p(-sample_rate);
  const double exponent_scale = inverse_twice_variance(noise_multiplier);
  BinomialCoefficient coefficient(static_cast<double>(alpha));
  double log_a = -kInf;
  for (std::int64_t i = 0; i <= alpha; ++i, coefficient.advance()) {
    const double k = static_cast<double>(i);
    log_a = log_add(log_a, coefficient.log_magnitude() + k * log_q + static_cast<double>(alpha - i) * log_1mq +
                               (k * k - k) * exponent_scale);
  }
  return log_a;
}

double sampled_gaussian_log_a_series(double noise_multiplier, double sample_rate, double alpha) {
  validate_series_arguments(noise_multiplier, sample_rate);
  require_in_interval("alpha", alpha, 1.0, End::kOpen, kMaxOrder, End::kClosed);
  const double log_q = std::log(sample_rate);
  const double log_1mq = std::log1p(-sample_rate);
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
    if (i > alpha && std::max(log_s0, log_s1) < log_a + std::log(kSeriesTolerance * std::max(log_a, kSeriesTinyLogA))) {
      return log_a;
    }
  }
  throw NumericalError("the erfc series of the sampled Gaussian RDP did not converge at " +
                       describe("sample_rate", sample_rate) + ", " + describe("noise_multiplier", noise_multiplier) +
                       ", " + describe("alpha", alpha));
}

namespace {

// One step's curve, r(alpha) = at_order(q, sigma, alpha) at each order, after validating all three.
template <typename AtOrder>
std::vector<double> rdp_curve(double noise_multiplier, double sample_rate, const std::vector<double>& orders,
                              AtOrder at_order) {
  require_in_interval("sample_rate", sample_rate, 0.0, End::kClosed, 1.0, End::kClosed);
  require_non_negative("noise_multiplier", noise_multiplier);
  validate_orders(orders);
  std::vector<double> rdp(orders.size());
  std::transform(orders.begin(), orders.end(), rdp.begin(),
                 [&](double alpha) { return at_order(noise_multiplier, sample_rate, alpha); });
  return rdp;
}

}  // namespace

std::vector<double> subsampled_gaussian_rdp(double noise_multiplier, double sample_rate,
                                            const std::vector<double>& orders) {
  return rdp_curve(noise_multiplier, sample_rate, orders, rdp_at_order);
}

std::vector<double> sampled_without_replacement_gaussian_rdp(double noise_multiplier, double sample_rate,
                                                             const std::vector<double>& orders) {
  return rdp_curve(noise_multiplier, sample_rate, orders, without_replacement_rdp_at_order);
}

double delta_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp, double eps) {
  validate_orders(orders);
  require_non_negative("eps", eps);
  validate_rdp(orders, rdp);
  double log_delta = 0.0;  // delta <= 1 always
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double alpha = orders[k];
    log_delta = std::min(log_delta, (alpha - 1) * (rdp[k] - eps + std::log1p(-1 / alpha)) - std::log(alpha));
  }
  return std::exp(log_delta);
}

bool PrivacySpent::optimal_order_at_edge() const {
  return status == OptimalOrderStatus::kSmallest || status == OptimalOrderStatus::kLargest;
}

PrivacySpent privacy_spent_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp, double delta) {
  validate_orders(orders);
  require_in_interval("delta", delta, 0.0, End::kOpen, 1.0, End::kOpen);
  validate_rdp(orders, rdp);
  PrivacySpent spent{
      kInf, delta, std::numeric_limits<double>::quiet_NaN(), orders, rdp, OptimalOrderStatus::kNoFiniteBound, ""};
  const double log_delta = std::log(delta);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    const double alpha = orders[k];
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

}  // namespace filkit
