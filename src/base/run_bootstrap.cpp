#include "filkit/base/run_bootstrap.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/summary.hpp"

#include "base/parallel_blocks.hpp"
#include "base/seeding.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace filkit {

namespace {

// Resamples per parallel block: one GEMM of n x R by R x 16 and 16 medians of n values.
constexpr Index kResamplesPerBlock = 16;

void check_values(const MatrixXd& values) {
  // The runs and resamples come from the jobs, never from input: a bug otherwise.
  if (values.rows() < 1 || values.cols() < 1)
    throw std::logic_error("bootstrap over runs: the values are " + std::to_string(values.rows()) + " runs x " +
                           std::to_string(values.cols()) + " examples, expected at least one of each");
  if (!values.allFinite()) throw NumericalError("bootstrap over runs: a value is not finite");
}

void check_level(double level) {
  if (!(level > 0.0 && level < 1.0))
    throw OptionError::with_text(
        "level", "bootstrap over runs: level = " + std::to_string(level) + ", expected a number in (0, 1)");
}

/// How often resample b draws each of `runs` runs.
Eigen::RowVectorXd draw_resample(Index runs, std::uint64_t seed, Index b) {
  std::mt19937_64 generator(splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(b))));
  std::uniform_int_distribution<Index> run(0, runs - 1);
  Eigen::RowVectorXd counts = Eigen::RowVectorXd::Zero(runs);
  for (Index k = 0; k < runs; ++k) counts(run(generator)) += 1.0;
  return counts;
}

/// The estimate and per-run statistics; the replicates from `fill_counts(first, block)`, which
/// writes the counts of resamples first .. first + block.rows() - 1 into `block`.
template <class FillCounts>
RunBootstrap bootstrap(const MatrixXd& values, const std::function<double(double)>& f, double level, Index resamples,
                       const FillCounts& fill_counts) {
  const Index runs = values.rows(), n = values.cols();
  RunBootstrap result;
  result.level = level;
  result.estimate = max_and_median(mean_over_runs(values), f);
  for (Index r = 0; r < runs; ++r) result.per_run.push_back(max_and_median(values.row(r).transpose(), f));
  if (runs == 1) return result;

  result.resamples = resamples;
  result.max_replicates.resize(resamples);
  result.median_replicates.resize(resamples);
  const MatrixXd by_example = values.transpose();  // n x R: each replicate's means become a contiguous column
  detail::for_each_block(
      resamples, kResamplesPerBlock,
      [&](Index first, Index count) {
        MatrixXd counts(count, runs);
        fill_counts(first, counts);
        const MatrixXd means = by_example * counts.transpose() / static_cast<double>(runs);
        for (Index j = 0; j < count; ++j) {
          const MaxAndMedian replicate = max_and_median(means.col(j), f);
          result.max_replicates[first + j] = replicate.max;
          result.median_replicates[first + j] = replicate.median;
        }
      },
      n * runs * resamples > 100000);
  const auto interval = [level](const std::vector<double>& replicates) {
    const VectorXd r = Eigen::Map<const VectorXd>(replicates.data(), static_cast<Index>(replicates.size()));
    return ConfidenceInterval{quantile(r, (1.0 - level) / 2.0), quantile(r, (1.0 + level) / 2.0)};
  };
  result.max_interval = interval(result.max_replicates);
  result.median_interval = interval(result.median_replicates);
  return result;
}

}  // namespace

MaxAndMedian max_and_median(const Eigen::Ref<const VectorXd>& means, const std::function<double(double)>& f) {
  // The runs and resamples come from the jobs, never from input: a bug otherwise.
  if (means.size() == 0) throw std::logic_error("max_and_median of an empty set");
  std::vector<double> sorted(means.data(), means.data() + means.size());
  // The median as summary.hpp's quantile(., 0.5) of f(means): f keeps the order, so only the two
  // middle values need it.
  const double position = 0.5 * static_cast<double>(sorted.size() - 1);
  const std::size_t below = static_cast<std::size_t>(std::floor(position));
  std::nth_element(sorted.begin(), sorted.begin() + below, sorted.end());
  const double low = f(sorted[below]);
  const double high = below + 1 < sorted.size() ? f(*std::min_element(sorted.begin() + below + 1, sorted.end())) : low;
  return {f(means.maxCoeff()), low + (position - static_cast<double>(below)) * (high - low)};
}

VectorXd mean_over_runs(const MatrixXd& values) {
  VectorXd sum = VectorXd::Zero(values.cols());
  for (Index r = 0; r < values.rows(); ++r) sum += values.row(r).transpose();
  return sum / static_cast<double>(values.rows());
}

MatrixXd draw_run_resamples(Index runs, Index resamples, std::uint64_t seed) {
  // The runs and resamples come from the jobs, never from input: a bug otherwise.
  if (runs < 1 || resamples < 1)
    throw std::logic_error("draw_run_resamples: " + std::to_string(resamples) + " resamples of " +
                           std::to_string(runs) + " runs, expected at least one of each");
  MatrixXd counts(resamples, runs);
  for (Index b = 0; b < resamples; ++b) counts.row(b) = draw_resample(runs, seed, b);
  return counts;
}

RunBootstrap bootstrap_over_runs(const MatrixXd& values, const std::function<double(double)>& f, double level,
                                 Index resamples, std::uint64_t seed) {
  check_values(values);
  check_level(level);
  if (resamples < 1)
    throw OptionError::with_text("resamples",
                                 "bootstrap over runs: resamples = " + std::to_string(resamples) + ", expected >= 1");
  RunBootstrap result = bootstrap(values, f, level, resamples, [&](Index first, MatrixXd& counts) {
    for (Index j = 0; j < counts.rows(); ++j) counts.row(j) = draw_resample(values.rows(), seed, first + j);
  });
  result.seed = seed;
  return result;
}

RunBootstrap bootstrap_over_runs(const MatrixXd& values, const std::function<double(double)>& f, double level,
                                 const MatrixXd& resample_counts) {
  check_values(values);
  check_level(level);
  const Index runs = values.rows();
  // The runs and resamples come from the jobs, never from input: a bug otherwise.
  if (resample_counts.rows() < 1 || resample_counts.cols() != runs)
    throw std::logic_error("bootstrap over runs: the resample counts are " + std::to_string(resample_counts.rows()) +
                           " x " + std::to_string(resample_counts.cols()) + ", expected B >= 1 rows of " +
                           std::to_string(runs) + " runs");
  for (Index b = 0; b < resample_counts.rows(); ++b) {
    const auto row = resample_counts.row(b).array();
    if ((row < 0.0).any() || (row != row.floor()).any() || row.sum() != static_cast<double>(runs))
      throw std::logic_error("bootstrap over runs: resample " + std::to_string(b) +
                             " does not draw the runs: its counts must be non-negative integers summing to " +
                             std::to_string(runs));
  }
  return bootstrap(values, f, level, resample_counts.rows(),
                   [&](Index first, MatrixXd& counts) { counts = resample_counts.middleRows(first, counts.rows()); });
}

}  // namespace filkit
