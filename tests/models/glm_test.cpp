#include "filkit/models/glm.hpp"

#include "test_util.hpp"

#include <cmath>
#include <limits>

namespace filkit {
namespace {

using testing::random_classification;

FitOptions options_for(ModelKind kind, double l2, bool intercept = false) {
  FitOptions options;
  options.kind = kind;
  options.l2 = l2;
  options.intercept = intercept;
  options.gradient_tolerance = 1e-12;
  return options;
}

// Central differences of the objective and of its gradient at a point away from the optimum.
void expect_derivatives_match_finite_differences(const Model& model, const Dataset& data, const VectorXd& omega) {
  const VectorXd w = model.flat();
  const VectorXd g = objective_gradient(model, data, omega);
  const MatrixXd H = hessian(model, data, omega);
  const double h = 1e-5;
  for (Index k = 0; k < w.size(); ++k) {
    Model plus = model, minus = model;
    VectorXd wp = w, wm = w;
    wp(k) += h;
    wm(k) -= h;
    plus.set_flat(wp);
    minus.set_flat(wm);
    const double dvalue = (objective_value(plus, data, omega) - objective_value(minus, data, omega)) / (2 * h);
    EXPECT_NEAR(dvalue, g(k), 1e-6 * std::max(1.0, std::abs(g(k))));
    const VectorXd dgrad = (objective_gradient(plus, data, omega) - objective_gradient(minus, data, omega)) / (2 * h);
    EXPECT_LT((dgrad - H.col(k)).norm(), 1e-6 * std::max(1.0, H.col(k).norm()));
  }
}

TEST(LeastSquares, SolvesTheWeightedNormalEquations) {
  const Dataset data = random_classification(60, 5, 2, 1);
  const VectorXd omega = VectorXd::LinSpaced(60, 0.5, 2.0);
  const Model model = fit(data, options_for(ModelKind::kLeastSquares, 1e-2, true), omega);
  // Independent reference: dense normal equations with the -1/+1 coding, solved by QR.
  MatrixXd Xt(60, 6);
  Xt << VectorXd::Ones(60), data.X;
  const VectorXd t = 2.0 * data.y.array() - 1.0;
  const MatrixXd H = Xt.transpose() * omega.asDiagonal() * Xt + 60 * 1e-2 * MatrixXd::Identity(6, 6);
  const VectorXd w = H.colPivHouseholderQr().solve(Xt.transpose() * omega.cwiseProduct(t));
  EXPECT_LT((model.weights.col(0) - w).norm(), 1e-12 * w.norm());
}

TEST(Objective, GradientAndHessianMatchFiniteDifferencesForEveryModel) {
  const Dataset binary = random_classification(40, 4, 2, 3);
  const Dataset multi = random_classification(40, 3, 3, 4);
  const VectorXd omega = VectorXd::LinSpaced(40, 0.3, 1.7);
  for (ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic, ModelKind::kSoftmax}) {
    const Dataset& data = kind == ModelKind::kSoftmax ? multi : binary;
    Model model = fit(data, options_for(kind, 1e-2, true), omega);
    model.weights.array() += 0.25;  // away from the optimum, where the gradient is not ~0
    SCOPED_TRACE(to_string(kind));
    expect_derivatives_match_finite_differences(model, data, omega);
  }
}

TEST(Newton, ReachesTheGradientToleranceForLogisticAndSoftmax) {
  const Dataset binary = random_classification(300, 8, 2, 5);
  const Dataset multi = random_classification(300, 6, 4, 6);
  const Model logistic = fit(binary, options_for(ModelKind::kLogistic, 1e-3, true));
  const Model softmax = fit(multi, options_for(ModelKind::kSoftmax, 1e-3, false));
  EXPECT_LT(objective_gradient(logistic, binary).norm(), 1e-9);
  EXPECT_LT(objective_gradient(softmax, multi).norm(), 1e-9);
  EXPECT_EQ(softmax.weights.cols(), 4);
  EXPECT_GT(accuracy(logistic, binary), 0.7);
  EXPECT_GT(accuracy(softmax, multi), 0.6);
  // A warm-started refit from the solution needs no step.
  EXPECT_EQ(refit(binary, options_for(ModelKind::kLogistic, 1e-3, true), logistic).iterations, 0);
}

TEST(Lbfgs, ReachesTheSameMinimiserAsNewton) {
  const Dataset multi = random_classification(300, 6, 4, 12);
  FitOptions options = options_for(ModelKind::kSoftmax, 1e-3, true);
  options.gradient_tolerance = 1e-10;
  options.solver = Solver::kNewton;
  const Model newton = fit(multi, options);
  options.solver = Solver::kLbfgs;
  const Model lbfgs = fit(multi, options);
  EXPECT_LT((newton.weights - lbfgs.weights).norm(), 1e-7 * newton.weights.norm());
  EXPECT_LT(lbfgs.gradient_norm, 1e-6);
  EXPECT_EQ(parse_enum<Solver>("lbfgs"), Solver::kLbfgs);
  EXPECT_THROW(parse_enum<Solver>("bfgs"), std::invalid_argument);
}

TEST(Fit, RejectsLabelsOutsideTheModelDomain) {
  Dataset data = random_classification(20, 3, 3, 7);  // labels 0..2
  EXPECT_THROW(fit(data, options_for(ModelKind::kLogistic, 1e-2)), std::invalid_argument);
  EXPECT_THROW(fit(data, options_for(ModelKind::kLeastSquares, 1e-2)), std::invalid_argument);
  data.y(0) = 0.5;
  try {
    fit(data, options_for(ModelKind::kSoftmax, 1e-2));
    FAIL() << "expected an error";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("row 0"), std::string::npos) << error.what();
  }
}

TEST(Fit, RejectsNonFiniteValuesAndBadWeights) {
  Dataset data = random_classification(20, 3, 2, 8);
  data.X(4, 1) = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(fit(data, options_for(ModelKind::kLogistic, 1e-2)), std::invalid_argument);
  data = random_classification(20, 3, 2, 8);
  EXPECT_THROW(fit(data, options_for(ModelKind::kLogistic, 1e-2), VectorXd::Ones(19)), std::invalid_argument);
  EXPECT_THROW(fit(data, options_for(ModelKind::kLogistic, -1.0)), std::invalid_argument);
}

TEST(Fit, ExplainsASingularHessianAndSuggestsLambda) {
  Dataset data = random_classification(30, 3, 2, 9);
  data.X.col(2) = 2.0 * data.X.col(1);  // collinear features
  try {
    fit(data, options_for(ModelKind::kLeastSquares, 0.0));
    FAIL() << "expected an error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("option l2"), std::string::npos) << error.what();
  }
}

TEST(Fit, ReportsNonConvergenceOnSeparableDataWithoutPenalty) {
  Dataset data = random_classification(30, 2, 2, 10);
  for (Index i = 0; i < data.n(); ++i) data.y(i) = data.X(i, 0) > 0 ? 1.0 : 0.0;  // separable
  FitOptions options = options_for(ModelKind::kLogistic, 0.0);
  options.max_iterations = 30;
  EXPECT_THROW(fit(data, options), std::runtime_error);
}

TEST(OutputPerturbation, IsSeededAndHasTheRequestedSpread) {
  const Dataset data = random_classification(50, 4, 2, 11);
  Model model = fit(data, options_for(ModelKind::kLogistic, 1e-2));
  model.weights = MatrixXd::Zero(2000, 1);  // many coordinates to estimate the spread
  const Model a = perturb_output(model, 0.5, 42), b = perturb_output(model, 0.5, 42);
  const Model c = perturb_output(model, 0.5, 43);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_NE(a.weights, c.weights);
  const double std_dev = std::sqrt(a.weights.squaredNorm() / 2000.0);
  EXPECT_NEAR(std_dev, 0.5, 0.03);
  EXPECT_THROW(perturb_output(model, -1.0, 1), std::invalid_argument);
}

// ---- The same numbers on any number of threads (glm.hpp) --------------------------------------
// 3000 rows are three blocks of the row passes, shared unevenly by 2 and 3 threads.

struct FitOutcome {
  Model model;
  MatrixXd hessian;
  double value;
  VectorXd gradient;
  PerExampleLoss loss;
  VectorXd prediction;
};

FitOutcome fit_outcome(const Dataset& data, const FitOptions& options, const VectorXd& omega) {
  FitOutcome outcome{fit(data, options, omega), {}, 0.0, {}, {}, {}};
  outcome.hessian = hessian(outcome.model, data, omega);
  outcome.value = objective_value(outcome.model, data, omega);
  outcome.gradient = objective_gradient(outcome.model, data, omega);
  outcome.loss = per_example_loss(outcome.model, data);
  outcome.prediction = predict(outcome.model, data.X);
  return outcome;
}

void expect_same_fit(const FitOutcome& a, const FitOutcome& b) {
  EXPECT_TRUE(testing::same_bits(a.model.weights, b.model.weights));
  EXPECT_EQ(a.model.iterations, b.model.iterations);
  EXPECT_TRUE(testing::same_bits(a.model.gradient_norm, b.model.gradient_norm));
  EXPECT_TRUE(testing::same_bits(a.hessian, b.hessian));
  EXPECT_TRUE(testing::same_bits(a.value, b.value));
  EXPECT_TRUE(testing::same_bits(a.gradient, b.gradient));
  EXPECT_TRUE(testing::same_bits(a.loss.loss, b.loss.loss));
  EXPECT_TRUE(testing::same_bits(a.loss.gradient_norm, b.loss.gradient_norm));
  EXPECT_TRUE(testing::same_bits(a.prediction, b.prediction));
}

TEST(ThreadCount, EveryModelAndSolverFitsBitwiseAlikeOnAnyNumberOfThreads) {
  const Dataset binary = random_classification(3000, 12, 2, 21);
  const Dataset multi = random_classification(3000, 8, 3, 22);
  const VectorXd omega = VectorXd::LinSpaced(3000, 0.5, 1.5);
  struct Case {
    const char* name;
    const Dataset& data;
    FitOptions options;
  };
  std::vector<Case> cases = {{"least squares", binary, options_for(ModelKind::kLeastSquares, 1e-3, true)},
                             {"logistic, Newton", binary, options_for(ModelKind::kLogistic, 1e-3, true)},
                             {"logistic, L-BFGS", binary, options_for(ModelKind::kLogistic, 1e-3, true)},
                             {"softmax, Newton", multi, options_for(ModelKind::kSoftmax, 1e-3, true)},
                             {"softmax, L-BFGS", multi, options_for(ModelKind::kSoftmax, 1e-3, false)}};
  for (Case* lbfgs : {&cases[2], &cases[4]}) {
    lbfgs->options.solver = Solver::kLbfgs;
    lbfgs->options.gradient_tolerance = 1e-8;  // L-BFGS's line search stalls short of 1e-12
  }
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    testing::expect_same_for_any_thread_count([&] { return fit_outcome(c.data, c.options, omega); }, expect_same_fit);
  }
}

}  // namespace
}  // namespace filkit
