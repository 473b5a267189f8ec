// Fisher information loss (FIL) of an output-perturbed GLM (docs/mathematics.md, sections 2 and 3;
// Hannun, Guo and van der Maaten, "Measuring data leakage in machine-learning models with
// Fisher information").
//
// The released model is w' = w* + N(0, sigma^2 I). Its Fisher information about the data vector
// z is I(z) = J^T J / sigma^2 with J = dw*/dz, which the implicit-function theorem gives block by
// block:
//
//   J_i = -omega_i H^{-1} B_i,   B_i = d/d(x, y) grad_w l(w.x, y) at (x_i, y_i),
//   H   = sum_i omega_i grad^2_w l_i + n*lambda*I.
//
// FIL of a set of private coordinates S is eta_S = ||J_S||_2 / sigma, its trace form (dFIL,
// Guo et al.) eta_bar_S = ||J_S||_F / (sigma sqrt(|S|)). By Cramer-Rao an unbiased estimate of a
// private coordinate has variance >= 1/eta^2 and an unbiased reconstruction of a whole example
// has per-coordinate MSE >= 1/eta_bar^2.
//
// Cost: H is factorised once. For the binary models B_i is rank one plus a multiple of the
// identity, so J_i J_i^T = omega_i^2 [r^2 H^{-2} + V S V^T] with V = H^{-1}[x_i, w] (and the
// intercept's unit vector): in H's eigenbasis a diagonal plus rank-2 (or 3) matrix whose largest
// eigenvalue is found exactly by bisection on Sylvester's inertia count, O(d) per step. Memory
// is O(n + d^2) beyond the data: Jacobians are never all stored.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/models/glm.hpp"
#include "filkit/models/label_privacy.hpp"

#include <string>
#include <vector>

namespace filkit {

struct FilOptions {
  /// Standard deviation of the output perturbation, > 0. FIL scales as 1/sigma.
  double sigma = 1.0;
  LabelPrivacy label = LabelPrivacy::kPrivate;
  /// Per-example FIL of binary models by the structured (eigenbasis + inertia) path; false uses
  /// the dense Jacobian of every example (O(p^2 d) each; the reference, and softmax's only path).
  bool structured = true;
  void validate() const;
};

/// The user-facing fields of FilOptions.
template <class Visit>
void visit_fields(FilOptions& o, Visit&& visit) {
  visit("sigma", o.sigma, "Standard deviation of the output perturbation w' = w* + N(0, sigma^2 I), > 0");
  visit("label", o.label, "Whether labels are private coordinates: private or public");
}

/// FIL and dFIL of every training example, with their Cramer-Rao bounds.
struct PerExampleFil {
  VectorXd eta;        ///< ||J_i||_2 / sigma
  VectorXd dfil;       ///< eta_bar_i = ||J_i||_F / (sigma sqrt(d_z))
  Index private_dims;  ///< d_z: private coordinates per example
  /// 1/eta^2: variance lower bound of an unbiased estimate of the most exposed coordinate direction.
  VectorXd attribute_mse_bound() const;
  /// 1/eta_bar^2: per-coordinate MSE lower bound of an unbiased reconstruction of the example.
  VectorXd example_mse_bound() const;
};

/// FIL of one set of private coordinates (a group of examples, an attribute over many examples,
/// the whole training set).
struct SubsetFil {
  double eta = 0.0;   ///< sqrt(lambda_max(sum_{i in S} J_i,cols J_i,cols^T)) / sigma
  double dfil = 0.0;  ///< sqrt(trace / coordinates) / sigma
  Index examples = 0;
  Index coordinates = 0;
};

/// Which private coordinates of an example: some feature columns (indices into X's columns;
/// empty = all features) and optionally the label.
struct CoordinateSelection {
  std::vector<Index> features;
  bool all_features = true;
  bool label = true;
  /// All features, with the label as `privacy` says.
  static CoordinateSelection example(LabelPrivacy privacy);
  /// Only these feature columns (an attribute or one-hot block), no label.
  static CoordinateSelection columns(std::vector<Index> features);
};

/// The Jacobian dw*/dz of a fitted model and everything derived from it. Construction factorises
/// H once (O(p^3)); every query reuses it. Every result is bitwise identical for any number of
/// OpenMP threads. Throws std::runtime_error if H is not positive definite (lambda = 0 with
/// collinear features).
///
/// On several ranks of `comm`, `train` and `omega` are this rank's shard of a model fitted on all
/// shards (fit with the same Communicator): construction and subset() are collective (H and the
/// group sums are added over the ranks); per-example results are of this rank's rows.
class FisherInformationLoss {
 public:
  FisherInformationLoss(const Model& model, const Dataset& train, const VectorXd& omega = VectorXd(),
                        FilOptions options = FilOptions(), const Communicator& comm = Communicator::local());

  /// Per-example FIL and dFIL of all private coordinates of each example (O(n d^2) in total for
  /// the binary models). Parallel over examples with OpenMP.
  PerExampleFil per_example() const;
  /// Per-example FIL of the chosen coordinates of each example (e.g. one attribute's block).
  VectorXd per_example_selection(const CoordinateSelection& selection) const;
  /// FIL of the chosen coordinates of the chosen examples taken together (rows empty = all; on
  /// several ranks: this rank's rows, joined with the other ranks' choices).
  SubsetFil subset(const std::vector<Index>& rows, const CoordinateSelection& selection) const;
  /// The same, with empty `rows` meaning none of this rank's rows (a group that lives on other ranks).
  SubsetFil subset_of_rows(const std::vector<Index>& rows, const CoordinateSelection& selection) const;

  /// The dense Jacobian J_i restricted to `selection` (p x |selection|), columns: the features
  /// in order, then the label (or the K one-hot label coordinates for softmax).
  MatrixXd jacobian(Index i, const CoordinateSelection& selection) const;
  /// J_i with every private coordinate (as the options' label privacy says).
  MatrixXd jacobian(Index i) const;

  Index num_params() const { return H_.rows(); }
  Index private_dims(const CoordinateSelection& selection) const;
  const FilOptions& options() const { return options_; }
  const MatrixXd& hessian() const { return H_; }

 private:
  MatrixXd derivative_of_gradient(Index i, const CoordinateSelection& selection) const;  // B_i
  MatrixXd selection_gram(const std::vector<Index>& rows, const CoordinateSelection& selection) const;
  PerExampleFil per_example_structured() const;
  PerExampleFil per_example_dense() const;
  std::vector<Index> feature_indices(const CoordinateSelection& selection) const;

  Model model_;
  const Dataset& train_;
  VectorXd omega_;
  FilOptions options_;
  const Communicator* comm_;
  VectorXd target_;  // the model's targets (coded)
  MatrixXd scores_;  // n x K
  MatrixXd H_;       // p x p
  MatrixXd H_inverse_;
  VectorXd eigenvalues_;  // of H, ascending
  MatrixXd eigenvectors_;
};

/// Effective noise of k independent releases of the same model with noise sigma_1..sigma_k:
/// their Fisher informations add, I = J^T J sum_k sigma_k^-2, so they leak as one release with
/// sigma = (sum_k sigma_k^-2)^(-1/2). Equal sigmas give sigma / sqrt(k), i.e. eta * sqrt(k).
double composed_sigma(const std::vector<double>& sigmas);

/// FIL of independent releases with Fisher information matrices I_1..I_k about the same data:
/// sqrt(lambda_max(sum_k I_k)) <= sqrt(sum_k eta_k^2).
double composed_fil(const std::vector<MatrixXd>& information_matrices);

}  // namespace filkit
