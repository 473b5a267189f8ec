// fim's constant gradient model on the thesis' table 3.2 ConvNet: one evaluation of its objective
// on a public batch of 512 (ReleasedGradientBackend::perturbation_objective: per-example gradients, their
// Jacobian products along 2 input-space probes each, the clip's terms and the gradient about c),
// half of the 26,010 parameters released, in float64 against float32 (--gradient-precision), in the
// same run. The counter batches_15840_h extrapolates to the hours of the 15,840 batches of a table
// 3.2 run. Beside them, --gradient-probe-draws step's two parts: the terms of a batch
// (perturbation_objective_terms, computed once a private step: 6 batches of the 3,000 public examples) and
// the objective from kept terms (perturbation_objective_from_terms, every batch of every epoch). And the
// thesis' per-batch probes from records kept for a private step (PerturbationObjectiveTermCache): the
// cache built once a step, then every epoch only the products of fresh probes (term_cache_products,
// a batch's worth) and the objective from them.
// Synthetic pixels and parameters keep the benchmark independent of installed datasets. Skips
// without LibTorch.
#include "filkit/networks/networks.hpp"
#include "filkit/public_data/constant_perturbation.hpp"
#include "networks/network_plugin.hpp"

#include <benchmark/benchmark.h>

#include <memory>
#include <optional>
#include <random>
#include <vector>

namespace {

using namespace filkit;

constexpr Index kBatch = 512, kProbes = 2;

// The table 3.2 shape: the ConvNet, every other parameter released, a batch of synthetic pixels.
struct Setup {
  ReleasedGradientSpec spec;
  std::unique_ptr<ReleasedGradientBackend> backend;
  VectorXd w, y, c;
  RowMatrix X, probes;
};

Setup table32_setup() {
  Setup s;
  const ImageShape image{1, 28, 28};
  NetworkOptions options;  // the reconstruction paper's MNIST ConvNet, the thesis' table 3.2 model
  const Network network(options, 784, 10, image);
  std::mt19937_64 rng(1);
  s.w = network.initial_parameters(rng);
  s.spec.plan = network.plan();
  s.spec.input_dim = 784;
  s.spec.image = image;
  s.spec.num_classes = 10;
  s.spec.clip_norm = 8.0;
  for (Index i = 0; i < network.parameter_count(); i += 2) s.spec.released.push_back(i);
  s.backend = create_released_gradient_backend(s.spec);
  std::uniform_real_distribution<double> pixel(0.0, 1.0);
  std::normal_distribution<double> normal;
  s.X.resize(kBatch, 784);
  s.probes.resize(kBatch * kProbes, 784);
  for (Index i = 0; i < s.X.size(); ++i) s.X(i) = pixel(rng);
  for (Index i = 0; i < s.probes.size(); ++i) s.probes(i) = normal(rng);
  s.y.resize(kBatch);
  s.c.resize(static_cast<Index>(s.spec.released.size()));
  for (Index i = 0; i < kBatch; ++i) s.y(i) = static_cast<double>(i % 10);
  for (Index i = 0; i < s.c.size(); ++i) s.c(i) = 0.05 * normal(rng);
  return s;
}

/// The table 3.2 setup, or none (the benchmark skipped) without LibTorch.
std::optional<Setup> setup_or_skip(benchmark::State& state) {
  if (networks_available()) return table32_setup();
  state.SkipWithError("built without LibTorch");
  return std::nullopt;
}

/// The batch's rows 0, ..., kBatch - 1.
std::vector<Index> batch_rows() {
  const std::vector<Index> rows = batch_rows();
  return rows;
}

void per_run_hours(benchmark::State& state) {
  state.counters["batches_15840_h"] = benchmark::Counter(
      1.0 / 15840.0 * 3600.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void perturbation_objective(benchmark::State& state, Precision precision) {
  const std::optional<Setup> setup = setup_or_skip(state);
  if (!setup) return;
  const Setup& s = *setup;
  PerturbationObjectiveRequest request;
  request.lambda = 1e3;
  request.precision = precision;
  for (auto _ : state)
    benchmark::DoNotOptimize(s.backend->perturbation_objective(s.w, s.X, s.y, s.c, s.probes, request).value);
  per_run_hours(state);
}

// --gradient-probe-draws step, once a private step: a batch's gradients and probe products.
void perturbation_objective_terms(benchmark::State& state) {
  const std::optional<Setup> setup = setup_or_skip(state);
  if (!setup) return;
  const Setup& s = *setup;
  for (auto _ : state)
    benchmark::DoNotOptimize(
        s.backend->perturbation_objective_terms(s.w, s.X, s.y, s.probes, Precision::kFloat32).gradients.data());
}

// --gradient-probe-draws step, every batch: the objective and its gradient from the kept terms.
void objective_from_terms(benchmark::State& state) {
  const std::optional<Setup> setup = setup_or_skip(state);
  if (!setup) return;
  const Setup& s = *setup;
  const PerturbationObjectiveTerms terms =
      s.backend->perturbation_objective_terms(s.w, s.X, s.y, s.probes, Precision::kFloat32);
  const std::vector<Index> rows = batch_rows();
  for (auto _ : state)
    benchmark::DoNotOptimize(perturbation_objective_from_terms(terms.gradients, terms.probe_products, rows, s.c,
                                                               s.spec.clip_norm, 1e3, true, 1e-7)
                                 .value);
  per_run_hours(state);
}

// The thesis' per-batch probes with the records kept: the cache of a batch's examples, built once a
// private step (6 times for the 3,000 public examples of table 3.2)...
void term_cache_build(benchmark::State& state) {
  const std::optional<Setup> setup = setup_or_skip(state);
  if (!setup) return;
  const Setup& s = *setup;
  for (auto _ : state)
    benchmark::DoNotOptimize(
        s.backend->perturbation_objective_term_cache(s.w, s.X, s.y, Precision::kFloat32)->gradients().data());
}

// ...and every batch of every epoch: the products of its fresh probes from the kept records, then
// the objective from the terms (compare with perturbation_objective/float32, which computes both afresh).
void term_cache_products(benchmark::State& state) {
  const std::optional<Setup> setup = setup_or_skip(state);
  if (!setup) return;
  const Setup& s = *setup;
  const auto cache = s.backend->perturbation_objective_term_cache(s.w, s.X, s.y, Precision::kFloat32);
  const std::vector<Index> rows = batch_rows();
  RowMatrix products;
  for (auto _ : state) {
    cache->probe_products(s.probes, products);
    benchmark::DoNotOptimize(
        perturbation_objective_from_terms(cache->gradients(), products, rows, s.c, s.spec.clip_norm, 1e3, true, 1e-7)
            .value);
  }
  per_run_hours(state);
}

BENCHMARK_CAPTURE(perturbation_objective, float64, Precision::kFloat64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(perturbation_objective, float32, Precision::kFloat32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(perturbation_objective_terms)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(objective_from_terms)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(term_cache_build)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(term_cache_products)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
