// fim's constant gradient model on the thesis' table 3.2 ConvNet: one evaluation of its objective
// on a public batch of 512 (ReleasedGradientBackend::shift_objective: per-example gradients, their
// Jacobian products along 2 input-space probes each, the clip's terms and the gradient about c),
// half of the 26,010 parameters released, in float64 against float32 (--gradient-precision), in the
// same run. The counter batches_15840_h extrapolates to the hours of the 15,840 batches of a table
// 3.2 run. Synthetic pixels and parameters keep the
// benchmark independent of installed datasets. Skips without LibTorch.
#include "networks/network_plugin.hpp"
#include "filkit/networks/networks.hpp"

#include <benchmark/benchmark.h>

#include <random>

namespace {

using namespace filkit;

constexpr Index kBatch = 512, kProbes = 2;

void shift_objective(benchmark::State& state, GradientPrecision precision) {
  if (!networks_available()) {
    state.SkipWithError("built without LibTorch");
    return;
  }
  const ImageShape image{1, 28, 28};
  NetworkOptions options;  // the reconstruction paper's MNIST ConvNet, the thesis' table 3.2 model
  const Network network(options, 784, 10, image);
  std::mt19937_64 rng(1);
  const VectorXd w = network.initial_parameters(rng);
  ReleasedGradientSpec spec;
  spec.plan = network.plan();
  spec.input_dim = 784;
  spec.image = image;
  spec.num_classes = 10;
  spec.clip_norm = 8.0;
  for (Index i = 0; i < network.parameter_count(); i += 2) spec.released.push_back(i);
  const auto backend = create_released_gradient_backend(spec);
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  std::normal_distribution<double> normal;
  RowMatrix X(kBatch, 784), probes(kBatch * kProbes, 784);
  for (Index i = 0; i < X.size(); ++i) X(i) = pixel(rng);
  for (Index i = 0; i < probes.size(); ++i) probes(i) = normal(rng);
  VectorXd y(kBatch), c(static_cast<Index>(spec.released.size()));
  for (Index i = 0; i < kBatch; ++i) y(i) = static_cast<double>(i % 10);
  for (Index i = 0; i < c.size(); ++i) c(i) = 0.05 * normal(rng);
  ShiftObjectiveRequest request;
  request.lambda = 1e3;
  request.precision = precision;
  for (auto _ : state) benchmark::DoNotOptimize(backend->shift_objective(w, X, y, c, probes, request).value);
  state.counters["batches_15840_h"] =
      benchmark::Counter(1.0 / 15840.0 * 3600.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(shift_objective, float64, GradientPrecision::kFloat64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(shift_objective, float32, GradientPrecision::kFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
