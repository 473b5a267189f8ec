// Private SGD on networks (dpsgd.hpp with DpSgdOptions::network), Adam, and resuming from a saved
// state: against the closed-form GLM, hand-computed updates and uninterrupted runs.

#include "filkit/dpsgd/training.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace filkit {
namespace {

using testing::random_classification;
using testing::TempDir;

DpSgdOptions softmax_options() {
  DpSgdOptions options;
  options.kind = ModelKind::kSoftmax;
  options.batch_size = 8;
  options.steps = 12;
  options.step_size = 0.5;
  options.clip_norm = 0.3;
  options.noise_multiplier = 0.8;
  options.momentum = 0.5;
  options.init_scale = 0.3;
  options.report_epochs = {1.0};
  options.runs = 2;
  options.seed = 21;
  options.trace = TraceMethod::kExact;  // exact for the network too (its auto would estimate)
  options.spectral = SpectralMethod::kExact;
  return options;
}

TEST(DpSgdNetworks, SoftmaxNetworkAccountantAgreesWithTheClosedFormGlmToRounding) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const Dataset train = random_classification(40, 5, 3, 1), test = random_classification(30, 5, 3, 2);
  for (bool intercept : {false, true}) {
    DpSgdOptions glm = softmax_options();
    glm.intercept = intercept;
    DpSgdOptions network = glm;
    network.network = NetworkOptions{NetworkArchitecture::kSoftmax, {}, false, 3};
    const DpSgdResult a = train_dpsgd(train, test, glm), b = train_dpsgd(train, test, network);
    ASSERT_EQ(a.snapshots.size(), b.snapshots.size());
    EXPECT_EQ(a.parameter_count, b.parameter_count);
    for (std::size_t c = 0; c < a.snapshots.size(); ++c) {
      const DpSgdSnapshot &x = a.snapshots[c], &y = b.snapshots[c];
      EXPECT_EQ(x.times_sampled, y.times_sampled);  // the same batches
      EXPECT_LT((x.fisher_trace - y.fisher_trace).norm(), 1e-10 * x.fisher_trace.norm());
      EXPECT_LT((x.fisher_spectral - y.fisher_spectral).norm(), 1e-9 * x.fisher_spectral.norm());
      EXPECT_EQ(x.test_accuracy, y.test_accuracy);
      EXPECT_DOUBLE_EQ(x.privacy.eps, y.privacy.eps);
    }
    for (int r = 0; r < glm.runs; ++r)
      EXPECT_LT((a.parameters[r] - b.parameters[r]).norm(), 1e-11 * a.parameters[r].norm());
  }
}

TEST(DpSgdNetworks, TrainsTheMlpAndTheConvNetWithEstimatedAccounting) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  // 16 x 16 "images" whose class is which quarter is bright: learnable in a few steps.
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> noise(0.0, 0.3);
  Dataset train;
  train.X.resize(60, 256);
  train.y.resize(60);
  for (Index i = 0; i < 60; ++i) {
    train.y(i) = static_cast<double>(i % 3);
    for (Index r = 0; r < 16; ++r)
      for (Index c = 0; c < 16; ++c)
        train.X(i, 16 * r + c) = noise(rng) + ((r < 8) == (i % 3 == 0) && (c < 8) == (i % 3 != 2) ? 0.7 : 0.0);
  }
  for (NetworkArchitecture architecture : {NetworkArchitecture::kMlp, NetworkArchitecture::kCnn}) {
    DpSgdOptions options;
    options.network = NetworkOptions{architecture, {16}, false, 10};
    options.batch_size = 20;
    options.steps = 15;
    options.step_size = 0.5;
    options.momentum = 0.5;
    options.clip_norm = 1.0;
    options.noise_multiplier = 0.5;
    options.trace = TraceMethod::kGaussian;
    options.probes = 1;
    options.spectral = SpectralMethod::kPowerIteration;
    options.power_iterations = 3;
    options.seed = 2;
    const DpSgdResult result = train_dpsgd(train, train, options);
    const DpSgdSnapshot& last = result.final_snapshot();
    EXPECT_GT(last.mean_test_accuracy(), 0.6) << to_string(architecture);
    EXPECT_TRUE(result.models.empty());
    ASSERT_EQ(result.parameters.size(), 1u);
    EXPECT_EQ(result.parameters[0].size(), result.parameter_count);
    EXPECT_FALSE(result.architecture.empty());
    for (Index i = 0; i < train.n(); ++i) {
      EXPECT_EQ(last.fisher_trace(i) > 0, last.times_sampled(i) > 0);
      // ||G||_2^2 <= Tr(G^T G) holds per step for exact values; power iteration is a lower bound
      // of the spectral norm, so only check it is finite and non-negative.
      EXPECT_GE(last.fisher_spectral(i), 0.0);
    }
  }
}

TEST(DpSgdNetworks, AdamTakesTheBiasCorrectedStep) {
  // One step from w = 0 with the same batch and noise: SGD without momentum moves by -rho u,
  // Adam by -rho u / (|u| + eps) (bias-corrected moments of one gradient).
  const Dataset train = random_classification(30, 4, 2, 5);
  DpSgdOptions sgd;
  sgd.batch_size = 10;
  sgd.steps = 1;
  sgd.step_size = 0.1;
  sgd.seed = 3;
  DpSgdOptions adam = sgd;
  adam.optimizer = Optimizer::kAdam;
  const VectorXd w_sgd = train_dpsgd(train, Dataset(), sgd).parameters[0];
  const VectorXd w_adam = train_dpsgd(train, Dataset(), adam).parameters[0];
  const VectorXd u = -w_sgd / sgd.step_size;
  const VectorXd expected = -adam.step_size * u.array() / (u.array().abs() + adam.adam_epsilon);
  EXPECT_LT((w_adam - expected).norm(), 1e-14);
  adam.adam_beta2 = 1.0;
  EXPECT_THROW(train_dpsgd(train, Dataset(), adam), std::invalid_argument);
}

/// Runs `options` to the end in pieces of `piece` steps, each call resuming from the state file.
DpSgdResult run_in_pieces(const Dataset& train, const Dataset& test, DpSgdOptions options, Index piece, int& calls) {
  options.stop_after = piece;
  calls = 0;
  for (;;) {
    ++calls;
    DpSgdResult result = train_dpsgd(train, test, options);
    EXPECT_EQ(result.resumed, calls > 1);
    if (result.complete) return result;
    EXPECT_TRUE(std::filesystem::exists(options.checkpoint_path));
  }
}

TEST(DpSgdNetworks, ResumingFromTheSavedStateGivesTheUninterruptedRun) {
  const TempDir dir;
  const Dataset train = random_classification(50, 4, 3, 6), test = random_classification(20, 4, 3, 7);
  std::vector<DpSgdOptions> cases;
  DpSgdOptions glm = softmax_options();
  glm.trace = TraceMethod::kCoordinates;  // estimates: their generators must resume too
  glm.probes = 2;
  glm.sampling = BatchSampling::kPoisson;
  cases.push_back(glm);
  DpSgdOptions adam = softmax_options();
  adam.optimizer = Optimizer::kAdam;
  cases.push_back(adam);
  if (networks_available()) {
    DpSgdOptions mlp = softmax_options();
    mlp.network = NetworkOptions{NetworkArchitecture::kMlp, {6}, false, 4};
    mlp.trace = TraceMethod::kGaussian;
    mlp.probes = 1;
    mlp.spectral = SpectralMethod::kPowerIteration;
    mlp.power_iterations = 2;
    mlp.init_scale = 0.0;
    cases.push_back(mlp);
  }
  for (DpSgdOptions options : cases) {
    const DpSgdResult whole = train_dpsgd(train, test, options);
    options.checkpoint_path = dir.file("state.cbor");
    options.checkpoint_every = 5;
    int calls = 0;
    const DpSgdResult pieces = run_in_pieces(train, test, options, 7, calls);  // 24 steps: 4 calls
    EXPECT_EQ(calls, 4);
    EXPECT_FALSE(std::filesystem::exists(options.checkpoint_path)) << "removed when the job finishes";
    ASSERT_EQ(whole.snapshots.size(), pieces.snapshots.size());
    for (std::size_t c = 0; c < whole.snapshots.size(); ++c) {
      EXPECT_EQ(whole.snapshots[c].fisher_trace, pieces.snapshots[c].fisher_trace);
      EXPECT_EQ(whole.snapshots[c].fisher_spectral.hasNaN(), pieces.snapshots[c].fisher_spectral.hasNaN());
      EXPECT_EQ(whole.snapshots[c].times_sampled, pieces.snapshots[c].times_sampled);
      EXPECT_EQ(whole.snapshots[c].test_accuracy, pieces.snapshots[c].test_accuracy);
    }
    EXPECT_EQ(whole.parameters, pieces.parameters);
    EXPECT_EQ(whole.run_seeds, pieces.run_seeds);
  }
}

TEST(DpSgdNetworks, RefusesAStateFileOfAnotherJob) {
  const TempDir dir;
  const Dataset train = random_classification(50, 4, 3, 6);
  DpSgdOptions options = softmax_options();
  options.checkpoint_path = dir.file("state.cbor");
  options.stop_after = 3;
  ASSERT_FALSE(train_dpsgd(train, Dataset(), options).complete);
  DpSgdOptions other = options;
  other.noise_multiplier = 2.0;
  try {
    train_dpsgd(train, Dataset(), other);
    ADD_FAILURE() << "resumed another job's state";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("noise_multiplier"), std::string::npos) << e.what();
  }
  EXPECT_THROW(train_dpsgd(random_classification(51, 4, 3, 6), Dataset(), options), DataError);
  dir.write("state.cbor", "not a state");
  EXPECT_THROW(train_dpsgd(train, Dataset(), options), DataError);
  DpSgdOptions nowhere = softmax_options();
  nowhere.stop_after = 3;  // would lose the work
  EXPECT_THROW(train_dpsgd(train, Dataset(), nowhere), std::invalid_argument);
}

}  // namespace
}  // namespace filkit

namespace filkit {
namespace {

std::string torchscript_fixture(const std::string& name) {
  return std::string(FILKIT_TEST_SOURCE_DIR) + "/tests/networks/torchscript/" + name;
}

// A resume after the TorchScript file was replaced by one of the same layers but other weights
// (the path, and so every setting, unchanged) would mix two networks in one run.
TEST(DpSgdNetworks, RefusesToResumeAfterTheTorchScriptFileChanged) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const TempDir dir;
  const Dataset train = random_classification(50, 4, 3, 6);
  const std::string module = dir.file("net.pt");
  std::filesystem::copy_file(torchscript_fixture("tanh_mlp.pt"), module);
  DpSgdOptions options = softmax_options();
  options.network = NetworkOptions{};
  options.network->architecture = NetworkArchitecture::kCustom;
  options.network->torchscript = module;
  options.trace = TraceMethod::kGaussian;
  options.spectral = SpectralMethod::kNone;
  options.checkpoint_path = dir.file("state.cbor");
  options.stop_after = 3;
  ASSERT_FALSE(train_dpsgd(train, Dataset(), options).complete);
  std::filesystem::copy_file(torchscript_fixture("tanh_mlp_other_weights.pt"), module,
                             std::filesystem::copy_options::overwrite_existing);
  try {
    train_dpsgd(train, Dataset(), options);
    ADD_FAILURE() << "resumed with another module's weights";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("the TorchScript file's contents changed"), std::string::npos) << e.what();
  }
  // The same file again resumes.
  std::filesystem::copy_file(torchscript_fixture("tanh_mlp.pt"), module,
                             std::filesystem::copy_options::overwrite_existing);
  options.stop_after = 0;
  EXPECT_TRUE(train_dpsgd(train, Dataset(), options).complete);
}

}  // namespace
}  // namespace filkit
