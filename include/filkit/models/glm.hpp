// Generalised linear models whose leakage filkit measures (docs/mathematics.md, section 1):
//
//   F(w) = sum_i omega_i * l(w.x_i, y_i) + (n*lambda/2) * ||w||^2,   n = number of examples,
//
// least squares (l = (a - y)^2 / 2, binary targets coded -1/+1; exact Cholesky solve), binary
// logistic regression (Newton with Cholesky and a backtracking line search; L-BFGS for many
// parameters) and multinomial
// (softmax) logistic regression (parameters d x K flattened column by column, same Newton solver).
//
// An optional intercept is a constant 1 prepended to every row: a public coordinate, regularised
// like every other weight (so the GLM reconstruction attack's stationarity condition holds
// exactly), never a private one.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/base/enum_names.hpp"
#include "filkit/base/types.hpp"
#include "filkit/data/dataset.hpp"

#include <cstdint>
#include <string>

namespace filkit {

enum class ModelKind { kLeastSquares, kLogistic, kSoftmax };
template <>
struct EnumNames<ModelKind> {
  static constexpr const char* what = "model";
  static constexpr std::pair<ModelKind, const char*> names[] = {{ModelKind::kLeastSquares, "least-squares"},
                                                                {ModelKind::kLogistic, "logistic"},
                                                                {ModelKind::kSoftmax, "softmax"}};
};

/// How logistic and softmax regression are minimised.
enum class Solver {
  kAuto,    ///< Newton up to kNewtonMaxParams parameters, L-BFGS above
  kNewton,  ///< Newton with a Cholesky solve of the full Hessian and a backtracking line search
  kLbfgs,   ///< L-BFGS (LBFGS++), for many parameters (e.g. softmax on raw pixels)
};
template <>
struct EnumNames<Solver> {
  static constexpr const char* what = "solver";
  static constexpr std::pair<Solver, const char*> names[] = {
      {Solver::kAuto, "auto"}, {Solver::kNewton, "newton"}, {Solver::kLbfgs, "lbfgs"}};
};
/// Above this many parameters kAuto uses L-BFGS: a Newton step's O(p^3) Cholesky then dominates.
constexpr Index kNewtonMaxParams = 2000;

/// Settings of one fit.
struct FitOptions {
  ModelKind kind = ModelKind::kLogistic;
  /// L2 strength lambda >= 0 of the penalty (n*lambda/2)||w||^2. lambda = 0 needs a
  /// non-singular X^T W X (and, for logistic, non-separable data).
  double l2 = 8e-4;
  /// Prepend a public constant-1 column (the intercept), regularised like the rest.
  bool intercept = false;
  /// Least squares only: y is real-valued (regression) instead of class indices {0,1} coded -1/+1.
  bool regression = false;
  /// Newton stops when ||grad F|| <= gradient_tolerance * max(1, ||grad F(0)||). Range (0, 1e-3].
  double gradient_tolerance = 1e-10;
  /// Newton iteration limit (>= 1; L-BFGS gets 100 times as many); reaching it is an error
  /// (std::runtime_error).
  int max_iterations = 100;
  Solver solver = Solver::kAuto;
  void validate() const;
};

/// The user-facing fields of FitOptions (the model kind and `regression` come from the job's task).
template <class Visit>
void visit_fields(FitOptions& o, Visit&& visit) {
  visit("l2", o.l2, "L2 strength lambda of the penalty (n*lambda/2)||w||^2, >= 0");
  visit("intercept", o.intercept, "Add a public, regularised intercept");
  visit("tolerance", o.gradient_tolerance, "Newton stops at ||grad F|| <= tolerance * max(1, ||grad F(0)||)");
  visit("solver", o.solver, "auto (Newton up to 2000 parameters, else L-BFGS), newton or lbfgs");
}

/// A fitted model. `weights` is p x K: p = d (+1 with an intercept, row 0), K = 1 for the binary
/// models and the number of classes for softmax.
struct Model {
  ModelKind kind = ModelKind::kLogistic;
  bool intercept = false;
  bool regression = false;
  double l2 = 0.0;
  Index n_train = 0;           ///< the n in n*lambda
  Index num_classes = 2;       ///< K for softmax, 2 for the binary models (1 for regression)
  MatrixXd weights;            ///< p x K
  int iterations = 0;          ///< Newton or L-BFGS iterations (0 for the closed form)
  double gradient_norm = 0.0;  ///< ||grad F(w*)|| at the returned solution

  Index input_dim() const { return weights.rows() - (intercept ? 1 : 0); }
  Index num_params() const { return weights.size(); }
  /// Parameters as one vector (column-major flattening of `weights`).
  VectorXd flat() const;
  void set_flat(const VectorXd& w);
};

/// Fits the model to `data` with per-example weights `omega` (empty = all 1, else n positive
/// finite values). The passes over the examples run in parallel (OpenMP) in blocks of a fixed
/// number of rows summed in order, so the fit, and every function below, is bitwise identical
/// for any number of threads. Throws std::invalid_argument for labels outside the model's domain, NaN/Inf
/// or shape mismatches; std::runtime_error for a singular H (with advice to raise lambda) or
/// non-convergence.
///
/// On several ranks of `comm` (a collective call), `data` and `omega` are this rank's shard and
/// the model is that of all shards together: every sum over examples is added over the ranks and
/// every rank takes the same steps (docs/distributed.md).
Model fit(const Dataset& data, const FitOptions& options, const VectorXd& omega = VectorXd(),
          const Communicator& comm = Communicator::local());

/// Refits starting from `start` (warm start), same options; used by attacks that refit after
/// changing one example.
Model refit(const Dataset& data, const FitOptions& options, const Model& start, const VectorXd& omega = VectorXd(),
            const Communicator& comm = Communicator::local());

/// The target the model regresses on for each example: -1/+1 for binary least squares, y itself
/// otherwise. Throws std::invalid_argument naming the first offending row.
VectorXd model_targets(const Dataset& data, const FitOptions& options);

/// The design row [1, x] (with an intercept) or x.
VectorXd design_row(const Model& model, const Eigen::Ref<const VectorXd>& x);

/// Per-example loss l(w.x_i, y_i) and gradient norm ||grad_w l||.
struct PerExampleLoss {
  VectorXd loss;
  VectorXd gradient_norm;
};
PerExampleLoss per_example_loss(const Model& model, const Dataset& data);

/// Predicted class indices (classification) or values (regression).
VectorXd predict(const Model& model, const RowMatrix& X);
/// Share of correct predictions (classification only).
double accuracy(const Model& model, const Dataset& data);
/// Mean squared error of predictions against the model's targets (any model kind; for binary
/// least squares against -1/+1 codes, for logistic against class probabilities vs 0/1).
double mean_squared_error(const Model& model, const Dataset& data);
/// accuracy and mean_squared_error over every rank's shard of the examples (collective; any shard
/// may be empty, NaN when all are); on one process the same as the functions above.
double accuracy_over_ranks(const Model& model, const Dataset& data, const Communicator& comm);
double mean_squared_error_over_ranks(const Model& model, const Dataset& data, const Communicator& comm);

/// The objective's Hessian at the model's weights, p*K x p*K, with the given example weights
/// (of all ranks' shards on several: collective).
MatrixXd hessian(const Model& model, const Dataset& data, const VectorXd& omega = VectorXd(),
                 const Communicator& comm = Communicator::local());
/// The objective F(w) at the model's weights.
double objective_value(const Model& model, const Dataset& data, const VectorXd& omega = VectorXd());
/// Gradient of the objective at the model's weights (flattened).
VectorXd objective_gradient(const Model& model, const Dataset& data, const VectorXd& omega = VectorXd());

/// Output perturbation (the Gaussian mechanism): w' = w* + N(0, sigma^2 I), seeded.
Model perturb_output(const Model& model, double sigma, std::uint64_t seed);
/// The standard normal draws that perturb_output(model, sigma, seed) scales by sigma and adds to
/// the model's `size` weights, in storage order.
VectorXd output_noise(Index size, std::uint64_t seed);

}  // namespace filkit
