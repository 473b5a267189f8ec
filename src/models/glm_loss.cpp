#include "models/glm_loss.hpp"

#include "base/parallel_blocks.hpp"

#include <cmath>

namespace filkit::detail {

namespace {
// Below this many multiply-adds a pass over the rows runs on one thread: waking a second one
// (and, on shared cores, waiting for it) costs more than it saves.
constexpr Index kParallelWork = Index{1} << 16;
// An exp or log, counted in multiply-adds, in the work of the loss passes.
constexpr Index kLossWork = 16;

double softplus(double a) { return a > 0 ? a + std::log1p(std::exp(-a)) : std::log1p(std::exp(a)); }
double sigmoid(double a) {
  if (a >= 0) return 1.0 / (1.0 + std::exp(-a));
  const double e = std::exp(a);
  return e / (1.0 + e);
}
}  // namespace

bool Design::worth_sharing(Index work) { return work >= kParallelWork; }

MatrixXd Design::times_rows(const MatrixXd& W, Index start, Index count) const {
  MatrixXd result(count, W.cols());
  result.noalias() = X_.middleRows(start, count) * W.bottomRows(X_.cols());
  if (intercept_) result.rowwise() += W.row(0);
  return result;
}

MatrixXd Design::transpose_times_rows(const Eigen::Ref<const MatrixXd>& M, Index start) const {
  MatrixXd result(cols(), M.cols());
  if (intercept_) result.row(0) = M.colwise().sum();
  result.bottomRows(X_.cols()).noalias() = X_.middleRows(start, M.rows()).transpose() * M;
  return result;
}

void Design::weighted_gram_rows(const Eigen::Ref<const VectorXd>& a, Index start, Eigen::Ref<MatrixXd> gram) const {
  const Index d = X_.cols(), offset = intercept_ ? 1 : 0;
  const auto block = X_.middleRows(start, a.size());
  const RowMatrix scaled = a.asDiagonal() * block;
  gram.bottomRightCorner(d, d).noalias() = block.transpose() * scaled;
  if (intercept_) {
    const VectorXd column = scaled.colwise().sum().transpose();
    gram.block(offset, 0, d, 1) = column;
    gram.block(0, offset, 1, d) = column.transpose();
    gram(0, 0) = a.sum();
  }
}

MatrixXd Design::times(const MatrixXd& W) const {
  MatrixXd result(rows(), W.cols());
  for_each_block(
      rows(), kRowBlock,
      [&](Index start, Index count) { result.middleRows(start, count) = times_rows(W, start, count); },
      worth_sharing(rows() * cols() * W.cols()));
  return result;
}

VectorXd Design::transpose_times(const VectorXd& v) const { return transpose_times(MatrixXd(v)).col(0); }

MatrixXd Design::transpose_times(const MatrixXd& M) const {
  MatrixXd result = MatrixXd::Zero(cols(), M.cols());
  reduce_blocks_in_order(
      rows(), kRowBlock, result,
      [&](MatrixXd& partial, Index start, Index count) {
        partial = transpose_times_rows(M.middleRows(start, count), start);
      },
      [&](const MatrixXd& partial) { result += partial; }, worth_sharing(rows() * cols() * M.cols()));
  return result;
}

MatrixXd Design::weighted_gram(const VectorXd& a) const {
  MatrixXd gram = MatrixXd::Zero(cols(), cols());
  reduce_blocks_in_order(
      rows(), kRowBlock, gram,
      [&](MatrixXd& partial, Index start, Index count) { weighted_gram_rows(a.segment(start, count), start, partial); },
      [&](const MatrixXd& partial) { gram += partial; }, worth_sharing(rows() * cols() * cols()));
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

GlmObjective::GlmObjective(const Model& model, const Dataset& data, VectorXd omega, const Communicator& comm)
    : shape_(model),
      design_(data.X, model.intercept),
      omega_(std::move(omega)),
      penalty_(static_cast<double>(comm.sum(data.n())) * model.l2),
      comm_(&comm) {
  FitOptions options;
  options.kind = model.kind;
  options.regression = model.regression;
  target_ = model.kind == ModelKind::kSoftmax ? data.y : model_targets(data, options);
}

MatrixXd GlmObjective::unflatten(const VectorXd& w) const {
  return Eigen::Map<const MatrixXd>(w.data(), shape_.weights.rows(), shape_.weights.cols());
}

Index GlmObjective::loss_pass_work() const {
  const Index K = shape_.weights.cols();
  return design_.rows() * K * (design_.cols() + kLossWork);
}

double GlmObjective::example_loss(const ScoreRow& scores, Index i) const {
  if (shape_.kind != ModelKind::kSoftmax) return scalar_loss(shape_.kind, scores(0), target_(i)).value;
  const double top = scores.maxCoeff();
  return top + std::log((scores.array() - top).exp().sum()) - scores(static_cast<Index>(target_(i)));
}

double GlmObjective::value(const VectorXd& w) const {
  const MatrixXd W = unflatten(w);
  double total = 0.0;
  reduce_blocks_in_order(
      design_.rows(), Design::kRowBlock, 0.0,
      [&](double& partial, Index start, Index count) {
        const MatrixXd a = design_.times_rows(W, start, count);
        for (Index b = 0; b < count; ++b) partial += omega_(start + b) * example_loss(a.row(b), start + b);
      },
      [&](double partial) { total += partial; }, Design::worth_sharing(loss_pass_work()));
  return comm_->sum(total) + 0.5 * penalty_ * w.squaredNorm();
}

VectorXd GlmObjective::gradient(const VectorXd& w) const {
  const MatrixXd W = unflatten(w);
  MatrixXd g = MatrixXd::Zero(W.rows(), W.cols());
  reduce_blocks_in_order(
      design_.rows(), Design::kRowBlock, g,
      [&](MatrixXd& partial, Index start, Index count) {
        const MatrixXd a = design_.times_rows(W, start, count);
        MatrixXd residual(count, a.cols());  // dl/da per example and class, times omega
        for (Index b = 0; b < count; ++b) {
          const Index i = start + b;
          if (shape_.kind == ModelKind::kSoftmax) {
            VectorXd r = class_probabilities(shape_.kind, a.row(b).transpose());
            r(static_cast<Index>(target_(i))) -= 1.0;
            residual.row(b) = omega_(i) * r.transpose();
          } else {
            residual(b, 0) = omega_(i) * scalar_loss(shape_.kind, a(b, 0), target_(i)).first;
          }
        }
        partial = design_.transpose_times_rows(residual, start);
      },
      [&](const MatrixXd& partial) { g += partial; }, Design::worth_sharing(2 * loss_pass_work()));
  comm_->sum(g);
  return Eigen::Map<const VectorXd>(g.data(), g.size()) + penalty_ * w;
}

MatrixXd GlmObjective::hessian(const VectorXd& w) const {
  const MatrixXd W = unflatten(w);
  const Index n = design_.rows(), p = design_.cols(), K = W.cols();
  MatrixXd H = MatrixXd::Zero(p * K, p * K);
  // Softmax: block (k, l) = X~^T diag(omega * (s_k delta_kl - s_k s_l)) X~, k <= l summed here.
  const auto add_rows = [&](MatrixXd& partial, Index start, Index count) {
    const MatrixXd a = design_.times_rows(W, start, count);
    const auto omega = omega_.segment(start, count);
    if (shape_.kind != ModelKind::kSoftmax) {
      VectorXd curvature(count);
      for (Index b = 0; b < count; ++b)
        curvature(b) = omega(b) * scalar_loss(shape_.kind, a(b, 0), target_(start + b)).second;
      design_.weighted_gram_rows(curvature, start, partial);
      return;
    }
    MatrixXd probabilities(count, K);
    for (Index b = 0; b < count; ++b)
      probabilities.row(b) = class_probabilities(shape_.kind, a.row(b).transpose()).transpose();
    for (Index k = 0; k < K; ++k) {
      for (Index l = k; l < K; ++l) {
        VectorXd coefficient = -probabilities.col(k).cwiseProduct(probabilities.col(l));
        if (k == l) coefficient += probabilities.col(k);
        design_.weighted_gram_rows(omega.cwiseProduct(coefficient), start, partial.block(k * p, l * p, p, p));
      }
    }
  };
  reduce_blocks_in_order(
      n, Design::kRowBlock, H, add_rows, [&](const MatrixXd& partial) { H += partial; },
      Design::worth_sharing(n * (p * K) * (p * K) / 2));
  comm_->sum(H);
  for (Index k = 0; k < K; ++k)
    for (Index l = k + 1; l < K; ++l) H.block(l * p, k * p, p, p) = H.block(k * p, l * p, p, p).transpose();
  H.diagonal().array() += penalty_;
  return H;
}

PerExampleLoss GlmObjective::per_example(const VectorXd& w) const {
  const MatrixXd W = unflatten(w);
  const Index n = design_.rows();
  PerExampleLoss result{VectorXd(n), VectorXd(n)};
  const auto rows = [&](Index start, Index count) {
    const MatrixXd a = design_.times_rows(W, start, count);
    for (Index b = 0; b < count; ++b) {
      const Index i = start + b;
      const double row_norm = design_.row(i).norm();
      if (shape_.kind == ModelKind::kSoftmax) {
        VectorXd r = class_probabilities(shape_.kind, a.row(b).transpose());
        const Index y = static_cast<Index>(target_(i));
        result.loss(i) = -std::log(std::max(r(y), 1e-300));
        r(y) -= 1.0;
        result.gradient_norm(i) = r.norm() * row_norm;
      } else {
        const ScalarLoss loss = scalar_loss(shape_.kind, a(b, 0), target_(i));
        result.loss(i) = loss.value;
        result.gradient_norm(i) = std::abs(loss.first) * row_norm;
      }
    }
  };
  for_each_block(n, Design::kRowBlock, rows, Design::worth_sharing(2 * loss_pass_work()));
  return result;
}

}  // namespace filkit::detail
