// Softmax regression's released vector under a constant learned perturbation, its exact Jacobian
// trace and the gradient model's training objective, each in a few products of O(B p K)
// (docs/mathematics.md, section 11.7; Edmunds 2024, chapter 3).
//
// The thesis' gradient model applies batch normalisation to single examples, so it outputs its
// shift: a constant c on the released coordinates. Example b of a private step releases
//   r_b = clip(u_b),  u_b = M g_b + c,  clip(v) = v / (GELU(||v||/C - 1) + 1)  (section 7.2)
// with g_b = vec(x~ e^T) (column-major: g[k p + j] = x~_j e_k), x~ = [1, x] with an intercept,
// e = softmax(W^T x~) - onehot(y), and M the selection of the released (not frozen) coordinates.
// J_b = d r_b / d x_b is m x d (labels public). Writing n = ||u||, s = GELU(n/C - 1) + 1,
// s' = GELU'(n/C - 1)/C, the Jacobian is J = J_m / s - (s'/(s^2 n)) u u^T J_m with J_m = M dg/dx, so
//   ||J v||^2 = a(n) ||J_m v||^2 + b(n) (u.J_m v)^2,   Tr(J^T J) = a(n) ||J_m||_F^2 + b(n) ||J_m^T u||^2,
//   a = 1/s^2,  b = (s'/s^2)^2 - 2 s'/(s^3 n),
// and ||J_m v||^2, J_m^T u and ||J_m||_F^2 are bilinear forms of x~, e, the softmax Jacobian and the
// p x K mask: no m-vector or m x d matrix of any example is ever formed.
//
// The objective (the thesis' trainer.py, loss 'reg'), over a batch of B public examples:
//   L(c) = (1/B) sum_b [ ||c||^2 + lambda (T_b + floor) / D_b ],   D_b = ||r_b||^2 (snr) or 1,
//   T_b = (1/S) sum_s ||J_b v_bs||^2 (input-space probes v_bs, Hutchinson) or Tr(J_b^T J_b) exactly.
#pragma once

#include "filkit/base/types.hpp"
#include "filkit/networks/gradient_model.hpp"

#include <functional>
#include <vector>

namespace filkit {

/// L(c) and its gradient from each example's terms that do not depend on c, for any model: row r of
/// `gradients` (n x m) is example r's released gradient M g_r, rows r S + s of `probe_products`
/// (n S x m, S >= 1) its probe products M J_r v_rs (the network backend's PerturbationObjectiveTerms). The
/// batch is the examples `rows`; clip_norm C > 0, lambda >= 0, floor >= 0. O(B S m): with probes
/// drawn once a private step (ProbeDraws::kStep) the terms are computed once and every epoch
/// before the step costs only this.
PerturbationObjectiveValue perturbation_objective_from_terms(const RowMatrix& gradients,
                                                             const RowMatrix& probe_products,
                                                             const std::vector<Index>& rows, const VectorXd& c,
                                                             double clip_norm, double lambda, bool snr, double floor);

/// Softmax regression's released coordinates at fixed weights (one private step).
class SoftmaxRelease {
 public:
  /// `weights` p x K (p = d + 1 with an intercept, its row 0; K >= 2), `frozen` p K flags in the
  /// GLM's column-major order (true = frozen, not released), clip_norm C > 0.
  SoftmaxRelease(MatrixXd weights, bool intercept, const std::vector<bool>& frozen, double clip_norm);

  Index input_dim() const { return W_.rows() - (intercept_ ? 1 : 0); }           ///< d
  Index num_classes() const { return W_.cols(); }                                ///< K
  Index released_count() const { return static_cast<Index>(released_.size()); }  ///< m
  /// The released coordinates' indices into the p K vector, increasing.
  const std::vector<Index>& released_coordinates() const { return released_; }

  /// r_b for every row of X (B x d, labels y class indices), B x m; c has m entries in the order of
  /// released_coordinates(). O(B m): for tests and diagnostics.
  MatrixXd released(const RowMatrix& X, const VectorXd& y, const VectorXd& c) const;

  struct Accounting {
    VectorXd clipped_sum;  ///< sum_b r_b (m)
    VectorXd trace;        ///< Tr(J_b^T J_b) exactly, one per example (B)
  };
  Accounting account(const RowMatrix& X, const VectorXd& y, const VectorXd& c) const;

  using Objective = PerturbationObjectiveValue;  ///< L(c) and dL/dc (m)
  /// L(c) and its gradient. `probes`: B S x d, row b S + s the probe v_bs of example b; no rows
  /// for the exact trace. lambda >= 0, floor >= 0 (the thesis: 1e-7). With snr, an example whose
  /// u is zero has D_b = 0 and an infinite objective. X and the probes are not scanned for NaN or
  /// infinity (a full pass each, 10 % of a call): non-finite entries give non-finite results.
  Objective objective(const RowMatrix& X, const VectorXd& y, const VectorXd& c, const RowMatrix& probes, double lambda,
                      bool snr, double floor) const;

  /// source(first, count, out) writes the probes of examples first, ..., first + count - 1 into
  /// `out`, S rows of d each an example (count S x d, row-major), as the rows of `probes` above.
  /// It is called from several threads at once, and may not throw.
  using ProbeSource = std::function<void(Index first, Index count, double* out)>;
  /// objective() of the batch of X's `rows` (in that order; y X's labels), each block of examples'
  /// rows gathered and probes made by `source` (S >= 1 an example; `first` counts positions in
  /// `rows`) where the block uses them: the same value as objective() of the gathered rows and the
  /// probe matrix, without writing the batch's B d pixels and B S d probes to memory and reading
  /// them back.
  Objective objective(const RowMatrix& X, const VectorXd& y, const std::vector<Index>& rows, const VectorXd& c,
                      Index probes_per_example, const ProbeSource& source, double lambda, bool snr, double floor) const;

 private:
  struct Pass;  // what one evaluation computes (src/public_data/constant_perturbation.cpp)
  // X's shape, the labels of the batch (`rows` of X, or all of it) and c.
  void check_batch(const RowMatrix& X, const VectorXd& y, const VectorXd& c,
                   const std::vector<Index>* rows = nullptr) const;
  // The objective's pass over X at c, lambda and floor checked (>= 0, finite); its probes unset.
  Pass objective_pass(const RowMatrix& X, const VectorXd& y, const VectorXd& c, double lambda, bool snr,
                      double floor) const;
  MatrixXd coordinate_matrix(const VectorXd& c) const;  // c scattered into p x K, zero when frozen
  VectorXd gather(const MatrixXd& full) const;          // the released entries of a p x K matrix
  void evaluate(Pass& pass) const;

  MatrixXd W_;
  bool intercept_;
  double clip_norm_;
  std::vector<Index> released_;
  MatrixXd R_;               // p x K, 1 where released
  MatrixXd masked_weights_;  // R .* W (feature rows used)
  MatrixXd feature_gram_;    // W_f^T W_f (K x K)
};

}  // namespace filkit
