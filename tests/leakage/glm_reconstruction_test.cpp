#include "filkit/leakage/glm_reconstruction.hpp"

#include "filkit/leakage/biased_attacker.hpp"
#include "filkit/leakage/bounds.hpp"

#include "expect_invalid_argument.hpp"
#include "test_util.hpp"

#include <cmath>
#include <limits>
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
    EXPECT_TRUE(testing::same_bits(one.second.mse_standard_error, more.second.mse_standard_error));
    EXPECT_TRUE(testing::same_bits(one.second.squared_bias, more.second.squared_bias));
    EXPECT_TRUE(testing::same_bits(one.second.squared_bias_standard_error, more.second.squared_bias_standard_error));
    EXPECT_TRUE(testing::same_bits(one.second.jacobian_trace, more.second.jacobian_trace));
    EXPECT_TRUE(
        testing::same_bits(one.second.jacobian_trace_standard_error, more.second.jacobian_trace_standard_error));
  });
  const Model model = tight_fit(data, ModelKind::kLogistic, 1e-2);
  const GlmAttackResult first = evaluate_glm_attack(model, data, options);
  options.seed = 1;
  EXPECT_NE(evaluate_glm_attack(model, data, options).mean_mse, first.mean_mse) << "the seed matters";
}

// J_i = dw*/dx_i = -H^{-1} B_i, B_i = c_i x~_i w_{1:}^T + r_i E, assembled literally.
MatrixXd literal_jacobian(const Model& model, const Dataset& data, Index i) {
  const Index d = data.d(), p = d + 1;
  const VectorXd w = model.weights.col(0), x = design_row(model, data.X.row(i).transpose());
  const double s = 1.0 / (1.0 + std::exp(-w.dot(x)));
  const double r = s - data.y(i), c = s * (1 - s);
  MatrixXd B = c * x * w.tail(d).transpose();
  B.bottomRows(d) += r * MatrixXd::Identity(d, d);
  (void)p;
  return -hessian(model, data).ldlt().solve(B);
}

TEST(GlmAttackMoments, MatchTheTrialsComputedLiterally) {
  // The fast path's inner products against the adversary's reconstructions, the dense Jacobian
  // J_i and the linearised error e_lin = sigma [x_i, -I] H eps / r_i, trial by trial.
  const Dataset data = random_classification(60, 4, 2, 30);
  const Model model = tight_fit(data, ModelKind::kLogistic, 2e-2);
  GlmAttackOptions options;
  options.sigma = 2e-2;
  options.trials = 70;
  options.seed = 4;
  options.rows = {2, 11, 59};
  const GlmAttackResult result = evaluate_glm_attack(model, data, options);
  const MatrixXd H = hessian(model, data);
  const double d = 4;
  for (Index k = 0; k < 3; ++k) {
    const Index i = options.rows[static_cast<std::size_t>(k)];
    const MatrixXd J = literal_jacobian(model, data, i);
    const VectorXd x = data.X.row(i).transpose();
    MatrixXd x_minus_identity(4, 5);
    x_minus_identity << x, -MatrixXd::Identity(4, 4);
    const double r = 1.0 / (1.0 + std::exp(-model.weights.col(0).dot(design_row(model, x)))) - data.y(i);
    // E[eps^T J e_lin / sigma] = tr(J [x, -I] H) / r = d: the control's mean.
    EXPECT_NEAR((J * x_minus_identity * H).trace() / r, d, 1e-9 * d);
    ControlVariateSums stein;
    VectorXd error_sum = VectorXd::Zero(4);
    double squared_norms = 0;
    for (Index t = 0; t < options.trials; ++t) {
      const VectorXd eps = output_noise(5, trial_seed(options.seed, t));
      const Model released = perturb_output(model, options.sigma, trial_seed(options.seed, t));
      const VectorXd e = glm_attack(released, data, {i}).x_hat.row(0).transpose() - x;
      const VectorXd e_lin = options.sigma * x_minus_identity * H * eps / r;
      const double s = eps.dot(J * e) / options.sigma, s_lin = eps.dot(J * e_lin) / options.sigma;
      stein.add(s - s_lin, s_lin - d);
      error_sum += e;
      squared_norms += e.squaredNorm();
    }
    const McEstimate trace = control_variate_mean(stein, 0.0);
    const McEstimate bias = squared_norm_of_mean(error_sum, squared_norms, 70.0);
    EXPECT_NEAR(result.jacobian_trace(k), (trace.value + d) / d, 1e-7) << i;
    EXPECT_NEAR(result.jacobian_trace_standard_error(k), trace.standard_error / d, 1e-7 * trace.standard_error) << i;
    EXPECT_NEAR(result.squared_bias(k), bias.value / d, 1e-7 * std::abs(bias.value)) << i;
    EXPECT_NEAR(result.squared_bias_standard_error(k), bias.standard_error / d, 1e-7 * bias.standard_error) << i;
  }
}

TEST(GlmAttackMoments, JacobianTraceMatchesFiniteDifferencesOfTheMeanInTheExample) {
  // tr J_mu by Stein's lemma against central differences in x_i of the attack's mean
  // reconstruction, refitted at x_i +- h e_j and released with the same noise draws (common random
  // numbers: the difference's Monte-Carlo error is that of the derivative alone). The noise in the
  // divisor D = r_i - g_0 is 0.2 |r_i| (sd(g_0) = sigma ||H_0||): the attack's mean is then
  // measurably nonlinear in x_i (E[1/D] > 1/r_i magnifies it: tr J_mu / d about 1.05), yet the
  // divisor stays away from 0, so the mean exists and the trials determine it.
  const Dataset data = random_classification(40, 3, 2, 31);
  const Model model = tight_fit(data, ModelKind::kLogistic, 5e-2);
  const VectorXd divisor = glm_attack(model, data).divisor;
  Index i = 0;  // the example fitted best: the smallest divisor
  divisor.cwiseAbs().minCoeff(&i);
  GlmAttackOptions options;
  options.sigma = 0.2 * std::abs(divisor(i)) / hessian(model, data).row(0).norm();
  options.trials = 4000;
  options.seed = 6;
  options.rows = {i};
  const GlmAttackResult result = evaluate_glm_attack(model, data, options);
  ASSERT_EQ(result.guarded(0), 0);

  const double h = 1e-5;
  VectorXd per_trial = VectorXd::Zero(options.trials);
  for (Index j = 0; j < 3; ++j) {
    Dataset plus = data, minus = data;
    plus.X(i, j) += h;
    minus.X(i, j) -= h;
    const Model fit_plus = tight_fit(plus, ModelKind::kLogistic, 5e-2),
                fit_minus = tight_fit(minus, ModelKind::kLogistic, 5e-2);
    for (Index t = 0; t < options.trials; ++t) {
      const std::uint64_t seed = trial_seed(options.seed, t);
      const double up = glm_attack(perturb_output(fit_plus, options.sigma, seed), plus, {i}).x_hat(0, j);
      const double down = glm_attack(perturb_output(fit_minus, options.sigma, seed), minus, {i}).x_hat(0, j);
      per_trial(t) += (up - down) / (2 * h) / 3.0;
    }
  }
  const double mean = per_trial.mean();
  const double error = std::sqrt((per_trial.array() - mean).square().sum() / (options.trials - 1) / options.trials);
  const double stein_error = result.jacobian_trace_standard_error(0);
  EXPECT_NEAR(result.jacobian_trace(0), mean, 4 * std::hypot(error, stein_error));
  EXPECT_LT(stein_error, 0.02);
  // Distinguishable from an unbiased attacker's 1, as the bias is from 0.
  EXPECT_GT(std::abs(result.jacobian_trace(0) - 1.0), 4 * stein_error) << "the setting should make the attack biased";
  EXPECT_GT(result.squared_bias(0), 3 * result.squared_bias_standard_error(0));
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
  expect_invalid_argument_naming([&] { evaluate_glm_attack(model, data, options); }, "trials = 0: must be in 1..");
  options.trials = std::numeric_limits<Index>::max();  // wrapped the block count below 0 (issue 50)
  expect_invalid_argument_naming([&] { evaluate_glm_attack(model, data, options); },
                                 "trials = 9223372036854775807: must be in 1..1000000000000000");
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
