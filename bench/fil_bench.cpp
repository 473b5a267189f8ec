// Per-example FIL throughput: the structured path (eigenbasis + inertia bisection) against the
// naive baseline (dense J_i = -H^{-1} B_i and its SVD, example by example), at d = 20 (PCA) and
// d = 784 (raw MNIST pixels), n = 12665 (MNIST 0 vs 1). Synthetic data of the same shape keep the
// benchmark independent of installed datasets. Peak resident memory is reported as a counter.
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

#include <Eigen/SVD>
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <map>
#include <random>

namespace {

using namespace filkit;

constexpr Index kExamples = 12665;

struct Problem {
  Dataset data;
  Model model;
};

// Sparse-ish non-negative pixels in the unit ball with labels from a linear rule, fitted once.
const Problem& problem(Index d) {
  static std::map<Index, Problem> cache;
  auto found = cache.find(d);
  if (found != cache.end()) return found->second;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  Problem p;
  p.data.X.resize(kExamples, d);
  p.data.y.resize(kExamples);
  VectorXd direction(d);
  for (Index j = 0; j < d; ++j) direction(j) = uniform(rng) - 0.5;
  for (Index i = 0; i < kExamples; ++i) {
    for (Index j = 0; j < d; ++j) p.data.X(i, j) = uniform(rng) < 0.2 ? uniform(rng) : 0.0;
    p.data.X.row(i) /= std::max(1.0, p.data.X.row(i).norm());
    p.data.y(i) = p.data.X.row(i).dot(direction) + 0.05 * (uniform(rng) - 0.5) > 0 ? 1.0 : 0.0;
  }
  p.data.source = "synthetic";
  FitOptions options;
  options.kind = ModelKind::kLogistic;
  options.l2 = 1e-2;
  options.intercept = true;
  p.model = fit(p.data, options);
  return cache.emplace(d, std::move(p)).first->second;
}

void report_memory(benchmark::State& state) {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_MB"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
}

// All n examples, structured path: factorisation of H included.
void BM_PerExampleFilStructured(benchmark::State& state) {
  const Problem& p = problem(state.range(0));
  for (auto _ : state) {
    const FisherInformationLoss fil(p.model, p.data);
    benchmark::DoNotOptimize(fil.per_example().eta.data());
  }
  state.counters["examples_per_s"] =
      benchmark::Counter(static_cast<double>(kExamples), benchmark::Counter::kIsIterationInvariantRate);
  report_memory(state);
}

// The naive baseline on a slice of examples (all n would take minutes at d = 784).
void BM_PerExampleFilDenseSvd(benchmark::State& state) {
  const Problem& p = problem(state.range(0));
  const Index slice = state.range(1);
  const FisherInformationLoss fil(p.model, p.data, VectorXd(), FilOptions{1.0, LabelPrivacy::kPrivate, false});
  for (auto _ : state) {
    for (Index i = 0; i < slice; ++i) {
      const MatrixXd J = fil.jacobian(i);
      Eigen::JacobiSVD<MatrixXd> svd(J);
      benchmark::DoNotOptimize(svd.singularValues()(0));
      benchmark::DoNotOptimize(J.norm());
    }
  }
  state.counters["examples_per_s"] =
      benchmark::Counter(static_cast<double>(slice), benchmark::Counter::kIsIterationInvariantRate);
  report_memory(state);
}

// Dense Jacobians with a symmetric eigensolver on J^T J: the best "form every J_i" can do.
void BM_PerExampleFilDenseGram(benchmark::State& state) {
  const Problem& p = problem(state.range(0));
  const Index slice = state.range(1);
  const FisherInformationLoss fil(p.model, p.data, VectorXd(), FilOptions{1.0, LabelPrivacy::kPrivate, false});
  for (auto _ : state) {
    for (Index i = 0; i < slice; ++i) {
      const MatrixXd J = fil.jacobian(i);
      const MatrixXd gram = J.transpose() * J;
      benchmark::DoNotOptimize(Eigen::SelfAdjointEigenSolver<MatrixXd>(gram, Eigen::EigenvaluesOnly).eigenvalues()(0));
    }
  }
  state.counters["examples_per_s"] =
      benchmark::Counter(static_cast<double>(slice), benchmark::Counter::kIsIterationInvariantRate);
  report_memory(state);
}

}  // namespace

BENCHMARK(BM_PerExampleFilStructured)->Arg(20)->Arg(784)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PerExampleFilDenseSvd)->Args({20, 12665})->Args({784, 4})->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PerExampleFilDenseGram)->Args({20, 12665})->Args({784, 8})->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
