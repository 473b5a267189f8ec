// Private to the library: the design matrix view [1, X], the per-example losses of the GLMs and
// the objective F(w) = sum_i omega_i l_i + (n*lambda/2)||w||^2 with its gradient and Hessian.
#pragma once

#include "filkit/models/glm.hpp"

namespace filkit::detail {

/// X with an optional leading constant column, without copying X.
class Design {
 public:
  Design(const RowMatrix& X, bool intercept) : X_(X), intercept_(intercept) {}
  Index rows() const { return X_.rows(); }
  Index cols() const { return X_.cols() + (intercept_ ? 1 : 0); }
  bool intercept() const { return intercept_; }
  const RowMatrix& features() const { return X_; }
  /// X~ W for W with cols() rows.
  MatrixXd times(const MatrixXd& W) const;
  /// X~^T v.
  VectorXd transpose_times(const VectorXd& v) const;
  /// X~^T M for an n x K matrix M (p x K).
  MatrixXd transpose_times(const MatrixXd& M) const;
  /// X~^T diag(a) X~, accumulated in row blocks so no n x d temporary is made.
  MatrixXd weighted_gram(const VectorXd& a) const;
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
class GlmObjective {
 public:
  GlmObjective(const Model& model, const Dataset& data, VectorXd omega);
  double value(const VectorXd& w) const;
  VectorXd gradient(const VectorXd& w) const;
  MatrixXd hessian(const VectorXd& w) const;
  PerExampleLoss per_example(const VectorXd& w) const;

 private:
  MatrixXd scores(const VectorXd& w) const;  // n x K
  MatrixXd unflatten(const VectorXd& w) const;
  Model shape_;
  Design design_;
  VectorXd omega_;
  VectorXd target_;  // binary models: -1/+1, 0/1 or real; softmax: class index
  double penalty_;   // n * lambda
};

}  // namespace filkit::detail
