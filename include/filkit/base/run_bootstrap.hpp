// Confidence intervals over independent runs for the largest and the median over examples of a
// per-example mean over runs: the dataset-level dFIL bounds of private SGD with several runs
// (docs/mathematics.md, section 7.6; Guo et al. 2022 average the accountant over 10 runs).
//
// Given values V (R runs x n examples; for DP-SGD the accounted Tr I_i of run r), the estimate is
//   S(V) = S_i f(m_i),   m_i = (1/R) sum_r V_ri,   S = max or median over the n examples,
// f monotone non-decreasing (dFIL: f(t) = sqrt(t / d_z)); the median of an even count is the mean
// of the two middle values of f(m), as summary.hpp's `median`. A bootstrap resample draws R runs
// with replacement: c_br counts how often run r is drawn in resample b (sum_r c_br = R), and its
// replicate is S computed from m*_i = (1/R) sum_r c_br V_ri. The percentile interval at level L is
// [Q((1 - L)/2), Q((1 + L)/2)] of the B replicates (Q: summary.hpp's `quantile`, linear
// interpolation between order statistics). Efron and Tibshirani, "An Introduction to the
// Bootstrap" (1993), sections 6 and 13.
//
// What the interval says and does not. It is the run-to-run (Monte-Carlo) uncertainty of the
// averaged accountant: with R -> infinity it shrinks to the value of the expected accountant.
// Percentile intervals of a mean from few runs are narrow: their width uses the plug-in spread
// (factor sqrt((R - 1)/R)) and normal rather than t quantiles, so a 95% interval covers about 90%
// at R = 10, 93% at R = 20 and 94% at R = 30 for a statistic that behaves like one example's mean
// (a well separated maximum; run_bootstrap_test.cpp measures R = 30). The median over many examples whose run
// noise exceeds their spread is covered more often than the level says (conservative). The maximum
// over many examples of noisy means is biased upwards (a conservative dFIL bound), and a resample,
// which repeats some runs, has noisier means and so a larger maximum still: the replicates then sit
// above the estimate, and the percentile interval can lie above it (with 5 runs of 240 examples the
// estimate was the interval's lower end). It errs towards larger dFIL, smaller MSE bounds; no
// bootstrap removes the bias. The median of right-skewed means moves down instead. Both effects
// shrink as each run's per-example values get less noisy (docs/mathematics.md, section 7.6, gives
// simulated coverages for DP-SGD). With one run nothing varies between runs: no interval is given (not a
// zero-width one).
//
// Cost: B R n multiply-adds for the replicates' means and O(B n) for their medians, in blocks of
// resamples run in parallel; the results do not depend on the thread count.
#pragma once

#include "filkit/base/types.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace filkit {

/// A two-sided confidence interval, lower <= upper.
struct ConfidenceInterval {
  double lower = 0.0;
  double upper = 0.0;
};

/// The largest and the median over examples of one per-example quantity.
struct MaxAndMedian {
  double max = 0.0;
  double median = 0.0;  ///< mean of the two middle values for an even count
};

/// max_i f(means_i) and median_i f(means_i), f monotone non-decreasing (only the order statistics
/// of `means` are transformed). Throws std::invalid_argument for an empty vector.
MaxAndMedian max_and_median(const Eigen::Ref<const VectorXd>& means, const std::function<double(double)>& f);

/// The mean over runs of each column of `values` (R x n), summed in run order: the accountant's
/// average, bitwise the same as adding the runs one after another and dividing by R.
VectorXd mean_over_runs(const MatrixXd& values);

/// B bootstrap resamples of R runs: row b holds c_b (how often each run is drawn; each row sums to
/// R). Resample b draws its R runs uniformly with replacement from std::mt19937_64 seeded with a
/// value derived from (seed, b), so any resample can be drawn alone and the set does not depend on
/// how it is split between threads. R >= 1, B >= 1.
MatrixXd draw_run_resamples(Index runs, Index resamples, std::uint64_t seed);

/// The estimate, each run's own statistics and the bootstrap intervals of max and median.
struct RunBootstrap {
  MaxAndMedian estimate;              ///< of the mean over all R runs
  std::vector<MaxAndMedian> per_run;  ///< of each run alone: f(V_r.) (the spread between runs)
  /// Percentile intervals at `level`; empty with one run.
  std::optional<ConfidenceInterval> max_interval, median_interval;
  std::vector<double> max_replicates, median_replicates;  ///< one per resample; empty with one run
  double level = 0.95;
  Index resamples = 0;     ///< B (0 with one run)
  std::uint64_t seed = 0;  ///< of draw_run_resamples (0 when the resamples were given)
};

/// The bootstrap of max and median with B = `resamples` resamples drawn by draw_run_resamples(R,
/// B, seed). `values` is R x n (R >= 1, n >= 1); level in (0, 1); B >= 1. Throws
/// std::invalid_argument for anything else.
RunBootstrap bootstrap_over_runs(const MatrixXd& values, const std::function<double(double)>& f, double level,
                                 Index resamples, std::uint64_t seed);

/// The same with given resamples (B x R counts, each row non-negative integers summing to R), for
/// checking by hand; with one run the counts are not used.
RunBootstrap bootstrap_over_runs(const MatrixXd& values, const std::function<double(double)>& f, double level,
                                 const MatrixXd& resample_counts);

}  // namespace filkit
