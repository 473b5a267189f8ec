// RDP of the Gaussian mechanism on batches drawn without replacement (replace-one neighbours),
// privacy/sampled_gaussian_rdp.hpp, against an independent evaluation of the same bound (Wang, Balle,
// Kasiviswanathan 2019, Theorem 27): the forward differences as explicit alternating binomial
// sums in long double, D^k a_0 = sum_m (-1)^{k-m} C(k, m) exp(m (m - 1) / (2 s^2)), instead of the
// library's repeated differences in log space. The stored versions of dp_accounting's
// rdp_privacy_accountant_test.py hold no values for sampling without replacement, so none are
// cited here.
#include "filkit/privacy/rdp_accountant.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace filkit {
namespace {

long double binomial(int n, int k) {
  long double value = 1;
  for (int j = 1; j <= k; ++j) value = value * (n - k + j) / j;
  return value;
}

long double forward_difference(int k, long double s) {
  long double sum = 0;
  for (int m = 0; m <= k; ++m)
    sum += ((k - m) % 2 ? -1 : 1) * binomial(k, m) * std::exp(static_cast<long double>(m) * (m - 1) / (2 * s * s));
  return sum;
}

// (alpha - 1) r(alpha) at an integer order, directly.
long double log_a_direct(long double q, long double s, int alpha) {
  long double a = 1 + q * q * binomial(alpha, 2) * std::min(4 * std::expm1(1 / (s * s)), 2 * std::exp(1 / (s * s)));
  for (int i = 3; i <= alpha; ++i) {
    const long double low = std::abs(forward_difference(2 * (i / 2), s));
    const long double high = std::abs(forward_difference(2 * ((i + 1) / 2), s));
    const long double cgf = static_cast<long double>(i - 1) * i / (2 * s * s);
    a += std::pow(q, i) * binomial(alpha, i) * std::min(4 * std::sqrt(low * high), 2 * std::exp(cgf));
  }
  return std::log(a);
}

TEST(RdpWithoutReplacement, MatchesDirectEvaluationOfTheBound) {
  const std::vector<double> orders = {1.5, 2, 2.5, 3, 4, 5, 7.25, 8, 10, 12};
  for (double q : {0.001, 0.01, 0.1, 0.5}) {
    for (double s : {0.7, 1.0, 2.0, 4.0}) {
      const std::vector<double> rdp = sampled_without_replacement_gaussian_rdp(s, q, orders);
      for (std::size_t k = 0; k < orders.size(); ++k) {
        const double alpha = orders[k];
        const int lower = static_cast<int>(std::floor(alpha));
        const double t = alpha - lower;
        const long double log_lower = lower == 1 ? 0.0L : log_a_direct(q, s, lower);
        const long double log_upper = t == 0 ? 0.0L : log_a_direct(q, s, lower + 1);
        const double expected = static_cast<double>(((1 - t) * log_lower + t * log_upper) / (alpha - 1));
        EXPECT_NEAR(rdp[k], expected, 1e-9 * expected) << "q " << q << " s " << s << " alpha " << alpha;
      }
    }
  }
}

TEST(RdpWithoutReplacement, EdgeCases) {
  const std::vector<double> orders = {1.5, 2, 32, 300};
  // q = 1: the Gaussian mechanism, alpha / (2 s^2); q = 0: nothing; s = 0: infinite.
  const std::vector<double> full = sampled_without_replacement_gaussian_rdp(2.0, 1.0, orders);
  for (std::size_t k = 0; k < orders.size(); ++k) EXPECT_DOUBLE_EQ(full[k], orders[k] / 8);
  for (double r : sampled_without_replacement_gaussian_rdp(2.0, 0.0, orders)) EXPECT_EQ(r, 0.0);
  for (double r : sampled_without_replacement_gaussian_rdp(0.0, 0.1, orders)) EXPECT_TRUE(std::isinf(r));
  // Above order 256 only the second bound is used: still finite, increasing in q.
  const std::vector<double> small = sampled_without_replacement_gaussian_rdp(1.0, 0.01, orders);
  const std::vector<double> large = sampled_without_replacement_gaussian_rdp(1.0, 0.02, orders);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    EXPECT_TRUE(std::isfinite(small[k]));
    EXPECT_LT(small[k], large[k]);
  }
}

TEST(RdpWithoutReplacement, AccountantUsesSensitivityTwo) {
  // In filkit's units (sigma per clipping norm C) replace-one moves the sum by 2C.
  RdpAccountant accountant(rdp_orders(OrderGrid::kOpacus), NeighbouringRelation::kReplaceOne);
  accountant.step(2.0, 0.01, 10);
  const std::vector<double> one = sampled_without_replacement_gaussian_rdp(1.0, 0.01, accountant.orders());
  for (std::size_t k = 0; k < one.size(); ++k) EXPECT_NEAR(accountant.rdp()[k], 10 * one[k], 1e-12 * one[k] * 10);
  // Fixed-size batches under replace-one cost more than Poisson under add/remove at equal sigma.
  RdpAccountant poisson;
  poisson.step(2.0, 0.01, 10);
  EXPECT_GT(accountant.epsilon(1e-5), poisson.epsilon(1e-5));
}

}  // namespace
}  // namespace filkit
