// The probes of fim's constant model on softmax regression: a public batch's 512 x 2 x 784 standard
// normals, each example's from its own SplitMixStream (src/base/splitmix_stream.hpp), one normal()
// at a time against normals(), which gives the same values (a test checks). One thread;
// calls_94400_s extrapolates to the 94,400 public batches of a table 3.1 run.
#include "base/splitmix_stream.hpp"

#include <benchmark/benchmark.h>

#include <vector>

namespace {

using namespace filkit;

constexpr int kExamples = 512, kPerExample = 2 * 784;

void report(benchmark::State& state) {
  state.counters["calls_94400_s"] =
      benchmark::Counter(1.0 / 94400.0, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

void BM_NormalOneAtATime(benchmark::State& state) {
  std::vector<double> out(static_cast<std::size_t>(kExamples) * kPerExample);
  std::uint64_t key = 0;
  for (auto _ : state) {
    for (int b = 0; b < kExamples; ++b) {
      SplitMixStream stream(splitmix64(++key));
      for (int j = 0; j < kPerExample; ++j) out[static_cast<std::size_t>(b) * kPerExample + j] = stream.normal();
    }
    benchmark::DoNotOptimize(out.data());
  }
  report(state);
}

void BM_NormalsBlock(benchmark::State& state) {
  std::vector<double> out(static_cast<std::size_t>(kExamples) * kPerExample);
  std::uint64_t key = 0;
  for (auto _ : state) {
    for (int b = 0; b < kExamples; ++b)
      SplitMixStream(splitmix64(++key)).normals(out.data() + static_cast<std::size_t>(b) * kPerExample, kPerExample);
    benchmark::DoNotOptimize(out.data());
  }
  report(state);
}

}  // namespace

BENCHMARK(BM_NormalOneAtATime)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_NormalsBlock)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
