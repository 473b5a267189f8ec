#include "filkit/privacy/rdp_accountant.hpp"

#include "expect_invalid_argument.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

namespace filkit {
namespace {

double relative_error(double value, double reference) { return std::abs(value - reference) / std::abs(reference); }

double eps_of(double q, double sigma, std::int64_t steps, double delta = 1e-5) {
  RdpAccountant accountant;
  accountant.compose(sigma, q, steps);
  return accountant.get_privacy_spent(delta).eps;
}

std::unique_ptr<PrivacyAccountant> make_rdp() { return std::make_unique<RdpAccountant>(); }

// log A_alpha by direct numerical integration of its definition,
//   A_alpha - 1 = E_{z ~ N(0, s^2)} [ (1 + q expm1((2z - 1) / (2 s^2)))^alpha - 1 ],
// composite 5-point Gauss-Legendre on [-15 s - 1, alpha + 15 s + 1] (the binomial terms are
// Gaussians centred at 0..alpha with width s), panels of width s / 8. Integrating A - 1 keeps the
// relative precision of a small log A.
double log_a_by_quadrature(double q, double sigma, double alpha) {
  const double inner = std::sqrt(5 - 2 * std::sqrt(10.0 / 7)) / 3;
  const double outer = std::sqrt(5 + 2 * std::sqrt(10.0 / 7)) / 3;
  const double nodes[5] = {-outer, -inner, 0.0, inner, outer};
  const double weights[5] = {(322 - 13 * std::sqrt(70.0)) / 900, (322 + 13 * std::sqrt(70.0)) / 900, 128.0 / 225,
                             (322 + 13 * std::sqrt(70.0)) / 900, (322 - 13 * std::sqrt(70.0)) / 900};
  auto integrand = [&](double z) {
    const double density = std::exp(-z * z / (2 * sigma * sigma)) / (sigma * std::sqrt(2 * std::numbers::pi));
    return density * std::expm1(alpha * std::log1p(q * std::expm1((2 * z - 1) / (2 * sigma * sigma))));
  };
  const double low = -15 * sigma - 1;
  const double high = alpha + 15 * sigma + 1;
  const int panels = static_cast<int>(std::ceil((high - low) / (sigma / 8)));
  const double width = (high - low) / panels;
  double integral = 0.0;
  for (int p = 0; p < panels; ++p) {
    const double centre = low + (p + 0.5) * width;
    for (int k = 0; k < 5; ++k) integral += weights[k] * integrand(centre + 0.5 * width * nodes[k]) * 0.5 * width;
  }
  return std::log1p(integral);
}

// The published RDP check values (docs/mathematics.md, section 7.10: q = 0.01, sigma = 2.5,
// 50 steps) against 50-digit mpmath quadrature of the definition (computed offline):
//   order   published     quadrature
//   1.5     6.5007e-4     6.5007089718803974e-4
//   2.5     1.08549e-3    1.0854180569181243e-3
//   5       2.18076e-3    2.1807565623078808e-3
//   50      2.38460e-2    2.3846037538706169e-2
//   100     167.416       167.41630754841826
// Published values are rounded, so they are checked to half a unit of their last digit. The
// published 1.08549e-3 is not the RDP at 2.5: it is dp_accounting's series of absolute terms
// (1.0854871e-3), an upper bound; the exact signed series gives the quadrature value.
const std::vector<double> kCheckOrders = {1.5, 2.5, 5, 50, 100};
const std::vector<double> kQuadratureRdp = {6.5007089718803974e-4, 1.0854180569181243e-3, 2.1807565623078808e-3,
                                            2.3846037538706169e-2, 167.41630754841826};

std::vector<double> check_value_rdp() {
  std::vector<double> rdp = subsampled_gaussian_rdp(2.5, 0.01, kCheckOrders);
  for (double& value : rdp) value *= 50;
  return rdp;
}

TEST(SubsampledGaussianRdp, MatchesPublishedCheckValues) {
  const std::vector<double> rdp = check_value_rdp();
  EXPECT_NEAR(rdp[0], 6.5007e-4, 0.5e-8);
  EXPECT_NEAR(rdp[2], 2.18076e-3, 0.5e-8);
  EXPECT_NEAR(rdp[3], 2.38460e-2, 0.5e-7);
  EXPECT_NEAR(rdp[4], 167.416, 0.5e-3);
  // TF Privacy's rdp_accountant_test lists 167.416307 for the same case (truncated, not rounded).
  EXPECT_NEAR(rdp[4], 167.416307, 1e-6);
}

TEST(SubsampledGaussianRdp, MatchesHighPrecisionQuadratureOfTheDefinition) {
  const std::vector<double> rdp = check_value_rdp();
  for (std::size_t k = 0; k < kCheckOrders.size(); ++k) {
    EXPECT_LT(relative_error(rdp[k], kQuadratureRdp[k]), 1e-9) << "order " << kCheckOrders[k];
  }
  // The published 1.08549e-3 at order 2.5 lies 6.6e-5 above the exact value.
  EXPECT_GT(relative_error(1.08549e-3, kQuadratureRdp[1]), 5e-5);
}

TEST(SubsampledGaussianRdp, IntegerOrdersAgreeWithDirectNumericalIntegration) {
  struct Case {
    double q, sigma;
    std::int64_t alpha;
  };
  for (const Case& c : {Case{0.01, 2.5, 5}, Case{0.1, 1.0, 8}, Case{0.5, 2.0, 3}, Case{0.2, 0.8, 12}}) {
    const double summed = sampled_gaussian_log_a_integer(c.sigma, c.q, c.alpha);
    const double integrated = log_a_by_quadrature(c.q, c.sigma, static_cast<double>(c.alpha));
    EXPECT_LT(relative_error(summed, integrated), 1e-9) << "q " << c.q << " sigma " << c.sigma << " alpha " << c.alpha;
    // The comparison has teeth: 0.1% more noise is told apart.
    EXPECT_GT(relative_error(sampled_gaussian_log_a_integer(1.001 * c.sigma, c.q, c.alpha), integrated), 1e-4);
  }
}

TEST(SubsampledGaussianRdp, FractionalOrdersAgreeWithDirectNumericalIntegration) {
  struct Case {
    double q, sigma, alpha;
  };
  for (const Case& c : {Case{0.04, 1.5, 3.9}, Case{0.3, 0.5, 1.7}, Case{0.5, 2.0, 2.5}, Case{0.9, 0.7, 5.5}}) {
    const double series = sampled_gaussian_log_a_series(c.sigma, c.q, c.alpha);
    EXPECT_LT(relative_error(series, log_a_by_quadrature(c.q, c.sigma, c.alpha)), 1e-9)
        << "q " << c.q << " sigma " << c.sigma << " alpha " << c.alpha;
  }
}

TEST(SubsampledGaussianRdp, IntegerPathAgreesWithSeriesAtTheSameOrder) {
  struct Case {
    double q, sigma;
    std::int64_t alpha;
  };
  for (const Case& c :
       {Case{0.1, 1.0, 2}, Case{0.1, 1.0, 7}, Case{0.01, 2.5, 50}, Case{0.5, 0.7, 10}, Case{0.04, 1.5, 20}}) {
    const double summed = sampled_gaussian_log_a_integer(c.sigma, c.q, c.alpha);
    const double series = sampled_gaussian_log_a_series(c.sigma, c.q, static_cast<double>(c.alpha));
    EXPECT_LT(relative_error(series, summed), 1e-9) << "q " << c.q << " sigma " << c.sigma << " alpha " << c.alpha;
  }
}

TEST(SubsampledGaussianRdp, FullBatchIsTheGaussianMechanismExactly) {
  const std::vector<double> orders = rdp_orders(OrderGrid::kTfPrivacy);
  const std::vector<double> rdp = subsampled_gaussian_rdp(0.8, 1.0, orders);
  for (std::size_t k = 0; k < orders.size(); ++k) EXPECT_EQ(rdp[k], orders[k] / (2 * 0.8 * 0.8));
  // The sums approach the closed form as q -> 1.
  const std::vector<double> near_full = subsampled_gaussian_rdp(0.8, 1 - 1e-9, {1.5, 3, 7.5});
  EXPECT_LT(relative_error(near_full[0], 1.5 / 1.28), 1e-6);
  EXPECT_LT(relative_error(near_full[1], 3 / 1.28), 1e-6);
  EXPECT_LT(relative_error(near_full[2], 7.5 / 1.28), 1e-6);
}

TEST(SubsampledGaussianRdp, NoSamplingIsFreeAndNoNoiseIsInfinite) {
  for (double value : subsampled_gaussian_rdp(0.0, 0.0, {1.5, 2, 64})) EXPECT_EQ(value, 0.0);
  for (double value : subsampled_gaussian_rdp(0.0, 0.01, {1.5, 2, 64})) EXPECT_TRUE(std::isinf(value));
  RdpAccountant accountant;
  accountant.compose(0.0, 0.01, 10);
  const PrivacySpent spent = accountant.get_privacy_spent(1e-5);
  EXPECT_TRUE(std::isinf(spent.eps));
  EXPECT_TRUE(std::isnan(spent.optimal_order));
  EXPECT_EQ(spent.status, OptimalOrderStatus::kNoFiniteBound);
  EXPECT_FALSE(spent.warning.empty());
}

TEST(SubsampledGaussianRdp, IncreasesWithSamplingRateAndDecreasesWithNoise) {
  const std::vector<double> orders = rdp_orders(OrderGrid::kOpacus);
  const std::vector<double> low_q = subsampled_gaussian_rdp(1.0, 0.01, orders);
  const std::vector<double> high_q = subsampled_gaussian_rdp(1.0, 0.05, orders);
  const std::vector<double> more_noise = subsampled_gaussian_rdp(1.2, 0.01, orders);
  for (std::size_t k = 0; k < orders.size(); ++k) {
    EXPECT_GT(high_q[k], low_q[k]) << "order " << orders[k];
    EXPECT_LT(more_noise[k], low_q[k]) << "order " << orders[k];
  }
}

TEST(LogErfc, MatchesErfcWhereErfcIsRepresentable) {
  for (double x = -5; x <= 25; x += 0.37) {
    EXPECT_LT(relative_error(log_erfc(x), std::log(std::erfc(x))), 1e-14) << "x " << x;
  }
  EXPECT_EQ(log_erfc(0.0), 0.0);
}

TEST(LogErfc, StaysAccurateWhereErfcUnderflows) {
  // 30-digit mpmath values of log(erfc(x)).
  EXPECT_EQ(std::erfc(30.0), 0.0);
  EXPECT_LT(relative_error(log_erfc(30), -903.97411711064387808), 1e-15);
  EXPECT_LT(relative_error(log_erfc(100), -10005.177585122664333), 1e-15);
  EXPECT_LT(relative_error(log_erfc(1e5), -10000000012.085290408), 1e-15);
}

TEST(RdpAccountant, MatchesOpacusPublishedEpsilon) {
  // Opacus default orders; sigma 1.5, q 0.04, 2250 steps, delta 1e-5 -> eps 7.32911 at order 3.9.
  RdpAccountant accountant(rdp_orders(OrderGrid::kOpacus));
  accountant.compose(1.5, 0.04, 2250);
  const PrivacySpent spent = accountant.get_privacy_spent(1e-5);
  EXPECT_LT(relative_error(spent.eps, 7.32911), 1e-6);
  EXPECT_EQ(spent.optimal_order, 3.9);
  EXPECT_EQ(spent.status, OptimalOrderStatus::kInterior);
  EXPECT_TRUE(spent.warning.empty());
}

TEST(RdpAccountant, MatchesTfPrivacyPublishedEpsilonOnEveryGrid) {
  // TF Privacy's compute_dp_sgd_privacy_test: N 60000, B 150, sigma 1.3, 15 epochs (6000 steps),
  // delta 1e-5 -> eps 0.7242234026109595 at order 19. Order 19 is on every grid below, so the
  // value does not depend on the grid.
  const std::vector<double> tf_script_grid = {1.25, 1.5, 1.75, 2., 2.25, 2.5, 3., 3.5, 4., 4.5};
  std::vector<double> compute_dp_sgd_privacy_grid = tf_script_grid;
  for (int order = 5; order < 64; ++order) compute_dp_sgd_privacy_grid.push_back(order);
  compute_dp_sgd_privacy_grid.insert(compute_dp_sgd_privacy_grid.end(), {128, 256, 512});
  for (const std::vector<double>& orders :
       {rdp_orders(OrderGrid::kOpacus), rdp_orders(OrderGrid::kTfPrivacy), compute_dp_sgd_privacy_grid}) {
    RdpAccountant accountant(orders);
    accountant.compose(1.3, 150.0 / 60000, 15 * 60000 / 150);
    const PrivacySpent spent = accountant.get_privacy_spent(1e-5);
    EXPECT_LT(relative_error(spent.eps, 0.7242234026109595), 1e-9);
    EXPECT_EQ(spent.optimal_order, 19);
  }
}

TEST(RdpAccountant, PublishedEpsilonsNeedTheImprovedConversion) {
  // The classic conversion eps = r - log(delta) / (alpha - 1) on the same curves gives 8.07385 and
  // 0.94187, so the published values pin down the improved conversion.
  auto classic_eps = [](const RdpAccountant& accountant, double delta) {
    double eps = std::numeric_limits<double>::infinity();
    for (std::size_t k = 0; k < accountant.orders().size(); ++k) {
      eps = std::min(eps, accountant.rdp()[k] - std::log(delta) / (accountant.orders()[k] - 1));
    }
    return eps;
  };
  RdpAccountant opacus_case;
  opacus_case.compose(1.5, 0.04, 2250);
  EXPECT_NEAR(classic_eps(opacus_case, 1e-5), 8.07385, 1e-5);
  RdpAccountant tf_case;
  tf_case.compose(1.3, 0.0025, 6000);
  EXPECT_NEAR(classic_eps(tf_case, 1e-5), 0.94187, 1e-5);
}

TEST(RdpAccountant, EpsilonGrowsWithStepsAndSamplingRateAndFallsWithNoise) {
  double previous = 0.0;
  for (std::int64_t steps : {10, 100, 1000, 10000}) {
    const double eps = eps_of(0.01, 1.0, steps);
    EXPECT_GT(eps, previous) << "steps " << steps;
    previous = eps;
  }
  previous = 0.0;
  for (double q : {0.001, 0.01, 0.1, 0.5, 1.0}) {
    const double eps = eps_of(q, 1.0, 100);
    EXPECT_GT(eps, previous) << "q " << q;
    previous = eps;
  }
  previous = std::numeric_limits<double>::infinity();
  for (double sigma : {0.5, 1.0, 2.0, 4.0, 8.0}) {
    const double eps = eps_of(0.01, sigma, 1000);
    EXPECT_LT(eps, previous) << "sigma " << sigma;
    previous = eps;
  }
}

TEST(RdpAccountant, ComposesBySummingCurves) {
  RdpAccountant split;
  split.compose(1.1, 0.02, 300);
  split.compose(1.1, 0.02, 700);
  RdpAccountant whole;
  whole.compose(1.1, 0.02, 1000);
  RdpAccountant mixed;
  mixed.compose(1.1, 0.02, 1000);
  mixed.compose(3.0, 0.1, 50);
  const std::vector<double> second = subsampled_gaussian_rdp(3.0, 0.1, mixed.orders());
  for (std::size_t k = 0; k < whole.orders().size(); ++k) {
    EXPECT_LT(relative_error(split.rdp()[k], whole.rdp()[k]), 1e-14);
    EXPECT_LT(relative_error(mixed.rdp()[k], whole.rdp()[k] + 50 * second[k]), 1e-14);
  }
  EXPECT_GT(mixed.get_privacy_spent(1e-5).eps, whole.get_privacy_spent(1e-5).eps);
  RdpAccountant nothing;
  nothing.compose(0.0, 0.5, 0);  // zero steps of an infinite mechanism cost nothing
  for (double value : nothing.rdp()) EXPECT_EQ(value, 0.0);
}

TEST(RdpAccountant, WarnsWhenTheOptimalOrderIsAtTheEdgeOfTheGrid) {
  RdpAccountant little_leakage;
  little_leakage.compose(5.0, 0.001, 10);
  const PrivacySpent largest = little_leakage.get_privacy_spent(1e-5);
  EXPECT_EQ(largest.optimal_order, 63);
  EXPECT_EQ(largest.status, OptimalOrderStatus::kLargest);
  EXPECT_TRUE(largest.optimal_order_at_edge());
  EXPECT_NE(largest.warning.find("largest"), std::string::npos);

  RdpAccountant much_leakage;
  much_leakage.compose(0.1, 1.0, 100);
  const PrivacySpent smallest = much_leakage.get_privacy_spent(1e-5);
  EXPECT_EQ(smallest.optimal_order, 1.1);
  EXPECT_EQ(smallest.status, OptimalOrderStatus::kSmallest);
  EXPECT_NE(smallest.warning.find("smallest"), std::string::npos);
}

TEST(PrivacySpentFromRdp, MatchesTfPrivacyHandComputedValue) {
  // TF Privacy's test: constant RDP 1.1 over orders 2..32 (pure DP), delta 1e-5: the largest
  // order wins and eps = 1.1 + log(31/32) - (log(1e-5) + log(32)) / 31 = 1.32783806176.
  std::vector<double> orders;
  for (int order = 2; order <= 32; ++order) orders.push_back(order);
  const PrivacySpent spent = privacy_spent_from_rdp(orders, std::vector<double>(orders.size(), 1.1), 1e-5);
  EXPECT_NEAR(spent.eps, 1.32783806176, 1e-10);
  EXPECT_EQ(spent.optimal_order, 32);
  EXPECT_EQ(spent.status, OptimalOrderStatus::kLargest);
}

TEST(PrivacySpentFromRdp, ClampsEpsilonAtZero) {
  const std::vector<double> orders = rdp_orders(OrderGrid::kOpacus);
  // With zero RDP and a large delta the bound dips below zero.
  const PrivacySpent spent = privacy_spent_from_rdp(orders, std::vector<double>(orders.size(), 0.0), 0.9);
  EXPECT_EQ(spent.eps, 0.0);
}

TEST(NoiseMultiplierForEpsilon, ReturnsNoiseJustMeetingTheTarget) {
  struct Case {
    double target, q;
    std::int64_t steps;
  };
  // The last case has eps(sigma = 1) below the target, so the bracket is found by halving.
  for (const Case& c : {Case{1.0, 0.01, 1000}, Case{7.32911, 0.04, 2250}, Case{5.0, 0.001, 10}}) {
    const NoiseMultiplierSearch found = noise_multiplier_for_epsilon(make_rdp, c.target, 1e-5, c.q, c.steps);
    const double eps = eps_of(c.q, found.noise_multiplier, c.steps);
    EXPECT_LE(eps, c.target);
    EXPECT_LT(relative_error(eps, c.target), 1e-3) << "target " << c.target;
    EXPECT_GT(found.evaluations, 2);
  }
  EXPECT_LT(relative_error(noise_multiplier_for_epsilon(make_rdp, 7.32911, 1e-5, 0.04, 2250).noise_multiplier, 1.5),
            1e-3);
}

TEST(NoiseMultiplierForEpsilon, RejectsUnreachableTargets) {
  // With delta 1e-5 no noise brings eps below about 0.1 on orders up to 63.
  expect_invalid_argument_naming([&] { noise_multiplier_for_epsilon(make_rdp, 0.05, 1e-5, 0.01, 1); },
                                 "is unreachable");
  // Reachable in principle (sigma = 1.51), but not below the given ceiling.
  expect_invalid_argument_naming([&] { noise_multiplier_for_epsilon(make_rdp, 1.0, 1e-5, 0.01, 1000, 1.2); },
                                 "max_noise_multiplier");
}

TEST(Accounting, RejectsInvalidInputsNamingTheParameter) {
  const std::vector<double> orders = {2.0};
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, -0.1, orders); }, "sample_rate");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, 1.5, orders); }, "sample_rate");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, std::nan(""), orders); }, "sample_rate");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(-1.0, 0.1, orders); }, "noise_multiplier");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, 0.1, {}); }, "orders");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, 0.1, {2.0, 1.0}); }, "orders[1]");
  expect_invalid_argument_naming([&] { subsampled_gaussian_rdp(1.0, 0.1, {0.5}); }, "orders[0]");
  expect_invalid_argument_naming([&] { RdpAccountant{std::vector<double>{}}; }, "orders");
  RdpAccountant accountant;
  expect_invalid_argument_naming([&] { accountant.compose(1.0, 0.1, -1); }, "steps");
  expect_invalid_argument_naming([&] { accountant.get_privacy_spent(0.0); }, "delta");
  expect_invalid_argument_naming([&] { accountant.get_privacy_spent(1.0); }, "delta");
  expect_invalid_argument_naming([&] { privacy_spent_from_rdp({2.0, 3.0}, {0.1}, 1e-5); }, "rdp");
  expect_invalid_argument_naming([&] { privacy_spent_from_rdp({2.0}, {-0.1}, 1e-5); }, "rdp[0]");
  // target_eps, delta, sample_rate, steps, max_noise_multiplier, eps_tolerance: each spoilt once.
  const auto invalid_search = [](double target_eps, double delta, double sample_rate, std::int64_t steps,
                                 double max_noise_multiplier, double eps_tolerance, const std::string& name) {
    expect_invalid_argument_naming(
        [&] {
          noise_multiplier_for_epsilon(make_rdp, target_eps, delta, sample_rate, steps, max_noise_multiplier,
                                       eps_tolerance);
        },
        name);
  };
  invalid_search(0, 1e-5, 0.01, 10, 1e4, 1e-4, "target_eps");
  invalid_search(1, 2, 0.01, 10, 1e4, 1e-4, "delta");
  invalid_search(1, 1e-5, 0, 10, 1e4, 1e-4, "sample_rate");
  invalid_search(1, 1e-5, 0.01, 0, 1e4, 1e-4, "steps");
  invalid_search(1, 1e-5, 0.01, 10, -1, 1e-4, "max_noise_multiplier");
  invalid_search(1, 1e-5, 0.01, 10, 1e4, 0, "eps_tolerance");
}

TEST(OrderGrids, FollowOpacusAndTfPrivacyDefinitions) {
  const std::vector<double> opacus = rdp_orders(OrderGrid::kOpacus);
  ASSERT_EQ(opacus.size(), 151u);
  EXPECT_EQ(opacus.front(), 1.1);
  EXPECT_EQ(opacus[98], 10.9);
  EXPECT_EQ(opacus[99], 12);  // Opacus skips 11
  EXPECT_EQ(opacus.back(), 63);
  const std::vector<double> tf = rdp_orders(OrderGrid::kTfPrivacy);
  ASSERT_EQ(tf.size(), 155u);
  EXPECT_EQ(tf[99], 11);
  EXPECT_EQ(tf[151], 63);
  EXPECT_EQ(tf.back(), 512);
  for (OrderGrid grid : {OrderGrid::kOpacus, OrderGrid::kTfPrivacy}) {
    EXPECT_EQ(parse_enum<OrderGrid>(to_string(grid)), grid);
  }
  EXPECT_EQ(parse_enum<OrderGrid>("tf"), OrderGrid::kTfPrivacy);
  EXPECT_THROW(parse_enum<OrderGrid>("dp-accounting"), std::invalid_argument);
  for (OptimalOrderStatus status : {OptimalOrderStatus::kInterior, OptimalOrderStatus::kSmallest,
                                    OptimalOrderStatus::kLargest, OptimalOrderStatus::kNoFiniteBound}) {
    EXPECT_EQ(parse_enum<OptimalOrderStatus>(to_string(status)), status);
  }
  EXPECT_THROW(parse_enum<OptimalOrderStatus>("edge"), std::invalid_argument);
}

}  // namespace
}  // namespace filkit
