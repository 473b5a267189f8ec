#include "filkit/leakage/fil.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"

#include "filkit/base/low_rank_eigen.hpp"
#include "base/parallel_blocks.hpp"
#include "models/glm_loss.hpp"

#include <Eigen/Eigenvalues>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace filkit {

void FilOptions::validate() const { require_positive("sigma", sigma); }

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

// ---------------------------------------------------------------------------------------------

FisherInformationLoss::FisherInformationLoss(const Model& model, const Dataset& train, const VectorXd& omega,
                                             FilOptions options, const Communicator& comm)
    : model_(model), train_(train), options_(options), comm_(&comm) {
  options_.validate();
  if (train.d() != model.input_dim())
    throw DataError("FIL: the model takes " + std::to_string(model.input_dim()) + " features but the data have " +
                    std::to_string(train.d()));
  if (const Index n = comm.sum(train.n()); n != model.n_train)
    throw DataError("FIL: the model was fitted on " + std::to_string(model.n_train) + " examples but the data have " +
                    std::to_string(n));
  omega_ = omega.size() ? omega : VectorXd::Ones(train.n());
  if (omega_.size() != train.n())
    throw OptionError::with_text("example_weights", "FIL: expected " + std::to_string(train.n()) +
                                                        " example weights, got " + std::to_string(omega_.size()));
  FitOptions coding;
  coding.kind = model.kind;
  coding.regression = model.regression;
  target_ = model.kind == ModelKind::kSoftmax ? train.y : model_targets(train, coding);
  scores_ = detail::Design(train.X, model.intercept).times(model.weights);
  H_ = filkit::hessian(model, train, omega_, comm);
  const Eigen::SelfAdjointEigenSolver<MatrixXd> solver(H_);
  eigenvalues_ = solver.eigenvalues();
  eigenvectors_ = solver.eigenvectors();
  if (!(eigenvalues_(0) > 1e-13 * eigenvalues_(eigenvalues_.size() - 1)))
    throw NumericalError(
        "FIL: the Hessian H is singular (smallest eigenvalue " + std::to_string(eigenvalues_(0)) +
        "); the minimiser is not a differentiable function of the data. Set a positive l2 (L2 strength).");
  const MatrixXd scaled_eigenvectors = eigenvectors_ * eigenvalues_.cwiseInverse().asDiagonal();
  H_inverse_ = detail::product_in_column_blocks(scaled_eigenvectors, eigenvectors_.transpose());
}

std::vector<Index> FisherInformationLoss::feature_indices(const CoordinateSelection& selection) const {
  if (selection.all_features) {
    std::vector<Index> all(static_cast<std::size_t>(train_.d()));
    for (Index j = 0; j < train_.d(); ++j) all[static_cast<std::size_t>(j)] = j;
    return all;
  }
  for (Index j : selection.features)
    if (j < 0 || j >= train_.d())
      throw OptionError::with_text(
          "attribute", "FIL: feature column " + std::to_string(j) + " is outside 0.." + std::to_string(train_.d() - 1));
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
    throw OptionError::with_text(
        "index", "FIL: example index " + std::to_string(i) + " is outside 0.." + std::to_string(train_.n() - 1));
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
  constexpr Index kBlock = 128;  // rows rotated per GEMM, a block to a thread; bounds memory at kBlock x p
  detail::for_each_block(n, kBlock, [&](Index start, Index count) {
    MatrixXd rotated = train_.X.middleRows(start, count) * eigenvectors_.bottomRows(d);
    if (intercept) rotated.rowwise() += eigenvectors_.row(0);
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
  });
  result.eta /= options_.sigma;
  result.dfil /= options_.sigma;
  return result;
}

VectorXd FisherInformationLoss::per_example_selection(const CoordinateSelection& selection) const {
  if (selection.all_features && selection.label == (options_.label == LabelPrivacy::kPrivate)) return per_example().eta;
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
  const auto m = static_cast<Index>(rows.size());
  const auto row = [&rows](Index k) { return rows[static_cast<std::size_t>(k)]; };
  const std::vector<Index> features = feature_indices(selection);  // throws here, not in the parallel loop
  MatrixXd M = MatrixXd::Zero(P, P);
  if (model_.kind == ModelKind::kSoftmax) {
    constexpr Index kBlock = 16;  // examples a partial sum: each adds a (p K) x (p K) product
    detail::reduce_blocks_in_order(
        m, kBlock, M,
        [&](MatrixXd& partial, Index start, Index count) {
          for (Index k = start; k < start + count; ++k) {
            const MatrixXd B = derivative_of_gradient(row(k), selection);
            partial.noalias() += (omega_(row(k)) * omega_(row(k))) * (B * B.transpose());
          }
        },
        [&](const MatrixXd& partial) { M += partial; });
    return M;
  }
  // Binary: B B^T = (c^2 ||w_sel||^2 + label) x x^T + c r (x w_sel^T + w_sel x^T) + r^2 E_sel.
  const Index offset = model_.intercept ? 1 : 0;
  VectorXd w_selected = VectorXd::Zero(P), e_selected = VectorXd::Zero(P);
  for (Index j : features) {
    w_selected(j + offset) = model_.weights(j + offset, 0);
    e_selected(j + offset) = 1.0;
  }
  const double w_norm2 = w_selected.squaredNorm(), label = selection.label ? 1.0 : 0.0;
  const detail::Design design(train_.X, model_.intercept);
  // The three sums of the expansion, over one block of the rows.
  struct Sums {
    MatrixXd outer;       // sum w2 (c^2 ||w_sel||^2 + label) x x^T
    VectorXd cross;       // sum w2 c r x
    double residual_sum;  // sum w2 r^2
  };
  Sums total{M, VectorXd::Zero(P), 0.0};
  constexpr Index kBlock = 1024;
  detail::reduce_blocks_in_order(
      m, kBlock, total,
      [&, X = MatrixXd()](Sums& partial, Index start, Index count) mutable {
        X.resize(count, P);
        VectorXd outer(count), mixed(count);
        for (Index b = 0; b < count; ++b) {
          const Index i = row(start + b);
          const detail::ScalarLoss loss = detail::scalar_loss(model_.kind, scores_(i, 0), target_(i));
          const double w2 = omega_(i) * omega_(i);
          X.row(b) = design.row(i).transpose();
          outer(b) = w2 * (loss.second * loss.second * w_norm2 + label);
          mixed(b) = w2 * loss.second * loss.first;
          partial.residual_sum += w2 * loss.first * loss.first;
        }
        partial.outer.noalias() = X.transpose() * (outer.asDiagonal() * X);
        partial.cross.noalias() = X.transpose() * mixed;
      },
      [&](const Sums& partial) {
        total.outer += partial.outer;
        total.cross += partial.cross;
        total.residual_sum += partial.residual_sum;
      });
  M = std::move(total.outer);
  M += total.cross * w_selected.transpose() + w_selected * total.cross.transpose();
  M.diagonal() += total.residual_sum * e_selected;
  return M;
}

SubsetFil FisherInformationLoss::subset(const std::vector<Index>& rows, const CoordinateSelection& selection) const {
  if (!rows.empty()) return subset_of_rows(rows, selection);
  std::vector<Index> all(static_cast<std::size_t>(train_.n()));
  std::iota(all.begin(), all.end(), Index{0});
  return subset_of_rows(all, selection);
}

SubsetFil FisherInformationLoss::subset_of_rows(const std::vector<Index>& chosen,
                                                const CoordinateSelection& selection) const {
  for (Index i : chosen)
    if (i < 0 || i >= train_.n())
      throw OptionError::with_text(
          "rows", "FIL subset: row " + std::to_string(i) + " is outside 0.." + std::to_string(train_.n() - 1));
  MatrixXd M = selection_gram(chosen, selection);
  comm_->sum(M);  // the other ranks' rows
  // H^-1 M H^-1 has the eigenvalues of diag(1/lambda) Q^T M Q diag(1/lambda).
  const VectorXd inverse = eigenvalues_.cwiseInverse();
  const MatrixXd rotated =
      inverse.asDiagonal() *
      detail::product_in_column_blocks(eigenvectors_.transpose(), detail::product_in_column_blocks(M, eigenvectors_)) *
      inverse.asDiagonal();
  SubsetFil result;
  result.examples = comm_->sum(static_cast<Index>(chosen.size()));
  result.coordinates = result.examples * private_dims(selection);
  result.eta = std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(rotated))) / options_.sigma;
  result.dfil = std::sqrt(std::max(0.0, rotated.trace()) / static_cast<double>(result.coordinates)) / options_.sigma;
  return result;
}

// ---------------------------------------------------------------------------------------------

double composed_sigma(const std::vector<double>& sigmas) {
  if (sigmas.empty()) throw OptionError::with_text("sigmas", "composed_sigma: no releases given");
  double precision = 0.0;
  for (double sigma : sigmas) {
    if (!(sigma > 0.0) || !std::isfinite(sigma))
      throw OptionError::with_text("sigmas",
                                   "composed_sigma: sigma = " + format_double(sigma) + " must be finite and > 0");
    precision += 1.0 / (sigma * sigma);
  }
  return 1.0 / std::sqrt(precision);
}

double composed_fil(const std::vector<MatrixXd>& information_matrices) {
  if (information_matrices.empty())
    throw OptionError::with_text("information_matrices", "composed_fil: no releases given");
  MatrixXd total = MatrixXd::Zero(information_matrices[0].rows(), information_matrices[0].cols());
  for (const MatrixXd& I : information_matrices) {
    if (I.rows() != total.rows() || I.cols() != total.cols())
      throw OptionError::with_text("information_matrices", "composed_fil: information matrices of different shapes");
    total += I;
  }
  return std::sqrt(std::max(0.0, largest_symmetric_eigenvalue(0.5 * (total + total.transpose()))));
}

}  // namespace filkit
