#include "filkit/leakage/black_box_attack.hpp"

#include "leakage/binary_model.hpp"
#include "models/glm_loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace filkit {

namespace {

struct ReleaseScores {
  VectorXd target, scores;
};

ReleaseScores release_scores(const Model& released, const Dataset& train) {
  detail::require_binary_model(released, "black-box attack");
  FitOptions coding;
  coding.kind = released.kind;
  coding.regression = released.regression;
  const detail::Design design(train.X, released.intercept);
  return {model_targets(train, coding), design.times(released.weights).col(0)};
}

ReleaseStatistics statistics_of(const Model& released, const ReleaseScores& s) {
  ReleaseStatistics statistics;
  statistics.n = s.scores.size();
  if (released.kind == ModelKind::kLeastSquares) {
    statistics.squared_residuals = (s.scores - s.target).squaredNorm();
  } else {
    for (Index j = 0; j < statistics.n; ++j)
      statistics.counts(static_cast<Index>(s.target(j)), s.scores(j) >= 0.0 ? 1 : 0) += 1.0;
  }
  return statistics;
}

std::vector<Index> guesses_of(const Model& released, const ReleaseScores& s, const AttributeCandidates& candidates,
                              const std::vector<Index>& examples, const ReleaseStatistics& whole) {
  const Index offset = released.intercept ? 1 : 0, K = candidates.num_levels();
  VectorXd block_weights(static_cast<Index>(candidates.columns.size()));
  for (std::size_t c = 0; c < candidates.columns.size(); ++c)
    block_weights(static_cast<Index>(c)) = released.weights(candidates.columns[c] + offset, 0);
  const VectorXd level_scores = candidates.patterns * block_weights;  // K: the block's part of the score
  const VectorXd log_prior = candidates.prior.array().log();

  const bool gaussian = released.kind == ModelKind::kLeastSquares;
  const double dof = static_cast<double>(std::max<Index>(whole.n - released.num_params(), 1));
  const double variance = std::max(whole.squared_residuals / dof, std::numeric_limits<double>::min());
  const Eigen::Matrix2d counts = whole.counts + Eigen::Matrix2d::Ones();  // add-one smoothed
  const Eigen::Matrix2d log_pi =
      (counts.array().rowwise() / counts.colwise().sum().array()).log();  // log P(y | prediction)
  std::vector<Index> guesses(examples.size());
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const Index i = examples[e];
    const double base = s.scores(i) - level_scores(candidates.truth[static_cast<std::size_t>(i)]);
    const double t = s.target(i);
    double best = -std::numeric_limits<double>::infinity();
    guesses[e] = candidates.mode;
    for (Index k = 0; k < K; ++k) {
      const double a = base + level_scores(k);
      const double fit =
          gaussian ? -(a - t) * (a - t) / (2.0 * variance) : log_pi(static_cast<Index>(t), a >= 0.0 ? 1 : 0);
      if (log_prior(k) + fit > best) {
        best = log_prior(k) + fit;
        guesses[e] = k;
      }
    }
  }
  return guesses;
}

}  // namespace

ReleaseStatistics release_statistics(const Model& released, const Dataset& train) {
  return statistics_of(released, release_scores(released, train));
}

std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples, const ReleaseStatistics& whole_training_set) {
  return guesses_of(released, release_scores(released, train), candidates, examples, whole_training_set);
}

std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples) {
  const ReleaseScores scores = release_scores(released, train);
  return guesses_of(released, scores, candidates, examples, statistics_of(released, scores));
}

}  // namespace filkit
