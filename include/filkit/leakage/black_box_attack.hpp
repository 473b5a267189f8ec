// The black-box attribute-inference adversary of Fredrikson et al. (2014) (docs/mathematics.md,
// section 5): it sees only the released model's predictions and guesses
//   argmax_v p(v) pi(prediction(w', x_i with v), y_i)
// least squares: pi = N(w'.x; y_i, s^2), s^2 = sum_j (w'.x_j - y_j)^2 / (n - p), the residual
// variance of w' on the training set (targets as the model codes them);
// logistic: pi = P(y_i | prediction) from w''s confusion matrix on the training set, counts plus
// one (so an unseen cell is unlikely, not impossible). p(v) is the level's share of the training set.
#pragma once

#include "filkit/leakage/attribute_candidates.hpp"
#include "filkit/models/glm.hpp"

#include <vector>

namespace filkit {

/// What the adversary takes from the training set about a release besides its predictions: the
/// residual sum of squares (least squares) and the (target, prediction) counts (logistic), and the
/// number of examples. Sums, so that the ranks of an MPI job add theirs.
struct ReleaseStatistics {
  double squared_residuals = 0.0;
  Eigen::Matrix2d counts = Eigen::Matrix2d::Zero();  ///< (target, predicted class), not yet smoothed
  Index n = 0;
};

/// The statistics of `released` on the rows of `train` (one rank's: add them over the ranks).
ReleaseStatistics release_statistics(const Model& released, const Dataset& train);

/// Black-box guesses of every attacked example's level (rows of `train`) from a released model,
/// given the statistics of the whole training set. `released` must be least squares or logistic.
std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples, const ReleaseStatistics& whole_training_set);

/// The same on one process: the statistics of `train`.
std::vector<Index> black_box_guesses(const Model& released, const Dataset& train, const AttributeCandidates& candidates,
                                     const std::vector<Index>& examples);

}  // namespace filkit
