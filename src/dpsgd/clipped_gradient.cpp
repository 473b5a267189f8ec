#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"

#include "models/glm_loss.hpp"

#include <Eigen/Eigenvalues>
#include <Eigen/QR>

#include <cmath>
#include <stdexcept>
#include <string>

namespace filkit {

ClippedGradientStep::ClippedGradientStep(ModelKind kind, MatrixXd weights, bool intercept, double clip_norm,
                                         LabelPrivacy label)
    : kind_(kind), W_(std::move(weights)), intercept_(intercept), clip_norm_(clip_norm), label_(label) {
  if (kind_ != ModelKind::kLogistic && kind_ != ModelKind::kSoftmax)
    throw OptionError::with_text("model", "ClippedGradientStep: model kind " + to_string(kind_) +
                                              " is not supported: expected logistic or softmax");
  if (kind_ == ModelKind::kLogistic && W_.cols() != 1)
    throw OptionError::with_text(
        "weights", "ClippedGradientStep: logistic weights must have 1 column, got " + std::to_string(W_.cols()));
  if (kind_ == ModelKind::kSoftmax && W_.cols() < 2)
    throw OptionError::with_text("weights", "ClippedGradientStep: softmax weights need >= 2 columns");
  if (input_dim() < 1) throw OptionError::with_text("weights", "ClippedGradientStep: no feature rows in the weights");
  if (!(clip_norm_ > 0.0) || !std::isfinite(clip_norm_))
    throw OptionError::with_text(
        "clip_norm", "ClippedGradientStep: clip_norm = " + format_double(clip_norm_) + ": must be finite and > 0");
  feature_gram_ = feature_weights().transpose() * feature_weights();
}

Index ClippedGradientStep::private_dims() const {
  return input_dim() + (label_ == LabelPrivacy::kPrivate ? num_classes() : 0);
}

VectorXd ClippedGradientStep::label_vector(double y) const {
  if (kind_ == ModelKind::kLogistic) return VectorXd::Constant(1, y);
  const Index k = static_cast<Index>(y);
  if (k < 0 || k >= num_classes() || static_cast<double>(k) != y)
    throw DataError("label " + std::to_string(y) + " is not a class index in [0, " + std::to_string(num_classes() - 1) +
                    "]");
  VectorXd onehot = VectorXd::Zero(num_classes());
  onehot(k) = 1.0;
  return onehot;
}

// ---------------------------------------------------------------------------------------------

ClippedGlmGradient::ClippedGlmGradient(const ClippedGradientStep& step, const Eigen::Ref<const VectorXd>& x,
                                       const VectorXd& label)
    : step_(&step), x_(x) {
  const Index d = step.input_dim(), K = step.num_classes();
  if (x.size() != d)
    throw OptionError::with_text(
        "x", "ClippedGlmGradient: x has " + std::to_string(x.size()) + " features, the model " + std::to_string(d));
  if (label.size() != K)
    throw OptionError::with_text("label", "ClippedGlmGradient: label has " + std::to_string(label.size()) +
                                              " coordinates, expected " + std::to_string(K));
  design_row_.resize(step.weights().rows());
  if (step.intercept()) design_row_ << 1.0, x;
  else design_row_ = x;
  design_norm2_ = design_row_.squaredNorm();

  const VectorXd scores = step.weights().transpose() * design_row_;
  const VectorXd probabilities = detail::class_probabilities(step.kind(), scores);
  r_ = probabilities - label;
  if (step.kind() == ModelKind::kLogistic) {
    M_ = MatrixXd::Constant(1, 1, probabilities(0) * (1.0 - probabilities(0)));
  } else {
    M_ = -probabilities * probabilities.transpose();
    M_.diagonal() += probabilities;
  }

  gradient_norm_ = r_.norm() * std::sqrt(design_norm2_);
  const double C = step.clip_norm();
  f_ = soft_clip_factor(gradient_norm_, C);
  // f'(u) = -GELU'(u/C - 1) f^2 / C. At g = 0 the g g^T term vanishes whatever beta is.
  beta_ = gradient_norm_ > 0.0 ? -gelu_derivative(gradient_norm_ / C - 1.0) * f_ * f_ / C / gradient_norm_ : 0.0;

  // h = G^T g: features ||r||^2 x + ||x~||^2 W_f M r, labels -||x~||^2 r.
  h_.resize(step.private_dims());
  h_.head(d) = r_.squaredNorm() * x_ + design_norm2_ * (step.feature_weights() * (M_ * r_));
  if (step.label() == LabelPrivacy::kPrivate) h_.tail(K) = -design_norm2_ * r_;
}

const VectorXd& ClippedGlmGradient::clipped_gradient() const {
  if (clipped_.size() == 0) {
    const MatrixXd clipped = design_row_ * (f_ * r_).transpose();  // p x K
    clipped_ = Eigen::Map<const VectorXd>(clipped.data(), clipped.size());
  }
  return clipped_;
}

double ClippedGlmGradient::jacobian_trace() const {
  const Index d = step_->input_dim(), K = step_->num_classes();
  const VectorXd features_times_weights = step_->feature_weights().transpose() * x_;  // W_f^T x
  const double v_frobenius2 = (M_ * step_->feature_gram() * M_).trace();              // ||M W_f^T||_F^2
  double unclipped = static_cast<double>(d) * r_.squaredNorm() + 2.0 * r_.dot(M_ * features_times_weights) +
                     v_frobenius2 * design_norm2_;
  if (step_->label() == LabelPrivacy::kPrivate) unclipped += static_cast<double>(K) * design_norm2_;
  const double g2 = gradient_norm_ * gradient_norm_;
  return f_ * f_ * unclipped + (2.0 * f_ * beta_ + beta_ * beta_ * g2) * h_.squaredNorm();
}

const MatrixXd& ClippedGlmGradient::mixing() const {
  if (mixing_.size() == 0) {
    const Index d = step_->input_dim(), K = step_->num_classes();
    MatrixXd U0 = MatrixXd::Zero(K, step_->private_dims());
    U0.leftCols(d) = M_ * step_->feature_weights().transpose();
    if (step_->label() == LabelPrivacy::kPrivate) U0.rightCols(K) = -MatrixXd::Identity(K, K);
    mixing_ = f_ * U0 + beta_ * r_ * h_.transpose();
  }
  return mixing_;
}

double ClippedGlmGradient::jacobian_spectral_norm_squared() const {
  const Index d = step_->input_dim(), K = step_->num_classes(), dz = step_->private_dims();
  const bool label_private = step_->label() == LabelPrivacy::kPrivate;
  const MatrixXd& U = mixing();
  const double c = f_ * f_ * r_.squaredNorm();  // the eigenvalue on the complement, if any

  // A basis of the invariant subspace span{e, U^T, label axes}.
  MatrixXd B = MatrixXd::Zero(dz, 1 + K + (label_private ? K : 0));
  B.col(0).head(d) = x_;
  B.middleCols(1, K) = U.transpose();
  if (label_private) B.bottomRightCorner(K, K).setIdentity();
  const Eigen::ColPivHouseholderQR<MatrixXd> qr(B);
  const Index rank = qr.rank();
  const MatrixXd Q = qr.householderQ() * MatrixXd::Identity(dz, rank);

  const VectorXd qe = Q.topRows(d).transpose() * x_;
  const VectorXd qa = Q.transpose() * (U.transpose() * r_);
  const MatrixXd qu = Q.transpose() * U.transpose();  // rank x K
  MatrixXd small = c * (Q.topRows(d).transpose() * Q.topRows(d));
  small += f_ * (qe * qa.transpose() + qa * qe.transpose());
  small += design_norm2_ * qu * qu.transpose();
  double largest =
      rank > 0 ? Eigen::SelfAdjointEigenSolver<MatrixXd>(small, Eigen::EigenvaluesOnly).eigenvalues().maxCoeff() : 0.0;
  if (rank < dz) largest = std::max(largest, c);
  return largest;
}

MatrixXd ClippedGlmGradient::dense_jacobian() const {
  const Index p = design_row_.size(), K = step_->num_classes(), d = step_->input_dim();
  const Index offset = step_->intercept() ? 1 : 0;
  const MatrixXd& U = mixing();
  MatrixXd G(p * K, step_->private_dims());
  for (Index k = 0; k < K; ++k) {
    auto block = G.middleRows(k * p, p);
    block.noalias() = design_row_ * U.row(k);
    block.block(offset, 0, d, d).diagonal().array() += f_ * r_(k);
  }
  return G;
}

VectorXd ClippedGlmGradient::apply(const VectorXd& v) const {
  const Index p = design_row_.size(), d = step_->input_dim(), offset = step_->intercept() ? 1 : 0;
  VectorXd features_part = VectorXd::Zero(p);  // E v
  features_part.segment(offset, d) = v.head(d);
  const MatrixXd result = f_ * features_part * r_.transpose() + design_row_ * (mixing() * v).transpose();
  return Eigen::Map<const VectorXd>(result.data(), result.size());
}

VectorXd ClippedGlmGradient::apply_transpose(const VectorXd& u) const {
  const Index p = design_row_.size(), d = step_->input_dim(), offset = step_->intercept() ? 1 : 0;
  const Eigen::Map<const MatrixXd> u_matrix(u.data(), p, step_->num_classes());
  VectorXd result = mixing().transpose() * (u_matrix.transpose() * design_row_);
  result.head(d) += f_ * (u_matrix * r_).segment(offset, d);
  return result;
}

}  // namespace filkit
