// PCA of the default job's shape (n = 12000 rows, d = 784 pixels, k = 20): the covariance by
// each kernel (Eigen's rank update, the AVX2 and AVX-512 tiles, AVX-512 in single precision,
// exact on pixels), the top eigenpairs by the dense solver, Spectra's Lanczos and a randomised
// subspace iteration, and the whole preprocessing fit and apply. Synthetic pixels (integers
// 0..255) with an image-like decaying spectrum keep the benchmark independent of installed
// datasets; the eigen-solvers report their error against the dense solver as counters (sine of
// the largest principal angle, relative variance error).
#include "filkit/data/preprocessing.hpp"

#include <benchmark/benchmark.h>

#include <cmath>
#include <random>

namespace {

using namespace filkit;

constexpr Index kRows = 12000, kPixels = 784, kComponents = 20;

// Pixels x = clamp(round(100 + Z diag(s) Q^T)), eigenvalues decaying as j^-1.4 like Fashion-MNIST's
// (the 1st is 66 times the 20th, the 20th 8% above the 21st).
const RowMatrix& pixels() {
  static const RowMatrix X = [] {
    std::mt19937_64 rng(1);
    std::normal_distribution<double> normal;
    MatrixXd gaussian(kPixels, kPixels);
    for (Index i = 0; i < gaussian.size(); ++i) gaussian.data()[i] = normal(rng);
    const MatrixXd Q = Eigen::HouseholderQR<MatrixXd>(gaussian).householderQ();
    VectorXd scale(kPixels);
    for (Index j = 0; j < kPixels; ++j) scale(j) = 400.0 * std::pow(static_cast<double>(j + 1), -0.7);
    RowMatrix Z(kRows, kPixels);
    for (Index i = 0; i < Z.size(); ++i) Z.data()[i] = normal(rng);
    RowMatrix pixels = (Z * scale.asDiagonal() * Q.transpose()).array() + 100.0;
    for (Index i = 0; i < pixels.size(); ++i) pixels.data()[i] = std::clamp(std::round(pixels.data()[i]), 0.0, 255.0);
    return pixels;
  }();
  return X;
}

const VectorXd& mean() {
  static const VectorXd m = pixels().colwise().mean();
  return m;
}

const MatrixXd& covariance() {
  static const MatrixXd C = detail::covariance(pixels(), mean());
  return C;
}

struct Reference {
  MatrixXd vectors;
  VectorXd values;
};

const Reference& dense_reference() {
  static const Reference reference = [] {
    Reference r;
    detail::top_eigenpairs(covariance(), kComponents, detail::EigenSolver::kDense, r.vectors, r.values);
    return r;
  }();
  return reference;
}

void report_error(benchmark::State& state, const MatrixXd& vectors, const VectorXd& values) {
  const Reference& reference = dense_reference();
  const MatrixXd outside = vectors - reference.vectors * (reference.vectors.transpose() * vectors);
  state.counters["sin_angle"] = Eigen::JacobiSVD<MatrixXd>(outside).singularValues()(0);
  state.counters["variance_rel_err"] =
      ((values - reference.values).array().abs() / reference.values.array()).maxCoeff();
}

void BM_Covariance(benchmark::State& state, detail::GramKernel kernel) {
  mean();  // builds the data outside the timed loop
  for (auto _ : state) benchmark::DoNotOptimize(detail::covariance(pixels(), mean(), kernel).data());
  // n d (d + 1) / 2 multiply-adds for one triangle.
  state.counters["flops"] = benchmark::Counter(static_cast<double>(kRows) * kPixels * (kPixels + 1),
                                               benchmark::Counter::kIsIterationInvariantRate);
}

void BM_TopEigenpairs(benchmark::State& state, detail::EigenSolver solver) {
  dense_reference();
  MatrixXd vectors;
  VectorXd values;
  for (auto _ : state) {
    detail::top_eigenpairs(covariance(), kComponents, solver, vectors, values);
    benchmark::DoNotOptimize(values.data());
  }
  report_error(state, vectors, values);
}

// Randomised subspace iteration (Halko, Martinsson & Tropp 2011, algorithm 4.4) with l = k + 20
// columns and `power` multiplications by C, then Rayleigh-Ritz: the alternative to Lanczos.
void BM_TopEigenpairsRandomised(benchmark::State& state) {
  dense_reference();
  const Index power = state.range(0), columns = kComponents + 20;
  const MatrixXd C = covariance().selfadjointView<Eigen::Upper>();
  MatrixXd vectors;
  VectorXd values;
  for (auto _ : state) {
    std::mt19937_64 rng(2);
    std::normal_distribution<double> normal;
    MatrixXd Q(kPixels, columns);
    for (Index i = 0; i < Q.size(); ++i) Q.data()[i] = normal(rng);
    for (Index p = 0; p < power; ++p) {
      const MatrixXd Y = C * Q;
      Q = Eigen::HouseholderQR<MatrixXd>(Y).householderQ() * MatrixXd::Identity(kPixels, columns);
    }
    const Eigen::SelfAdjointEigenSolver<MatrixXd> small(Q.transpose() * C * Q);
    vectors = Q * small.eigenvectors().rightCols(kComponents).rowwise().reverse();
    values = small.eigenvalues().tail(kComponents).reverse();
    benchmark::DoNotOptimize(values.data());
  }
  report_error(state, vectors, values);
}

// The default job's preprocessing on these pixels: pixel scaling, global-max, PCA to 20.
void BM_PreprocessFitAndApply(benchmark::State& state) {
  Dataset train;
  train.X = pixels();
  train.y = VectorXd::Zero(kRows);
  PreprocessOptions options;
  options.scale_pixels = true;
  options.row_scaling = RowScaling::kGlobalMax;
  options.pca_components = kComponents;
  for (auto _ : state) {
    const Preprocessor fitted = Preprocessor::fit(train, options);
    benchmark::DoNotOptimize(fitted.apply(train).X.data());
  }
}

}  // namespace

BENCHMARK_CAPTURE(BM_Covariance, eigen, detail::GramKernel::kEigen)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Covariance, avx2, detail::GramKernel::kAvx2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Covariance, avx512, detail::GramKernel::kAvx512)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Covariance, avx512_float, detail::GramKernel::kAvx512Float)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_TopEigenpairs, dense, detail::EigenSolver::kDense)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_TopEigenpairs, spectra, detail::EigenSolver::kSpectra)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_TopEigenpairsRandomised)->Arg(10)->Arg(20)->Arg(40)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PreprocessFitAndApply)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
