// The smoothly clipped per-example gradient of a GLM and its exact Jacobian G = d g~ / d z about
// the example's private coordinates z (docs/mathematics.md, sections 7.2 and 7.7; Guo et al.,
// ICML 2022, Section 6.2).
//
// Smooth clipping (privacy/soft_clip.hpp): g~ = f(||g||) g, f(u) = 1 / (GELU(u/C - 1) + 1).
//
// GLM gradients (weights W, p x K; x~ = [1, x] with an intercept, else x; K = 1 for logistic):
//   logistic: g = r x~,          r = sigmoid(w.x~) - y,           M = s(1 - s)       (1 x 1)
//   softmax:  g = vec(x~ r^T),   r = softmax(W^T x~) - y_onehot,  M = diag(S) - S S^T (K x K)
// with vec column-major (g[k p + j] = x~_j r_k, the order of Model::flat). The label y is treated
// as a continuous coordinate (logistic: y in [0, 1]; softmax: the K one-hot coordinates).
//
// Jacobian of the unclipped gradient, one column per private coordinate (features, then labels):
//   feature m: r (x) e~_m + V_m (x) x~,   V = M W_f^T (K x d, W_f = the feature rows of W),
//   label k:   -(e_k (x) x~)            (only when the label is private),
// i.e. G = r (x) E + U0 (x) x~ with E = d x~/dz (p x d_z), U0 = [V, -I_K] (K x d_z).
// Chain rule through the clip factor: dg~ = P dg with P = f I + beta g g^T, beta = f'(||g||)/||g||,
//   G~ = f r (x) E + U (x) x~,   U = f U0 + beta r h^T,   h = G^T g.
// Consequences used for exact O(K d) traces and small spectral problems:
//   ||G||_F^2  = d ||r||^2 + 2 r^T V x + tr(M W_f^T W_f M) ||x~||^2 (+ K ||x~||^2 if label private),
//   ||G~||_F^2 = f^2 ||G||_F^2 + (2 f beta + beta^2 ||g||^2) ||h||^2,
//   G~^T G~    = f^2 ||r||^2 Pi + f (e a^T + a e^T) + ||x~||^2 U^T U,   e = E^T x~ = [x; 0],
//                a = U^T r, Pi = E^T E (1 on features, 0 on labels),
// whose range outside span{e, U^T, label axes} is an eigenspace of value f^2 ||r||^2, so the
// spectral norm is the largest eigenvalue of a (1 + 2K)-dimensional problem.
#pragma once

#include "filkit/base/jacobian_estimators.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/models/label_privacy.hpp"
#include "filkit/privacy/soft_clip.hpp"

namespace filkit {

/// What every example of one DP-SGD step shares: the weights and the Gram matrix of their
/// feature rows. Logistic and softmax models only (std::invalid_argument otherwise).
class ClippedGradientStep {
 public:
  /// `weights` p x K (p = d + 1 with an intercept, its row 0), clip_norm C > 0.
  ClippedGradientStep(ModelKind kind, MatrixXd weights, bool intercept, double clip_norm, LabelPrivacy label);

  ModelKind kind() const { return kind_; }
  const MatrixXd& weights() const { return W_; }
  bool intercept() const { return intercept_; }
  double clip_norm() const { return clip_norm_; }
  LabelPrivacy label() const { return label_; }
  Index input_dim() const { return W_.rows() - (intercept_ ? 1 : 0); }
  Index num_classes() const { return W_.cols(); }  ///< K (1 for logistic)
  /// d_z = d (+ 1 for a private logistic label, + K for a private softmax label).
  Index private_dims() const;
  /// The feature rows W_f of the weights (d x K).
  auto feature_weights() const { return W_.bottomRows(input_dim()); }
  const MatrixXd& feature_gram() const { return feature_gram_; }  ///< W_f^T W_f (K x K)
  /// The label coordinates of class index y: {y} for logistic, the one-hot vector for softmax.
  VectorXd label_vector(double y) const;

 private:
  ModelKind kind_;
  MatrixXd W_;
  bool intercept_;
  double clip_norm_;
  LabelPrivacy label_;
  MatrixXd feature_gram_;
};

/// One example's clipped gradient g~ and its Jacobian G~ (p K x d_z) in closed form. Holds a
/// pointer to `step`, which must outlive it (both live for one step of training).
class ClippedGlmGradient : public JacobianOperator {
 public:
  /// `x`: the d features; `label`: step.label_vector(y) or any real values of that size. `step` is
  /// kept by reference: it must outlive this object (a temporary step does not compile).
  ClippedGlmGradient(const ClippedGradientStep& step, const Eigen::Ref<const VectorXd>& x, const VectorXd& label);
  ClippedGlmGradient(ClippedGradientStep&&, const Eigen::Ref<const VectorXd>&, const VectorXd&) = delete;

  /// g~ (p K), built on first use (training needs only f r: the batch sum is one product).
  const VectorXd& clipped_gradient() const;
  double gradient_norm() const { return gradient_norm_; }  ///< ||g||
  double clip_factor() const { return f_; }                ///< f(||g||)
  /// The residual r (K): g = vec(x~ r^T); g~ = vec(x~ (f r)^T).
  const VectorXd& residual() const { return r_; }

  /// Tr(G~^T G~) = ||G~||_F^2 by the closed form, O(K d + K^3).
  double jacobian_trace() const;
  /// ||G~||_2^2 = lambda_max(G~^T G~) exactly, O(d_z K^2).
  double jacobian_spectral_norm_squared() const;
  /// G~ as a dense p K x d_z matrix (tests; O(p K d_z)).
  MatrixXd dense_jacobian() const;

  Index rows() const override { return design_row_.size() * r_.size(); }
  Index cols() const override { return step_->private_dims(); }
  VectorXd apply(const VectorXd& v) const override;
  VectorXd apply_transpose(const VectorXd& u) const override;

 private:
  const MatrixXd& mixing() const;  // U (K x d_z), built on first use

  const ClippedGradientStep* step_;
  VectorXd x_, design_row_, r_, h_;
  MatrixXd M_;  // dr/dscores (K x K)
  double design_norm2_ = 0.0, gradient_norm_ = 0.0, f_ = 1.0, beta_ = 0.0;
  mutable MatrixXd mixing_;
  mutable VectorXd clipped_;
};

}  // namespace filkit
