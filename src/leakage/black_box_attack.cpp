#include "filkit/leakage/black_box_attack.hpp"

#include "leakage/binary_model.hpp"
#include "models/glm_loss.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace filkit {


std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples) {
  detail::require_binary_model(released, "black-box attack");
  FitOptions coding;
  coding.kind = released.kind;
  coding.regression = released.regression;
  const VectorXd target = model_targets(train, coding);
  const detail::Design design(train.X, released.intercept);
  const VectorXd scores = design.times(released.weights).col(0);
  const Index offset = released.intercept ? 1 : 0, K = candidates.num_levels();
  VectorXd block_weights(static_cast<Index>(candidates.columns.size()));
  for (std::size_t c = 0; c < candidates.columns.size(); ++c)
    block_weights(static_cast<Index>(c)) = released.weights(candidates.columns[c] + offset, 0);
  const VectorXd level_scores = candidates.patterns * block_weights;  // K: the block's part of the score
  const VectorXd log_prior = candidates.prior.array().log();

  const bool gaussian = released.kind == ModelKind::kLeastSquares;
  const double dof = static_cast<double>(std::max<Index>(train.n() - released.num_params(), 1));
  const double variance = std::max((scores - target).squaredNorm() / dof, std::numeric_limits<double>::min());
  Eigen::Matrix2d log_pi;  // log P(y | prediction), add-one smoothed
  if (!gaussian) {
    Eigen::Matrix2d counts = Eigen::Matrix2d::Ones();
    for (Index j = 0; j < train.n(); ++j) counts(static_cast<Index>(target(j)), scores(j) >= 0.0 ? 1 : 0) += 1.0;
    log_pi = (counts.array().rowwise() / counts.colwise().sum().array()).log();
  }
  std::vector<Index> guesses(examples.size());
  for (std::size_t e = 0; e < examples.size(); ++e) {
    const Index i = examples[e];
    const double base = scores(i) - level_scores(candidates.truth[static_cast<std::size_t>(i)]);
    double best = -std::numeric_limits<double>::infinity();
    guesses[e] = candidates.mode;
    for (Index k = 0; k < K; ++k) {
      const double a = base + level_scores(k);
      const double fit = gaussian ? -(a - target(i)) * (a - target(i)) / (2.0 * variance)
                                  : log_pi(static_cast<Index>(target(i)), a >= 0.0 ? 1 : 0);
      if (log_prior(k) + fit > best) {
        best = log_prior(k) + fit;
        guesses[e] = k;
      }
    }
  }
  return guesses;
}

}  // namespace filkit
