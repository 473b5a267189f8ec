#include "filkit/leakage/glm_reconstruction.hpp"

#include "filkit/leakage/bounds.hpp"

#include "test_util.hpp"

#include <cmath>
#include <string>

namespace filkit {
namespace {

using testing::random_classification;

Model tight_fit(const Dataset& data, ModelKind kind, double l2, bool intercept = true) {
  FitOptions options;
  options.kind = kind;
  options.l2 = l2;
  options.intercept = intercept;
  options.gradient_tolerance = 1e-13;
  return fit(data, options);
}

template <typename Call>
void expect_invalid_argument_naming(Call call, const std::string& field) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one naming " << field;
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(field), std::string::npos) << error.what();
  }
}

// The adversary's computation written out literally: B_i = -(sum_{j != i} grad l_j(w') +
// n lambda w'), x_hat = B_i[1:] / B_i[0], for logistic regression with an intercept.
VectorXd literal_attack(const Model& released, const Dataset& data, Index i) {
  const VectorXd w = released.weights.col(0);
  VectorXd B = -static_cast<double>(data.n()) * released.l2 * w;
  for (Index j = 0; j < data.n(); ++j) {
    if (j == i) continue;
    const VectorXd x = design_row(released, data.X.row(j).transpose());
    const double s = 1.0 / (1.0 + std::exp(-w.dot(x)));
    B -= (s - data.y(j)) * x;
  }
  return B.tail(data.d()) / B(0);
}

double squared_error_per_coordinate(const VectorXd& x_hat, const Dataset& data, Index i) {
  return (x_hat - data.X.row(i).transpose()).squaredNorm() / static_cast<double>(data.d());
}

TEST(GlmAttack, RecoversEveryExampleExactlyFromTheExactModel) {
  for (ModelKind kind : {ModelKind::kLogistic, ModelKind::kLeastSquares}) {
    SCOPED_TRACE(to_string(kind));
    const Dataset data = random_classification(80, 6, 2, 21);
    const Model model = tight_fit(data, kind, 1e-2);
    const GlmReconstruction attack = glm_attack(model, data);
    ASSERT_EQ(attack.x_hat.rows(), 80);
    EXPECT_LT((attack.x_hat - data.X).cwiseAbs().maxCoeff(), 1e-8);

    GlmAttackOptions options;
    options.sigma = 0.0;
    options.trials = 3;
    const GlmAttackResult result = evaluate_glm_attack(model, data, options);
    EXPECT_LT(result.mean_mse.maxCoeff(), 1e-16);
    EXPECT_EQ(result.total_guarded, 0);
  }
}

TEST(GlmAttack, MatchesTheAdversarysLiteralSumOverTheOtherExamples) {
  const Dataset data = random_classification(50, 4, 2, 22);
  const Model released = perturb_output(tight_fit(data, ModelKind::kLogistic, 2e-2), 1e-2, 5);
  const GlmReconstruction attack = glm_attack(released, data, {3, 17, 49});
  for (Index k = 0; k < 3; ++k) {
    const VectorXd literal = literal_attack(released, data, attack.rows[static_cast<std::size_t>(k)]);
    EXPECT_LT((attack.x_hat.row(k).transpose() - literal).norm(), 1e-10 * literal.norm());
  }
}

TEST(GlmAttack, AWrongRegularisationStrengthBreaksTheReconstruction) {
  // The same check with the adversary assuming lambda 10% too large fails by far: the exactness
  // above is not an accident of the data.
  const Dataset data = random_classification(50, 4, 2, 23);
  Model model = tight_fit(data, ModelKind::kLogistic, 2e-2);
  model.l2 *= 1.1;
  EXPECT_GT((glm_attack(model, data).x_hat - data.X).cwiseAbs().maxCoeff(), 1e-3);
}

TEST(GlmAttackEvaluation, AveragesTheSquaredErrorOfReplayableTrials) {
  const Dataset data = random_classification(40, 3, 2, 24);
  const Model model = tight_fit(data, ModelKind::kLogistic, 2e-2);
  GlmAttackOptions options;
  options.sigma = 3e-3;
  options.trials = 70;  // three blocks, the last one partial
  options.seed = 99;
  options.rows = {0, 5, 39};
  options.keep_reconstructions = {5};
  const GlmAttackResult result = evaluate_glm_attack(model, data, options);
  ASSERT_EQ(result.mean_mse.size(), 3);
  VectorXd expected = VectorXd::Zero(3);
  VectorXd mean_x_hat = VectorXd::Zero(3);
  for (Index t = 0; t < options.trials; ++t) {
    const Model released = perturb_output(model, options.sigma, trial_seed(options.seed, t));
    const GlmReconstruction attack = glm_attack(released, data, options.rows);
    for (Index k = 0; k < 3; ++k)
      expected(k) += squared_error_per_coordinate(attack.x_hat.row(k).transpose(), data, options.rows[k]) / 70.0;
    mean_x_hat += attack.x_hat.row(1).transpose() / 70.0;
  }
  for (Index k = 0; k < 3; ++k) EXPECT_NEAR(result.mean_mse(k), expected(k), 1e-9 * expected(k)) << k;
  EXPECT_LT((result.reconstructions.row(0).transpose() - mean_x_hat).norm(), 1e-10 * mean_x_hat.norm());
}

TEST(GlmAttackEvaluation, IsUnbiasedEnoughAtModerateNoiseToMeetTheDeltaMethodAndCramerRao) {
  // x_hat is a smooth function of w', so for small noise its covariance is sigma^2 Jx Jx^T with
  // Jx = d x_hat / d w'. Jx by central differences of the attack itself gives the prediction
  // tr(Cov)/d independently of the closed form; Monte Carlo must agree with it, and Cramer-Rao
  // (the attack is unbiased to first order) puts both above the dFIL bound 1 / eta_bar^2.
  const Dataset data = random_classification(150, 4, 2, 25);
  const Model model = tight_fit(data, ModelKind::kLogistic, 5e-2);
  const double sigma = 2e-4;
  const std::vector<Index> rows = {1, 30, 77, 120};
  const Index p = model.num_params();
  VectorXd delta_method = VectorXd::Zero(4);
  const double h = 1e-6;
  for (Index k = 0; k < p; ++k) {
    Model plus = model, minus = model;
    plus.weights(k, 0) += h;
    minus.weights(k, 0) -= h;
    const RowMatrix column = (glm_attack(plus, data, rows).x_hat - glm_attack(minus, data, rows).x_hat) / (2 * h);
    delta_method += sigma * sigma * column.rowwise().squaredNorm() / static_cast<double>(data.d());
  }
  const VectorXd closed_form = linearised_attack_mse(model, data, sigma, rows);
  EXPECT_LT(((closed_form - delta_method).array() / delta_method.array()).abs().maxCoeff(), 1e-5);

  GlmAttackOptions options;
  options.sigma = sigma;
  options.trials = 20000;
  options.seed = 3;
  options.rows = rows;
  const GlmAttackResult result = evaluate_glm_attack(model, data, options);
  ReconstructionBoundOptions bound_options;
  bound_options.sigma = sigma;
  const VectorXd dfil_bound = reconstruction_bounds(model, data, bound_options).dfil_bound;
  for (Index k = 0; k < 4; ++k) {
    const Index i = rows[static_cast<std::size_t>(k)];
    EXPECT_NEAR(result.mean_mse(k), delta_method(k), 0.02 * delta_method(k)) << "example " << i;
    EXPECT_GE(result.mean_mse(k), dfil_bound(i)) << "example " << i;
    EXPECT_GE(delta_method(k), dfil_bound(i) * (1 - 1e-9)) << "example " << i;
  }
  EXPECT_EQ(result.total_guarded, 0);
}

TEST(GlmAttackEvaluation, LinearisedPredictionNeverFallsBelowTheDfilBound) {
  // Jx J_i = I (the attack is exact at every dataset), so tr(Jx Jx^T) >= tr((J^T J)^-1) >= d^2/tr(J^T J).
  const Dataset data = random_classification(120, 5, 2, 26);
  const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
  ReconstructionBoundOptions options;
  options.sigma = 0.01;
  const VectorXd bound = reconstruction_bounds(model, data, options).dfil_bound;
  const VectorXd predicted = linearised_attack_mse(model, data, 0.01);
  EXPECT_TRUE((predicted.array() >= bound.array() * (1 - 1e-9)).all());
}

TEST(GlmAttackEvaluation, ResultsDoNotDependOnTheThreadCount) {
  // The fit before the attack included: 2500 rows of 12 features make several blocks of its row
  // passes, with products Eigen would have split between threads.
  const Dataset data = random_classification(2500, 12, 2, 27);
  GlmAttackOptions options;
  options.sigma = 1e-2;
  options.trials = 1100;  // more than one wave of blocks
  options.rows = {0, 2, 7, 100, 2499};
  options.keep_reconstructions = {2, 7};
  const auto attack = [&] {
    const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
    return std::pair(model, evaluate_glm_attack(model, data, options));
  };
  testing::expect_same_for_any_thread_count(attack, [](const auto& one, const auto& more) {
    EXPECT_TRUE(testing::same_bits(one.first.weights, more.first.weights));
    EXPECT_TRUE(testing::same_bits(one.second.mean_mse, more.second.mean_mse));
    EXPECT_EQ(one.second.guarded, more.second.guarded);
    EXPECT_TRUE(testing::same_bits(one.second.linearised_mse, more.second.linearised_mse));
    EXPECT_TRUE(testing::same_bits(one.second.reconstructions, more.second.reconstructions));
  });
  const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
  const GlmAttackResult first = evaluate_glm_attack(model, data, options);
  options.seed = 1;
  EXPECT_NE(evaluate_glm_attack(model, data, options).mean_mse, first.mean_mse) << "the seed matters";
}

TEST(GlmAttackEvaluation, GuardsAndCountsNearZeroDivisors) {
  // An example classified with certainty has s - y ~ 0: with the exact model its divisor B_i[0]
  // is below the guard in every trial, so it has no valid trial and a NaN mean.
  Dataset data = random_classification(40, 3, 2, 28);
  const Model first = tight_fit(data, ModelKind::kLogistic, 1e-2);
  data.X.row(0) = 40.0 * first.weights.col(0).tail(3).normalized().transpose();
  data.y(0) = 1.0;
  const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
  const VectorXd divisor = glm_attack(model, data).divisor;
  const Index tiny = (divisor.array().abs() < 1e-3).count();
  ASSERT_GE(tiny, 1);
  ASSERT_LT(std::abs(divisor(0)), 1e-3);
  GlmAttackOptions options;
  options.sigma = 0.0;
  options.trials = 5;
  options.divisor_guard = 1e-3;
  const GlmAttackResult result = evaluate_glm_attack(model, data, options);
  EXPECT_EQ(result.total_guarded, 5 * tiny);
  EXPECT_EQ(result.examples_all_guarded, tiny);
  EXPECT_EQ(result.guarded(0), 5);
  EXPECT_TRUE(std::isnan(result.mean_mse(0)));
  EXPECT_FALSE(std::isnan(result.mean_mse(1)));
}

TEST(GlmAttack, InvalidOptionsAndModelsThrowNamingTheField) {
  const Dataset data = random_classification(20, 3, 2, 29);
  const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
  GlmAttackOptions options;
  options.trials = 0;
  expect_invalid_argument_naming([&] { evaluate_glm_attack(model, data, options); }, "trials = 0: must be >= 1");
  options = GlmAttackOptions();
  options.sigma = -1.0;
  expect_invalid_argument_naming([&] { options.validate(); }, "sigma = -1: must be >= 0");
  options = GlmAttackOptions();
  options.divisor_guard = 1.0;
  expect_invalid_argument_naming([&] { options.validate(); }, "divisor_guard = 1: must lie in [0, 0.001]");
  options = GlmAttackOptions();
  options.rows = {20};
  expect_invalid_argument_naming([&] { evaluate_glm_attack(model, data, options); }, "rows: row 20 is outside 0..19");
  options = GlmAttackOptions();
  options.keep_reconstructions = {-1};
  expect_invalid_argument_naming([&] { options.validate(); }, "save_reconstructions = -1: must be >= 0");
  expect_invalid_argument_naming([&] { glm_attack(tight_fit(data, ModelKind::kLogistic, 1e-2, false), data); },
                                 "intercept");
  const Dataset three = random_classification(30, 3, 3, 30);
  expect_invalid_argument_naming([&] { glm_attack(tight_fit(three, ModelKind::kSoftmax, 1e-2), three); }, "softmax");
  expect_invalid_argument_naming([&] { glm_attack(model, random_classification(21, 3, 2, 31)); }, "fitted on");
}

}  // namespace
}  // namespace filkit
