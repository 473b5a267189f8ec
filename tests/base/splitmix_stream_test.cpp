// The per-example random streams of the networks' probes: draws in counter form, uniforms and
// bounded integers with the right frequencies, and ziggurat normals whose distribution function,
// tail mass and moments are those of N(0, 1) (a Kolmogorov-Smirnov distance that also catches a
// 2 % error of scale).
#include "base/splitmix_stream.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace filkit {
namespace {

double standard_normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

/// sup_x |F_n(x) - F(x)| of the sample against the distribution function F.
template <class Cdf>
double kolmogorov_smirnov_distance(std::vector<double> sample, Cdf cdf) {
  std::sort(sample.begin(), sample.end());
  const double n = static_cast<double>(sample.size());
  double distance = 0.0;
  for (std::size_t i = 0; i < sample.size(); ++i) {
    const double F = cdf(sample[i]);
    distance = std::max({distance, F - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - F});
  }
  return distance;
}

TEST(SplitMixStream, DrawCIsSplitMixOfTheKeyPlusCGammas) {
  SplitMixStream stream(12345);
  for (std::uint64_t c = 0; c < 5; ++c) EXPECT_EQ(stream.bits(), splitmix64(12345 + c * 0x9e3779b97f4a7c15ULL));
  SplitMixStream again(12345), other(12346);
  EXPECT_EQ(again.normal(), SplitMixStream(12345).normal());
  EXPECT_NE(again.bits(), other.bits());
}

TEST(SplitMixStream, ABlockOfNormalsIsTheSequenceOfSingleNormals) {
  // Counts within one block of draws, across several and with a block's worth of rejections; after
  // each the two streams stand at the same draw.
  for (std::uint64_t key : {1ull, 77ull, 0xdeadbeefull})
    for (std::int64_t count : {0, 1, 255, 256, 257, 1568, 100000}) {
      SplitMixStream single(key), block(key);
      std::vector<double> expected(static_cast<std::size_t>(count)), got(static_cast<std::size_t>(count) + 1, -7.0);
      for (double& x : expected) x = single.normal();
      block.normals(got.data(), count);
      for (std::int64_t i = 0; i < count; ++i) ASSERT_EQ(got[i], expected[i]) << "key " << key << ", normal " << i;
      EXPECT_EQ(got[count], -7.0) << "wrote past the end";
      EXPECT_EQ(block.bits(), single.bits()) << "key " << key << ", count " << count;
    }
  // A stream's tail and wedge draws (about 1 in 80 normals) are among the 10^5: more than 1,000.
  SplitMixStream stream(77);
  int outside = 0;
  const ZigguratTables& t = ziggurat_tables();
  for (int n = 0; n < 100000; ++n) {
    const std::uint64_t draw = stream.bits();
    const double u = static_cast<double>(static_cast<std::int64_t>(draw) >> 11) * 0x1.0p-52;
    outside += !(std::abs(u) < t.inner_ratio[draw & (ZigguratTables::kLayers - 1)]);
  }
  EXPECT_GT(outside, 1000);
}

TEST(SplitMixStream, UniformsAndBoundedIntegersHaveTheirFrequencies) {
  SplitMixStream stream(7);
  constexpr int kDraws = 700000, kBins = 7;
  std::vector<double> uniforms(kDraws);
  std::vector<int> counts(kBins, 0);
  for (int i = 0; i < kDraws; ++i) {
    uniforms[i] = stream.uniform();
    ASSERT_GT(uniforms[i], 0.0);
    ASSERT_LT(uniforms[i], 1.0);
    ++counts[stream.below(kBins)];
  }
  EXPECT_LT(kolmogorov_smirnov_distance(uniforms, [](double u) { return u; }), 1.95 / std::sqrt(double(kDraws)));
  double chi_squared = 0.0;
  for (int count : counts) chi_squared += std::pow(count - kDraws / kBins, 2) / (kDraws / kBins);
  EXPECT_LT(chi_squared, 22.5);  // chi^2 with 6 degrees of freedom: P(> 22.5) = 0.001
  EXPECT_EQ(stream.below(1), 0u);
  // A bound just above 2^63 rejects about half of the draws: still in range and both halves hit.
  const std::uint64_t large = (std::uint64_t{1} << 63) + 1;
  int upper = 0;
  for (int i = 0; i < 1000; ++i) {
    const std::uint64_t k = stream.below(large);
    ASSERT_LT(k, large);
    upper += k >= large / 2;
  }
  EXPECT_GT(upper, 400);
  EXPECT_LT(upper, 600);
}

TEST(SplitMixStream, TheZigguratsLayersHaveEqualAreas) {
  const ZigguratTables& t = ziggurat_tables();
  const double R = ZigguratTables::kTailStart, V = ZigguratTables::kLayerArea;
  auto f = [](double x) { return std::exp(-0.5 * x * x); };
  // The base layer: the rectangle up to R and the tail, int_R^inf f = sqrt(pi / 2) erfc(R / sqrt 2).
  EXPECT_NEAR(R * f(R) + std::sqrt(M_PI / 2) * std::erfc(R / std::sqrt(2.0)), V, 1e-9 * V);
  for (int i = 1; i < ZigguratTables::kLayers; ++i)  // layer i: width x_i, heights f(x_i) to f(x_{i+1})
    EXPECT_NEAR(t.x[i] * (f(t.x[i + 1]) - f(t.x[i])), V, 1e-8 * V) << "layer " << i;
}

TEST(SplitMixStream, ZigguratNormalsAreStandardNormal) {
  constexpr int kDraws = 1000000;
  std::vector<double> sample(kDraws);
  SplitMixStream stream(2024);
  double sum = 0.0, squares = 0.0, fourth = 0.0;
  int beyond_tail_start = 0;
  for (double& z : sample) {
    z = stream.normal();
    sum += z;
    squares += z * z;
    fourth += z * z * z * z;
    beyond_tail_start += std::abs(z) > ZigguratTables::kTailStart;
  }
  const double n = kDraws, critical = 1.95 / std::sqrt(n);  // P(D > critical) = 0.001
  EXPECT_LT(kolmogorov_smirnov_distance(sample, standard_normal_cdf), critical);
  // The test has the power to see a 2 % error of scale.
  std::vector<double> scaled = sample;
  for (double& z : scaled) z *= 1.02;
  EXPECT_GT(kolmogorov_smirnov_distance(scaled, standard_normal_cdf), critical);
  // Moments within 4 standard errors: var(z) = 1, var(z^2) = 2, var(z^4) = 96.
  EXPECT_NEAR(sum / n, 0.0, 4.0 / std::sqrt(n));
  EXPECT_NEAR(squares / n, 1.0, 4.0 * std::sqrt(2.0 / n));
  EXPECT_NEAR(fourth / n, 3.0, 4.0 * std::sqrt(96.0 / n));
  // The tail, drawn by its own method: P(|z| > R) = 2 (1 - Phi(R)) = 5.76e-4.
  const double tail_mass = 2.0 * (1.0 - standard_normal_cdf(ZigguratTables::kTailStart));
  EXPECT_NEAR(beyond_tail_start, n * tail_mass, 4.0 * std::sqrt(n * tail_mass));
}

}  // namespace
}  // namespace filkit
