// Per-example FIL and dFIL at the reconstruction paper's size (binary MNIST: n = 12665, d = 784,
// logistic regression with an intercept, lambda = 1e-2), structured path against the naive dense
// one (every Jacobian J_i, p x d, and its SVD), plus the GLM attack's cost per noise draw.
//
// The data are synthetic (sparse pixels in [0,1] with a class-dependent pattern) so the benchmark
// needs no dataset. The naive path is timed on a few examples only: one 785 x 784 JacobiSVD takes
// tens of seconds, so JacobiSVD runs on 2 examples and the faster BDCSVD on 50; compare the
// `examples_per_second` counters.
#include "filkit/leakage/fil.hpp"
#include "filkit/leakage/glm_reconstruction.hpp"

#include <Eigen/SVD>
#include <benchmark/benchmark.h>

#include <random>

namespace {

using filkit::Index;

constexpr Index kExamples = 12665;
constexpr Index kPixels = 784;

filkit::Dataset synthetic_pixels() {
  std::mt19937_64 rng(2022);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  filkit::Dataset data;
  data.X = filkit::RowMatrix::Zero(kExamples, kPixels);
  data.y.resize(kExamples);
  for (Index i = 0; i < kExamples; ++i) {
    const bool one = uniform(rng) < 0.5;
    data.y(i) = (uniform(rng) < 0.02) != one ? 1.0 : 0.0;  // 2% label noise: not separable
    for (Index j = 0; j < kPixels; ++j) {
      // Class 1 lights the first half of the image more often, like a thin stroke vs a loop.
      const double on = (j < kPixels / 2) == one ? 0.3 : 0.1;
      if (uniform(rng) < on) data.X(i, j) = uniform(rng);
    }
  }
  data.source = "synthetic pixels";
  return data;
}

// Fitted once: a Newton fit at this size takes seconds.
struct Problem {
  filkit::Dataset data = synthetic_pixels();
  filkit::Model model;
  Problem() {
    filkit::FitOptions options;
    options.kind = filkit::ModelKind::kLogistic;
    options.l2 = 1e-2;
    options.intercept = true;
    model = filkit::fit(data, options);
  }
};

const Problem& problem() {
  static const Problem instance;
  return instance;
}

filkit::FilOptions public_label(bool structured) {
  return filkit::FilOptions{1e-2, filkit::LabelPrivacy::kPublic, structured};
}

void set_rate(benchmark::State& state, Index examples) {
  state.counters["examples_per_second"] =
      benchmark::Counter(static_cast<double>(examples), benchmark::Counter::kIsIterationInvariantRate);
}

// Factorising H is shared by every example and by both paths.
void BM_FilSetup(benchmark::State& state) {
  const Problem& p = problem();
  for (auto _ : state) {
    const filkit::FisherInformationLoss fil(p.model, p.data, filkit::VectorXd(), public_label(true));
    benchmark::DoNotOptimize(fil.hessian().data());
  }
}
BENCHMARK(BM_FilSetup)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_PerExampleStructured(benchmark::State& state) {
  const Problem& p = problem();
  const filkit::FisherInformationLoss fil(p.model, p.data, filkit::VectorXd(), public_label(true));
  for (auto _ : state) {
    const filkit::PerExampleFil result = fil.per_example();
    benchmark::DoNotOptimize(result.eta.data());
  }
  set_rate(state, kExamples);
}
BENCHMARK(BM_PerExampleStructured)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

template <typename Svd>
void dense_per_example(benchmark::State& state) {
  const Problem& p = problem();
  const filkit::FisherInformationLoss fil(p.model, p.data, filkit::VectorXd(), public_label(false));
  const Index examples = state.range(0);
  for (auto _ : state) {
    double checksum = 0.0;
    for (Index i = 0; i < examples; ++i) {
      const filkit::MatrixXd J = fil.jacobian(i);
      const double dfil = J.norm();                   // ||J_i||_F
      const double eta = Svd(J).singularValues()(0);  // ||J_i||_2
      checksum += dfil + eta;
    }
    benchmark::DoNotOptimize(checksum);
  }
  set_rate(state, examples);
}

void BM_PerExampleDenseJacobiSvd(benchmark::State& state) {
  dense_per_example<Eigen::JacobiSVD<filkit::MatrixXd>>(state);
}
BENCHMARK(BM_PerExampleDenseJacobiSvd)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

void BM_PerExampleDenseBdcSvd(benchmark::State& state) { dense_per_example<Eigen::BDCSVD<filkit::MatrixXd>>(state); }
BENCHMARK(BM_PerExampleDenseBdcSvd)->Arg(50)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

// One noise draw attacks all n examples: a full gradient, O(n d).
void BM_GlmAttackTrials(benchmark::State& state) {
  const Problem& p = problem();
  filkit::GlmAttackOptions options;
  options.sigma = 1e-5;
  options.trials = state.range(0);
  for (auto _ : state) {
    const filkit::GlmAttackResult result = filkit::evaluate_glm_attack(p.model, p.data, options);
    benchmark::DoNotOptimize(result.mean_mse.data());
  }
  state.counters["trials_per_second"] =
      benchmark::Counter(static_cast<double>(options.trials), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GlmAttackTrials)->Arg(512)->Unit(benchmark::kMillisecond)->Iterations(1)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
