// One Adam update of fim's constant gradient model at table 3.1's shape (m = 3,834 released
// coordinates, hidden widths 256, 256: about 10^6 parameters, the output layer's m x 256 nearly all
// of them): the fused update (update_from_perturbation_gradient, the output layer's gradient made
// where Adam uses it) against the baseline in the same run, update(parameter_gradient(...)), which
// writes the ~10^6-entry gradient and reads it back. Both give the same bits (a test checks). And
// the fused update with the state in float32.
// calls_94400_s extrapolates to the 94,400 updates of a table 3.1 run.
#include "filkit/public_data/constant_gradient_model.hpp"

#include <benchmark/benchmark.h>

#include <random>

namespace {

using namespace filkit;

constexpr Index kReleased = 3834;

VectorXd perturbation_gradient() {
  std::mt19937_64 rng(4);
  std::normal_distribution<double> normal;
  VectorXd g(kReleased);
  for (Index i = 0; i < g.size(); ++i) g(i) = normal(rng);
  return g;
}

// The seconds of 94,400 updates at this one's time.
void report(benchmark::State& state) {
  state.counters["calls_94400_s"] =
      benchmark::Counter(1.0 / 94400.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_UpdateOfParameterGradient(benchmark::State& state) {
  ConstantGradientModel model(GradientModelKind::kConstant, kReleased, {256, 256}, 1);
  const VectorXd gc = perturbation_gradient();
  model.restart();
  for (auto _ : state) model.update(model.parameter_gradient(gc), 1e-6, 0.1);
  benchmark::DoNotOptimize(model.perturbation().data());
  report(state);
}

void BM_FusedUpdate(benchmark::State& state) {
  ConstantGradientModel model(GradientModelKind::kConstant, kReleased, {256, 256}, 1);
  const VectorXd gc = perturbation_gradient();
  model.restart();
  for (auto _ : state) model.update_from_perturbation_gradient(gc, 1e-6, 0.1);
  benchmark::DoNotOptimize(model.perturbation().data());
  report(state);
}

// --gradient-state-precision float32: phi, the moments and c in float32, half the bytes a pass.
void BM_FusedUpdateFloat32(benchmark::State& state) {
  ConstantGradientModel model(GradientModelKind::kConstant, kReleased, {256, 256}, 1, Precision::kFloat32);
  const VectorXd gc = perturbation_gradient();
  model.restart();
  for (auto _ : state) model.update_from_perturbation_gradient(gc, 1e-6, 0.1);
  benchmark::DoNotOptimize(model.perturbation().data());
  report(state);
}

}  // namespace

BENCHMARK(BM_UpdateOfParameterGradient)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FusedUpdate)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_FusedUpdateFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
