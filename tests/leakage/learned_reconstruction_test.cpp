#include "filkit/leakage/learned_reconstruction.hpp"

#include "test_util.hpp"

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace filkit {
namespace {

constexpr double kC1 = 1e-4, kC2 = 9e-4;  // (0.01)^2 and (0.03)^2 for data range 1

/// n random images of `shape` with pixels uniform in [0, 1] and labels 0..classes-1.
Dataset random_images(Index n, ImageShape shape, int classes, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  std::uniform_int_distribution<int> label(0, classes - 1);
  Dataset data;
  data.X.resize(n, shape.size());
  data.y.resize(n);
  for (Index i = 0; i < n; ++i) {
    for (Index j = 0; j < shape.size(); ++j) data.X(i, j) = pixel(rng);
    data.y(i) = label(rng);
  }
  data.image = shape;
  data.source = "random_images";
  return data;
}

/// The noiseless white-box case: one full-batch gradient step of softmax regression (with
/// intercept) from w = 0. Its parameters are -rho/n sum_i [x_i; 1] (1/K - e_{y_i})^T: for a fixed
/// label, an affine function of the target x, so a linear map per label inverts it exactly.
VectorXd one_gradient_step(const Dataset& train, int classes, double rho) {
  const Index d = train.d();
  MatrixXd w = MatrixXd::Zero(d + 1, classes);
  for (Index i = 0; i < train.n(); ++i) {
    VectorXd residual = VectorXd::Constant(classes, 1.0 / classes);
    residual(static_cast<Index>(train.y(i))) -= 1.0;
    VectorXd x(d + 1);
    x << train.X.row(i).transpose(), 1.0;
    w -= rho / static_cast<double>(train.n()) * x * residual.transpose();
  }
  return w.reshaped();
}

LearnedReconstructionOptions linear_options() {
  LearnedReconstructionOptions options;
  options.train_shadow_models = 300;
  options.target_shadow_models = 20;
  options.fixed_size = 30;
  options.attacker_hidden = {};
  options.ridge = 1e-12;
  options.clip_inputs = false;  // exact inversion: a target may lie just outside the training range
  return options;
}

TEST(LearnedReconstruction, LinearAttackerInvertsOneNoiselessGradientStep) {
  const Dataset fixed = random_images(30, {1, 7, 7}, 2, 1);
  const Dataset candidates = random_images(320, {1, 7, 7}, 2, 2);
  const auto train = [](const Dataset& data, Index) { return one_gradient_step(data, 2, 0.5); };
  const LearnedReconstructionResult result = run_learned_reconstruction(fixed, candidates, train, linear_options());
  ASSERT_EQ(result.targets.size(), 20u);
  EXPECT_EQ(result.parameter_count, 2 * 50);
  EXPECT_EQ(result.num_classes, 2);
  for (const TargetReconstruction& target : result.targets) {
    EXPECT_LT(target.mse, 1e-8) << "target " << target.candidate;
    EXPECT_NEAR(target.ssim, 1.0, 1e-6);
    EXPECT_GT(target.baseline_mse, 0.03);  // uniform pixels: about 1/12 around the class mean
    EXPECT_LT(target.baseline_ssim, 0.5);
  }
}

TEST(LearnedReconstruction, LinearAttackerInvertsThreeClasses) {
  const Dataset fixed = random_images(20, {1, 7, 8}, 3, 3);
  const Dataset candidates = random_images(420, {1, 7, 8}, 3, 4);
  const auto train = [](const Dataset& data, Index) { return one_gradient_step(data, 3, 1.0); };
  LearnedReconstructionOptions options = linear_options();
  options.train_shadow_models = 400;
  const LearnedReconstructionResult result = run_learned_reconstruction(fixed, candidates, train, options);
  for (const TargetReconstruction& target : result.targets) EXPECT_LT(target.mse, 1e-8);
}

TEST(LearnedReconstruction, MlpAttackerBeatsTheClassMeanInTheNoiselessCase) {
  const Dataset fixed = random_images(10, {1, 7, 7}, 2, 5);
  const Dataset candidates = random_images(440, {1, 7, 7}, 2, 6);
  const auto train = [](const Dataset& data, Index) { return one_gradient_step(data, 2, 0.5); };
  LearnedReconstructionOptions options = linear_options();
  options.train_shadow_models = 400;
  options.target_shadow_models = 40;
  options.attacker_hidden = {64};
  options.attacker_epochs = 60;
  options.attacker_batch_size = 32;
  options.attacker_step_size = 3e-3;
  options.attacker_weight_decay = 0;
  const LearnedReconstructionResult result = run_learned_reconstruction(fixed, candidates, train, options);
  double attack = 0, baseline = 0;
  for (const TargetReconstruction& target : result.targets) attack += target.mse, baseline += target.baseline_mse;
  EXPECT_LT(attack, 0.5 * baseline);  // 0.028 against 0.082 per target
}

TEST(LearnedReconstruction, ClipsHeldOutInputsToTheTrainingRange) {
  // A trainer whose one parameter is the target's first pixel, and 1e6 for the first held-out
  // target: unclipped, the linear map sends it to about 1e6; clipped, into the training range.
  Dataset candidates = random_images(60, {1, 7, 7}, 1, 20);
  candidates.X(50, 0) = 1e6;
  const Dataset fixed = random_images(3, {1, 7, 7}, 1, 21);
  const auto train = [](const Dataset& data, Index) { return VectorXd::Constant(1, data.X(data.n() - 1, 0)); };
  LearnedReconstructionOptions options = linear_options();
  options.train_shadow_models = 50;
  options.target_shadow_models = 5;
  const double unclipped = run_learned_reconstruction(fixed, candidates, train, options).targets[0].reconstruction(0);
  options.clip_inputs = true;
  const double clipped = run_learned_reconstruction(fixed, candidates, train, options).targets[0].reconstruction(0);
  EXPECT_NEAR(unclipped, 1e6, 1.0);
  EXPECT_LE(clipped, candidates.X.topRows(50).col(0).maxCoeff() + 1e-9);
}

TEST(LearnedReconstruction, MlpGradientMatchesFiniteDifferences) {
  const Attacker mlp = initial_mlp(5, {4, 3}, 2, 11);
  std::mt19937_64 rng(12);
  std::normal_distribution<double> normal;
  RowMatrix inputs(6, 5), outputs(6, 2);
  for (Index i = 0; i < inputs.size(); ++i) inputs.data()[i] = normal(rng);
  for (Index i = 0; i < outputs.size(); ++i) outputs.data()[i] = normal(rng);
  Attacker gradient = mlp;
  mlp_loss_and_gradient(mlp, inputs, outputs, &gradient);
  constexpr double h = 1e-6;
  for (std::size_t l = 0; l < mlp.weights.size(); ++l) {
    for (Index j = 0; j < mlp.weights[l].size(); ++j) {
      Attacker plus = mlp, minus = mlp;
      plus.weights[l].data()[j] += h;
      minus.weights[l].data()[j] -= h;
      const double numeric = (mlp_loss_and_gradient(plus, inputs, outputs, nullptr) -
                              mlp_loss_and_gradient(minus, inputs, outputs, nullptr)) /
                             (2 * h);
      EXPECT_NEAR(gradient.weights[l].data()[j], numeric, 1e-8) << "layer " << l << ", weight " << j;
    }
    for (Index j = 0; j < mlp.biases[l].size(); ++j) {
      Attacker plus = mlp, minus = mlp;
      plus.biases[l](j) += h;
      minus.biases[l](j) -= h;
      const double numeric = (mlp_loss_and_gradient(plus, inputs, outputs, nullptr) -
                              mlp_loss_and_gradient(minus, inputs, outputs, nullptr)) /
                             (2 * h);
      EXPECT_NEAR(gradient.biases[l](j), numeric, 1e-8) << "layer " << l << ", bias " << j;
    }
  }
}

TEST(LearnedReconstruction, AttackerInitJaxDrawsStaxDenseLayersAndPytorchItsUniform) {
  // jax (stax's Dense, the thesis' attacker): each layer's weights have variance 2 / (in + out),
  // truncated at 2 of the untruncated normal's standard deviations, and biases standard deviation
  // 1e-2. pytorch: every weight and bias uniform on +-1/sqrt(in), so variance 1 / (3 in). Widths
  // as the thesis' attacker (512, 256) over 787 inputs and 784 outputs.
  const Index widths[] = {787, 512, 256, 784};
  const Attacker jax = initial_mlp(787, {512, 256}, 784, 7, NetworkInitialisation::kJax);
  const Attacker pytorch = initial_mlp(787, {512, 256}, 784, 7, NetworkInitialisation::kPyTorch);
  ASSERT_EQ(jax.weights.size(), 3u);
  for (std::size_t l = 0; l < 3; ++l) {
    const Index in = widths[l], out = widths[l + 1];
    ASSERT_EQ(jax.weights[l].rows(), out);
    ASSERT_EQ(jax.weights[l].cols(), in);
    const double count = static_cast<double>(in * out);
    const double variance = 2.0 / static_cast<double>(in + out);
    // The sample variance's relative standard error is about sqrt(2 / n) (less when truncated).
    EXPECT_NEAR(jax.weights[l].squaredNorm() / count / variance, 1.0, 5.0 * std::sqrt(2.0 / count)) << "layer " << l;
    const double bound = 2.0 * std::sqrt(variance) / 0.87962566103423978;
    EXPECT_LE(jax.weights[l].cwiseAbs().maxCoeff(), bound) << "layer " << l;
    EXPECT_GT(jax.weights[l].cwiseAbs().maxCoeff(), 0.9 * bound) << "layer " << l;
    const double bias_rms = std::sqrt(jax.biases[l].squaredNorm() / static_cast<double>(out));
    EXPECT_NEAR(bias_rms / 1e-2, 1.0, 5.0 * std::sqrt(0.5 / static_cast<double>(out))) << "layer " << l;

    const double uniform = 1.0 / (3.0 * static_cast<double>(in));
    EXPECT_NEAR(pytorch.weights[l].squaredNorm() / count / uniform, 1.0, 5.0 * std::sqrt(0.8 / count)) << "layer " << l;
    EXPECT_LE(pytorch.weights[l].cwiseAbs().maxCoeff(), 1.0 / std::sqrt(static_cast<double>(in)));
    EXPECT_LE(pytorch.biases[l].cwiseAbs().maxCoeff(), 1.0 / std::sqrt(static_cast<double>(in)));
  }
  const Attacker again = initial_mlp(787, {512, 256}, 784, 7, NetworkInitialisation::kJax);
  EXPECT_EQ(again.weights[0], jax.weights[0]) << "drawn from the seed alone";
}

TEST(LearnedReconstruction, MlpLossSumsOverOutputsAndAveragesOverRowsAsTheThesis) {
  // Zero weights: the output is the last bias b for every row, so the loss is
  // (1/rows) sum_i ||b - y_i||^2 (the thesis' 'mse': sum over pixels, mean over the batch).
  Attacker mlp = initial_mlp(3, {4}, 2, 5);
  for (MatrixXd& w : mlp.weights) w.setZero();
  mlp.biases.back() << 0.5, -1.0;
  RowMatrix inputs = RowMatrix::Ones(2, 3), outputs(2, 2);
  outputs << 1.0, 1.0, 0.0, -2.0;
  const double expected = ((0.25 + 4.0) + (0.25 + 1.0)) / 2.0;
  EXPECT_NEAR(mlp_loss_and_gradient(mlp, inputs, outputs, nullptr), expected, 1e-15);
}

TEST(LearnedReconstruction, MlpStandardisesTheOneHotLabelsOverTheFittedShadowModels) {
  // Labels 0, 0, 0, 1: the one-hot columns have means 0.75, 0.25 and standard deviation sqrt(3/16)
  // (as utils.standardize_data over [parameters, one-hot label]); a class never seen keeps scale 1.
  RowMatrix standardised(4, 2);
  standardised << 1, 0, 0, 1, -1, 0, 0, -1;
  VectorXd labels(4);
  labels << 0, 0, 0, 1;
  RowMatrix outputs = RowMatrix::Zero(4, 3);
  LearnedReconstructionOptions options;
  options.attacker_hidden = {3};
  options.attacker_epochs = 1;
  const Attacker mlp = fit_attacker(standardised, labels, outputs, 3, options);
  ASSERT_EQ(mlp.label_mean.size(), 3);
  EXPECT_NEAR(mlp.label_mean(0), 0.75, 1e-15);
  EXPECT_NEAR(mlp.label_mean(1), 0.25, 1e-15);
  EXPECT_NEAR(mlp.label_mean(2), 0.0, 1e-15);
  EXPECT_NEAR(mlp.label_scale(0), std::sqrt(3.0 / 16.0), 1e-15);
  EXPECT_NEAR(mlp.label_scale(1), std::sqrt(3.0 / 16.0), 1e-15);
  EXPECT_EQ(mlp.label_scale(2), 1.0);
}

TEST(LearnedReconstruction, ResultsDoNotDependOnTheThreadCount) {
  const Dataset fixed = random_images(10, {1, 7, 7}, 2, 7);
  const Dataset candidates = random_images(120, {1, 7, 7}, 2, 8);
  LearnedReconstructionOptions options = linear_options();
  options.train_shadow_models = 100;
  options.attacker_hidden = {1500, 20};  // the first layer's products are large enough to run in parallel
  options.attacker_epochs = 2;
  options.attacker_batch_size = 16;
  const auto run = [&] {
    return run_learned_reconstruction(
        fixed, candidates, [](const Dataset& data, Index) { return one_gradient_step(data, 2, 0.5); }, options);
  };
  testing::expect_same_for_any_thread_count(
      run, [](const LearnedReconstructionResult& one, const LearnedReconstructionResult& more) {
        ASSERT_EQ(one.targets.size(), more.targets.size());
        for (std::size_t t = 0; t < one.targets.size(); ++t) {
          EXPECT_TRUE(testing::same_bits(one.targets[t].mse, more.targets[t].mse));
          EXPECT_TRUE(testing::same_bits(one.targets[t].ssim, more.targets[t].ssim));
          EXPECT_EQ(one.targets[t].reconstruction, more.targets[t].reconstruction);
        }
      });
}

TEST(LearnedReconstruction, ShadowDataIsDFixedFollowedByTheCandidate) {
  const Dataset fixed = random_images(5, {1, 7, 7}, 2, 9);
  const Dataset candidates = random_images(40, {1, 7, 7}, 2, 10);
  const Dataset train = with_candidate(fixed, candidates, 3);
  ASSERT_EQ(train.n(), 6);
  EXPECT_EQ(train.X.row(5), candidates.X.row(3));
  EXPECT_EQ(train.y(5), candidates.y(3));
  EXPECT_EQ(train.X.topRows(5), fixed.X);
}

// ---- SSIM ----

TEST(Ssim, IdenticalImagesScoreOne) {
  const Dataset images = random_images(1, {3, 9, 10}, 2, 13);
  EXPECT_DOUBLE_EQ(ssim(images.X.row(0).transpose(), images.X.row(0).transpose(), {3, 9, 10}), 1.0);
}

TEST(Ssim, IsSymmetric) {
  const Dataset images = random_images(2, {1, 12, 9}, 2, 14);
  const VectorXd x = images.X.row(0).transpose(), y = images.X.row(1).transpose();
  EXPECT_DOUBLE_EQ(ssim(x, y, {1, 12, 9}), ssim(y, x, {1, 12, 9}));
  EXPECT_LT(ssim(x, y, {1, 12, 9}), 0.2);  // independent noise: little structure in common
}

TEST(Ssim, AConstantShiftLowersIt) {
  const Dataset images = random_images(1, {1, 8, 8}, 2, 15);
  const VectorXd x = images.X.row(0).transpose();
  const double small = ssim(x, (x.array() + 0.1).matrix(), {1, 8, 8});
  const double large = ssim(x, (x.array() + 0.3).matrix(), {1, 8, 8});
  EXPECT_LT(small, 1.0);
  EXPECT_LT(large, small);
}

TEST(Ssim, MatchesHandComputationForFlatImages) {
  // Flat windows: variances and covariance 0, so SSIM = (2ab + C1) / (a^2 + b^2 + C1).
  const VectorXd a = VectorXd::Constant(49, 0.3), b = VectorXd::Constant(49, 0.5);
  EXPECT_NEAR(ssim(a, b, {1, 7, 7}), (2 * 0.3 * 0.5 + kC1) / (0.09 + 0.25 + kC1), 1e-15);
  EXPECT_NEAR(ssim(a, b, {1, 7, 7}), 0.8823875330785064, 1e-15);
}

TEST(Ssim, MatchesHandComputationForOnePixel) {
  // x: one pixel 1 in a 7x7 window, y: 0. mu_x = 1/49, sample var_x = (1 - 1/49)/48 = 1/49, mu_y =
  // var_y = cov = 0: SSIM = C1 C2 / ((1/49^2 + C1)(1/49 + C2)) = 0.008177714534840484.
  VectorXd x = VectorXd::Zero(49);
  x(24) = 1.0;
  EXPECT_NEAR(ssim(x, VectorXd::Zero(49), {1, 7, 7}), 0.008177714534840484, 1e-15);
  // 7 x 8: two windows; the pixel at column 0 lies only in the first, the second compares two
  // flat zero windows (SSIM 1), and the mean is (0.008177714534840484 + 1) / 2.
  VectorXd wide = VectorXd::Zero(56);
  wide(3 * 8) = 1.0;
  EXPECT_NEAR(ssim(wide, VectorXd::Zero(56), {1, 7, 8}), 0.5040888572674203, 1e-15);
}

TEST(Ssim, RefusesImagesSmallerThanTheWindowOrOfTheWrongSize) {
  EXPECT_THROW(ssim(VectorXd::Zero(36), VectorXd::Zero(36), {1, 6, 6}), std::invalid_argument);
  EXPECT_THROW(ssim(VectorXd::Zero(49), VectorXd::Zero(48), {1, 7, 7}), std::logic_error);
}

// ---- bad inputs ----

template <class Call>
void expect_invalid_argument(const Call& call, const std::string& message_part) {
  try {
    call();
    ADD_FAILURE() << "no exception; expected one mentioning '" << message_part << "'";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find(message_part), std::string::npos) << error.what();
  }
}

TEST(LearnedReconstruction, RefusesBadInputsNamingWhatIsWrong) {
  const Dataset fixed = random_images(10, {1, 7, 7}, 2, 16);
  const Dataset candidates = random_images(50, {1, 7, 7}, 2, 17);
  const auto train = [](const Dataset& data, Index) { return one_gradient_step(data, 2, 0.5); };
  LearnedReconstructionOptions options = linear_options();
  options.train_shadow_models = 40;
  options.target_shadow_models = 20;  // 60 > 50 candidates
  expect_invalid_argument([&] { run_learned_reconstruction(fixed, candidates, train, options); },
                          "target_shadow_models = 60 shadow models need as many candidates, and there are 50");
  options.target_shadow_models = 10;
  expect_invalid_argument([&] { run_learned_reconstruction(fixed.select_rows({}), candidates, train, options); },
                          "D_fixed is empty");
  Dataset only_zeros = fixed;
  only_zeros.y.setZero();
  expect_invalid_argument([&] { run_learned_reconstruction(only_zeros, candidates, train, options); },
                          "which no example of D_fixed has (labels must match)");
  Dataset fractional = candidates;
  fractional.y(4) = 0.5;
  expect_invalid_argument([&] { run_learned_reconstruction(fixed, fractional, train, options); },
                          "candidate row 4 has label 0.5, not a class index");
  const Dataset wider = random_images(50, {1, 7, 8}, 2, 18);
  expect_invalid_argument([&] { run_learned_reconstruction(fixed, wider, train, options); },
                          "D_fixed has 49 features and the candidates 56");
  LearnedReconstructionOptions none = options;
  none.train_shadow_models = 0;
  expect_invalid_argument([&] { run_learned_reconstruction(fixed, candidates, train, none); },
                          "train_shadow_models = 0: must be >= 1");
  none = options;
  none.target_shadow_models = 0;
  expect_invalid_argument([&] { run_learned_reconstruction(fixed, candidates, train, none); },
                          "target_shadow_models = 0: must be >= 1");
  LearnedReconstructionOptions bad = options;
  bad.attacker_hidden = {8, 0};
  expect_invalid_argument([&] { bad.validate(); }, "attacker_hidden = 0");
  bad = options;
  bad.ridge = -1;
  expect_invalid_argument([&] { bad.validate(); }, "ridge = -1");
  bad = options;
  bad.attacker_step_size = 0;
  expect_invalid_argument([&] { bad.validate(); }, "attacker_step_size = 0");
  const auto ragged = [&](const Dataset& data, Index) {
    return data.X(data.n() - 1, 0) > 0.5 ? VectorXd::Zero(3) : VectorXd::Zero(4);
  };
  EXPECT_THROW_NAMING(run_learned_reconstruction(fixed, candidates, ragged, options), std::logic_error,
                      "parameters and model 0 has");  // the trainer's bug, not the user's input
}

TEST(LearnedReconstruction, DrawsDisjointFixedAndCandidateRows) {
  Dataset data = random_images(100, {1, 7, 7}, 2, 19);
  for (Index i = 0; i < data.n(); ++i) data.X(i, 0) = static_cast<double>(i);  // row identity
  LearnedReconstructionOptions options = linear_options();
  options.fixed_size = 20;
  options.train_shadow_models = 50;
  options.target_shadow_models = 30;
  EXPECT_EQ(draw_attack_data(data, options).public_part.n(), 0);
  options.train_shadow_models = 40;
  const AttackData drawn = draw_attack_data(data, options, 10);
  ASSERT_EQ(drawn.public_part.n(), 10);
  ASSERT_EQ(drawn.fixed.n(), 20);
  ASSERT_EQ(drawn.candidates.n(), 70);
  std::vector<int> seen(100, 0);
  for (Index i = 0; i < 10; ++i) ++seen[static_cast<std::size_t>(drawn.public_part.X(i, 0))];
  for (Index i = 0; i < 20; ++i) ++seen[static_cast<std::size_t>(drawn.fixed.X(i, 0))];
  for (Index i = 0; i < 70; ++i) ++seen[static_cast<std::size_t>(drawn.candidates.X(i, 0))];
  for (int count : seen) EXPECT_EQ(count, 1);
  EXPECT_EQ(drawn.fixed.image, data.image);
  expect_invalid_argument([&] { draw_attack_data(data, options, 11); },
                          "= 101 rows, and the data (random_images) has 100");
}

}  // namespace
}  // namespace filkit
