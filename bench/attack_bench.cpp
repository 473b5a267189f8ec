// White-box attribute inference: the cost of the candidate minimisers f(D with x_i's attribute
// at level v) - w*, by rank-2 updates (least squares: Woodbury, O(p^2) per example; logistic:
// chord Newton from w*, O(n p) per step) against the naive refit of every candidate (least
// squares: a new Cholesky solve, O(n p^2); logistic: Newton warm-started from w*). Synthetic data
// shaped like income-regression (n = 5520, a 5-level attribute, p = 60) keep the benchmark
// independent of installed datasets. The least-squares update attacks every example (its one-off
// cost, H^-1, is shared by all of them, as in a real run), the logistic update 512 (its cost is
// per candidate), the naive refit 16; the counter candidates_per_second compares them.
#include "filkit/leakage/attribute_inference.hpp"
#include "filkit/models/glm.hpp"

#include <benchmark/benchmark.h>

#include <map>
#include <random>

namespace {

using namespace filkit;

constexpr Index kExamples = 5520;
constexpr Index kNumeric = 55;
constexpr Index kLevels = 5;
constexpr Index kNaiveExamples = 16;  // examples the naive refit attacks per iteration

struct Problem {
  Dataset data;
  FitOptions options;
  Model model;
  AttributeCandidates candidates;
};

// A one-hot attribute (the first kLevels - 1 columns) and Gaussian features; the target is a
// noisy linear rule (its sign for the logistic model).
const Problem& problem(ModelKind kind) {
  static std::map<ModelKind, Problem> cache;
  if (auto found = cache.find(kind); found != cache.end()) return found->second;
  std::mt19937_64 rng(2);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<Index> level(0, kLevels - 1);
  Problem p;
  const Index d = kLevels - 1 + kNumeric;
  p.data.X = RowMatrix::Zero(kExamples, d);
  p.data.y.resize(kExamples);
  VectorXd direction(d);
  for (Index j = 0; j < d; ++j) direction(j) = 0.3 * normal(rng);
  for (Index i = 0; i < kExamples; ++i) {
    const Index v = level(rng);
    if (v < kLevels - 1) p.data.X(i, v) = 1.0;
    for (Index j = kLevels - 1; j < d; ++j) p.data.X(i, j) = normal(rng);
    const double score = p.data.X.row(i).dot(direction) + normal(rng);
    p.data.y(i) = kind == ModelKind::kLeastSquares ? score : (score > 0.0 ? 1.0 : 0.0);
  }
  p.data.source = "synthetic";
  AttributeColumns attribute{"group", {}, {}, "none", true};
  for (Index k = 0; k + 1 < kLevels; ++k) attribute.columns.push_back(k);
  p.options.kind = kind;
  p.options.regression = kind == ModelKind::kLeastSquares;
  p.options.intercept = true;
  p.options.l2 = 1e-3;
  p.model = fit(p.data, p.options);
  p.candidates = attribute_candidates(p.data, attribute);
  return cache.emplace(kind, std::move(p)).first->second;
}

void BM_CandidateMinimisers(benchmark::State& state, ModelKind kind, WhiteBoxSolver solver) {
  const Problem& p = problem(kind);
  const Index attacked = solver == WhiteBoxSolver::kRefit   ? kNaiveExamples
                         : kind == ModelKind::kLeastSquares ? kExamples
                                                            : 512;
  std::vector<Index> examples;
  for (Index e = 0; e < attacked; ++e) examples.push_back(e * (kExamples / attacked));
  for (auto _ : state) {
    const CandidateMinimisers result =
        candidate_minimisers(p.model, p.data, VectorXd(), p.candidates, examples, p.options, solver);
    benchmark::DoNotOptimize(result.shifts.data());
  }
  state.counters["candidates_per_second"] =
      benchmark::Counter(static_cast<double>(attacked * (kLevels - 1)), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK_CAPTURE(BM_CandidateMinimisers, least_squares_update, ModelKind::kLeastSquares, WhiteBoxSolver::kUpdate)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CandidateMinimisers, least_squares_refit, ModelKind::kLeastSquares, WhiteBoxSolver::kRefit)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CandidateMinimisers, logistic_update, ModelKind::kLogistic, WhiteBoxSolver::kUpdate)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_CandidateMinimisers, logistic_refit, ModelKind::kLogistic, WhiteBoxSolver::kRefit)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
