// Rényi differential privacy (RDP) of the sampled Gaussian mechanism and its conversion to
// (eps, delta): the mathematics of the RDP accountant (rdp_accountant.hpp), as Opacus keeps it in
// accountants/analysis/rdp.py. The accountant DP-SGD users compare against (Opacus, TensorFlow
// Privacy, dp_accounting).
//
// Mechanism. Each step adds N(0, sigma^2 C^2 I) to a sum of L2-clipped (norm <= C) per-example
// terms over a batch that holds every example independently with probability q (Poisson
// sampling). sigma is the noise multiplier; C cancels from every formula below.
//
// RDP of one step at order alpha > 1 (Mironov, Talwar, Zhang 2019, "Rényi Differential Privacy
// of the Sampled Gaussian Mechanism", arXiv:1908.10530, Section 3):
//   r(alpha) = log(A_alpha) / (alpha - 1),   A_alpha = E_{z ~ mu0} [ (mu(z) / mu0(z))^alpha ],
//   mu0 = N(0, sigma^2),   mu = (1 - q) N(0, sigma^2) + q N(1, sigma^2).
// Integer alpha: a finite binomial sum, added up by log-sum-exp:
//   A_alpha = sum_{i=0}^{alpha} C(alpha, i) (1 - q)^(alpha - i) q^i exp((i^2 - i) / (2 sigma^2)).
// Real alpha (Section 3.3): split the integral at z0 = sigma^2 log(1/q - 1) + 1/2, where the two
// components of mu are equal, (1 - q) mu0 = q mu1, and expand each half in a binomial series in
// the smaller component over the larger (j = alpha - i):
//   A_alpha = A0 + A1,
//   A0 = sum_{i>=0} C(alpha, i) q^i (1 - q)^j exp((i^2 - i) / (2 sigma^2)) erfc((i - z0) / (sqrt(2) sigma)) / 2,
//   A1 = sum_{i>=0} C(alpha, i) q^j (1 - q)^i exp((j^2 - j) / (2 sigma^2)) erfc((z0 - j) / (sqrt(2) sigma)) / 2.
// The generalised binomial coefficients C(alpha, i) alternate in sign for i > alpha + 1. We sum
// the exact SIGNED series (negative terms subtracted in log space), as TensorFlow Privacy's
// rdp_accountant._compute_log_a_frac and Opacus do. Current dp_accounting adds |C(alpha, i)|
// instead, an upper bound on A_alpha, not A_alpha: at q = 0.01, sigma = 2.5, 50 steps it gives
// 6.7058e-4 at alpha = 1.5 and 1.085487e-3 at alpha = 2.5, where the signed series and direct
// quadrature both give 6.500709e-4 and 1.085418e-3. For i > alpha the terms alternate with
// decreasing magnitude, so the first omitted term bounds the truncation error; the series stops
// once that is below 1e-12 max(log A_alpha, 1e-4) in log A_alpha. The terms shrink geometrically
// except near q = 1/2, where they decay only polynomially (at q = 1/2, order 1.1: 3e4 terms at
// sigma = 4, 4e5 at sigma = 1e3).
// Special cases: q = 0 gives r = 0; sigma = 0 (with q > 0) gives r = inf; q = 1 is the plain
// Gaussian mechanism, r = alpha / (2 sigma^2), exactly. Every sum runs in log space.
//
// Composition (Mironov 2017, "Rényi Differential Privacy", Proposition 1): RDP adds up order by
// order, so T steps give T r(alpha) and several mechanisms add their curves over the same orders.
//
// Conversion to (eps, delta) (Balle, Barthe, Gaboardi, Hsu, Sato 2020, "Hypothesis Testing
// Interpretations and Rényi Differential Privacy", Theorem 21; Canonne, Kamath, Steinke 2020,
// "The Discrete Gaussian for Differential Privacy", Proposition 12):
//   eps = max(0, min_alpha [ r(alpha) + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1) ]),
// the conversion of Opacus's get_privacy_spent and TF Privacy / dp_accounting's newer versions;
// it is tighter than the classic eps = r(alpha) + log(1/delta) / (alpha - 1) (Mironov 2017,
// Proposition 3). The minimising order is reported, with a warning when it is the smallest or
// largest order of the grid (a wider grid may then give a smaller eps).
//
// Sampling without replacement (fixed-size batches of B out of n, q = B / n) under replace-one
// neighbours: Wang, Balle, Kasiviswanathan 2019 ("Subsampled Rényi Differential Privacy and
// Analytical Moments Accountant", AISTATS, arXiv:1808.00087), Theorem 27, in the form
// dp_accounting's rdp_privacy_accountant evaluates it. With the Gaussian's CGF
// c(x) = x (x + 1) / (2 s^2) (s the noise multiplier per unit of replace-one sensitivity) and
// the forward differences D^k of the sequence a_j = exp(c(j - 1)) = exp(j (j - 1) / (2 s^2)) at 0,
// for integer alpha >= 2:
//   A = 1 + q^2 C(alpha, 2) min(4 (e^{1/s^2} - 1), 2 e^{1/s^2})
//         + sum_{i=3}^{alpha} q^i C(alpha, i) min(4 sqrt(|D^{2 floor(i/2)}| |D^{2 ceil(i/2)}|), 2 e^{c(i - 1)}),
//   r(alpha) = log(A) / (alpha - 1);
// above alpha = 256 only the second argument of each min is used (the differences cost
// O(alpha^2)). A non-integer alpha interpolates log A linearly between floor(alpha) and
// ceil(alpha) (their Corollary 10: the CGF is convex), log A = 0 at alpha = 1. The differences are
// taken in log space with signs. In filkit's units s = sigma / 2 (neighbouring_relation.hpp).
#pragma once

#include "filkit/base/enum_names.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace filkit {

/// Named grids of RDP orders.
enum class OrderGrid {
  /// Opacus's DEFAULT_ALPHAS: [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64)),
  /// i.e. 1.1, 1.2, ..., 10.9 then 12, 13, ..., 63 (151 orders; 11 is not in it).
  kOpacus,
  /// [1 + x / 10. for x in range(1, 100)] + list(range(11, 64)) + [128, 256, 512] (155 orders),
  /// the grid commonly passed to TF Privacy's apply_dp_sgd_analysis and the one the project's
  /// issue names "tf-privacy". dp_accounting's DEFAULT_RDP_ORDERS is this plus 1024; TF Privacy's
  /// own compute_dp_sgd_privacy uses the coarser [1.25, 1.5, 1.75, 2, 2.25, 2.5, 3, 3.5, 4, 4.5] +
  /// list(range(5, 64)) + [128, 256, 512].
  kTfPrivacy,
};
template <>
struct EnumNames<OrderGrid> {
  static constexpr const char* what = "order grid";
  static constexpr std::pair<OrderGrid, const char*> names[] = {
      {OrderGrid::kOpacus, "opacus"}, {OrderGrid::kTfPrivacy, "tf-privacy"}, {OrderGrid::kTfPrivacy, "tf"}};
};

/// The orders of a named grid, in increasing order.
std::vector<double> rdp_orders(OrderGrid grid);

/// Checks a grid of orders: non-empty, each in (1, 1e6] (an OptionError naming "orders").
void validate_orders(const std::vector<double>& orders);

/// log erfc(x) for any real x, accurate where erfc itself underflows (x > 26.5): there an
/// asymptotic series of erfc(x) exp(x^2) x sqrt(pi) is used (from x > 20, where it converges to
/// double precision in a few terms).
double log_erfc(double x);

/// log A_alpha of one sampled Gaussian step at an integer order alpha >= 2 by the finite binomial
/// sum (see the top of this file); requires 0 < sample_rate < 1 and noise_multiplier > 7.5e-155
/// (so that 1 / (2 sigma^2) is finite).
double sampled_gaussian_log_a_integer(double noise_multiplier, double sample_rate, std::int64_t alpha);

/// log A_alpha at any real order alpha > 1 (integer orders included) by the signed two-sided
/// erfc series (see the top of this file); requires 0 < sample_rate < 1 and noise_multiplier >
/// 7.5e-155. Throws std::runtime_error if the series fails to converge.
double sampled_gaussian_log_a_series(double noise_multiplier, double sample_rate, double alpha);

/// r(alpha) of ONE step of the sampled Gaussian mechanism at each order: integer orders by the
/// binomial sum, other orders by the erfc series. noise_multiplier finite, >= 0 (below 7.5e-155,
/// like 0, it gives inf); sample_rate q in [0, 1]; orders non-empty, each in (1, 1e6] (the sums
/// take O(alpha) terms). Throws std::invalid_argument naming the parameter otherwise.
std::vector<double> subsampled_gaussian_rdp(double noise_multiplier, double sample_rate,
                                            const std::vector<double>& orders);

/// r(alpha) of ONE step of the Gaussian mechanism on a batch drawn without replacement, under
/// replace-one neighbours (the bound at the top of this file). noise_multiplier is per unit of
/// replace-one sensitivity (dp_accounting's convention: filkit's sigma / kReplaceOneSensitivity).
/// noise_multiplier finite, >= 0 (0 gives inf); sample_rate q = B / n in [0, 1]; orders as above.
std::vector<double> sampled_without_replacement_gaussian_rdp(double noise_multiplier, double sample_rate,
                                                             const std::vector<double>& orders);

/// Where the optimal order lies on the order grid.
enum class OptimalOrderStatus {
  kInterior,       ///< strictly inside the grid: the grid is wide enough
  kSmallest,       ///< the smallest order: smaller orders might give a smaller eps
  kLargest,        ///< the largest order: larger orders might give a smaller eps
  kNoFiniteBound,  ///< every order has infinite RDP (e.g. noise_multiplier = 0): eps = inf
};
template <>
struct EnumNames<OptimalOrderStatus> {
  static constexpr const char* what = "optimal order status";
  static constexpr std::pair<OptimalOrderStatus, const char*> names[] = {
      {OptimalOrderStatus::kInterior, "interior"},
      {OptimalOrderStatus::kSmallest, "smallest"},
      {OptimalOrderStatus::kLargest, "largest"},
      {OptimalOrderStatus::kNoFiniteBound, "no-finite-bound"}};
};

/// An (eps, delta) guarantee converted from an RDP curve.
struct PrivacySpent {
  double eps = 0.0;            ///< >= 0; inf when no order has finite RDP
  double delta = 0.0;          ///< the delta asked for
  double optimal_order = 0.0;  ///< the order attaining eps; NaN when eps = inf
  std::vector<double> orders;  ///< the order grid
  std::vector<double> rdp;     ///< the composed RDP at each order
  OptimalOrderStatus status = OptimalOrderStatus::kInterior;
  std::string warning;  ///< a sentence for the user; empty when status is kInterior

  /// True when the optimal order is the smallest or largest order of the grid.
  bool optimal_order_at_edge() const;
};

/// (eps, delta) from an RDP curve by the conversion at the top of this file. `orders` and `rdp`
/// have equal, non-zero length; orders in (1, 1e6]; rdp >= 0 (inf allowed); delta in (0, 1).
PrivacySpent privacy_spent_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp, double delta);

/// delta at eps from an RDP curve: the conversion at the top of this file solved for delta,
///   delta = min(1, min_alpha exp((alpha - 1) (r(alpha) - eps + log1p(-1/alpha)) - log alpha)).
/// eps finite and >= 0; orders and rdp as for privacy_spent_from_rdp.
double delta_from_rdp(const std::vector<double>& orders, const std::vector<double>& rdp, double eps);

}  // namespace filkit
