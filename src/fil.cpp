#include "filkit/fil.hpp"

#include "glm_loss.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace filkit {

std::string to_string(LabelPrivacy label) { return label == LabelPrivacy::kPrivate ? "private" : "public"; }

LabelPrivacy label_privacy_from_string(const std::string& name) {
  if (name == "private") return LabelPrivacy::kPrivate;
  if (name == "public") return LabelPrivacy::kPublic;
  throw std::invalid_argument("unknown label privacy '" + name + "': expected private or public");
}

void FilOptions::validate() const {
  if (!(sigma > 0.0) || !std::isfinite(sigma))
    throw std::invalid_argument("FilOptions.sigma = " + std::to_string(sigma) + ": must be finite and > 0");
}

VectorXd PerExampleFil::attribute_mse_bound() const { return eta.array().square().inverse(); }
VectorXd PerExampleFil::example_mse_bound() const { return dfil.array().square().inverse(); }

CoordinateSelection CoordinateSelection::example(LabelPrivacy privacy) {
  CoordinateSelection selection;
  selection.label = privacy == LabelPrivacy::kPrivate;
  return selection;
}

CoordinateSelection CoordinateSelection::columns(std::vector<Index> features) {
  CoordinateSelection selection;
  selection.features = std::move(features);
  selection.all_features = false;
  selection.label = false;
  return selection;
}

// ---------------------------------------------------------------------------------------------

namespace {

double largest_symmetric_eigenvalue(const MatrixXd& symmetric) {
  if (symmetric.size() == 0) return 0.0;
  const Eigen::SelfAdjointEigenSolver<MatrixXd> solver(symmetric, Eigen::EigenvaluesOnly);
  return solver.eigenvalues().maxCoeff();
}

}  // namespace

namespace {

// GCC 12 warns about Eigen's fixed-capacity eigensolver internals (a false positive).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// A k x k matrix (k <= 3) without heap allocation: the inertia count runs in the inner loop.
using SmallMatrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, 0, 3, 3>;

// The secular matrix M(mu) = diag(sign) + W^T (D - mu)^-1 W, its derivative in mu, and the
// number of eigenvalues of A = D + W diag(sign) W^T above mu (Sylvester's law of inertia).
struct SecularEvaluation {
  Index above = 0;
  double determinant = 0.0;
  double determinant_slope = 0.0;  // d det M / d mu
};

class SecularFunction {
 public:
  SecularFunction(const VectorXd& D, const MatrixXd& W, const VectorXd& sign)
      : D_(D), W_(W), sign_(sign), weight_(D.size()), weight_squared_(D.size()),
        negative_sign_((sign.array() < 0.0).count()) {}

  SecularEvaluation operator()(double mu) {
    const Index k = W_.cols();
    weight_ = (D_.array() - mu).inverse();
    // mu equal to some D_j (measure zero): nudge that weight to a huge finite value.
    for (Index j = 0; j < D_.size(); ++j)
      if (!std::isfinite(weight_(j))) weight_(j) = -1.0 / std::numeric_limits<double>::min();
    weight_squared_ = weight_.cwiseAbs2();
    SmallMatrix M(k, k), slope(k, k);
    for (Index a = 0; a < k; ++a) {
      for (Index b = 0; b <= a; ++b) {
        const auto product = W_.col(a).array() * W_.col(b).array();
        M(a, b) = M(b, a) = (product * weight_.array()).sum() + (a == b ? sign_(a) : 0.0);
        slope(a, b) = slope(b, a) = (product * weight_squared_.array()).sum();
      }
    }
    SecularEvaluation result;
    const Eigen::SelfAdjointEigenSolver<SmallMatrix> eigen(M);
    const auto& values = eigen.eigenvalues();
    result.above = (D_.array() > mu).count() + (values.array() < 0.0).count() - negative_sign_;
    result.determinant = values.prod();
    // d det / d mu = det * tr(M^-1 dM/dmu), written with the eigendecomposition of M.
    const SmallMatrix rotated = eigen.eigenvectors().transpose() * slope * eigen.eigenvectors();
    double slope_sum = 0.0;
    for (Index a = 0; a < k; ++a) {
      double others = 1.0;
      for (Index b = 0; b < k; ++b)
        if (b != a) others *= values(b);
      slope_sum += rotated(a, a) * others;
    }
    result.determinant_slope = slope_sum;
    return result;
  }

 private:
  const VectorXd& D_;
  const MatrixXd& W_;
  const VectorXd& sign_;
  VectorXd weight_, weight_squared_;
  Index negative_sign_;
};

#pragma GCC diagnostic pop

}  // namespace

double largest_eigenvalue_diagonal_plus_low_rank(const VectorXd& D, const MatrixXd& U, const MatrixXd& S) {
  if (S.rows() > 3) throw std::invalid_argument("largest_eigenvalue_diagonal_plus_low_rank: rank > 3");
  // Write U S U^T = sum_k sign_k W_k W_k^T with W = U V |s|^(1/2) (S = V diag(s) V^T), so that
  // the k x k secular matrix stays well scaled however small or large the eigenvalues of S are.
  const Eigen::SelfAdjointEigenSolver<MatrixXd> s_solver(S);
  const VectorXd& s = s_solver.eigenvalues();
  const MatrixXd W = U * s_solver.eigenvectors() * s.cwiseAbs().cwiseSqrt().asDiagonal();  // p x k
  const VectorXd sign = s.unaryExpr([](double v) { return v < 0.0 ? -1.0 : 1.0; });
  const double d_max = D.size() ? D.maxCoeff() : 0.0;

  // Bracket: the largest diagonal entry of A is a lower bound, Weyl's inequality an upper one.
  const VectorXd diagonal = D + W.cwiseAbs2() * sign;
  double lo = diagonal.size() ? diagonal.maxCoeff() : 0.0;
  double hi = d_max + (W.colwise().squaredNorm().transpose().array() * (sign.array() > 0).cast<double>()).sum();
  if (!(hi > lo)) return lo;
  // Newton on det M(mu) from the top of the bracket, safeguarded: every evaluation also counts
  // the eigenvalues above its point, which shrinks the bracket; a Newton step that leaves the
  // bracket or does not halve it is replaced by bisection. Converges in ~6 steps, not ~47.
  SecularFunction secular(D, W, sign);
  double mu = hi, previous_width = hi - lo;
  for (int iteration = 0; iteration < 200 && hi - lo > 1e-15 * std::abs(hi); ++iteration) {
    const SecularEvaluation at = secular(mu);
    if (at.above >= 1) lo = std::max(lo, mu);
    else hi = std::min(hi, mu);
    double next = at.determinant_slope != 0.0 ? mu - at.determinant / at.determinant_slope : lo - 1.0;
    if (std::abs(next - mu) <= 1e-15 * std::abs(mu) && next >= lo && next <= hi) {
      // A tiny Newton step also happens next to a pole of det M (mu near some D_j): accept the
      // point only if the inertia count confirms the top eigenvalue lies within a few ulps.
      const double margin = 4e-15 * std::abs(next) + std::numeric_limits<double>::min();
      const bool below_is_inside = secular(next - margin).above >= 1;
      const bool above_is_clear = secular(next + margin).above == 0;
      if (below_is_inside && above_is_clear) return next;
      if (below_is_inside) lo = std::max(lo, next - margin);
      if (above_is_clear) hi = std::min(hi, next + margin);
      next = 0.5 * (lo + hi);
    }
    if (!(next > lo && next < hi) || hi - lo > 0.5 * previous_width) next = 0.5 * (lo + hi);
    previous_width = hi - lo;
    mu = next;
  }
  return 0.5 * (lo + hi);
}

// ---------------------------------------------------------------------------------------------

FisherInformationLoss::FisherInformationLoss(const Model& model, const Dataset& train,
                                             const VectorXd& omega, FilOptions options)
    : model_(model), train_(train), options_(options) {
  options_.validate();
  if (train.d() != model.input_dim())
    throw std::invalid_argument("FIL: the model takes " + std::to_string(model.input_dim()) +
                                " features but the data have " + std::to_string(train.d()));
  if (train.n() != model.n_train)
    throw std::invalid_argument("FIL: the model was fitted on " + std::to_string(model.n_train) +
                                " examples but the data have " + std::to_string(train.n()));
  omega_ = omega.size() ? omega : VectorXd::Ones(train.n());
  if (omega_.size() != train.n())
    throw std::invalid_argument("FIL: expected " + std::to_string(train.n()) + " example weights, got " +
                                std::to_string(omega_.size()));
  FitOptions coding;
  coding.kind = model.kind;
  coding.regression = model.regression;
  target_ = model.kind == ModelKind::kSoftmax ? train.y : model_targets(train, coding);
  scores_ = detail::Design(train.X, model.intercept).times(model.weights);
  H_ = filkit::hessian(model, train, omega_);
  const Eigen::SelfAdjointEigenSolver<MatrixXd> solver(H_);
  eigenvalues_ = solver.eigenvalues();
  eigenvectors_ = solver.eigenvectors();
  if (!(eigenvalues_(0) > 1e-13 * eigenvalues_(eigenvalues_.size() - 1)))
    throw std::runtime_error(
        "FIL: the Hessian H is singular (smallest eigenvalue " + std::to_string(eigenvalues_(0)) +
        "); the minimiser is not a differentiable function of the data. Set a positive --l2.");
  H_inverse_ = eigenvectors_ * eigenvalues_.cwiseInverse().asDiagonal() * eigenvectors_.transpose();
}

std::vector<Index> FisherInformationLoss::feature_indices(const CoordinateSelection& selection) const {
  if (selection.all_features) {
    std::vector<Index> all(static_cast<std::size_t>(train_.d()));
    for (Index j = 0; j < train_.d(); ++j) all[static_cast<std::size_t>(j)] = j;
    return all;
  }
  for (Index j : selection.features)
    if (j < 0 || j >= train_.d())
      throw std::invalid_argument("FIL: feature column " + std::to_string(j) + " is outside 0.." +
                                  std::to_string(train_.d() - 1));
  return selection.features;
}

Index FisherInformationLoss::private_dims(const CoordinateSelection& selection) const {
  const Index features = selection.all_features ? train_.d() : static_cast<Index>(selection.features.size());
  const Index label = selection.label ? (model_.kind == ModelKind::kSoftmax ? model_.num_classes : 1) : 0;
  return features + label;
}

MatrixXd FisherInformationLoss::derivative_of_gradient(Index i, const CoordinateSelection& selection) const {
  const std::vector<Index> features = feature_indices(selection);
  const Index offset = model_.intercept ? 1 : 0;
  const Index p = model_.weights.rows(), K = model_.weights.cols();
  const VectorXd x = detail::Design(train_.X, model_.intercept).row(i);
  MatrixXd B = MatrixXd::Zero(p * K, private_dims(selection));
  if (model_.kind != ModelKind::kSoftmax) {
    const detail::ScalarLoss loss = detail::scalar_loss(model_.kind, scores_(i, 0), target_(i));
    for (std::size_t c = 0; c < features.size(); ++c) {
      const Index j = features[c] + offset;
      B.col(static_cast<Index>(c)) = loss.second * model_.weights(j, 0) * x;
      B(j, static_cast<Index>(c)) += loss.first;
    }
    if (selection.label) B.col(B.cols() - 1) = -x;
    return B;
  }
  // Softmax: grad_W l = x (s - e_y)^T; d/dx_j = e_j (s - e_y)^T + x (Sigma W_j^T)^T with
  // Sigma = diag(s) - s s^T; d/d(one-hot y_k) = -x e_k^T. Flattened column by column.
  const VectorXd s = detail::class_probabilities(model_.kind, scores_.row(i).transpose());
  VectorXd residual = s;
  residual(static_cast<Index>(target_(i))) -= 1.0;
  const MatrixXd Sigma = MatrixXd(s.asDiagonal()) - s * s.transpose();
  for (std::size_t c = 0; c < features.size(); ++c) {
    const Index j = features[c] + offset;
    const VectorXd mixed = Sigma * model_.weights.row(j).transpose();  // K
    auto column = B.col(static_cast<Index>(c));
    for (Index k = 0; k < K; ++k) {
      column.segment(k * p, p) = mixed(k) * x;
      column(k * p + j) += residual(k);
    }
  }
  if (selection.label)
    for (Index k = 0; k < K; ++k) B.col(static_cast<Index>(features.size()) + k).segment(k * p, p) = -x;
  return B;
}

MatrixXd FisherInformationLoss::jacobian(Index i, const CoordinateSelection& selection) const {
  if (i < 0 || i >= train_.n())
    throw std::invalid_argument("FIL: example index " + std::to_string(i) + " is outside 0.." +
                                std::to_string(train_.n() - 1));
  return -omega_(i) * (H_inverse_ * derivative_of_gradient(i, selection));
}

MatrixXd FisherInformationLoss::jacobian(Index i) const {
  return jacobian(i, CoordinateSelection::example(options_.label));
}

PerExampleFil FisherInformationLoss::per_example() const {
  if (options_.structured && model_.kind != ModelKind::kSoftmax) return per_example_structured();
  return per_example_dense();
}

PerExampleFil FisherInformationLoss::per_example_dense() const {
  const CoordinateSelection selection = CoordinateSelection::example(options_.label);
  const Index n = train_.n();
  PerExampleFil result{VectorXd(n), VectorXd(n), private_dims(selection)};
#pragma omp parallel for schedule(dynamic, 16)
  for (Index i = 0; i < n; ++i) {
    const MatrixXd J = jacobian(i, selection);
    const MatrixXd gram = J.cols() <= J.rows() ? MatrixXd(J.transpose() * J) : MatrixXd(J * J.transpose());
    result.eta(i) = std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(gram)));
    result.dfil(i) = std::sqrt(J.squaredNorm() / static_cast<double>(result.private_dims));
  }
  result.eta /= options_.sigma;
  result.dfil /= options_.sigma;
  return result;
}

PerExampleFil FisherInformationLoss::per_example_structured() const {
  // In H's eigenbasis (H = Q diag(lambda) Q^T, lambda ascending so D0 = lambda^-2 descends):
  // J_i J_i^T ~ omega^2 [r^2 D0 + U S U^T], U = diag(1/lambda) Q^T [x, w_private, e_0].
  const CoordinateSelection selection = CoordinateSelection::example(options_.label);
  const Index n = train_.n(), p = H_.rows(), d = train_.d();
  const bool intercept = model_.intercept;
  const Index k = intercept ? 3 : 2;
  const VectorXd inverse = eigenvalues_.cwiseInverse();
  const VectorXd D0 = inverse.cwiseAbs2();
  const double trace_D0 = D0.sum();
  VectorXd w_private = model_.weights.col(0);
  if (intercept) w_private(0) = 0.0;
  const double w_norm2 = w_private.squaredNorm();
  MatrixXd fixed(p, k - 1);  // rotated, scaled w (and e_0)
  fixed.col(0) = inverse.cwiseProduct(eigenvectors_.transpose() * w_private);
  if (intercept) fixed.col(1) = inverse.cwiseProduct(eigenvectors_.row(0).transpose());
  const MatrixXd fixed_gram = fixed.transpose() * fixed;
  const double label = selection.label ? 1.0 : 0.0;

  PerExampleFil result{VectorXd(n), VectorXd(n), private_dims(selection)};
  constexpr Index kBlock = 1024;  // rows rotated per GEMM; bounds memory at kBlock x p
  for (Index start = 0; start < n; start += kBlock) {
    const Index count = std::min(kBlock, n - start);
    MatrixXd rotated = train_.X.middleRows(start, count) * eigenvectors_.bottomRows(d);
    if (intercept) rotated.rowwise() += eigenvectors_.row(0);
#pragma omp parallel for schedule(static)
    for (Index b = 0; b < count; ++b) {
      const Index i = start + b;
      const detail::ScalarLoss loss = detail::scalar_loss(model_.kind, scores_(i, 0), target_(i));
      const double c = loss.second, r = loss.first;
      MatrixXd U(p, k);
      U.col(0) = inverse.cwiseProduct(rotated.row(b).transpose());
      U.rightCols(k - 1) = fixed;
      MatrixXd S = MatrixXd::Zero(k, k);
      S(0, 0) = c * c * w_norm2 + label;
      S(0, 1) = S(1, 0) = c * r;
      if (intercept) S(2, 2) = -r * r;  // the intercept coordinate is public
      MatrixXd gram(k, k);
      gram(0, 0) = U.col(0).squaredNorm();
      gram.block(0, 1, 1, k - 1) = U.col(0).transpose() * fixed;
      gram.block(1, 0, k - 1, 1) = gram.block(0, 1, 1, k - 1).transpose();
      gram.bottomRightCorner(k - 1, k - 1) = fixed_gram;
      const double trace = r * r * trace_D0 + (S.array() * gram.array()).sum();
      const double top = largest_eigenvalue_diagonal_plus_low_rank(r * r * D0, U, S);
      const double w2 = omega_(i) * omega_(i);
      result.eta(i) = std::sqrt(std::max(0.0, w2 * top));
      result.dfil(i) = std::sqrt(std::max(0.0, w2 * trace) / static_cast<double>(result.private_dims));
    }
  }
  result.eta /= options_.sigma;
  result.dfil /= options_.sigma;
  return result;
}

VectorXd FisherInformationLoss::per_example_selection(const CoordinateSelection& selection) const {
  if (selection.all_features && selection.label == (options_.label == LabelPrivacy::kPrivate))
    return per_example().eta;
  feature_indices(selection);  // validate here: an exception must not leave the parallel loop
  const Index n = train_.n();
  VectorXd eta(n);
#pragma omp parallel for schedule(dynamic, 16)
  for (Index i = 0; i < n; ++i) {
    const MatrixXd J = jacobian(i, selection);
    eta(i) = std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(J.transpose() * J)));
  }
  return eta / options_.sigma;
}

MatrixXd FisherInformationLoss::selection_gram(const std::vector<Index>& rows,
                                               const CoordinateSelection& selection) const {
  // sum_{i in rows} omega_i^2 B_i,sel B_i,sel^T (p x p): the subset's J_S J_S^T before H^-1.
  const Index P = H_.rows();
  MatrixXd M = MatrixXd::Zero(P, P);
  if (model_.kind == ModelKind::kSoftmax) {
    for (Index i : rows) {
      const MatrixXd B = derivative_of_gradient(i, selection);
      M.noalias() += (omega_(i) * omega_(i)) * (B * B.transpose());
    }
    return M;
  }
  // Binary: B B^T = (c^2 ||w_sel||^2 + label) x x^T + c r (x w_sel^T + w_sel x^T) + r^2 E_sel.
  const Index offset = model_.intercept ? 1 : 0;
  VectorXd w_selected = VectorXd::Zero(P), e_selected = VectorXd::Zero(P);
  for (Index j : feature_indices(selection)) {
    w_selected(j + offset) = model_.weights(j + offset, 0);
    e_selected(j + offset) = 1.0;
  }
  const double w_norm2 = w_selected.squaredNorm(), label = selection.label ? 1.0 : 0.0;
  const detail::Design design(train_.X, model_.intercept);
  VectorXd cross = VectorXd::Zero(P);
  double residual_sum = 0.0;
  constexpr Index kBlock = 1024;
  for (std::size_t start = 0; start < rows.size(); start += kBlock) {
    const Index count = static_cast<Index>(std::min<std::size_t>(kBlock, rows.size() - start));
    MatrixXd X(count, P);
    VectorXd outer(count), mixed(count);
    for (Index b = 0; b < count; ++b) {
      const Index i = rows[start + static_cast<std::size_t>(b)];
      const detail::ScalarLoss loss = detail::scalar_loss(model_.kind, scores_(i, 0), target_(i));
      const double w2 = omega_(i) * omega_(i);
      X.row(b) = design.row(i).transpose();
      outer(b) = w2 * (loss.second * loss.second * w_norm2 + label);
      mixed(b) = w2 * loss.second * loss.first;
      residual_sum += w2 * loss.first * loss.first;
    }
    M.noalias() += X.transpose() * (outer.asDiagonal() * X);
    cross.noalias() += X.transpose() * mixed;
  }
  M += cross * w_selected.transpose() + w_selected * cross.transpose();
  M.diagonal() += residual_sum * e_selected;
  return M;
}

SubsetFil FisherInformationLoss::subset(const std::vector<Index>& rows, const CoordinateSelection& selection) const {
  std::vector<Index> chosen = rows;
  if (chosen.empty()) {
    chosen.resize(static_cast<std::size_t>(train_.n()));
    for (Index i = 0; i < train_.n(); ++i) chosen[static_cast<std::size_t>(i)] = i;
  }
  for (Index i : chosen)
    if (i < 0 || i >= train_.n())
      throw std::invalid_argument("FIL subset: row " + std::to_string(i) + " is outside 0.." +
                                  std::to_string(train_.n() - 1));
  const MatrixXd M = selection_gram(chosen, selection);
  // H^-1 M H^-1 has the eigenvalues of diag(1/lambda) Q^T M Q diag(1/lambda).
  const VectorXd inverse = eigenvalues_.cwiseInverse();
  const MatrixXd rotated =
      inverse.asDiagonal() * (eigenvectors_.transpose() * M * eigenvectors_) * inverse.asDiagonal();
  SubsetFil result;
  result.examples = static_cast<Index>(chosen.size());
  result.coordinates = result.examples * private_dims(selection);
  result.eta = std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(rotated))) / options_.sigma;
  result.dfil = std::sqrt(std::max(0.0, rotated.trace()) / static_cast<double>(result.coordinates)) /
                options_.sigma;
  return result;
}

// ---------------------------------------------------------------------------------------------

double composed_sigma(const std::vector<double>& sigmas) {
  if (sigmas.empty()) throw std::invalid_argument("composed_sigma: no releases given");
  double precision = 0.0;
  for (double sigma : sigmas) {
    if (!(sigma > 0.0) || !std::isfinite(sigma))
      throw std::invalid_argument("composed_sigma: sigma = " + std::to_string(sigma) + " must be finite and > 0");
    precision += 1.0 / (sigma * sigma);
  }
  return 1.0 / std::sqrt(precision);
}

double composed_fil(const std::vector<MatrixXd>& information_matrices) {
  if (information_matrices.empty()) throw std::invalid_argument("composed_fil: no releases given");
  MatrixXd total = MatrixXd::Zero(information_matrices[0].rows(), information_matrices[0].cols());
  for (const MatrixXd& I : information_matrices) {
    if (I.rows() != total.rows() || I.cols() != total.cols())
      throw std::invalid_argument("composed_fil: information matrices of different shapes");
    total += I;
  }
  return std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(0.5 * (total + total.transpose()))));
}

}  // namespace filkit
