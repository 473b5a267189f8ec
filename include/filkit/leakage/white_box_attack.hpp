// The white-box attribute-inference adversary (docs/mathematics.md, section 5; FIL paper section
// 6.4): it knows everything but example i's attribute and how the model was trained, including the
// example weights omega, and guesses argmin_v ||w' - f(D with x_i's attribute set to v)||.
//
//
// The candidate minimisers f(D with v) do not depend on the noise: they are computed once and
// reused by every trial and sigma, stored as shifts f(D with v) - w* (the true level's is 0).
// Least squares (solver kUpdate): changing x_i to x_i' changes H = X^T W X + n lambda I by
// omega_i (x' x'^T - x x^T) and X^T W t by omega_i t_i (x' - x), so with A = H^-1 and
// U = [x, x'], C = omega_i diag(-1, 1), Woodbury gives
//   f(D with v) - w* = omega_i t_i (A x' - A x) - A U (I + C U^T A U)^-1 C U^T A b',
//   A b' = w* + omega_i t_i (A x' - A x),
// O(p^2) per example (A x) and O(p k) per candidate (A x' = A x + A[:, block] (v - x_block)).
// Logistic (kUpdate): chord Newton from w* with H(w*) corrected for the changed example by the
// same rank-2 Woodbury form, an exact gradient (O(n p)) each step, to the fit's gradient
// tolerance; a candidate whose gradient stops halving at every step (the changed Hessian is
// far from H(w*): small n, near-separable data) falls back to refit() (counted). kRefit is the
// naive reference: a full refit per candidate (least squares: a new Cholesky solve; logistic:
// Newton warm-started from w*).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/enum_names.hpp"
#include "filkit/leakage/attribute_candidates.hpp"
#include "filkit/models/glm.hpp"

#include <vector>

namespace filkit {

enum class WhiteBoxSolver { kUpdate, kRefit };
template <>
struct EnumNames<WhiteBoxSolver> {
  static constexpr const char* what = "white-box solver";
  static constexpr std::pair<WhiteBoxSolver, const char*> names[] = {{WhiteBoxSolver::kUpdate, "update"},
                                                                     {WhiteBoxSolver::kRefit, "refit"}};
};

/// f(D with x_e's attribute at level k) - w* for every attacked example e and level k.
struct CandidateMinimisers {
  std::vector<Index> examples;  ///< attacked training examples
  Index levels = 0;             ///< K
  MatrixXd shifts;              ///< (m K) x p, row e K + k; zero at the true level
  VectorXd squared_norms;       ///< ||shift||^2 of every row
  Index fallback_refits = 0;    ///< logistic kUpdate: candidates that needed a full refit
  double seconds = 0.0;
};

/// Computes the candidate minimisers of `model` (fitted on `train` with `omega`, empty = 1).
/// Parallel over examples (OpenMP); the result is bitwise identical for any thread count.
/// On the ranks of an MPI job (collective; docs/distributed.md) `train`, `omega`, the candidates'
/// truth and `examples` are the rank's own rows, and H is that of all ranks; least squares by
/// updates computes each rank's examples on it, in parallel, while logistic updates and refits,
/// whose every step sums over all rows, take the ranks' examples one at a time, all ranks together.
/// Each rank gets the shifts of its examples. Throws std::invalid_argument for softmax models or
/// shape mismatches; std::runtime_error if a refit fails or a Woodbury system is singular.
CandidateMinimisers candidate_minimisers(const Model& model, const Dataset& train, const VectorXd& omega,
                                         const AttributeCandidates& candidates, const std::vector<Index>& examples,
                                         const FitOptions& options, WhiteBoxSolver solver, bool progress = false,
                                         const Communicator& comm = Communicator::local());

/// White-box guesses for noise b = w' - w*: argmin_k ||b - shift_{e,k}|| for every attacked
/// example (ties: the lower level).
std::vector<Index> white_box_guesses(const CandidateMinimisers& minimisers, const VectorXd& noise);

}  // namespace filkit
