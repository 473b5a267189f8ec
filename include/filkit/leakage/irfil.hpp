// Iteratively reweighted Fisher information loss (IRFIL; Algorithm 1 of Hannun, Guo and van der
// Maaten, "Measuring data leakage in machine-learning models with Fisher information", section 5;
// docs/mathematics.md, section 4): reweights the training loss until every example leaks the
// same FIL.
//
//   u^0 = 1, and for t = 0, 1, ..., T:
//     omega^t = g(u^t)                                      the weighting, below
//     w^t     = argmin_w sum_i omega^t_i l(w.x_i, y_i) + (n lambda / 2) ||w||^2
//     eta^t_i = ||J_i(omega^t)||_2 / sigma                  J_i = -omega_i H^-1 B_i, H weighted too;
//                                                           all coordinates or one attribute's
//     u^{t+1}_i = clamp(n (u^t_i / eta^t_i) / sum_j (u^t_j / eta^t_j), min_weight, max_weight)
//
// Iteration 0 is the unweighted model ("eta before"); iteration T is fitted with the weights of
// T updates ("eta after"), so a run makes T + 1 fits. If every eta^t_i is equal the update is the
// identity (the paper's equation 28): all-equal eta is a fixed point. sigma scales every eta
// alike and so does not change the weights.
//
// Weightings g (the paper names per-example weighting; per-class and hybrid follow the authors'
// released code, reweighted.py, get_weights):
//   example  omega_i = u_i                                  Algorithm 1 as printed
//   class    omega_i = mean of u_j over the examples j of i's class: every class gets one weight
//   hybrid   omega_i = u_i * (mean of u_j over i's class): per-example weights, with each
//            class's share scaled by its mean weight
// The update always acts on the per-example u, with the eta of the model trained on omega.
// Clamping follows the normalisation, as in the authors' code: a binding clamp leaves sum u != n.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/base/summary.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

#include <nlohmann/json_fwd.hpp>

#include <limits>
#include <string>
#include <vector>

namespace filkit {

enum class IrfilWeighting { kExample, kClass, kHybrid };
template <>
struct EnumNames<IrfilWeighting> {
  static constexpr const char* what = "IRFIL weighting";
  static constexpr std::pair<IrfilWeighting, const char*> names[] = {
      {IrfilWeighting::kExample, "example"}, {IrfilWeighting::kClass, "class"}, {IrfilWeighting::kHybrid, "hybrid"}};
};

struct IrfilOptions {
  /// The model refitted at every iteration (least squares, logistic or softmax).
  FitOptions fit;
  /// sigma (> 0) of the output perturbation the eta refer to, and whether labels are private.
  FilOptions fil;
  /// Number T >= 0 of reweighting updates; T + 1 fits. Default 10 (the paper's figure 7).
  int iterations = 10;
  IrfilWeighting weighting = IrfilWeighting::kExample;
  /// Clamp of u after each normalisation: 0 <= min_weight < max_weight (max may be +inf).
  double min_weight = 0.0;
  double max_weight = std::numeric_limits<double>::infinity();
  /// The eta that drives the update: empty = example level (every feature, and the label as
  /// fil.label says); else these feature columns (an attribute's one-hot block), label excluded.
  std::vector<Index> attribute_columns;
  /// Show progress on stderr.
  bool progress = false;
  /// Throws std::invalid_argument naming the field, value and rule.
  void validate() const;
};

/// The user-facing fields of IrfilOptions (fit comes from the job's task, attribute_columns from
/// its attribute).
template <class Visit>
void visit_fields(IrfilOptions& o, Visit&& visit) {
  visit("iterations", o.iterations, "Reweighting updates T (T + 1 fits), >= 0");
  visit("weighting", o.weighting,
        "example: omega = u; class: the class mean of u; hybrid: u times its class mean of u");
  visit("min_weight", o.min_weight, "Clamp weights below at this value, >= 0");
  visit("max_weight", o.max_weight, "Clamp weights above at this value (inf: none)");
  visit_fields(o.fil, visit);
}

/// What one iteration's model looks like.
struct IrfilIteration {
  int iteration = 0;
  Summary eta;                                       ///< of the driving eta over the training examples
  double weight_min = 0.0, weight_max = 0.0;         ///< of the training weights omega^t
  Index clamped = 0;                                 ///< entries of u^t held at min_weight or max_weight
  double train_accuracy = 0.0, test_accuracy = 0.0;  ///< of w^t (NaN for regression)
  double train_mse = 0.0, test_mse = 0.0;            ///< of w^t (see mean_squared_error)
  int fit_iterations = 0;                            ///< Newton iterations of the fit (0 for least squares)
  double seconds = 0.0;                              ///< fit + eta
};

/// On several MPI ranks the per-example vectors (weights, eta_before, eta_after) are of all ranks'
/// examples at rank 0 and empty elsewhere; the iterations' records are the same on every rank
/// (their eta summaries are computed at rank 0 only).
struct IrfilResult {
  std::vector<IrfilIteration> iterations;  ///< T + 1 entries; 0 is the unweighted model
  std::vector<VectorXd> weights;           ///< omega^t, t = 0..T: the weights w^t was fitted with
  VectorXd eta_before;                     ///< eta^0
  VectorXd eta_after;                      ///< eta^T
  Model model;                             ///< w^T

  /// Per-iteration records, final weights and eta before/after.
  nlohmann::json to_json() const;
};

/// Runs IRFIL on `train`; `test` (may be empty) is only evaluated. Throws std::invalid_argument
/// for bad options, a class or hybrid weighting of a regression, or attribute columns outside X;
/// std::runtime_error if a fit fails or an eta is zero or not finite (no update exists).
/// On several ranks of `comm` (collective), `train` and `test` are this rank's shards.
IrfilResult irfil(const Dataset& train, const Dataset& test, const IrfilOptions& options,
                  const Communicator& comm = Communicator::local());

/// Line 7 of Algorithm 1 with clamping: clamp(n (u_i / eta_i) / sum_j (u_j / eta_j), lo, hi).
/// Throws std::runtime_error naming the first example whose eta is not finite and > 0.
/// On several ranks n and the sum are of all ranks' examples (collective).
VectorXd irfil_update(const VectorXd& u, const VectorXd& eta, double min_weight, double max_weight,
                      const Communicator& comm = Communicator::local());

/// The training weights omega = g(u) of a weighting; `labels` are class indices (unused by
/// kExample). Throws std::invalid_argument if sizes differ.
/// On several ranks the class means are of all ranks' examples (collective).
VectorXd irfil_training_weights(const VectorXd& u, const VectorXd& labels, IrfilWeighting weighting,
                                const Communicator& comm = Communicator::local());

/// Example weights from a CSV file with a header: the column `column`, one row per training
/// example in order (an `index` column, if present, must count 0..n-1). Throws
/// std::invalid_argument naming the file, column and line for a missing column, a wrong row
/// count, or a value that is not a finite number >= 0.
VectorXd read_example_weights(const std::string& path, const std::string& column, Index n,
                              ByteSize max_memory = default_memory_budget());

}  // namespace filkit
