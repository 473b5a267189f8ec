#include "filkit/leakage/biased_attacker.hpp"

#include "test_util.hpp"

#include <cmath>
#include <random>

namespace filkit {
namespace {

// The Gaussian mechanism w' = z + sigma eps (J_m = I) and the linear-shrinkage attacker
// z_hat = a w' + (1 - a) c, whose mean a z + (1 - a) c has bias (1 - a)(c - z) and Jacobian a I:
// MSE = a^2 sigma^2 + (1 - a)^2 ||c - z||^2 / d, which Theorem 2's biased form meets with
// equality (I = I / sigma^2, so tr(J_mu I^-1 J_mu^T) / d = a^2 sigma^2).
struct ShrinkageTrials {
  VectorXd error_sum;
  double squared_norms = 0, trials = 0, mse = 0;
  ControlVariateSums stein, stein_without_control;
};

ShrinkageTrials shrinkage_trials(const VectorXd& z, const VectorXd& c, double a, double sigma, Index trials,
                                 unsigned seed) {
  const Index d = z.size();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  ShrinkageTrials out;
  out.error_sum = VectorXd::Zero(d);
  for (Index t = 0; t < trials; ++t) {
    VectorXd eps(d);
    for (Index k = 0; k < d; ++k) eps(k) = normal(rng);
    const VectorXd z_hat = a * (z + sigma * eps) + (1 - a) * c;
    const VectorXd e = z_hat - z;
    out.error_sum += e;
    out.squared_norms += e.squaredNorm();
    out.mse += e.squaredNorm() / static_cast<double>(d);
    // s = eps^T J_m e / sigma; its control: the same term of the unbiased attacker z_hat = w',
    // ||eps||^2, of mean d (as the GLM attack's linearisation).
    const double s = eps.dot(e) / sigma, s_unbiased = eps.squaredNorm();
    out.stein.add(s - s_unbiased, s_unbiased - static_cast<double>(d));
    out.stein_without_control.add(s, 0.0);
  }
  out.trials = static_cast<double>(trials);
  out.mse /= out.trials;
  return out;
}

TEST(BiasedAttacker, EstimatesTheShrinkageAttackersBiasAndJacobianWithinTheirStandardErrors) {
  const VectorXd z = (VectorXd(5) << 0.1, 0.9, 0.5, 0.3, 0.7).finished();
  const VectorXd c = VectorXd::Constant(5, 0.5);
  const double a = 0.6, sigma = 0.4, d = 5;
  const ShrinkageTrials trials = shrinkage_trials(z, c, a, sigma, 40000, 11);

  const double true_bias = (1 - a) * (1 - a) * (c - z).squaredNorm();
  const McEstimate bias = squared_norm_of_mean(trials.error_sum, trials.squared_norms, trials.trials);
  EXPECT_NEAR(bias.value, true_bias, 4 * bias.standard_error);
  EXPECT_LT(bias.standard_error, 0.05 * true_bias);  // precise enough to matter

  const McEstimate trace = control_variate_mean(trials.stein, 0.0);  // E[s - s_unbiased]
  EXPECT_NEAR(trace.value + d, a * d, 4 * trace.standard_error);
  const McEstimate plain = control_variate_mean(trials.stein_without_control, 0.0);
  EXPECT_NEAR(plain.value, a * d, 4 * plain.standard_error);
  // The control takes out the a ||eps||^2 part: only (1 - a) eps.(c - z) / sigma is left.
  const double residual = (1 - a) * (c - z).norm() / sigma / std::sqrt(trials.trials);
  EXPECT_NEAR(trace.standard_error, residual, 0.05 * residual);
  EXPECT_LT(trace.standard_error, 0.4 * plain.standard_error);  // sqrt(0.4 / 4.0) here
}

TEST(BiasedAttacker, TheShrinkageAttackerBeatsTheUnbiasedBoundAndMeetsTheBiasedOne) {
  // Shrinking towards a guess near z: MSE below sigma^2, the unbiased Cramer-Rao bound.
  const VectorXd z = (VectorXd(4) << 0.4, 0.6, 0.5, 0.55).finished();
  const VectorXd c = VectorXd::Constant(4, 0.5);
  const double a = 0.5, sigma = 0.3, d = 4;
  const ShrinkageTrials trials = shrinkage_trials(z, c, a, sigma, 40000, 12);
  const double unbiased_bound = sigma * sigma;  // d / tr I with I = I / sigma^2
  const double exact_mse = a * a * sigma * sigma + (1 - a) * (1 - a) * (c - z).squaredNorm() / d;
  EXPECT_NEAR(trials.mse, exact_mse, 0.02 * exact_mse);
  EXPECT_LT(trials.mse, 0.5 * unbiased_bound);

  const McEstimate trace = control_variate_mean(trials.stein, 0.0);
  const McEstimate bias = squared_norm_of_mean(trials.error_sum, trials.squared_norms, trials.trials);
  const McEstimate bound = biased_mse_bound(unbiased_bound, {(trace.value + d) / d, trace.standard_error / d},
                                            {bias.value / d, bias.standard_error / d});
  // Equality for this attacker: the estimate meets the exact MSE within its errors.
  EXPECT_NEAR(bound.value, exact_mse, 4 * bound.standard_error + 0.02 * exact_mse);
  EXPECT_LT(bound.standard_error, 0.05 * exact_mse);
}

TEST(BiasedAttacker, SquaredBiasIsUnbiasedWhereTheSquaredMeanIsNot) {
  // An unbiased attacker (a = 1) over many short runs: the U-statistic averages to 0, the squared
  // mean error to tr Cov / T = d sigma^2 / T.
  const VectorXd z = VectorXd::Constant(3, 0.5);
  const double sigma = 0.5, runs = 4000, T = 8;
  double u_statistic = 0, squared_mean = 0, u_squares = 0;
  for (unsigned run = 0; run < runs; ++run) {
    const ShrinkageTrials trials = shrinkage_trials(z, z, 1.0, sigma, static_cast<Index>(T), 100 + run);
    const double u = squared_norm_of_mean(trials.error_sum, trials.squared_norms, trials.trials).value;
    u_statistic += u / runs;
    u_squares += u * u / runs;
    squared_mean += (trials.error_sum / T).squaredNorm() / runs;
  }
  const double standard_error = std::sqrt((u_squares - u_statistic * u_statistic) / runs);
  EXPECT_NEAR(u_statistic, 0.0, 4 * standard_error);
  EXPECT_NEAR(squared_mean, 3 * sigma * sigma / T, 0.05 * 3 * sigma * sigma / T);
}

TEST(BiasedAttacker, BoundsOfUnbiasedAndConstantAttackers) {
  // Unbiased: the bound itself. A constant guess (J_mu = 0): only its squared bias, even where the
  // unbiased bound is infinite (an example the release says nothing about).
  EXPECT_DOUBLE_EQ(biased_mse_bound(2.5, {1.0, 0.0}, {0.0, 0.0}).value, 2.5);
  EXPECT_DOUBLE_EQ(biased_mse_bound(INFINITY, {0.0, 0.0}, {0.3, 0.01}).value, 0.3);
  EXPECT_DOUBLE_EQ(biased_mse_bound(INFINITY, {0.0, 0.0}, {0.3, 0.01}).standard_error, 0.01);
  // A negative squared-bias estimate (noise) counts as 0; the errors add.
  const McEstimate bound = biased_mse_bound(4.0, {0.5, 0.1}, {-0.2, 0.05});
  EXPECT_DOUBLE_EQ(bound.value, 1.0);
  EXPECT_DOUBLE_EQ(bound.standard_error, 2 * 0.5 * 4.0 * 0.1 + 0.05);
  EXPECT_TRUE(std::isnan(control_variate_mean(ControlVariateSums{}, 0.0).value));
  EXPECT_TRUE(std::isnan(squared_norm_of_mean(VectorXd::Zero(2), 0.0, 1.0).value));
}

}  // namespace
}  // namespace filkit
