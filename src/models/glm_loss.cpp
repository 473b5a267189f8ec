#include "models/glm_loss.hpp"

#include <cmath>

namespace filkit::detail {

namespace {
constexpr Index kRowBlock = 2048;  // rows per GEMM block: large enough for BLAS-3 speed

double softplus(double a) { return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a)); }
double sigmoid(double a) {
  if (a >= 0) return 1.0 / (1.0 + std::exp(-a));
  const double e = std::exp(a);
  return e / (1.0 + e);
}
}  // namespace

MatrixXd Design::times(const MatrixXd& W) const {
  MatrixXd result(rows(), W.cols());
  if (intercept_) {
    result.noalias() = X_ * W.bottomRows(X_.cols());
    result.rowwise() += W.row(0);
  } else {
    result.noalias() = X_ * W;
  }
  return result;
}

VectorXd Design::transpose_times(const VectorXd& v) const {
  VectorXd result(cols());
  if (intercept_) {
    result(0) = v.sum();
    result.tail(X_.cols()).noalias() = X_.transpose() * v;
  } else {
    result.noalias() = X_.transpose() * v;
  }
  return result;
}

MatrixXd Design::transpose_times(const MatrixXd& M) const {
  MatrixXd result(cols(), M.cols());
  if (intercept_) {
    result.row(0) = M.colwise().sum();
    result.bottomRows(X_.cols()).noalias() = X_.transpose() * M;
  } else {
    result.noalias() = X_.transpose() * M;
  }
  return result;
}

MatrixXd Design::weighted_gram(const VectorXd& a) const {
  const Index d = X_.cols(), offset = intercept_ ? 1 : 0;
  MatrixXd gram = MatrixXd::Zero(cols(), cols());
  for (Index start = 0; start < rows(); start += kRowBlock) {
    const Index count = std::min(kRowBlock, rows() - start);
    const auto block = X_.middleRows(start, count);
    const auto weights = a.segment(start, count);
    const RowMatrix scaled = weights.asDiagonal() * block;
    gram.bottomRightCorner(d, d).noalias() += block.transpose() * scaled;
    if (intercept_) {
      const VectorXd column = scaled.colwise().sum().transpose();
      gram.block(offset, 0, d, 1) += column;
      gram.block(0, offset, 1, d) += column.transpose();
      gram(0, 0) += weights.sum();
    }
  }
  return gram;
}

VectorXd Design::row(Index i) const {
  if (!intercept_) return X_.row(i).transpose();
  VectorXd result(cols());
  result << 1.0, X_.row(i).transpose();
  return result;
}

ScalarLoss scalar_loss(ModelKind kind, double a, double t) {
  if (kind == ModelKind::kLeastSquares) return {0.5 * (a - t) * (a - t), a - t, 1.0};
  const double s = sigmoid(a);
  return {softplus(a) - t * a, s - t, s * (1.0 - s)};
}

VectorXd class_probabilities(ModelKind kind, const VectorXd& scores) {
  if (kind != ModelKind::kSoftmax) return VectorXd::Constant(1, sigmoid(scores(0)));
  const VectorXd shifted = (scores.array() - scores.maxCoeff()).exp();
  return shifted / shifted.sum();
}

GlmObjective::GlmObjective(const Model& model, const Dataset& data, VectorXd omega)
    : shape_(model), design_(data.X, model.intercept), omega_(std::move(omega)),
      penalty_(static_cast<double>(data.n()) * model.l2) {
  FitOptions options;
  options.kind = model.kind;
  options.regression = model.regression;
  target_ = model.kind == ModelKind::kSoftmax ? data.y : model_targets(data, options);
}

MatrixXd GlmObjective::unflatten(const VectorXd& w) const {
  return Eigen::Map<const MatrixXd>(w.data(), shape_.weights.rows(), shape_.weights.cols());
}

MatrixXd GlmObjective::scores(const VectorXd& w) const { return design_.times(unflatten(w)); }

double GlmObjective::value(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  double total = 0.0;
  for (Index i = 0; i < a.rows(); ++i) {
    double loss;
    if (shape_.kind == ModelKind::kSoftmax) {
      const double top = a.row(i).maxCoeff();
      loss = top + std::log((a.row(i).array() - top).exp().sum()) - a(i, static_cast<Index>(target_(i)));
    } else {
      loss = scalar_loss(shape_.kind, a(i, 0), target_(i)).value;
    }
    total += omega_(i) * loss;
  }
  return total + 0.5 * penalty_ * w.squaredNorm();
}

VectorXd GlmObjective::gradient(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  MatrixXd residual(a.rows(), a.cols());  // dl/da per example and class, times omega
  for (Index i = 0; i < a.rows(); ++i) {
    if (shape_.kind == ModelKind::kSoftmax) {
      VectorXd r = class_probabilities(shape_.kind, a.row(i).transpose());
      r(static_cast<Index>(target_(i))) -= 1.0;
      residual.row(i) = omega_(i) * r.transpose();
    } else {
      residual(i, 0) = omega_(i) * scalar_loss(shape_.kind, a(i, 0), target_(i)).first;
    }
  }
  const MatrixXd g = design_.transpose_times(residual);
  return Eigen::Map<const VectorXd>(g.data(), g.size()) + penalty_ * w;
}

MatrixXd GlmObjective::hessian(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  const Index n = a.rows(), p = design_.cols();
  if (shape_.kind != ModelKind::kSoftmax) {
    VectorXd curvature(n);
    for (Index i = 0; i < n; ++i)
      curvature(i) = omega_(i) * scalar_loss(shape_.kind, a(i, 0), target_(i)).second;
    MatrixXd H = design_.weighted_gram(curvature);
    H.diagonal().array() += penalty_;
    return H;
  }
  // Softmax: block (k, l) = X~^T diag(omega * (s_k delta_kl - s_k s_l)) X~.
  const Index K = a.cols();
  MatrixXd probabilities(n, K);
  for (Index i = 0; i < n; ++i)
    probabilities.row(i) = class_probabilities(shape_.kind, a.row(i).transpose()).transpose();
  MatrixXd H(p * K, p * K);
  for (Index k = 0; k < K; ++k) {
    for (Index l = k; l < K; ++l) {
      VectorXd coefficient = -probabilities.col(k).cwiseProduct(probabilities.col(l));
      if (k == l) coefficient += probabilities.col(k);
      const MatrixXd block = design_.weighted_gram(omega_.cwiseProduct(coefficient));
      H.block(k * p, l * p, p, p) = block;
      if (l != k) H.block(l * p, k * p, p, p) = block.transpose();
    }
  }
  H.diagonal().array() += penalty_;
  return H;
}

PerExampleLoss GlmObjective::per_example(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  const Index n = a.rows();
  PerExampleLoss result{VectorXd(n), VectorXd(n)};
  for (Index i = 0; i < n; ++i) {
    const double row_norm = design_.row(i).norm();
    if (shape_.kind == ModelKind::kSoftmax) {
      VectorXd r = class_probabilities(shape_.kind, a.row(i).transpose());
      const Index y = static_cast<Index>(target_(i));
      result.loss(i) = -std::log(std::max(r(y), 1e-300));
      r(y) -= 1.0;
      result.gradient_norm(i) = r.norm() * row_norm;
    } else {
      const ScalarLoss loss = scalar_loss(shape_.kind, a(i, 0), target_(i));
      result.loss(i) = loss.value;
      result.gradient_norm(i) = std::abs(loss.first) * row_norm;
    }
  }
  return result;
}

}  // namespace filkit::detail
