// The memory estimates checked against --max-memory before a model is allocated (issue 27): each
// parameter count against a count by hand of a known architecture and against the parameters the
// model really allocates (the constant model's phi, the plugin's conditional model, the attacker
// MLP); the bytes as the documented copies of those counts; the refusals name the estimate and
// the options to change, before LibTorch is loaded; the zip members' unpacked size against
// Info-ZIP's listing of the fixture; LibTorch's messages cut to one line.
#include "filkit/data/npy.hpp"
#include "filkit/leakage/learned_reconstruction.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/networks/networks.hpp"
#include "filkit/public_data/constant_gradient_model.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "networks/network_plugin.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace filkit {
namespace {

constexpr std::uint64_t kDouble = sizeof(double);

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const MemoryLimitError& error) {
    return error.what();
  }
  ADD_FAILURE() << "no MemoryLimitError";
  return {};
}

void expect_contains(const std::string& text, const std::vector<std::string>& fragments) {
  for (const std::string& fragment : fragments)
    EXPECT_NE(text.find(fragment), std::string::npos) << fragment << " in " << text;
}

TEST(NetworkMemoryEstimate, CountsTheMnistCnnByHand) {
  NetworkOptions options;  // cnn
  const NetworkPlan plan = plan_network(builtin_network_layers(options, 10), {1, 28, 28}, 10);
  // conv 16 8x8 s2 p2: 16*64+16 = 1040 -> 16x13x13; avgpool 2 s1 -> 16x12x12; conv 32 4x4 s2:
  // 32*16*16+32 = 8224 -> 32x5x5; avgpool -> 32x4x4 = 512; dense 32: 512*32+32 = 16416; dense 10: 330.
  ASSERT_EQ(plan.parameter_count, 1040 + 8224 + 16416 + 330);
  const std::uint64_t values =
      784 + 2704 + 2704 + 2304 + 800 + 800 + 512 + 512 + 32 + 32 + 10;  // input, each layer's output
  const NetworkMemoryEstimate estimate = estimate_network_memory(plan, 25);
  EXPECT_EQ(estimate.parameter_count, 26010);
  EXPECT_EQ(estimate.rows, 25);
  EXPECT_EQ(estimate.parameters, 26010 * kDouble * kNetworkParameterCopies);
  EXPECT_EQ(estimate.activations, 25 * values * kDouble * kNetworkActivationCopies);
  EXPECT_EQ(estimate.per_example_gradients, 25 * (1040 + 8224) * kDouble * kNetworkPerExampleCopies);  // convolutions
  EXPECT_EQ(estimate.total(), estimate.parameters + estimate.activations + estimate.per_example_gradients);
}

TEST(NetworkMemoryEstimate, RowsInFlightAreTheChunkOrTheBatchIfSmaller) {
  NetworkOptions options;
  options.chunk = 100;
  EXPECT_EQ(network_rows_in_flight(options), 100);
  options.batch_rows = 4;
  EXPECT_EQ(network_rows_in_flight(options), 4);
  options.batch_rows = 600;
  EXPECT_EQ(network_rows_in_flight(options), 100);
}

TEST(NetworkMemoryEstimate, SaturatesInsteadOfWrappingAround) {
  const NetworkPlan plan = plan_network(parse_network_layers("conv:2:2,flatten,dense:2"), {1, 3, 3}, 2);
  const NetworkMemoryEstimate estimate = estimate_network_memory(plan, std::int64_t{1} << 62);
  EXPECT_EQ(estimate.per_example_gradients, UINT64_MAX);
  EXPECT_EQ(estimate.total(), UINT64_MAX);
}

// The issue's reproducer: 20 features, flatten,dense:1000000,tanh,dense:2 is 20e6 + 1e6 + 2e6 + 2
// parameters; under 64M it is refused with the estimate before the plugin is loaded (so the test
// runs without LibTorch too).
TEST(Network, RefusesANetworkBeyondMaxMemoryBeforeLoadingLibTorch) {
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "flatten,dense:1000000,tanh,dense:2";
  options.max_memory = 64 << 20;
  options.batch_rows = 4;
  const std::string message = message_of([&] { Network(options, 20, 2); });
  expect_contains(
      message, {"a network of 23000002 parameters with 4 examples in flight", "max_memory = 64M", "chunk, batch_size"});
  // 16 copies of p, 4 rows x (20 + 1e6 + 1e6 + 2) activations x 4, no convolution: 3.0 GiB
  // (the run it stops peaked at 4.2 GB, LibTorch's 200 MB included).
  const std::uint64_t bytes = 23000002ull * 8 * 16 + 4ull * 2000022 * 8 * 4;
  expect_contains(message, {readable_bytes(bytes)});
}

TEST(GradientModelMemoryEstimate, CountsTheConstantModelByHandAndAsItAllocates) {
  GradientModelOptions options;
  options.hidden = {7, 5, 4};
  const Index m = 6;
  // beta (5), W (4 x 5), b (4), W_o (6 x 4), b_o (6).
  EXPECT_EQ(gradient_model_parameter_count(options, m, std::nullopt), 5 + 20 + 4 + 24 + 6);
  const ConstantGradientModel model(GradientModelKind::kConstant, m, options.hidden, 1);
  EXPECT_EQ(gradient_model_parameter_count(options, m, std::nullopt), model.parameters().size());
  options.kind = GradientModelKind::kVector;
  EXPECT_EQ(gradient_model_parameter_count(options, m, std::nullopt),
            ConstantGradientModel(GradientModelKind::kVector, m, {}, 1).parameters().size());
}

TEST(GradientModelMemoryEstimate, CountsProbesAsBatchTimesProbesTimesInputAndReleased) {
  GradientModelOptions options;
  options.hidden = {256, 256};
  options.batch_size = 16;
  options.probes = 3;
  const Index m = 40, d = 30;
  options.unit = ScheduleUnit::kBatches;  // per-batch probes on single batches: nothing kept beyond a batch
  const GradientModelMemoryEstimate estimate = estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true);
  const std::uint64_t count = 256 + 256 * 256 + 256 + 40 * 256 + 40;
  EXPECT_EQ(estimate.parameter_count, static_cast<Index>(count));
  EXPECT_EQ(estimate.parameters, count * kDouble * kGradientModelParameterCopies);
  EXPECT_EQ(estimate.activations, 10 * 40 * kDouble * 2);  // the batch is the 10 public rows
  EXPECT_EQ(estimate.probes, 10 * 3 * (30 + 40) * kDouble);
  EXPECT_EQ(estimate.step_draws, 0u);
  EXPECT_EQ(estimate.kept_records, 0u);
  // Per-batch probes over epochs on a network: an epoch's probes, gradients and products at once,
  // and the examples' records kept for the step (kKeptRecordCopies of an example's activations and
  // records, in the objective's precision). The closed form keeps none.
  options.unit = ScheduleUnit::kEpochs;
  const NetworkPlan plan = plan_network(parse_network_layers("conv:2:3:1,tanh,flatten,dense:2"), {1, 5, 5}, 2);
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true, &plan).step_draws,
            10 * (3 * 30 + 4 * 40) * kDouble);
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true).step_draws, 0u);  // not kept
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, false, &plan).step_draws, 0u);
  // input 25; conv: output 2 x 3 x 3 = 18, records 9 positions x (fan-in 9 + 2 outputs) = 99; tanh
  // 18; flatten 18; dense: output 2, records 18 + 2.
  const std::uint64_t example = 25 + 18 + 99 + 18 + 18 + 2 + 20;
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true, &plan).kept_records,
            10 * example * kDouble * kKeptRecordCopies);
  options.precision = Precision::kFloat32;
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true, &plan).kept_records,
            10 * example * sizeof(float) * kKeptRecordCopies);
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, false, &plan).kept_records, 0u);
  options.precision = Precision::kFloat64;
  // Drawn once a step: every public example's 3 probes (30 each) and, on a network, its gradient
  // and 3 probe products (40 each).
  options.probe_draws = ProbeDraws::kStep;
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true).step_draws,
            10 * (3 * 30 + 4 * 40) * kDouble);
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, false).step_draws, 10 * 3 * 30 * kDouble);
  options.trace = GradientTrace::kExact;
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true).probes, 0u);
  EXPECT_EQ(estimate_gradient_model_memory(options, m, d, std::nullopt, 10, true).step_draws, 0u);
}

/// A softmax problem of 20 features and 2 classes, `n` rows.
Dataset small_data(Index n) {
  Dataset data;
  data.X = RowMatrix::Constant(n, 20, 0.1);
  data.y = VectorXd::Zero(n);
  for (Index i = 1; i < n; i += 2) data.y(i) = 1.0;
  return data;
}

/// train_with_public_data's refusal (before pre-training, so in no time) for fim under 256M.
std::string fim_refusal(const PublicDataTrainingOptions& options) {
  return message_of([&] { train_with_public_data(small_data(80), small_data(40), Dataset{}, options); });
}

TEST(GradientModelMemoryEstimate, RefusesTheIssuesWideModelNamingTheOptionsBeforePreTraining) {
  PublicDataTrainingOptions options;
  options.methods = {PrivateTrainingMethod::kFim};
  options.private_phase.kind = ModelKind::kSoftmax;
  options.private_phase.batch_size = 4;
  options.pretrain.batch_size = 8;
  options.pretrain.steps = 1000000000;  // refused before: it would not end
  options.gradient_model.batch_size = 8;
  options.private_phase.max_memory = ByteSize{std::uint64_t{256} << 20};
  options.gradient_model.hidden = {256, 100000000};
  expect_contains(fim_refusal(options), {"the gradient model of", "max_memory = 256M", "gradient_hidden",
                                         "gradient_batch_size", "gradient_probes"});
  options.gradient_model.hidden = {256, 256};
  options.gradient_model.probes = 1000000;
  expect_contains(fim_refusal(options), {"of probes", "max_memory = 256M"});
}

TEST(GradientModelMemoryEstimate, CountsANetworksPerExampleGradientsBesideIt) {
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)";
  // A dense layer of 10^6 units (23,000,002 parameters): the network's estimate (16 p-vectors and
  // 4 rows' activations, 2.7 GiB) fits in 4G, its gradients for pre-training's batches of 64 rows
  // (their mean gradient, 11 GiB) do not.
  PublicDataTrainingOptions options;
  options.methods = {PrivateTrainingMethod::kSgd};
  NetworkOptions network;
  network.architecture = NetworkArchitecture::kCustom;
  network.layers = "flatten,dense:1000000,tanh,dense:2";
  network.batch_rows = 4;
  network.max_memory = std::uint64_t{4} << 30;
  options.private_phase.network = network;
  options.private_phase.batch_size = 4;
  options.pretrain.batch_size = 64;
  options.pretrain.steps = 1000000000;
  options.private_phase.max_memory = ByteSize{std::uint64_t{4} << 30};
  const NetworkPlan plan = plan_network(parse_network_layers(network.layers), {20}, 2);
  ASSERT_LT(estimate_network_memory(plan, 4).total(), std::uint64_t{4} << 30);
  expect_contains(fim_refusal(options), {"training a network of 23000002 parameters", "of per-example gradients",
                                         "max_memory = 4G", "chunk, batch_size, pretrain_batch_size"});
}

TEST(LearnedAttackMemoryEstimate, CountsTheShadowModelsTrainedAtOnceAndTheAttacker) {
  LearnedReconstructionOptions options;
  options.attacker_hidden = {8};
  options.train_shadow_models = 30;
  options.target_shadow_models = 5;
  LearnedAttackMemoryEstimate estimate;
  estimate.attacker = estimate_attacker_memory(options, 12, 3, 7);
  estimate.shadow_model = 1000;
  estimate.threads = 2;
  EXPECT_EQ(estimate.shadow_training(), 2000 + estimate.attacker.inputs / 2);
  estimate.kept = 500;  // learned-attack's --shadow-models store, beside the models training
  EXPECT_EQ(estimate.shadow_training(), 2500 + estimate.attacker.inputs / 2);
  estimate.kept = 0;
  EXPECT_EQ(estimate.total(), std::max(estimate.shadow_training(), estimate.attacker.total()));
  estimate.shadow_model = std::uint64_t{1} << 40;
  EXPECT_EQ(estimate.total(), estimate.shadow_training());
  // Refused before any training: a shadow model needing 1 TiB, or an attacker of 10^8 units.
  options.max_memory = ByteSize{std::uint64_t{64} << 20};
  expect_contains(message_of([&] { check_learned_attack_memory(options, 12, 3, 7, std::uint64_t{1} << 40); }),
                  {"the learned attack (", "shadow models trained at once, 1.0 TiB each", "max_memory = 64M",
                   "train_shadow_models", "threads"});
  expect_contains(message_of([&] { check_learned_attack_memory(options, 12, 3, 7, 1000, std::uint64_t{1} << 40); }),
                  {"and 1.0 TiB of kept shadow models", "max_memory = 64M"});
  options.attacker_hidden = {100000000};
  expect_contains(message_of([&] { check_learned_attack_memory(options, 12, 3, 7, 1000); }),
                  {"then the attacker of", "attacker_hidden"});
  EXPECT_NO_THROW(check_learned_attack_memory(LearnedReconstructionOptions{}, 1570, 2, 784, 50 << 20));
}

TEST(GradientModelMemoryEstimate, CountsTheConditionalModelAsThePluginAllocatesIt) {
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)";
  for (const bool image : {false, true}) {
    ReleasedGradientSpec spec;
    spec.input_dim = image ? 784 : 12;
    if (image) spec.image = ImageShape{1, 28, 28};
    spec.num_classes = 3;
    spec.plan = plan_network(parse_network_layers("dense:3:nobias"), {spec.input_dim}, 3);
    for (Index i = 0; i < spec.plan.parameter_count; i += 2) spec.released.push_back(i);
    spec.learned = true;
    spec.gradient_model.kind = GradientModelKind::kConditional;
    spec.gradient_model.hidden = {9, 5};
    const auto backend = create_released_gradient_backend(spec);
    const Index m = static_cast<Index>(spec.released.size());
    EXPECT_EQ(gradient_model_parameter_count(spec.gradient_model, m, spec.image), backend->phi().size()) << image;
    if (!image)  // features 2m; per layer 2 f + (f + 1) w; output (5 + 1) m
      EXPECT_EQ(backend->phi().size(), 2 * 2 * m + (2 * m + 1) * 9 + 2 * 9 + 10 * 5 + 6 * m);
  }
}

TEST(AttackerMemoryEstimate, CountsTheMlpAsItAllocatesAndTheLinearMapsByHand) {
  LearnedReconstructionOptions options;
  options.attacker_hidden = {8, 4};
  options.train_shadow_models = 30;
  options.target_shadow_models = 5;
  options.attacker_batch_size = 10;
  const Index p = 12, K = 3, d = 7;
  const AttackerMemoryEstimate estimate = estimate_attacker_memory(options, p, K, d);
  const Attacker mlp = initial_mlp(p + K, options.attacker_hidden, d, 1);
  Index allocated = 0;
  for (const MatrixXd& w : mlp.weights) allocated += w.size();
  for (const VectorXd& b : mlp.biases) allocated += b.size();
  EXPECT_EQ(estimate.parameter_count, allocated);
  EXPECT_EQ(allocated, (15 + 1) * 8 + (8 + 1) * 4 + (4 + 1) * 7);
  EXPECT_EQ(estimate.parameters, static_cast<std::uint64_t>(allocated) * kDouble * 4);
  EXPECT_EQ(estimate.activations, 10 * (15 + 8 + 4 + 7) * kDouble * 2);
  EXPECT_EQ(estimate.inputs, (35 * 12 * 2 + 30 * 15) * kDouble);
  options.attacker_hidden.clear();  // one (p + 1) x d map a label, X^T X and its factorisation
  const AttackerMemoryEstimate linear = estimate_attacker_memory(options, p, K, d);
  EXPECT_EQ(linear.parameter_count, 3 * 13 * 7);
  EXPECT_EQ(linear.activations, 2 * 13 * 13 * kDouble);
  options.attacker_hidden = {100000000};
  options.max_memory = ByteSize{std::uint64_t{64} << 20};
  expect_contains(message_of([&] { check_attacker_memory(options, p, K, d); }),
                  {"the attacker of", "max_memory = 64M", "attacker_hidden"});
}

TEST(ZipMembers, VerifyingReturnsTheUnpackedSizeThatInfoZipLists) {
  // `unzip -l tests/networks/torchscript/tanh_mlp.pt`: 15 files, 4250 bytes.
  EXPECT_EQ(verify_zip_members(std::string(FILKIT_TEST_SOURCE_DIR) + "/tests/networks/torchscript/tanh_mlp.pt", "zip"),
            4250u);
}

TEST(Network, RefusesATorchScriptFileBeyondMaxMemoryBeforeLoadingIt) {
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.torchscript = std::string(FILKIT_TEST_SOURCE_DIR) + "/tests/networks/torchscript/tanh_mlp.pt";
  options.max_memory = 3 * 4250 - 1;
  expect_contains(message_of([&] { Network(options, 4, 3); }),
                  {"loading torchscript", "tanh_mlp.pt", "4.2 KiB unpacked", "needs 12 KiB"});
}

TEST(LibTorchErrors, AreCutToOneLineAndAnAllocationFailureNamesItsSize) {
  const std::string c10 =
      "[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 32000000000 bytes. Error code 12 (Cannot allocate memory)\nframe #0: <unknown function> + 0x4c062\n"
      "frame #1: c10::ThrowEnforceNotMet(...)";
  const std::string line = detail::libtorch_error_message(c10);
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;
  expect_contains(line, {"out of memory", "LibTorch could not allocate 30 GiB"});  // 32e9 bytes
  EXPECT_EQ(detail::libtorch_error_message("shape mismatch\nException raised from foo at bar.cpp:1 (most recent call "
                                           "first):\nframe #0: baz"),
            "shape mismatch");
  EXPECT_EQ(detail::libtorch_error_message("a filkit message"), "a filkit message");
}

// A real c10::Error out of the plugin: a conditional model of 2^40 x 2m weights (8 TiB) fails in
// LibTorch's allocator at once (nothing is touched), and reaches the caller as one line.
TEST(LibTorchErrors, AnAllocationFailureInThePluginIsOneLine) {
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)";
  ReleasedGradientSpec spec;
  spec.input_dim = 4;
  spec.num_classes = 2;
  spec.plan = plan_network(parse_network_layers("dense:2:nobias"), {4}, 2);
  spec.released = {0, 1, 2};
  spec.learned = true;
  spec.gradient_model.kind = GradientModelKind::kConditional;
  spec.gradient_model.hidden = {Index{1} << 40};
  try {
    create_released_gradient_backend(spec);
    ADD_FAILURE() << "an 8 TiB tensor was allocated";
  } catch (const std::runtime_error& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    expect_contains(message, {"out of memory", "LibTorch could not allocate 48 TiB"});
  }
}

}  // namespace
}  // namespace filkit
