// The bootstrap over runs (include/filkit/base/run_bootstrap.hpp): closed-form cases, a bootstrap
// computed by hand from a fixed resample set, the distribution of the resamples, and the coverage of
// its intervals by Monte Carlo for runs drawn from a known distribution.
#include "filkit/base/run_bootstrap.hpp"

#include "filkit/base/summary.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

namespace filkit {
namespace {

double identity(double t) { return t; }

TEST(RunBootstrap, IdenticalRunsGiveZeroWidthIntervalsAtTheEstimate) {
  MatrixXd values(4, 5);
  for (Index r = 0; r < 4; ++r) values.row(r) << 3.0, 1.0, 4.0, 1.0, 5.0;
  const RunBootstrap b = bootstrap_over_runs(values, identity, 0.95, 200, 7);
  EXPECT_EQ(b.estimate.max, 5.0);
  EXPECT_EQ(b.estimate.median, 3.0);
  ASSERT_TRUE(b.max_interval && b.median_interval);
  EXPECT_EQ(b.max_interval->lower, 5.0);
  EXPECT_EQ(b.max_interval->upper, 5.0);
  EXPECT_EQ(b.median_interval->lower, 3.0);
  EXPECT_EQ(b.median_interval->upper, 3.0);
  ASSERT_EQ(b.per_run.size(), 4u);
  for (const MaxAndMedian& run : b.per_run) EXPECT_EQ(run.max, 5.0);
  EXPECT_EQ(b.resamples, 200);
  EXPECT_EQ(b.seed, 7u);
}

TEST(RunBootstrap, OneRunHasNoIntervalNotAZeroWidthOne) {
  MatrixXd values(1, 3);
  values << 2.0, 8.0, 4.0;
  const RunBootstrap b = bootstrap_over_runs(values, identity, 0.95, 1000, 3);
  EXPECT_FALSE(b.max_interval.has_value());
  EXPECT_FALSE(b.median_interval.has_value());
  EXPECT_TRUE(b.max_replicates.empty());
  EXPECT_EQ(b.resamples, 0);
  ASSERT_EQ(b.per_run.size(), 1u);
  EXPECT_EQ(b.per_run[0].max, 8.0);
  EXPECT_EQ(b.estimate.median, 4.0);
}

// Two runs of four examples, f(t) = sqrt(t / 2) (dFIL of a trace with d_z = 2):
//   run 0: 1 4 2 8     run 1: 3 0 6 2
// resamples (counts of run 0, run 1) and their means, max f and median f (mean of the 2nd and 3rd
// smallest f):
//   (2, 0): 1 4 2 8 -> max f(8) = 2,          median (f(2) + f(4)) / 2 = (1 + sqrt 2) / 2
//   (0, 2): 3 0 6 2 -> max f(6) = sqrt 3,     median (f(2) + f(3)) / 2 = (1 + sqrt 1.5) / 2
//   (1, 1): 2 2 4 5 -> max f(5) = sqrt 2.5,   median (f(2) + f(4)) / 2 = (1 + sqrt 2) / 2
//   (1, 1) and (0, 2) again.
// Level 0.8: Q(0.1) and Q(0.9) of five replicates sit at positions 0.4 and 3.6 of the sorted ones.
TEST(RunBootstrap, MatchesABootstrapComputedByHandFromFixedResamples) {
  MatrixXd values(2, 4);
  values << 1, 4, 2, 8, 3, 0, 6, 2;
  MatrixXd counts(5, 2);
  counts << 2, 0, 0, 2, 1, 1, 1, 1, 0, 2;
  const auto f = [](double t) { return std::sqrt(t / 2.0); };
  const RunBootstrap b = bootstrap_over_runs(values, f, 0.8, counts);

  const double s2 = std::sqrt(2.0), s3 = std::sqrt(3.0), s25 = std::sqrt(2.5), s15 = std::sqrt(1.5);
  const std::vector<double> max_expected{2.0, s3, s25, s25, s3};
  const double a = (1 + s15) / 2, c = (1 + s2) / 2;  // a < c
  const std::vector<double> median_expected{c, a, c, c, a};
  ASSERT_EQ(b.max_replicates.size(), 5u);
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(b.max_replicates[k], max_expected[k], 1e-15) << k;
    EXPECT_NEAR(b.median_replicates[k], median_expected[k], 1e-15) << k;
  }
  // max sorted: s25 s25 s3 s3 2 -> [s25 + 0.4 (s25 - s25), s3 + 0.6 (2 - s3)]
  EXPECT_NEAR(b.max_interval->lower, s25, 1e-15);
  EXPECT_NEAR(b.max_interval->upper, s3 + 0.6 * (2.0 - s3), 1e-15);
  // median sorted: a a c c c -> [a + 0.4 (a - a), c + 0.6 (c - c)]
  EXPECT_NEAR(b.median_interval->lower, a, 1e-15);
  EXPECT_NEAR(b.median_interval->upper, c, 1e-15);
  // The estimate is of the mean over both runs (2 2 4 5); each run's own statistics beside it.
  EXPECT_NEAR(b.estimate.max, s25, 1e-15);
  EXPECT_NEAR(b.estimate.median, c, 1e-15);
  EXPECT_NEAR(b.per_run[0].max, 2.0, 1e-15);
  EXPECT_NEAR(b.per_run[1].median, a, 1e-15);
  // A median taken before the transform, f(median of the means) = f(3), would be caught.
  EXPECT_GT(std::abs(b.estimate.median - f(3.0)), 1e-2);
}

TEST(RunBootstrap, MaxAndMedianEqualTheSummaryOfTheTransformedValues) {
  std::mt19937_64 rng(5);
  std::exponential_distribution<double> draw(1.0);
  for (Index n : {1, 2, 7, 10}) {
    VectorXd means(n);
    for (Index i = 0; i < n; ++i) means(i) = draw(rng);
    const auto f = [](double t) { return std::sqrt(t / 784.0); };
    const Summary s = summarize((means / 784.0).cwiseSqrt());
    const MaxAndMedian m = max_and_median(means, f);
    EXPECT_EQ(m.max, s.max) << n;
    EXPECT_EQ(m.median, s.median) << n;
  }
}

TEST(RunBootstrap, MeanOverRunsAddsTheRunsInOrder) {
  MatrixXd values(3, 2);
  values << 0.1, 1e16, 0.2, 1.0, 0.3, -1e16;
  VectorXd sum = VectorXd::Zero(2);
  for (Index r = 0; r < 3; ++r) sum += values.row(r).transpose();
  const VectorXd mean = mean_over_runs(values);
  EXPECT_EQ(mean, VectorXd(sum / 3.0));
  EXPECT_EQ(mean(1), 0.0);  // (1e16 + 1) - 1e16 in run order: the 1 is lost to rounding
}

TEST(RunBootstrap, ResamplesDrawEachRunBinomiallyAndTheSeededBootstrapUsesThem) {
  const Index runs = 5, resamples = 20000;
  const MatrixXd counts = draw_run_resamples(runs, resamples, 11);
  for (Index b = 0; b < resamples; ++b) ASSERT_EQ(counts.row(b).sum(), runs);
  // c_r ~ Binomial(R, 1/R): mean 1, variance 1 - 1/R (0.8); standard errors ~0.007 and ~0.01.
  for (Index r = 0; r < runs; ++r) {
    const double mean = counts.col(r).mean();
    const double variance = (counts.col(r).array() - mean).square().sum() / (resamples - 1);
    EXPECT_NEAR(mean, 1.0, 0.03) << r;
    EXPECT_NEAR(variance, 0.8, 0.05) << r;
  }
  EXPECT_NE(draw_run_resamples(runs, 10, 12), counts.topRows(10));
  EXPECT_EQ(draw_run_resamples(runs, 10, 11), counts.topRows(10)) << "resample b does not depend on B";

  MatrixXd values(runs, 40);
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  for (Index r = 0; r < runs; ++r)
    for (Index i = 0; i < 40; ++i) values(r, i) = 0.1 * static_cast<double>(i) + normal(rng);
  const RunBootstrap seeded = bootstrap_over_runs(values, identity, 0.9, 300, 11);
  const RunBootstrap given = bootstrap_over_runs(values, identity, 0.9, draw_run_resamples(runs, 300, 11));
  EXPECT_EQ(seeded.max_replicates, given.max_replicates);
  EXPECT_EQ(seeded.median_replicates, given.median_replicates);
  EXPECT_EQ(seeded.max_interval->upper, given.max_interval->upper);
}

// Runs drawn from a known distribution: V_ri = mu_i + N(0, 1), R = 30 runs of 101 examples with
// mu_i = i for i < 100 and mu_100 = 102, so the true max is 102 and the true median 50. The 95%
// percentile interval should cover each in about 94% of trials (run_bootstrap.hpp: percentile
// intervals from few runs are a little narrow; for the max, carried by one example's mean,
// P(|t_29| < 1.96 sqrt(29/30)) = 0.936); a 50% interval about half as often, which shows that the
// check would catch an interval of the wrong width. (Seeded: 0.935 and 0.9325; 0.505 and 0.4875.)
TEST(RunBootstrap, NinetyFivePercentIntervalsCoverTheTrueValuesInRoughlyNinetyFivePercentOfTrials) {
  const Index runs = 30, n = 101;
  const int trials = 400;
  VectorXd mu(n);
  for (Index i = 0; i < n; ++i) mu(i) = static_cast<double>(i);
  mu(n - 1) = 102.0;
  const double true_max = 102.0, true_median = 50.0;
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> noise;
  int max_covered = 0, median_covered = 0, max_covered_at_half = 0, median_covered_at_half = 0;
  for (int t = 0; t < trials; ++t) {
    MatrixXd values(runs, n);
    for (Index r = 0; r < runs; ++r)
      for (Index i = 0; i < n; ++i) values(r, i) = mu(i) + noise(rng);
    const RunBootstrap b = bootstrap_over_runs(values, identity, 0.95, 1000, 100 + t);
    max_covered += b.max_interval->lower <= true_max && true_max <= b.max_interval->upper;
    median_covered += b.median_interval->lower <= true_median && true_median <= b.median_interval->upper;
    const auto covers_at_half = [](const std::vector<double>& replicates, double truth) {
      const VectorXd r = Eigen::Map<const VectorXd>(replicates.data(), static_cast<Index>(replicates.size()));
      return quantile(r, 0.25) <= truth && truth <= quantile(r, 0.75);
    };
    max_covered_at_half += covers_at_half(b.max_replicates, true_max);
    median_covered_at_half += covers_at_half(b.median_replicates, true_median);
  }
  const auto share = [&](int covered) { return static_cast<double>(covered) / trials; };
  EXPECT_GE(share(max_covered), 0.90);
  EXPECT_LE(share(max_covered), 0.98);
  EXPECT_GE(share(median_covered), 0.90);
  EXPECT_LE(share(median_covered), 0.98);
  EXPECT_GE(share(max_covered_at_half), 0.38);
  EXPECT_LE(share(max_covered_at_half), 0.62);
  EXPECT_GE(share(median_covered_at_half), 0.38);
  EXPECT_LE(share(median_covered_at_half), 0.62);
  std::printf("coverage of 95%% intervals: max %.4f, median %.4f; of 50%%: max %.4f, median %.4f\n", share(max_covered),
              share(median_covered), share(max_covered_at_half), share(median_covered_at_half));
}

TEST(RunBootstrap, InvalidInputsAreRefused) {
  MatrixXd values(2, 3);
  values << 1, 2, 3, 4, 5, 6;
  // Shapes and resample counts are the caller's (internal) bugs: std::logic_error; a value that is
  // not finite is a failed computation upstream: NumericalError.
  EXPECT_THROW(bootstrap_over_runs(MatrixXd(0, 3), identity, 0.95, 10, 0), std::logic_error);
  EXPECT_THROW(bootstrap_over_runs(values, identity, 1.0, 10, 0), std::invalid_argument);
  EXPECT_THROW(bootstrap_over_runs(values, identity, 0.0, 10, 0), std::invalid_argument);
  EXPECT_THROW(bootstrap_over_runs(values, identity, 0.95, 0, 0), std::invalid_argument);
  MatrixXd with_nan = values;
  with_nan(1, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(bootstrap_over_runs(with_nan, identity, 0.95, 10, 0), NumericalError);
  MatrixXd counts(1, 2);
  counts << 1, 0;  // draws one run, not two
  EXPECT_THROW(bootstrap_over_runs(values, identity, 0.95, counts), std::logic_error);
  counts << 0.5, 1.5;
  EXPECT_THROW(bootstrap_over_runs(values, identity, 0.95, counts), std::logic_error);
  EXPECT_THROW(bootstrap_over_runs(values, identity, 0.95, MatrixXd::Ones(1, 3)), std::logic_error);
  EXPECT_THROW(max_and_median(VectorXd(0), identity), std::logic_error);
}

}  // namespace
}  // namespace filkit
