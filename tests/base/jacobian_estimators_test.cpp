#include "filkit/base/jacobian_estimators.hpp"

#include "filkit/dpsgd/clipped_gradient.hpp"

#include "test_util.hpp"

#include <Eigen/SVD>

#include <cmath>
#include <functional>
#include <random>

namespace filkit {
namespace {

/// The clipped-gradient Jacobian of a softmax example above the clip threshold, label private:
/// a realistic, non-trivial G (p K = 48 x d_z = 15).
struct SoftmaxJacobian {
  SoftmaxJacobian() : step(make_step()), x(make_x()), g(step, x, step.label_vector(1.0)) {}
  static ClippedGradientStep make_step() {
    std::mt19937_64 rng(3);
    std::normal_distribution<double> normal;
    MatrixXd W(12, 4);
    for (Index i = 0; i < W.size(); ++i) W(i) = 2.0 * normal(rng);
    return ClippedGradientStep(ModelKind::kSoftmax, W, true, 0.3, LabelPrivacy::kPrivate);
  }
  static VectorXd make_x() { return VectorXd::LinSpaced(11, 0.0, 0.6); }
  ClippedGradientStep step;
  VectorXd x;
  ClippedGlmGradient g;
};

using Estimator = std::function<TraceEstimate(const JacobianOperator&, int, std::mt19937_64&)>;

/// Mean and variance of `repeats` independent estimates with `probes` probes each.
std::pair<double, double> repeated_estimates(const Estimator& estimate, const JacobianOperator& G, int probes,
                                             int repeats, unsigned seed) {
  std::mt19937_64 rng(seed);
  double sum = 0.0, squares = 0.0;
  for (int r = 0; r < repeats; ++r) {
    const double value = estimate(G, probes, rng).value;
    sum += value;
    squares += value * value;
  }
  const double mean = sum / repeats;
  return {mean, (squares - repeats * mean * mean) / (repeats - 1)};
}

void expect_unbiased_with_variance_falling_as_one_over_probes(const Estimator& estimate) {
  const SoftmaxJacobian J;
  const double exact = J.g.jacobian_trace();
  const int repeats = 4000;
  const auto [mean4, variance4] = repeated_estimates(estimate, J.g, 4, repeats, 1);
  const auto [mean16, variance16] = repeated_estimates(estimate, J.g, 16, repeats, 2);
  EXPECT_NEAR(mean4, exact, 4.0 * std::sqrt(variance4 / repeats)) << "exact " << exact;
  EXPECT_NEAR(mean16, exact, 4.0 * std::sqrt(variance16 / repeats)) << "exact " << exact;
  // Variance ratio 4 for 4x the probes; the sample variance of 4000 draws is within ~10%.
  EXPECT_NEAR(variance4 / variance16, 4.0, 1.0);
  // A biased estimator is caught: scaling by d_z / (d_z - 1) moves the mean by ~7%, far beyond
  // four standard errors.
  const double scale = static_cast<double>(J.g.cols()) / (J.g.cols() - 1);
  EXPECT_GT(std::abs(scale * mean16 - exact), 4.0 * std::sqrt(variance16 / repeats));
}

TEST(TraceEstimators, RandomCoordinatesAreUnbiasedWithVarianceFallingAsOneOverProbes) {
  expect_unbiased_with_variance_falling_as_one_over_probes(estimate_trace_by_coordinates);
}

TEST(TraceEstimators, GaussianProbesAreUnbiasedWithVarianceFallingAsOneOverProbes) {
  expect_unbiased_with_variance_falling_as_one_over_probes(estimate_trace_by_gaussian_probes);
}

TEST(TraceEstimators, StandardErrorDescribesTheSpreadOfEstimates) {
  const SoftmaxJacobian J;
  std::mt19937_64 rng(9);
  const auto [mean, variance] = repeated_estimates(estimate_trace_by_gaussian_probes, J.g, 32, 2000, 4);
  double reported = 0.0;
  for (int r = 0; r < 200; ++r) reported += estimate_trace_by_gaussian_probes(J.g, 32, rng).standard_error / 200;
  EXPECT_NEAR(reported, std::sqrt(variance), 0.2 * std::sqrt(variance));
  (void)mean;
}

TEST(TraceEstimators, CoordinatesAreExactForEqualColumnNorms) {
  const DenseJacobianOperator G(3.0 * MatrixXd::Identity(5, 5));
  std::mt19937_64 rng(1);
  const TraceEstimate estimate = estimate_trace_by_coordinates(G, 3, rng);
  EXPECT_DOUBLE_EQ(estimate.value, 45.0);
  EXPECT_EQ(estimate.standard_error, 0.0);
  EXPECT_THROW(estimate_trace_by_coordinates(G, 0, rng), std::invalid_argument);
}

TEST(PowerIteration, MatchesTheDenseSpectralNorm) {
  const SoftmaxJacobian J;
  const MatrixXd G = J.g.dense_jacobian();
  const double exact = Eigen::JacobiSVD<MatrixXd>(G).singularValues()(0);
  std::mt19937_64 rng(5);
  const SpectralNormEstimate estimate = estimate_spectral_norm(J.g, 500, 1e-14, rng);
  EXPECT_TRUE(estimate.converged);
  EXPECT_NEAR(estimate.value, exact, 1e-9 * exact);
  EXPECT_NEAR(estimate.value * estimate.value, J.g.jacobian_spectral_norm_squared(), 1e-8 * exact * exact);
  // Too few iterations from a random start are a lower bound, not the norm.
  std::mt19937_64 rng_short(5);
  EXPECT_LE(estimate_spectral_norm(DenseJacobianOperator(G), 1, 0.0, rng_short).value, exact * (1 + 1e-12));
}

TEST(PowerIteration, ZeroOperatorGivesZero) {
  std::mt19937_64 rng(1);
  const SpectralNormEstimate estimate =
      estimate_spectral_norm(DenseJacobianOperator(MatrixXd::Zero(3, 4)), 10, 1e-9, rng);
  EXPECT_EQ(estimate.value, 0.0);
  EXPECT_TRUE(estimate.converged);
}

}  // namespace
}  // namespace filkit
