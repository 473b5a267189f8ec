// A network in float32 (NetworkOptions::precision): every computation of the LibTorch plugin
// against the same network in float64 at the same (float-representable) inputs: equal to single
// precision's rounding, and not equal (the float32 request really ran in float32).
#include "filkit/networks/networks.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>

namespace filkit {
namespace {

using testing::expect_single_precision_of;

TEST(NetworkPrecision, Float32ComputesFloat64sValuesToSinglePrecision) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const int K = 3;
  Dataset data = testing::random_classification(9, 64, K, 7);
  data.X = data.X.cast<float>().cast<double>();  // inputs both precisions hold exactly
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "conv:3:3:1:1,tanh,avgpool:2:2,conv:2:2:1:0,gelu,flatten,dense:5,tanh,dense:3";
  options.chunk = 4;  // several chunks and pieces
  const ImageShape image{1, 8, 8};
  const Network f64(options, 64, K, image);
  options.precision = Precision::kFloat32;
  const Network f32(options, 64, K, image);
  std::mt19937_64 rng(8);
  VectorXd w = f64.initial_parameters(rng);
  w = w.cast<float>().cast<double>();
  const double C = 0.3;  // most gradients beyond the clip's knee
  expect_single_precision_of(f32.logits(w, data.X), f64.logits(w, data.X), "logits");
  expect_single_precision_of(f32.gradients(w, data.X, data.y), f64.gradients(w, data.X, data.y), "gradients");
  expect_single_precision_of(f32.clipped_gradients(w, data.X, data.y, C), f64.clipped_gradients(w, data.X, data.y, C),
                             "clipped gradients");
  const RowMatrix V = testing::normal_vector(9 * 64, 9).reshaped<Eigen::RowMajor>(9, 64);
  expect_single_precision_of(f32.jacobian_vector_products(w, data.X, data.y, C, V),
                             f64.jacobian_vector_products(w, data.X, data.y, C, V), "G v", 1e-4);
  const RowMatrix U =
      testing::normal_vector(9 * f64.parameter_count(), 10).reshaped<Eigen::RowMajor>(9, f64.parameter_count());
  expect_single_precision_of(f32.vector_jacobian_products(w, data.X, data.y, C, U),
                             f64.vector_jacobian_products(w, data.X, data.y, C, U), "G^T u", 1e-4);
  for (const TraceMethod trace : {TraceMethod::kExact, TraceMethod::kGaussian}) {
    NetworkAccountingRequest request;
    request.trace = trace;
    request.probes = 2;
    request.spectral = trace == TraceMethod::kExact ? SpectralMethod::kExact : SpectralMethod::kPowerIteration;
    const NetworkBatchAccounting a = f64.account_batch(w, data.X, data.y, C, request, 11);
    const NetworkBatchAccounting b = f32.account_batch(w, data.X, data.y, C, request, 11);
    const std::string name = to_string(trace);
    expect_single_precision_of(b.clipped_sum, a.clipped_sum, "clipped sum, " + name);
    // The same probes (drawn in float64, then rounded): the estimates agree as the exact values do.
    expect_single_precision_of(b.trace, a.trace, "trace, " + name, 1e-4);
    expect_single_precision_of(b.spectral, a.spectral, "spectral norm, " + name, 1e-3);
  }
}

TEST(NetworkGradientSum, IsTheSumOfThePerExampleGradientsInEitherPrecision) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  // One reverse pass of the summed loss (pre-training and sgd) against the per-example gradients
  // summed: the same numbers, added in another order.
  const int K = 3;
  Dataset data = testing::random_classification(23, 64, K, 17);
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "conv:3:3:1:1,tanh,avgpool:2:2,flatten,dense:5,gelu,dense:3";
  options.chunk = 10;  // three chunks, the last short
  for (const Precision precision : {Precision::kFloat64, Precision::kFloat32}) {
    options.precision = precision;
    const Network network(options, 64, K, ImageShape{1, 8, 8});
    std::mt19937_64 rng(18);
    const VectorXd w = network.initial_parameters(rng);
    const VectorXd per_example = network.gradients(w, data.X, data.y).colwise().sum().transpose();
    const VectorXd sum = network.gradient_sum(w, data.X, data.y);
    const double tolerance = precision == Precision::kFloat64 ? 1e-13 : 1e-5;
    EXPECT_LT((sum - per_example).norm(), tolerance * per_example.norm()) << to_string(precision);
  }
}

}  // namespace
}  // namespace filkit
