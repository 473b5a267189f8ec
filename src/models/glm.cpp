#include "filkit/models/glm.hpp"
#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"

#include "models/glm_loss.hpp"

#include <Eigen/Cholesky>
#include <LBFGS.h>

#include <cmath>
#include <random>
#include <sstream>
#include <stdexcept>

namespace filkit {

void FitOptions::validate() const {
  require_non_negative("l2", l2);
  require_in_interval("tolerance", gradient_tolerance, 0.0, End::kOpen, 1e-3, End::kClosed);
  require_positive("max_iterations", max_iterations);
  if (regression && kind != ModelKind::kLeastSquares)
    option_error("regression",
                 "only least squares (" + option_name("model") + " least-squares) fits a real-valued target");
}

VectorXd Model::flat() const { return Eigen::Map<const VectorXd>(weights.data(), weights.size()); }

void Model::set_flat(const VectorXd& w) {
  if (w.size() != weights.size())
    throw OptionError::with_text("weights", "Model::set_flat: expected " + std::to_string(weights.size()) +
                                                " parameters, got " + std::to_string(w.size()));
  weights = Eigen::Map<const MatrixXd>(w.data(), weights.rows(), weights.cols());
}

VectorXd design_row(const Model& model, const Eigen::Ref<const VectorXd>& x) {
  if (!model.intercept) return x;
  VectorXd row(x.size() + 1);
  row << 1.0, x;
  return row;
}

namespace {

void check_finite(const Dataset& data) {
  for (Index i = 0; i < data.n(); ++i) {
    if (!data.X.row(i).allFinite())
      throw DataError("data '" + data.source + "': row " + std::to_string(i) + " has a NaN or infinite feature");
    if (!std::isfinite(data.y(i)))
      throw DataError("data '" + data.source + "': label of row " + std::to_string(i) + " is NaN or infinite");
  }
}

Index infer_num_classes(const Dataset& data, const Communicator& comm = Communicator::local()) {
  Index classes = static_cast<Index>(data.class_names.size());
  if (data.n() > 0) classes = std::max<Index>(classes, static_cast<Index>(data.y.maxCoeff()) + 1);
  return std::max<Index>(comm.max(classes), 2);
}

VectorXd checked_omega(const VectorXd& omega, Index n) {
  if (omega.size() == 0) return VectorXd::Ones(n);
  if (omega.size() != n)
    throw OptionError::with_text("example_weights", "example weights: expected " + std::to_string(n) + " values, got " +
                                                        std::to_string(omega.size()));
  for (Index i = 0; i < n; ++i)
    if (!std::isfinite(omega(i)) || omega(i) < 0.0)
      throw OptionError::with_text("example_weights", "example weight " + std::to_string(i) + " = " +
                                                          format_double(omega(i)) + ": must be finite and >= 0");
  return omega;
}

Model empty_model(const Dataset& data, const FitOptions& options, const Communicator& comm) {
  Model model;
  model.kind = options.kind;
  model.intercept = options.intercept;
  model.regression = options.regression;
  model.l2 = options.l2;
  model.n_train = comm.sum(data.n());
  model.num_classes = options.kind == ModelKind::kSoftmax ? infer_num_classes(data, comm) : options.regression ? 1 : 2;
  const Index p = data.d() + (options.intercept ? 1 : 0);
  model.weights = MatrixXd::Zero(p, options.kind == ModelKind::kSoftmax ? model.num_classes : 1);
  return model;
}

NumericalError singular_hessian_error(const FitOptions& options) {
  std::ostringstream message;
  message << "the Hessian H = X^T W X + n*lambda*I is singular or numerically so (lambda = " << options.l2 << ")";
  if (options.l2 == 0.0) message << ": features are collinear; set a positive L2 strength (option l2, e.g. 1e-4)";
  else message << "; increase the L2 strength (option l2)";
  return NumericalError(message.str());
}

// Cholesky of H with a conditioning check: an LLT that "succeeds" on a numerically singular
// matrix would give a meaningless solution and FIL.
Eigen::LLT<MatrixXd> factorise(const MatrixXd& H, const FitOptions& options) {
  Eigen::LLT<MatrixXd> llt(H);
  if (llt.info() != Eigen::Success || !(llt.rcond() > 1e-14)) throw singular_hessian_error(options);
  return llt;
}

Model fit_least_squares(const Dataset& data, const FitOptions& options, const VectorXd& omega,
                        const Communicator& comm) {
  Model model = empty_model(data, options, comm);
  const VectorXd target = model_targets(data, options);
  const detail::Design design(data.X, options.intercept);
  MatrixXd H = design.weighted_gram(omega);
  comm.sum(H);
  H.diagonal().array() += static_cast<double>(model.n_train) * options.l2;
  VectorXd rhs = design.transpose_times(VectorXd(omega.cwiseProduct(target)));
  comm.sum(rhs);
  model.weights.col(0) = factorise(H, options).solve(rhs);
  model.gradient_norm = detail::GlmObjective(model, data, omega, comm).gradient(model.flat()).norm();
  return model;
}

// Without a penalty, separable data have no finite minimiser: Newton still "converges" because
// the gradient vanishes as ||w|| grows. Every example fitted to certainty exposes it.
void reject_separable(const detail::GlmObjective& objective, const VectorXd& w, const FitOptions& options,
                      const Communicator& comm) {
  const PerExampleLoss losses = objective.per_example(w);
  const double largest_loss = comm.max(losses.loss.size() ? losses.loss.maxCoeff() : 0.0);
  if (w.norm() > 1e6 || largest_loss < 1e-8)
    throw NumericalError(to_string(options.kind) +
                         " regression with lambda = 0 has no finite minimiser: the training data are "
                         "linearly separable (||w|| = " +
                         format_double(w.norm()) + "). Set a positive L2 strength (option l2)");
}

Model newton(const Dataset& data, const FitOptions& options, Model model, const VectorXd& omega,
             const Communicator& comm) {
  const detail::GlmObjective objective(model, data, omega, comm);
  VectorXd w = model.flat();
  const double scale = std::max(1.0, objective.gradient(VectorXd::Zero(w.size())).norm());
  double value = objective.value(w);
  for (int iteration = 0;; ++iteration) {
    const VectorXd gradient = objective.gradient(w);
    model.gradient_norm = gradient.norm();
    model.iterations = iteration;
    if (model.gradient_norm <= options.gradient_tolerance * scale) break;
    if (iteration == options.max_iterations) {
      std::ostringstream message;
      message << to_string(options.kind) << " regression did not converge in " << options.max_iterations
              << " Newton iterations (gradient norm " << model.gradient_norm << ", target "
              << options.gradient_tolerance * scale << ")";
      if (options.l2 == 0.0) message << "; with lambda = 0 separable data have no minimiser: set l2 > 0";
      throw NumericalError(message.str());
    }
    const VectorXd step = -factorise(objective.hessian(w), options).solve(gradient);
    // Backtracking (Armijo) line search; Newton's full step is accepted near the optimum.
    const double slope = gradient.dot(step);
    double t = 1.0, candidate = objective.value(w + step);
    // Near the optimum the predicted decrease drops below the rounding of F: there the full
    // step is right (quadratic convergence) and the Armijo test would only see noise.
    const bool in_rounding_regime = -slope < 1e-13 * (1.0 + std::abs(value));
    if (in_rounding_regime) candidate = std::min(candidate, value);
    while (!(candidate <= value + 1e-4 * t * slope) && !in_rounding_regime && t > 1e-12) {
      t *= 0.5;
      candidate = objective.value(w + t * step);
    }
    if (!(candidate <= value)) {
      // No decrease at all: the objective is flat to rounding, so the gradient is as small as
      // double precision allows. Accept only if that is close to the requested tolerance.
      if (model.gradient_norm <= 1e3 * options.gradient_tolerance * scale) break;
      throw NumericalError("line search failed at Newton iteration " + std::to_string(iteration) + " (gradient norm " +
                           format_double(model.gradient_norm) + ")");
    }
    w += t * step;
    value = candidate;
  }
  model.set_flat(w);
  if (options.l2 == 0.0) reject_separable(objective, w, options, comm);
  return model;
}

Model lbfgs(const Dataset& data, const FitOptions& options, Model model, const VectorXd& omega,
            const Communicator& comm) {
  const detail::GlmObjective objective(model, data, omega, comm);
  VectorXd w = model.flat();
  const double scale = std::max(1.0, objective.gradient(VectorXd::Zero(w.size())).norm());
  LBFGSpp::LBFGSParam<double> parameters;
  parameters.epsilon = options.gradient_tolerance * scale;
  parameters.epsilon_rel = 0.0;
  parameters.max_iterations = 100 * options.max_iterations;
  LBFGSpp::LBFGSSolver<double> solver(parameters);
  auto value_and_gradient = [&objective](const VectorXd& x, VectorXd& gradient) {
    gradient = objective.gradient(x);
    return objective.value(x);
  };
  double value = 0.0;
  try {
    model.iterations = solver.minimize(value_and_gradient, w, value);
  } catch (const std::exception& error) {
    // The line search gives up once F is flat to rounding; accept if the gradient is already
    // within reach of the tolerance, as Newton does.
    if (!(objective.gradient(w).norm() <= 1e3 * parameters.epsilon))
      throw NumericalError(to_string(options.kind) + " regression (L-BFGS) did not converge: " + error.what());
  }
  model.gradient_norm = objective.gradient(w).norm();
  if (model.gradient_norm > 1e3 * parameters.epsilon)
    throw NumericalError(to_string(options.kind) + " regression (L-BFGS) did not converge in " +
                         std::to_string(parameters.max_iterations) + " iterations (gradient norm " +
                         format_double(model.gradient_norm) + ")");
  model.set_flat(w);
  if (options.l2 == 0.0) reject_separable(objective, w, options, comm);
  return model;
}

Model minimise(const Dataset& data, const FitOptions& options, Model start, const VectorXd& omega,
               const Communicator& comm = Communicator::local()) {
  const bool use_lbfgs =
      options.solver == Solver::kLbfgs || (options.solver == Solver::kAuto && start.weights.size() > kNewtonMaxParams);
  return use_lbfgs ? lbfgs(data, options, std::move(start), omega, comm)
                   : newton(data, options, std::move(start), omega, comm);
}

}  // namespace

VectorXd model_targets(const Dataset& data, const FitOptions& options) {
  const Index n = data.n();
  VectorXd target = data.y;
  if (options.regression) return target;
  const Index classes = options.kind == ModelKind::kSoftmax ? infer_num_classes(data) : 2;
  for (Index i = 0; i < n; ++i) {
    const double y = data.y(i);
    if (y != std::floor(y) || y < 0 || y >= static_cast<double>(classes)) {
      std::ostringstream message;
      message << "label " << y << " of row " << i << " is outside the domain of the " << to_string(options.kind)
              << " model: expected ";
      if (classes == 2)
        message << "0 or 1 (choose two classes with the classes option, or regression for least squares)";
      else message << "a class index 0.." << classes - 1;
      throw DataError(message.str());
    }
  }
  if (options.kind == ModelKind::kLeastSquares) target = 2.0 * data.y.array() - 1.0;
  return target;
}

Model fit(const Dataset& data, const FitOptions& options, const VectorXd& omega, const Communicator& comm) {
  options.validate();
  data.validate();
  check_finite(data);
  if (comm.sum(data.n()) == 0) throw DataError("data '" + data.source + "' has no examples");
  const VectorXd weights = checked_omega(omega, data.n());
  model_targets(data, options);  // domain check before any work
  if (options.kind == ModelKind::kLeastSquares) return fit_least_squares(data, options, weights, comm);
  return minimise(data, options, empty_model(data, options, comm), weights, comm);
}

Model refit(const Dataset& data, const FitOptions& options, const Model& start, const VectorXd& omega,
            const Communicator& comm) {
  options.validate();
  const VectorXd weights = checked_omega(omega, data.n());
  if (options.kind == ModelKind::kLeastSquares) return fit_least_squares(data, options, weights, comm);
  Model model = empty_model(data, options, comm);
  if (start.weights.rows() == model.weights.rows() && start.weights.cols() == model.weights.cols())
    model.weights = start.weights;
  return minimise(data, options, model, weights, comm);
}

MatrixXd hessian(const Model& model, const Dataset& data, const VectorXd& omega, const Communicator& comm) {
  const detail::GlmObjective objective(model, data, checked_omega(omega, data.n()), comm);
  return objective.hessian(model.flat());
}

double objective_value(const Model& model, const Dataset& data, const VectorXd& omega) {
  const detail::GlmObjective objective(model, data, checked_omega(omega, data.n()));
  return objective.value(model.flat());
}

VectorXd objective_gradient(const Model& model, const Dataset& data, const VectorXd& omega) {
  const detail::GlmObjective objective(model, data, checked_omega(omega, data.n()));
  return objective.gradient(model.flat());
}

PerExampleLoss per_example_loss(const Model& model, const Dataset& data) {
  const detail::GlmObjective objective(model, data, VectorXd::Ones(data.n()));
  return objective.per_example(model.flat());
}

VectorXd predict(const Model& model, const RowMatrix& X) {
  const detail::Design design(X, model.intercept);
  const MatrixXd scores = design.times(model.weights);  // n x K
  VectorXd prediction(X.rows());
  for (Index i = 0; i < X.rows(); ++i) {
    switch (model.kind) {
      case ModelKind::kLeastSquares:
        prediction(i) = model.regression ? scores(i, 0) : (scores(i, 0) >= 0.0 ? 1.0 : 0.0);
        break;
      case ModelKind::kLogistic: prediction(i) = scores(i, 0) >= 0.0 ? 1.0 : 0.0; break;
      case ModelKind::kSoftmax: {
        Index best;
        scores.row(i).maxCoeff(&best);
        prediction(i) = static_cast<double>(best);
        break;
      }
    }
  }
  return prediction;
}

double accuracy(const Model& model, const Dataset& data) {
  if (model.regression) throw OptionError::with_text("model", "accuracy: the model is a regression");
  if (data.n() == 0) return std::nan("");
  const VectorXd prediction = predict(model, data.X);
  return (prediction.array() == data.y.array()).cast<double>().mean();
}

double mean_squared_error(const Model& model, const Dataset& data) {
  if (data.n() == 0) return std::nan("");
  const detail::Design design(data.X, model.intercept);
  const MatrixXd scores = design.times(model.weights);
  if (model.kind == ModelKind::kLeastSquares) {
    FitOptions options;
    options.kind = model.kind;
    options.regression = model.regression;
    return (scores.col(0) - model_targets(data, options)).squaredNorm() / static_cast<double>(data.n());
  }
  double total = 0.0;
  for (Index i = 0; i < data.n(); ++i) {
    const VectorXd probabilities = detail::class_probabilities(model.kind, scores.row(i).transpose());
    VectorXd truth = VectorXd::Zero(probabilities.size());
    truth(model.kind == ModelKind::kLogistic ? 0 : static_cast<Index>(data.y(i))) =
        model.kind == ModelKind::kLogistic ? data.y(i) : 1.0;
    total += (probabilities - truth).squaredNorm();
  }
  return total / static_cast<double>(data.n());
}

Model perturb_output(const Model& model, double sigma, std::uint64_t seed) {
  if (!(sigma >= 0.0) || !std::isfinite(sigma))
    throw OptionError::with_text("sigma",
                                 "output perturbation sigma = " + format_double(sigma) + ": must be finite and >= 0");
  const VectorXd noise = output_noise(model.weights.size(), seed);
  Model released = model;
  for (Index k = 0; k < released.weights.size(); ++k) released.weights.data()[k] += sigma * noise(k);
  return released;
}

VectorXd output_noise(Index size, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  VectorXd noise(size);
  for (Index k = 0; k < size; ++k) noise(k) = normal(rng);
  return noise;
}

double accuracy_over_ranks(const Model& model, const Dataset& data, const Communicator& comm) {
  if (!comm.distributed()) return accuracy(model, data);
  return share_over_ranks(data.n() > 0 ? accuracy(model, data) : 0.0, data.n(), comm);
}

double mean_squared_error_over_ranks(const Model& model, const Dataset& data, const Communicator& comm) {
  if (!comm.distributed()) return mean_squared_error(model, data);
  const Index n = comm.sum(data.n());
  const double sum = data.n() > 0 ? mean_squared_error(model, data) * static_cast<double>(data.n()) : 0.0;
  return comm.sum(sum) / static_cast<double>(n);
}

}  // namespace filkit
