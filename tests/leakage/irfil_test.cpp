// IRFIL: the update and its fixed point, the weightings, convergence of eta, weighted Jacobians
// against finite differences of weighted refits, option checks and reading weights back.
#include "filkit/leakage/irfil.hpp"

#include "test_util.hpp"

#include <nlohmann/json.hpp>
#include <fstream>
#include <sstream>

namespace filkit {
namespace {

using testing::random_categorical;
using testing::random_classification;
using testing::TempDir;

FitOptions least_squares(double l2, bool regression) {
  FitOptions options;
  options.kind = ModelKind::kLeastSquares;
  options.l2 = l2;
  options.regression = regression;
  return options;
}

TEST(IrfilUpdate, AllEqualEtaIsAFixedPoint) {
  const Index n = 7;
  VectorXd u = VectorXd::LinSpaced(n, 0.2, 2.0);
  u *= static_cast<double>(n) / u.sum();  // weights after an update sum to n
  const VectorXd eta = VectorXd::Constant(n, 0.37);
  EXPECT_LT((irfil_update(u, eta, 0.0, 1e300) - u).cwiseAbs().maxCoeff(), 1e-15);
  // ... and so are the training weights of every weighting.
  const VectorXd labels = (VectorXd(n) << 0, 1, 1, 0, 1, 0, 0).finished();
  for (IrfilWeighting weighting : {IrfilWeighting::kExample, IrfilWeighting::kClass, IrfilWeighting::kHybrid}) {
    const VectorXd before = irfil_training_weights(u, labels, weighting);
    const VectorXd after = irfil_training_weights(irfil_update(u, eta, 0.0, 1e300), labels, weighting);
    EXPECT_LT((after - before).cwiseAbs().maxCoeff(), 1e-14) << to_string(weighting);
  }
  // Unequal eta move the weights: the check above is not vacuous.
  VectorXd uneven = eta;
  uneven(0) *= 2.0;
  EXPECT_GT((irfil_update(u, uneven, 0.0, 1e300) - u).cwiseAbs().maxCoeff(), 0.01);
}

TEST(IrfilUpdate, NormalisesToNThenClampsAndRejectsZeroEta) {
  const VectorXd u = VectorXd::Ones(4);
  const VectorXd eta = (VectorXd(4) << 1.0, 2.0, 4.0, 8.0).finished();
  const VectorXd free = irfil_update(u, eta, 0.0, 1e300);
  EXPECT_NEAR(free.sum(), 4.0, 1e-14);
  EXPECT_NEAR(free(0) / free(3), 8.0, 1e-13);  // inversely proportional to eta
  const VectorXd clamped = irfil_update(u, eta, 0.5, 1.5);
  EXPECT_DOUBLE_EQ(clamped(0), 1.5);
  EXPECT_DOUBLE_EQ(clamped(3), 0.5);
  VectorXd bad = eta;
  bad(2) = 0.0;
  try {
    irfil_update(u, bad, 0.0, 1e300);
    FAIL() << "expected std::runtime_error";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("example 2"), std::string::npos) << error.what();
  }
}

TEST(IrfilTrainingWeights, ClassAndHybridFollowTheAuthorsDefinition) {
  const VectorXd u = (VectorXd(4) << 1.0, 3.0, 2.0, 6.0).finished();
  const VectorXd labels = (VectorXd(4) << 0, 0, 1, 1).finished();
  EXPECT_EQ(irfil_training_weights(u, labels, IrfilWeighting::kExample), u);
  EXPECT_EQ(irfil_training_weights(u, labels, IrfilWeighting::kClass), (VectorXd(4) << 2, 2, 4, 4).finished());
  EXPECT_EQ(irfil_training_weights(u, labels, IrfilWeighting::kHybrid), (VectorXd(4) << 2, 6, 8, 24).finished());
  EXPECT_THROW(irfil_training_weights(u, VectorXd::Zero(3), IrfilWeighting::kClass), std::logic_error);
}

TEST(Irfil, IterationZeroIsTheUnweightedModel) {
  const Dataset data = random_classification(80, 4, 2, 11);
  IrfilOptions options;
  options.fit.l2 = 1e-2;
  options.iterations = 2;
  const IrfilResult result = irfil(data, Dataset(), options);
  ASSERT_EQ(result.iterations.size(), 3u);
  ASSERT_EQ(result.weights.size(), 3u);
  EXPECT_EQ(result.weights[0], VectorXd::Ones(80));
  const Model model = fit(data, options.fit);
  const VectorXd eta = FisherInformationLoss(model, data).per_example().eta;
  EXPECT_LT((result.eta_before - eta).cwiseAbs().maxCoeff(), 1e-12 * eta.maxCoeff());
  EXPECT_NEAR(result.iterations[0].eta.mean, eta.mean(), 1e-14);
  // The final model is the one fitted with the final weights.
  const VectorXd refitted = fit(data, options.fit, result.weights.back()).flat();
  EXPECT_LT((result.model.flat() - refitted).norm(), 1e-8 * refitted.norm());
}

// A setting where the spread of eta falls at every iteration (asserted, not assumed): least
// squares on a small regression problem, example-level eta with the label private.
TEST(Irfil, StandardDeviationOfEtaFallsMonotonically) {
  const Dataset data = random_categorical(120, 3, 3, true, 5);
  IrfilOptions options;
  options.fit = least_squares(1e-3, true);
  options.iterations = 10;
  const IrfilResult result = irfil(data, Dataset(), options);
  for (std::size_t t = 1; t < result.iterations.size(); ++t)
    EXPECT_LT(result.iterations[t].eta.std, result.iterations[t - 1].eta.std) << "iteration " << t;
  const double before = result.iterations.front().eta.std / result.iterations.front().eta.mean;
  const double after = result.iterations.back().eta.std / result.iterations.back().eta.mean;
  EXPECT_LT(after, 0.1 * before) << "relative spread " << before << " -> " << after;
}

TEST(Irfil, AttributeLevelEtaDrivesTheUpdate) {
  const Dataset data = random_categorical(150, 2, 3, false, 6);
  IrfilOptions options;
  options.fit.kind = ModelKind::kLogistic;
  options.fit.l2 = 1e-2;
  options.iterations = 6;
  options.attribute_columns = data.attribute("group").columns;
  const IrfilResult result = irfil(data, data, options);
  const FisherInformationLoss fil(fit(data, options.fit), data);
  const VectorXd eta = fil.per_example_selection(CoordinateSelection::columns(options.attribute_columns));
  EXPECT_LT((result.eta_before - eta).cwiseAbs().maxCoeff(), 1e-12 * eta.maxCoeff());
  const auto spread = [](const IrfilIteration& it) { return it.eta.std / it.eta.mean; };
  EXPECT_LT(spread(result.iterations.back()), 0.1 * spread(result.iterations.front()));
  EXPECT_GT(result.iterations.back().test_accuracy, 0.7);
}

TEST(Irfil, ClassWeightingGivesEveryClassOneWeight) {
  const Dataset data = random_classification(90, 3, 2, 12);
  IrfilOptions options;
  options.fit.l2 = 1e-2;
  options.iterations = 3;
  options.weighting = IrfilWeighting::kClass;
  const VectorXd omega = irfil(data, Dataset(), options).weights.back();
  for (Index i = 0; i < data.n(); ++i) {
    for (Index j = 0; j < data.n(); ++j) {
      if (data.y(i) == data.y(j)) {
        ASSERT_EQ(omega(i), omega(j));
      }
    }
  }
  EXPECT_NE(omega.minCoeff(), omega.maxCoeff());
}

// Central differences of the refitted minimiser with the same example weights.
VectorXd refit_derivative(Dataset data, const FitOptions& options, const VectorXd& omega, Index i, Index j) {
  const double h = 1e-5, original = data.X(i, j);
  data.X(i, j) = original + h;
  const VectorXd plus = fit(data, options, omega).flat();
  data.X(i, j) = original - h;
  const VectorXd minus = fit(data, options, omega).flat();
  return (plus - minus) / (2 * h);
}

TEST(Irfil, WeightedJacobiansMatchFiniteDifferencesOfWeightedRefits) {
  for (const ModelKind kind : {ModelKind::kLeastSquares, ModelKind::kLogistic}) {
    const Dataset data = random_categorical(40, 2, 3, false, 8);
    IrfilOptions options;
    options.fit.kind = kind;
    options.fit.l2 = 1e-2;
    options.fit.gradient_tolerance = 1e-13;
    options.iterations = 3;
    const IrfilResult result = irfil(data, Dataset(), options);
    const VectorXd& omega = result.weights.back();
    ASSERT_GT(omega.maxCoeff() / omega.minCoeff(), 1.5) << "the weights must be uneven for the test to bite";
    const Model model = fit(data, options.fit, omega);
    const FisherInformationLoss weighted(model, data, omega), unweighted(model, data);
    for (const Index i : {Index{0}, Index{17}, Index{33}}) {
      const MatrixXd J = weighted.jacobian(i, CoordinateSelection::example(LabelPrivacy::kPublic));
      const MatrixXd wrong = unweighted.jacobian(i, CoordinateSelection::example(LabelPrivacy::kPublic));
      double error = 0.0, wrong_error = 0.0;
      for (Index j = 0; j < data.d(); ++j) {
        const VectorXd numeric = refit_derivative(data, options.fit, omega, i, j);
        error = std::max(error, (J.col(j) - numeric).norm() / numeric.norm());
        wrong_error = std::max(wrong_error, (wrong.col(j) - numeric).norm() / numeric.norm());
      }
      EXPECT_LT(error, 1e-6) << to_string(kind) << " example " << i;
      EXPECT_GT(wrong_error, 1e-2) << "ignoring the weights must show: " << to_string(kind) << " example " << i;
    }
  }
}

TEST(Irfil, BadOptionsThrowNamingTheField) {
  const Dataset data = random_categorical(30, 2, 3, true, 9);
  IrfilOptions options;
  options.fit = least_squares(1e-2, true);
  options.iterations = -1;
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "iterations", "-1");
  options.iterations = 2;
  options.min_weight = -0.5;
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "min_weight", "-0.5");
  options.min_weight = 2.0;
  options.max_weight = 1.0;
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "max_weight", "min_weight");
  options.max_weight = 10.0;
  options.min_weight = 0.0;
  options.weighting = IrfilWeighting::kHybrid;
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "weighting", "hybrid", "regression");
  options.weighting = IrfilWeighting::kExample;
  options.attribute_columns = {7};
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "attribute_columns", "7");
  options.attribute_columns = {};
  options.fil.sigma = 0.0;
  EXPECT_INVALID_ARGUMENT(irfil(data, Dataset(), options), "sigma");
  EXPECT_INVALID_ARGUMENT(parse_enum<IrfilWeighting>("group"), "group", "example");
}

TEST(ReadExampleWeights, ReadsAColumnAndNamesTheLineOfABadValue) {
  const TempDir dir;
  const std::string path = dir.write("w.csv", "index,weight,other\n0,0.5,1\n1,2,1\n2,1.5,1\n");
  EXPECT_EQ(read_example_weights(path, "weight", 3), (VectorXd(3) << 0.5, 2, 1.5).finished());
  EXPECT_INVALID_ARGUMENT(read_example_weights(path, "omega", 3), path, "omega", "weight");
  EXPECT_INVALID_ARGUMENT(read_example_weights(path, "weight", 4), path, "3 rows", "4 examples");
  const std::string bad = dir.write("bad.csv", "index,weight\n0,1\n1,-2\n");
  EXPECT_INVALID_ARGUMENT(read_example_weights(bad, "weight", 2), bad, "line 3", "-2");
  const std::string shuffled = dir.write("shuffled.csv", "index,weight\n1,1\n0,1\n");
  EXPECT_INVALID_ARGUMENT(read_example_weights(shuffled, "weight", 2), shuffled, "line 2", "index");
}

TEST(Irfil, IsBitwiseIdenticalOnAnyNumberOfThreads) {
  // 2500 rows of 12 features make several blocks of the fits' and FIL's row passes, with
  // products Eigen would have split between threads.
  const Dataset data = random_classification(2500, 12, 2, 17);
  IrfilOptions options;
  options.fit.l2 = 1e-3;
  options.fit.intercept = true;
  options.iterations = 2;
  testing::expect_same_for_any_thread_count(
      [&] { return irfil(data, data, options); },
      [](const IrfilResult& one, const IrfilResult& more) {
        ASSERT_EQ(one.weights.size(), more.weights.size());
        for (std::size_t t = 0; t < one.weights.size(); ++t) {
          EXPECT_TRUE(testing::same_bits(one.weights[t], more.weights[t])) << "iteration " << t;
          EXPECT_TRUE(testing::same_bits(one.iterations[t].test_mse, more.iterations[t].test_mse)) << "iteration " << t;
        }
        EXPECT_TRUE(testing::same_bits(one.eta_after, more.eta_after));
        EXPECT_TRUE(testing::same_bits(one.model.weights, more.model.weights));
      });
}

}  // namespace
}  // namespace filkit
