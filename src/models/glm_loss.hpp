// Private to the library: the design matrix view [1, X], the per-example losses of the GLMs and
// the objective F(w) = sum_i omega_i l_i + (n*lambda/2)||w||^2 with its gradient and Hessian.
#pragma once

#include "filkit/models/glm.hpp"

namespace filkit::detail {

/// X with an optional leading constant column, without copying X. The passes over all rows run
/// in parallel in blocks of kRowBlock rows, sums over blocks formed in block order, so that
/// their results do not depend on the thread count (base/parallel_blocks.hpp); the `_rows`
/// forms compute one block's share.
class Design {
 public:
  /// Rows of a block: large enough for BLAS-3 speed, small enough that a few thousand examples
  /// make several blocks. Fixed: the sums over blocks must not depend on the thread count.
  static constexpr Index kRowBlock = 1024;

  Design(const RowMatrix& X, bool intercept) : X_(X), intercept_(intercept) {}
  Index rows() const { return X_.rows(); }
  Index cols() const { return X_.cols() + (intercept_ ? 1 : 0); }
  bool intercept() const { return intercept_; }
  const RowMatrix& features() const { return X_; }
  /// Whether a pass of about `work` multiply-adds over all rows is worth sharing between threads.
  static bool worth_sharing(Index work);
  /// X~ W for W with cols() rows.
  MatrixXd times(const MatrixXd& W) const;
  /// X~^T v.
  VectorXd transpose_times(const VectorXd& v) const;
  /// X~^T M for an n x K matrix M (p x K).
  MatrixXd transpose_times(const MatrixXd& M) const;
  /// X~^T diag(a) X~, accumulated in row blocks so no n x d temporary is made.
  MatrixXd weighted_gram(const VectorXd& a) const;
  /// Rows [start, start + count) of X~ W.
  MatrixXd times_rows(const MatrixXd& W, Index start, Index count) const;
  /// X~^T M over rows [start, start + M.rows()) of X~.
  MatrixXd transpose_times_rows(const Eigen::Ref<const MatrixXd>& M, Index start) const;
  /// X~^T diag(a) X~ over rows [start, start + a.size()) of X~, into `gram` (overwritten).
  void weighted_gram_rows(const Eigen::Ref<const VectorXd>& a, Index start, Eigen::Ref<MatrixXd> gram) const;
  /// Row i of X~.
  VectorXd row(Index i) const;

 private:
  const RowMatrix& X_;
  bool intercept_;
};

/// l, dl/da and d2l/da2 of a binary model at score a and target t (-1/+1 or real for least
/// squares, 0/1 for logistic).
struct ScalarLoss {
  double value, first, second;
};
ScalarLoss scalar_loss(ModelKind kind, double a, double t);

/// sigmoid (logistic: one probability) or softmax (K probabilities) of a score vector.
VectorXd class_probabilities(ModelKind kind, const VectorXd& scores);

/// The objective of a fit: shape, penalty and targets come from `model`, data and weights given.
/// Each of value, gradient, Hessian and per-example loss is one pass over the rows, a block of
/// Design::kRowBlock rows at a time (scores, losses and their sums), summed in block order.
class GlmObjective {
 public:
  /// On several ranks of `comm`, `data` is this rank's shard: value, gradient and Hessian are of
  /// all shards (each a collective call) and the penalty counts all examples.
  GlmObjective(const Model& model, const Dataset& data, VectorXd omega,
               const Communicator& comm = Communicator::local());
  double value(const VectorXd& w) const;
  VectorXd gradient(const VectorXd& w) const;
  MatrixXd hessian(const VectorXd& w) const;
  PerExampleLoss per_example(const VectorXd& w) const;

 private:
  MatrixXd unflatten(const VectorXd& w) const;
  /// A row of a column-major score matrix, without a copy.
  using ScoreRow = Eigen::Ref<const Eigen::RowVectorXd, 0, Eigen::InnerStride<>>;
  /// l(a_i, y_i) of example i at its scores a_i (1 x K).
  double example_loss(const ScoreRow& scores, Index i) const;
  /// Multiply-adds of one pass computing the scores and losses of every row (an exp as kLossWork).
  Index loss_pass_work() const;
  Model shape_;
  Design design_;
  VectorXd omega_;
  VectorXd target_;  // binary models: -1/+1, 0/1 or real; softmax: class index
  double penalty_;   // n * lambda
  const Communicator* comm_;
};

}  // namespace filkit::detail
