// Lower bounds on the error of reconstructing a training example from an output-perturbed GLM
// (docs/mathematics.md, section 6; Guo, Karrer, Chaudhuri and van der Maaten, "Bounding training
// data reconstruction in private (deep) learning", ICML 2022, sections 4, 5 and 7.1).
//
// The attacker sees w' = w* + N(0, sigma^2 I) and everything but the target example z (d private
// coordinates; the label is public). Its error is MSE = E ||z_hat - z||^2 / d.
//
// - RDP bound (Theorem 1): if the learner is (2, eps)-RDP, an unbiased attacker has
//     MSE >= sum_i diam_i^2 / (4 d (e^eps - 1)),
//   diam_i = the range of coordinate i (data in [0,1]^d: 1 / (4 (e^eps - 1))).
// - Output-perturbed L2-regularised logistic regression (Chaudhuri, Monteleoni and Sarwate 2011):
//   the loss is 1-Lipschitz in the score, so replacing one example moves w* by at most
//   2 R / (n lambda) when every design row has ||x~|| <= R; the Gaussian mechanism of that
//   sensitivity is (alpha, alpha Delta^2 / (2 sigma^2))-RDP, so at alpha = 2
//     eps = 4 R^2 / (n lambda sigma)^2      (the paper uses R = 1).
// - FIL bound (Theorem 2, Cramer-Rao): an unbiased attacker has MSE >= d / Tr(I) = 1 / eta_bar^2
//   (dFIL) >= 1 / eta^2 (FIL), with I the Fisher information of w' about z.
// - Perfect privacy: guessing any point of the data domain already achieves
//   MSE <= sum_i diam_i^2 / d (= 1 for [0,1]^d), so a lower bound at or above that line means the
//   release tells the attacker nothing a blind guess would not (the paper's "perfect privacy"
//   threshold, the dotted line MSE = 1 of its Figures 2 and 3).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

#include <string>

namespace filkit {

/// eps of the (2, eps)-RDP of output perturbation of a model whose loss is 1-Lipschitz in the
/// score (logistic regression): eps = 4 R^2 / (n lambda sigma)^2, with R a bound on the design
/// rows' norm ([1, x] with an intercept). n >= 1, lambda > 0, sigma > 0, R > 0, else
/// std::invalid_argument naming the argument.
double output_perturbation_rdp_epsilon(Index n, double l2, double sigma, double norm_bound = 1.0);

/// Theorem 1 for an unbiased attacker: sum_i diam_i^2 / (4 d (e^eps - 1)) (computed with expm1,
/// so small eps keeps its precision; infinite at eps = 0). `diameters` has one positive entry per
/// private coordinate.
double rdp_mse_bound(double epsilon, const VectorXd& diameters);
/// The same with every coordinate's diameter equal: diam^2 / (4 (e^eps - 1)).
double rdp_mse_bound(double epsilon, double diameter = 1.0);

/// The perfect-privacy line sum_i diam_i^2 / d: the worst MSE of an attacker who guesses any
/// point of the domain without looking at the model (1 for [0,1]^d).
double perfect_privacy_mse(const VectorXd& diameters);

/// Share of `bounds` at or above `line` (NaN entries count as below). NaN for an empty vector.
double share_at_or_above(const VectorXd& bounds, double line);

/// Whether the design rows satisfy the norm assumption ||x~|| <= bound of the RDP guarantee.
/// With an intercept the design row is [1, x], so its norm is at least 1.
struct NormCheck {
  double bound = 1.0;     ///< the assumed R
  double max_norm = 0.0;  ///< the largest design-row norm found
  Index worst_row = -1;   ///< the row attaining it (-1 for no rows)
  Index violations = 0;   ///< rows with norm > bound (1e-12 relative slack for rounding)
  bool satisfied() const { return violations == 0; }
  /// A one-line explanation for a warning when not satisfied ("" otherwise).
  std::string message() const;
};
NormCheck check_norm_assumption(const RowMatrix& X, bool intercept, double bound = 1.0);

/// Settings of the reconstruction bounds of one output-perturbed model.
struct ReconstructionBoundOptions {
  /// Standard deviation of the output perturbation, finite and > 0.
  double sigma = 1e-2;
  /// Range of every private coordinate (diam_i of Theorem 1) when `diameters` is empty; default
  /// 1 (pixels in [0,1]). Finite and > 0.
  double diameter = 1.0;
  /// Per-coordinate ranges: empty, or one finite positive value per feature.
  VectorXd diameters{};
  /// R of the norm assumption ||x~|| <= R under which the RDP epsilon is stated, > 0. The
  /// paper's eps = 4 / (n lambda sigma)^2 is R = 1.
  double norm_bound = 1.0;
  void validate() const;
};

/// Everything `filkit bound` reports. Labels are public (the paper's setting): the private
/// coordinates are the d features.
struct ReconstructionBounds {
  double rdp_epsilon = 0.0;             ///< eps at R = options.norm_bound (the stated guarantee)
  double rdp_epsilon_at_data_norm = 0;  ///< eps at R = the data's largest design-row norm
  double rdp_mse_bound = 0.0;           ///< Theorem 1 at rdp_epsilon
  double rdp_mse_bound_at_data_norm = 0.0;
  double perfect_privacy_mse = 1.0;  ///< sum diam^2 / d
  NormCheck norm_check;
  PerExampleFil fil;                         ///< eta and dfil of every example (label public)
  VectorXd dfil_bound;                       ///< 1 / eta_bar^2 (Theorem 2, unbiased, whole example)
  VectorXd fil_bound;                        ///< 1 / eta^2 (the weaker form of Theorem 2)
  double share_dfil_bound_above_line = 0.0;  ///< share of examples with dfil_bound >= the line
  double share_fil_bound_above_line = 0.0;
};

/// Bounds of a fitted binary logistic regression released with output perturbation. O(n d^2)
/// (FisherInformationLoss::per_example, no Jacobian is stored). Throws std::invalid_argument for
/// a model other than logistic (the RDP guarantee needs the 1-Lipschitz loss) or diameters of
/// the wrong length, and whatever FisherInformationLoss throws.
///
/// On several ranks of `comm` (collective), `train` is this rank's shard: n and the norm check are
/// of all ranks' rows (worst_row a row of the whole training set), and the per-example vectors of
/// all of them are gathered at rank 0 (empty elsewhere, with the shares left at 0).
ReconstructionBounds reconstruction_bounds(const Model& model, const Dataset& train,
                                           const ReconstructionBoundOptions& options,
                                           const Communicator& comm = Communicator::local());

}  // namespace filkit
