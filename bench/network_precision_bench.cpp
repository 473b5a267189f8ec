// The MNIST ConvNet (26,010 parameters) in float64 against float32 (NetworkOptions::precision,
// docs/mathematics.md section 11.8), in the same run: a DP-SGD step's accounting of a batch of 100
// (clipped gradients and one Gaussian probe each), and a non-private step's mean gradient of a
// batch of 512 (pre-training and sgd) as the per-example gradients summed (what filkit did before
// Network::gradient_sum) against one reverse pass of the summed loss. Synthetic pixels; skips
// without LibTorch.
#include "filkit/networks/networks.hpp"

#include <benchmark/benchmark.h>

#include <random>

namespace {

using namespace filkit;

struct Problem {
  Network network;
  VectorXd w;
  RowMatrix X;
  VectorXd y;
};

Problem problem(Precision precision, Index rows) {
  NetworkOptions options;
  options.precision = precision;
  Network network(options, 784, 10);
  std::mt19937_64 rng(1);
  VectorXd w = network.initial_parameters(rng);
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  RowMatrix X(rows, 784);
  for (Index i = 0; i < X.size(); ++i) X(i) = pixel(rng);
  VectorXd y(rows);
  for (Index i = 0; i < rows; ++i) y(i) = static_cast<double>(i % 10);
  return {std::move(network), std::move(w), std::move(X), std::move(y)};
}

void account_step(benchmark::State& state, Precision precision) {
  if (!networks_available()) return state.SkipWithError("built without LibTorch");
  const Problem p = problem(precision, 100);
  NetworkAccountingRequest request;
  request.trace = TraceMethod::kGaussian;
  request.spectral = SpectralMethod::kNone;
  request.probes = 1;
  std::uint64_t seed = 0;
  for (auto _ : state) benchmark::DoNotOptimize(p.network.account_batch(p.w, p.X, p.y, 1.0, request, ++seed));
  state.counters["examples_per_second"] =
      benchmark::Counter(100.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void mean_gradient(benchmark::State& state, Precision precision, bool per_example) {
  if (!networks_available()) return state.SkipWithError("built without LibTorch");
  const Problem p = problem(precision, 512);
  for (auto _ : state) {
    if (per_example) {
      benchmark::DoNotOptimize(VectorXd(p.network.gradients(p.w, p.X, p.y).colwise().sum().transpose()));
    } else {
      benchmark::DoNotOptimize(p.network.gradient_sum(p.w, p.X, p.y));
    }
  }
  state.counters["examples_per_second"] =
      benchmark::Counter(512.0 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void BM_AccountStep_Float64(benchmark::State& s) { account_step(s, Precision::kFloat64); }
void BM_AccountStep_Float32(benchmark::State& s) { account_step(s, Precision::kFloat32); }
void BM_MeanGradient_PerExampleSummed_Float64(benchmark::State& s) { mean_gradient(s, Precision::kFloat64, true); }
void BM_MeanGradient_GradientSum_Float64(benchmark::State& s) { mean_gradient(s, Precision::kFloat64, false); }
void BM_MeanGradient_PerExampleSummed_Float32(benchmark::State& s) { mean_gradient(s, Precision::kFloat32, true); }
void BM_MeanGradient_GradientSum_Float32(benchmark::State& s) { mean_gradient(s, Precision::kFloat32, false); }

BENCHMARK(BM_AccountStep_Float64)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_AccountStep_Float32)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_MeanGradient_PerExampleSummed_Float64)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_MeanGradient_GradientSum_Float64)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_MeanGradient_PerExampleSummed_Float32)->Unit(benchmark::kMillisecond)->MinTime(2.0);
BENCHMARK(BM_MeanGradient_GradientSum_Float32)->Unit(benchmark::kMillisecond)->MinTime(2.0);

}  // namespace

BENCHMARK_MAIN();
