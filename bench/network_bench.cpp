// Per-example FIL accounting of one DP-SGD step on the reconstruction paper's MNIST ConvNet
// (26,010 parameters, 28 x 28 inputs): the clipped gradients of a batch of 100 and each member's
// Tr(G^T G) estimate, batched (networks.hpp: one forward, one backward to the pre-activations,
// per-example weight gradients as batched outer products, probes as batched JVP/VJPs) against
// one example at a time (the same code with chunk = 1: a graph per example), in the same run.
// The counter examples_per_second is the accounting throughput of a step. Synthetic pixels keep
// the benchmark independent of installed datasets. Skips without LibTorch.
#include "filkit/networks/networks.hpp"

#include <benchmark/benchmark.h>

#include <random>

namespace {

using namespace filkit;

constexpr Index kBatch = 100;

void account_step(benchmark::State& state, Index chunk, TraceMethod trace, SpectralMethod spectral) {
  if (!networks_available()) {
    state.SkipWithError("built without LibTorch");
    return;
  }
  NetworkOptions options;
  options.chunk = chunk;
  const Network network(options, 784, 10);
  std::mt19937_64 rng(1);
  const VectorXd w = network.initial_parameters(rng);
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  RowMatrix X(kBatch, 784);
  for (Index i = 0; i < X.size(); ++i) X(i) = pixel(rng);
  VectorXd y(kBatch);
  for (Index i = 0; i < kBatch; ++i) y(i) = static_cast<double>(i % 10);
  NetworkAccountingRequest request;
  request.trace = trace;
  request.spectral = spectral;
  request.probes = 1;
  request.power_iterations = 5;
  std::uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(network.account_batch(w, X, y, 1.0, request, ++seed));
  state.counters["examples_per_second"] =
      benchmark::Counter(static_cast<double>(kBatch) * state.iterations(), benchmark::Counter::kIsRate);
}

void BM_ConvNetGaussianTrace_Batched(benchmark::State& state) {
  account_step(state, kBatch, TraceMethod::kGaussian, SpectralMethod::kNone);
}
void BM_ConvNetGaussianTrace_OneAtATime(benchmark::State& state) {
  account_step(state, 1, TraceMethod::kGaussian, SpectralMethod::kNone);
}
void BM_ConvNetCoordinateTrace_Batched(benchmark::State& state) {
  account_step(state, kBatch, TraceMethod::kCoordinates, SpectralMethod::kNone);
}
void BM_ConvNetCoordinateTrace_OneAtATime(benchmark::State& state) {
  account_step(state, 1, TraceMethod::kCoordinates, SpectralMethod::kNone);
}
void BM_ConvNetPowerIteration5_Batched(benchmark::State& state) {
  account_step(state, kBatch, TraceMethod::kGaussian, SpectralMethod::kPowerIteration);
}
void BM_ConvNetPowerIteration5_OneAtATime(benchmark::State& state) {
  account_step(state, 1, TraceMethod::kGaussian, SpectralMethod::kPowerIteration);
}

BENCHMARK(BM_ConvNetGaussianTrace_Batched)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConvNetGaussianTrace_OneAtATime)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConvNetCoordinateTrace_Batched)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConvNetCoordinateTrace_OneAtATime)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConvNetPowerIteration5_Batched)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_ConvNetPowerIteration5_OneAtATime)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
