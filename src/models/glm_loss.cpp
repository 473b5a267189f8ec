#include "models/glm_loss.hpp"

#include "base/parallel_blocks.hpp"

#include <cmath>

namespace filkit::detail {

namespace {
// Rows per block of every pass over the examples: large enough for BLAS-3 speed, small enough
// that a few thousand examples already make several blocks for the threads. Fixed, so that the
// sums over blocks never depend on the thread count (base/parallel_blocks.hpp).
constexpr Index kRowBlock = 1024;

double softplus(double a) { return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a)); }
double sigmoid(double a) {
  if (a >= 0) return 1.0 / (1.0 + std::exp(-a));
  const double e = std::exp(a);
  return e / (1.0 + e);
}
}  // namespace

MatrixXd Design::times(const MatrixXd& W) const {
  MatrixXd result(rows(), W.cols());
  for_each_block(rows(), kRowBlock, [&](Index start, Index count) {
    auto block = result.middleRows(start, count);
    block.noalias() = X_.middleRows(start, count) * W.bottomRows(X_.cols());
    if (intercept_) block.rowwise() += W.row(0);
  });
  return result;
}

VectorXd Design::transpose_times(const VectorXd& v) const {
  const MatrixXd result = transpose_times(MatrixXd(v));
  return result.col(0);
}

MatrixXd Design::transpose_times(const MatrixXd& M) const {
  MatrixXd result = MatrixXd::Zero(cols(), M.cols());
  reduce_blocks_in_order(
      rows(), kRowBlock, result,
      [&](MatrixXd& partial, Index start, Index count) {
        const auto block = M.middleRows(start, count);
        if (intercept_) partial.row(0) = block.colwise().sum();
        partial.bottomRows(X_.cols()).noalias() = X_.middleRows(start, count).transpose() * block;
      },
      [&](const MatrixXd& partial) { result += partial; });
  return result;
}

MatrixXd Design::weighted_gram(const VectorXd& a) const {
  const Index d = X_.cols(), offset = intercept_ ? 1 : 0;
  MatrixXd gram = MatrixXd::Zero(cols(), cols());
  reduce_blocks_in_order(
      rows(), kRowBlock, gram,
      [&, scaled = RowMatrix()](MatrixXd& partial, Index start, Index count) mutable {
        const auto block = X_.middleRows(start, count);
        const auto weights = a.segment(start, count);
        scaled.noalias() = weights.asDiagonal() * block;
        partial.bottomRightCorner(d, d).noalias() = block.transpose() * scaled;
        if (intercept_) {
          const VectorXd column = scaled.colwise().sum().transpose();
          partial.block(offset, 0, d, 1) = column;
          partial.block(0, offset, 1, d) = column.transpose();
          partial(0, 0) = weights.sum();
        }
      },
      [&](const MatrixXd& partial) { gram += partial; });
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
  reduce_blocks_in_order(
      a.rows(), kRowBlock, 0.0,
      [&](double& partial, Index start, Index count) {
        for (Index i = start; i < start + count; ++i) {
          double loss;
          if (shape_.kind == ModelKind::kSoftmax) {
            const double top = a.row(i).maxCoeff();
            loss = top + std::log((a.row(i).array() - top).exp().sum()) - a(i, static_cast<Index>(target_(i)));
          } else {
            loss = scalar_loss(shape_.kind, a(i, 0), target_(i)).value;
          }
          partial += omega_(i) * loss;
        }
      },
      [&](double partial) { total += partial; });
  return total + 0.5 * penalty_ * w.squaredNorm();
}

VectorXd GlmObjective::gradient(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  MatrixXd residual(a.rows(), a.cols());  // dl/da per example and class, times omega
  for_each_block(a.rows(), kRowBlock, [&](Index start, Index count) {
    for (Index i = start; i < start + count; ++i) {
      if (shape_.kind == ModelKind::kSoftmax) {
        VectorXd r = class_probabilities(shape_.kind, a.row(i).transpose());
        r(static_cast<Index>(target_(i))) -= 1.0;
        residual.row(i) = omega_(i) * r.transpose();
      } else {
        residual(i, 0) = omega_(i) * scalar_loss(shape_.kind, a(i, 0), target_(i)).first;
      }
    }
  });
  const MatrixXd g = design_.transpose_times(residual);
  return Eigen::Map<const VectorXd>(g.data(), g.size()) + penalty_ * w;
}

MatrixXd GlmObjective::hessian(const VectorXd& w) const {
  const MatrixXd a = scores(w);
  const Index n = a.rows(), p = design_.cols();
  if (shape_.kind != ModelKind::kSoftmax) {
    VectorXd curvature(n);
    for_each_block(n, kRowBlock, [&](Index start, Index count) {
      for (Index i = start; i < start + count; ++i)
        curvature(i) = omega_(i) * scalar_loss(shape_.kind, a(i, 0), target_(i)).second;
    });
    MatrixXd H = design_.weighted_gram(curvature);
    H.diagonal().array() += penalty_;
    return H;
  }
  // Softmax: block (k, l) = X~^T diag(omega * (s_k delta_kl - s_k s_l)) X~.
  const Index K = a.cols();
  MatrixXd probabilities(n, K);
  for_each_block(n, kRowBlock, [&](Index start, Index count) {
    for (Index i = start; i < start + count; ++i)
      probabilities.row(i) = class_probabilities(shape_.kind, a.row(i).transpose()).transpose();
  });
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
  for_each_block(n, kRowBlock, [&](Index start, Index count) {
    for (Index i = start; i < start + count; ++i) {
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
  });
  return result;
}

}  // namespace filkit::detail
