// The trained model (trained_model.hpp): dpsgd's GLM or network, and its unclipped gradients
// (softmax regression's in closed form).
#include "public_data/trained_model.hpp"

#include "filkit/networks/networks.hpp"
#include "filkit/privacy/soft_clip.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <type_traits>

namespace filkit {

namespace {

template <class Real>
using MatrixOf = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic>;

/// The rows of X (with a leading 1 for the intercept), in Real.
template <class Real = double>
MatrixOf<Real> softmax_design(const Dataset& data, const std::vector<Index>& rows, bool intercept) {
  const Index n = static_cast<Index>(rows.size()), d = data.d(), first = intercept ? 1 : 0;
  MatrixOf<Real> Xt(n, d + first);
  if (intercept) Xt.col(0).setOnes();
  // Row-major X into the column-major design, 64 rows at a time: each pixel's 64 values are
  // written together, from 64 rows that stay in L1. Copying a whole row at a time wrote its 784
  // values to 784 columns, 5 ns a value (a third of the time of a fim step without public batches).
  constexpr Index kRows = 64;
  for (Index r0 = 0; r0 < n; r0 += kRows) {
    const Index count = std::min(kRows, n - r0);
    for (Index j = 0; j < d; ++j)
      for (Index i = 0; i < count; ++i)
        Xt(r0 + i, first + j) = static_cast<Real>(data.X(rows[static_cast<std::size_t>(r0 + i)], j));
  }
  return Xt;
}

/// One example's logits (a row or a column of K) turned in place into its cross-entropy residuals
/// softmax - onehot(label): the one formula of every softmax gradient here, so that they agree
/// bit for bit.
template <class Logits>
void logits_to_residuals(Logits&& z, Index label) {
  using Real = typename std::decay_t<Logits>::Scalar;
  z.array() -= z.maxCoeff();
  z = z.array().exp().matrix();
  z /= z.sum();
  z(label) -= Real(1);
}

/// The mean cross-entropy gradient over `rows` at W (p x K), as a vector in the GLM's order,
/// computed in Real (float: every product, exponential and sum in single precision, as jax's
/// float32; W rounded to it) and returned widened to double.
template <class Real>
VectorXd softmax_mean_gradient(const Dataset& data, const std::vector<Index>& rows, const MatrixXd& W_double,
                               bool intercept) {
  // In pieces of 4,096 rows: the design of all of table 3.1's 30,000 public examples (fim's cosine
  // diagnostic, every private step) would be 188 MB at once; a batch is one piece.
  constexpr std::size_t kPiece = 4096;
  const MatrixOf<Real> W = W_double.cast<Real>();
  MatrixOf<Real> G = MatrixOf<Real>::Zero(W.rows(), W.cols());
  for (std::size_t start = 0; start < rows.size(); start += kPiece) {
    const std::vector<Index> piece(rows.begin() + static_cast<std::ptrdiff_t>(start),
                                   rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + kPiece)));
    MatrixOf<Real> Xt = softmax_design<Real>(data, piece, intercept);
    MatrixOf<Real> R = Xt * W;  // logits, then residuals softmax - onehot
    for (Index i = 0; i < R.rows(); ++i)
      logits_to_residuals(R.row(i), static_cast<Index>(data.y(piece[static_cast<std::size_t>(i)])));
    G.noalias() += Xt.transpose() * R;
  }
  G /= static_cast<Real>(rows.size());
  return Eigen::Map<const Eigen::Matrix<Real, Eigen::Dynamic, 1>>(G.data(), G.size()).template cast<double>();
}

/// The phase as dpsgd's model reads it: softmax regression, or a network (which has no intercept
/// option: its layers have biases).
DpSgdOptions shared_model_options(DpSgdOptions phase) {
  phase.kind = ModelKind::kSoftmax;
  if (phase.network) phase.intercept = false;
  return phase;
}

}  // namespace

TrainedModel::TrainedModel(const Dataset& like, const DpSgdOptions& phase, Index K)
    : K_(K), phase_(shared_model_options(phase)), model_(make_trainable_model(like, phase_, K)) {
  if (const Network* network = model_->network()) {
    plan_ = network->plan();
  } else {
    NetworkOptions softmax;
    softmax.architecture = NetworkArchitecture::kSoftmax;
    softmax.intercept = phase_.intercept;
    plan_ = plan_network(builtin_network_layers(softmax, K), {like.d() + (phase_.intercept ? 1 : 0)}, K);
  }
}

std::vector<bool> TrainedModel::fixed_coordinates(bool reference_logit) const {
  if (!reference_logit) return {};
  std::vector<bool> fixed(static_cast<std::size_t>(parameter_count()), false);
  for (Index i = (K_ - 1) * p(); i < parameter_count(); ++i) fixed[static_cast<std::size_t>(i)] = true;
  return fixed;
}

Index TrainedModel::rows_at_once() const { return model_->network() ? model_->network()->options().chunk : 0; }

template <class Visit>
void TrainedModel::for_each_chunk(const std::vector<Index>& rows, Visit&& visit) const {
  const auto chunk = static_cast<std::size_t>(rows_at_once());
  for (std::size_t start = 0; start < rows.size(); start += chunk) {
    const auto end = rows.begin() + static_cast<std::ptrdiff_t>(std::min(rows.size(), start + chunk));
    visit(std::vector<Index>(rows.begin() + static_cast<std::ptrdiff_t>(start), end), static_cast<Index>(start));
  }
}

VectorXd TrainedModel::mean_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w) const {
  const Network* network = model_->network();
  if (!network) {
    const Eigen::Map<const MatrixXd> W(w.data(), p(), K_);
    return phase_.precision == Precision::kFloat32 ? softmax_mean_gradient<float>(data, rows, W, phase_.intercept)
                                                   : softmax_mean_gradient<double>(data, rows, W, phase_.intercept);
  }
  VectorXd sum = VectorXd::Zero(parameter_count());
  for_each_chunk(rows, [&](const std::vector<Index>& piece, Index) {
    const Dataset batch = data.select_rows(piece);
    sum += network->gradient_sum(w, batch.X, batch.y);
  });
  return sum / static_cast<double>(rows.size());
}

VectorXd TrainedModel::mean_clipped_gradient(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                                             double clip_norm, const std::vector<bool>& fixed) const {
  if (const Network* network = model_->network()) {
    if (!fixed.empty()) throw std::logic_error("mean_clipped_gradient: a network has no fixed coordinates");
    VectorXd sum = VectorXd::Zero(parameter_count());
    for_each_chunk(rows, [&](const std::vector<Index>& piece, Index) {
      const Dataset batch = data.select_rows(piece);
      sum += network->clipped_gradients(w, batch.X, batch.y, clip_norm).colwise().sum().transpose();
    });
    return sum / static_cast<double>(rows.size());
  }
  // Softmax: g_b = vec(x~_b r_b^T), so over the free classes (a fixed coordinate is a whole class,
  // fixed_coordinates) ||g_b|| = ||x~_b|| ||r_b's free entries||, and the mean of the clipped
  // gradients is X~^T diag(f_b) R / B, f_b the clip factor of ||g_b||.
  std::vector<bool> free_class(static_cast<std::size_t>(K_), true);
  if (!fixed.empty()) {
    for (Index k = 0; k < K_; ++k) {
      const auto first = fixed.begin() + k * p(), last = first + p();
      free_class[static_cast<std::size_t>(k)] = !*first;
      if (std::find(first, last, !*first) != last)
        throw std::logic_error("mean_clipped_gradient: fixed coordinates that are not whole classes");
    }
  }
  const MatrixXd Xt = softmax_design(data, rows, phase_.intercept);
  const Eigen::Map<const MatrixXd> W(w.data(), p(), K_);
  MatrixXd R = Xt * W;  // logits, then residuals softmax - onehot, then scaled by the clip factor
  for (Index b = 0; b < R.rows(); ++b) {
    logits_to_residuals(R.row(b), static_cast<Index>(data.y(rows[static_cast<std::size_t>(b)])));
    double free_norm2 = 0.0;
    for (Index k = 0; k < K_; ++k)
      if (free_class[static_cast<std::size_t>(k)]) free_norm2 += R(b, k) * R(b, k);
    R.row(b) *= soft_clip_factor(Xt.row(b).norm() * std::sqrt(free_norm2), clip_norm);
  }
  MatrixXd G = Xt.transpose() * R / static_cast<double>(rows.size());
  for (Index k = 0; k < K_; ++k)
    if (!free_class[static_cast<std::size_t>(k)]) G.col(k).setZero();
  return Eigen::Map<const VectorXd>(G.data(), G.size());
}

MatrixXd TrainedModel::released_gradients(const Dataset& data, const std::vector<Index>& rows, const VectorXd& w,
                                          const std::vector<Index>& released) const {
  const Index B = static_cast<Index>(rows.size()), m = static_cast<Index>(released.size());
  MatrixXd out(B, m);
  if (const Network* network = model_->network()) {  // a chunk of rows at a time, as mean_gradient
    for_each_chunk(rows, [&](const std::vector<Index>& piece, Index first) {
      const Dataset batch = data.select_rows(piece);
      const MatrixXd G = network->gradients(w, batch.X, batch.y);
      for (Index j = 0; j < m; ++j) out.block(first, j, G.rows(), 1) = G.col(released[static_cast<std::size_t>(j)]);
    });
    return out;
  }
  const MatrixXd Xt = softmax_design(data, rows, phase_.intercept);
  const Eigen::Map<const MatrixXd> W(w.data(), p(), K_);
  for (Index b = 0; b < B; ++b) {
    VectorXd e = (Xt.row(b) * W).transpose();
    logits_to_residuals(e, static_cast<Index>(data.y(rows[static_cast<std::size_t>(b)])));
    for (Index j = 0; j < m; ++j) {  // coordinate k p + i is x~_i e_k
      const Index coordinate = released[static_cast<std::size_t>(j)];
      out(b, j) = Xt(b, coordinate % p()) * e(coordinate / p());
    }
  }
  return out;
}

}  // namespace filkit
