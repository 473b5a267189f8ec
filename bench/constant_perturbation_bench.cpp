// The constant perturbation's training objective (SoftmaxRelease::objective, section 11.7 of
// docs/mathematics.md) at fim's shape: B = 512 public examples, d = 784 pixels, K = 10 classes,
// p = 785 with the intercept, half the coordinates frozen (m ~ 3925), S = 2 input-space probes
// (the thesis) or the exact trace. Against a per-example baseline in the same run: each example's
// m-vector u and its m-vectors J_m v (probes) or its m x d matrix J_m (exact) built explicitly, the
// gradient summed in m-space. The baseline's value and gradient are checked against the batched
// ones (counter rel_diff). calls_94400_s extrapolates the time to the 94,400 calls of a fim run.
// And the probes drawn before the objective against drawn inside it, block by block (below).
#include "filkit/dpsgd/clipped_gradient.hpp"
#include "filkit/public_data/constant_perturbation.hpp"

#include "base/splitmix_stream.hpp"

#include <benchmark/benchmark.h>

#include <random>

namespace {

using namespace filkit;

constexpr Index kBatch = 512, kPixels = 784, kClasses = 10, kCoords = (kPixels + 1) * kClasses;
constexpr double kLambda = 0.1, kFloor = 1e-7;

struct Problem {
  MatrixXd W;
  std::vector<bool> frozen;
  std::vector<Index> released;
  RowMatrix X;
  VectorXd y, c;
  double clip = 1.0;
};

// Pixels in [0, 1] (20 % nonzero, like MNIST), small weights, half the coordinates frozen.
const Problem& problem() {
  static const Problem pr = [] {
    std::mt19937_64 rng(3);
    std::uniform_real_distribution<double> uniform(0.0, 1.0);
    std::normal_distribution<double> normal;
    Problem p;
    p.W.resize(kPixels + 1, kClasses);
    for (Index i = 0; i < p.W.size(); ++i) p.W(i) = 0.05 * normal(rng);
    for (Index i = 0; i < kCoords; ++i) {
      p.frozen.push_back(uniform(rng) < 0.5);
      if (!p.frozen.back()) p.released.push_back(i);
    }
    p.X.resize(kBatch, kPixels);
    for (Index i = 0; i < p.X.size(); ++i) p.X.data()[i] = uniform(rng) < 0.2 ? uniform(rng) : 0.0;
    p.y.resize(kBatch);
    for (Index b = 0; b < kBatch; ++b) p.y(b) = static_cast<double>(b % kClasses);
    p.c.resize(static_cast<Index>(p.released.size()));
    for (Index i = 0; i < p.c.size(); ++i) p.c(i) = 0.02 * normal(rng);
    p.clip = 5.0;
    return p;
  }();
  return pr;
}

RowMatrix probes(Index S) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal;
  RowMatrix V(kBatch * S, kPixels);
  for (Index i = 0; i < V.size(); ++i) V.data()[i] = normal(rng);
  return V;
}

// The baseline: example by example in the m released coordinates. With kappa = s'/(s^2 n),
// dr = dm/s - kappa u (u.dm), so ||dr||^2 = f1 ||dm||^2 + f2 (u.dm)^2; f1, f2 and their
// n-derivatives by the quotient rule from s, s', s''.
SoftmaxRelease::Objective baseline(const Problem& pr, const RowMatrix& V) {
  const Index p = kPixels + 1, K = kClasses, m = pr.c.size(), S = V.rows() / kBatch;
  const auto W_f = pr.W.bottomRows(kPixels);
  VectorXd j_of(m), k_of(m);
  for (Index i = 0; i < m; ++i) {
    j_of(i) = static_cast<double>(pr.released[static_cast<std::size_t>(i)] % p);
    k_of(i) = static_cast<double>(pr.released[static_cast<std::size_t>(i)] / p);
  }
  SoftmaxRelease::Objective out;
  out.gradient = 2.0 * pr.c;
  out.value = pr.c.squaredNorm();
  VectorXd design(p), u(m), dm(m), sum_q_dm(m);
  MatrixXd Jm(m, S == 0 ? kPixels : 0);
  for (Index b = 0; b < kBatch; ++b) {
    design << 1.0, pr.X.row(b).transpose();
    VectorXd prob = pr.W.transpose() * design;
    prob = (prob.array() - prob.maxCoeff()).exp();
    prob /= prob.sum();
    VectorXd e = prob;
    e(static_cast<Index>(pr.y(b))) -= 1.0;
    MatrixXd softmax_jacobian = -prob * prob.transpose();
    softmax_jacobian.diagonal() += prob;
    for (Index i = 0; i < m; ++i) u(i) = design(static_cast<Index>(j_of(i))) * e(static_cast<Index>(k_of(i))) + pr.c(i);
    const double n = u.norm(), t = n / pr.clip - 1.0;
    const double s = gelu(t) + 1.0, s1 = gelu_derivative(t) / pr.clip,
                 s2 = gelu_second_derivative(t) / (pr.clip * pr.clip);
    const double kappa = s1 / (s * s * n);
    const double dkappa = (s2 * s * n - s1 * (2.0 * s1 * n + s)) / (s * s * s * n * n);
    const double f1 = 1.0 / (s * s), f2 = kappa * kappa * n * n - 2.0 * kappa / s;
    const double df1 = -2.0 * s1 / (s * s * s);
    const double df2 =
        2.0 * kappa * dkappa * n * n + 2.0 * kappa * kappa * n - 2.0 * (dkappa * s - kappa * s1) / (s * s);
    double A = 0.0, Q2 = 0.0;
    sum_q_dm.setZero();
    const auto jvp = [&](const VectorXd& v) {  // dm = M vec(v~ e^T + x~ delta^T)
      const VectorXd delta = softmax_jacobian * (W_f.transpose() * v);
      for (Index i = 0; i < m; ++i) {
        const Index j = static_cast<Index>(j_of(i)), k = static_cast<Index>(k_of(i));
        dm(i) = (j > 0 ? v(j - 1) * e(k) : 0.0) + design(j) * delta(k);
      }
    };
    if (S > 0) {
      for (Index sidx = 0; sidx < S; ++sidx) {
        jvp(V.row(b * S + sidx).transpose());
        const double q = u.dot(dm);
        A += dm.squaredNorm() / static_cast<double>(S);
        Q2 += q * q / static_cast<double>(S);
        sum_q_dm += (2.0 * q / static_cast<double>(S)) * dm;
      }
    } else {
      for (Index col = 0; col < kPixels; ++col) {  // J_m, one column a pixel
        jvp(VectorXd::Unit(kPixels, col));
        Jm.col(col) = dm;
      }
      A = Jm.squaredNorm();
      const VectorXd h = Jm.transpose() * u;
      Q2 = h.squaredNorm();
      sum_q_dm = 2.0 * (Jm * h);
    }
    const double T = f1 * A + f2 * Q2 + kFloor, D = n * n / (s * s);
    const double dD = 2.0 * n / (s * s) - 2.0 * n * n * s1 / (s * s * s);
    out.value += kLambda / kBatch * T / D;
    const double dF = (df1 * A + df2 * Q2) / D - T * dD / (D * D);
    out.gradient += kLambda / kBatch * (dF / n * u + f2 / D * sum_q_dm);
  }
  return out;
}

void report(benchmark::State& state, const SoftmaxRelease::Objective& fast, const SoftmaxRelease::Objective& slow) {
  state.counters["rel_diff"] = std::max(std::abs(fast.value - slow.value) / std::abs(slow.value),
                                        (fast.gradient - slow.gradient).norm() / slow.gradient.norm());
  state.counters["calls_94400_s"] =
      benchmark::Counter(1.0 / 94400.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Arg: S probes (0 = exact trace); `batched`: SoftmaxRelease::objective, else the baseline.
void run(benchmark::State& state, bool batched) {
  const Problem& pr = problem();
  const Index S = state.range(0);
  const RowMatrix V = S > 0 ? probes(S) : RowMatrix();
  const SoftmaxRelease release(pr.W, true, pr.frozen, pr.clip);
  const auto compute = [&](bool fast) {
    return fast ? release.objective(pr.X, pr.y, pr.c, V, kLambda, true, kFloor) : baseline(pr, V);
  };
  SoftmaxRelease::Objective result;
  for (auto _ : state) {
    result = compute(batched);
    benchmark::DoNotOptimize(result.value);
  }
  const SoftmaxRelease::Objective other = compute(!batched);
  report(state, batched ? result : other, batched ? other : result);
  state.counters["m"] = static_cast<double>(release.released_count());
}

void BM_ObjectiveBatched(benchmark::State& state) { run(state, true); }
void BM_ObjectivePerExample(benchmark::State& state) { run(state, false); }

// A public batch as fim evaluates it: its rows gathered and the 2 probes of each example drawn
// from its own SplitMixStream, then the objective (both matrices written to memory and read back),
// against the objective gathering each block's rows and drawing its probes where it uses them
// (SoftmaxRelease::ProbeSource). The same value and gradient (rel_diff; a test checks the bits).
constexpr Index kProbes = 2;
void draw(std::uint64_t key, Index first, Index count, double* out) {
  for (Index b = first; b < first + count; ++b)
    SplitMixStream(splitmix64(key + static_cast<std::uint64_t>(b)))
        .normals(out + (b - first) * kProbes * kPixels, kProbes * kPixels);
}

SoftmaxRelease::Objective probes_then_objective(const SoftmaxRelease& release, std::uint64_t key) {
  const Problem& pr = problem();
  RowMatrix X(kBatch, kPixels), V(kBatch * kProbes, kPixels);
#pragma omp parallel for schedule(static)
  for (Index b = 0; b < kBatch; ++b) {
    X.row(b) = pr.X.row(b);  // fim gathers the batch's rows of the public part
    draw(key, b, 1, V.row(b * kProbes).data());
  }
  return release.objective(X, pr.y, pr.c, V, kLambda, true, kFloor);
}

SoftmaxRelease::Objective objective_making_probes(const SoftmaxRelease& release, std::uint64_t key) {
  const Problem& pr = problem();
  const SoftmaxRelease::ProbeSource source = [key](Index first, Index count, double* out) {
    draw(key, first, count, out);
  };
  static const std::vector<Index> rows = [] {
    std::vector<Index> all(static_cast<std::size_t>(kBatch));
    for (Index b = 0; b < kBatch; ++b) all[static_cast<std::size_t>(b)] = b;
    return all;
  }();
  return release.objective(pr.X, pr.y, rows, pr.c, kProbes, source, kLambda, true, kFloor);
}

void run_with_probes(benchmark::State& state, bool made_in_blocks) {
  const Problem& pr = problem();
  const SoftmaxRelease release(pr.W, true, pr.frozen, pr.clip);
  std::uint64_t key = 0;
  SoftmaxRelease::Objective result;
  for (auto _ : state) {
    result = made_in_blocks ? objective_making_probes(release, ++key) : probes_then_objective(release, ++key);
    benchmark::DoNotOptimize(result.value);
  }
  const SoftmaxRelease::Objective other =
      made_in_blocks ? probes_then_objective(release, key) : objective_making_probes(release, key);
  report(state, result, other);
}

void BM_ProbesThenObjective(benchmark::State& state) { run_with_probes(state, false); }
void BM_ObjectiveMakingProbes(benchmark::State& state) { run_with_probes(state, true); }

}  // namespace

BENCHMARK(BM_ObjectiveBatched)->Arg(2)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ObjectivePerExample)->Arg(2)->Arg(0)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ProbesThenObjective)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_ObjectiveMakingProbes)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
