// Training in float32 (DpSgdOptions::precision, docs/mathematics.md section 11 "float32"): the
// optimiser's step against a hand-written single-precision Adam and momentum SGD, the closed-form
// GLMs' refusal, and networks trained in float32 against the same runs in float64 (single
// precision's rounding, not another computation).
#include "filkit/dpsgd/training.hpp"

#include "dpsgd/optimizer_steps.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace filkit {
namespace {

using testing::is_float;

TEST(Float32Training, AdamStepIsSinglePrecisionAdamCoordinateByCoordinate) {
  DpSgdOptions o;
  o.optimizer = Optimizer::kAdam;
  o.step_size = 0.01;
  o.adam_bias_correction_offset = 1;
  o.precision = Precision::kFloat32;
  VectorXd w = testing::normal_vector(64, 1, 0.5), m = VectorXd::Zero(64), v = VectorXd::Zero(64);
  detail::round_to_float(w);
  std::vector<float> W(64), M(64, 0.0f), V(64, 0.0f);
  for (Index i = 0; i < 64; ++i) W[i] = static_cast<float>(w(i));
  Index adam_steps = 0;
  for (int t = 1; t <= 5; ++t) {
    const VectorXd g = testing::normal_vector(64, 10 + t, 0.1);
    detail::optimizer_step(o, w, g, m, v, adam_steps);
    // jax's adam in float32, written out (its count i + 1 with i = t, as the offset 1).
    const float b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, lr = 0.01f;
    const float c1 = 1.0f - std::pow(b1, static_cast<float>(t + 1)),
                c2 = 1.0f - std::pow(b2, static_cast<float>(t + 1));
    for (Index i = 0; i < 64; ++i) {
      const float gi = static_cast<float>(g(i));
      M[i] = b1 * M[i] + (1.0f - b1) * gi;
      V[i] = b2 * V[i] + (1.0f - b2) * gi * gi;
      W[i] -= lr * (M[i] / c1) / (std::sqrt(V[i] / c2) + eps);
    }
    ASSERT_TRUE(is_float(w) && is_float(m) && is_float(v)) << "step " << t;
    for (Index i = 0; i < 64; ++i) {
      // A fused multiply-add may round once where the loop rounds twice: a few units in the last
      // place, where a wrong formula moves w by a step's size (1e-2).
      EXPECT_NEAR(w(i), W[i], 4e-7 * std::abs(W[i]) + 1e-9) << "step " << t << " coordinate " << i;
      EXPECT_NEAR(m(i), M[i], 4e-7 * std::abs(M[i]) + 1e-12);
    }
  }
}

TEST(Float32Training, MomentumStepStaysInSinglePrecisionAndFloat64IsUnchanged) {
  DpSgdOptions o;
  o.optimizer = Optimizer::kSgd;
  o.momentum = 0.5;
  o.step_size = 0.1;
  VectorXd w64 = testing::normal_vector(16, 2), m64 = VectorXd::Zero(16), v64;
  detail::round_to_float(w64);
  VectorXd w32 = w64, m32 = m64, v32;
  Index steps64 = 0, steps32 = 0;
  const VectorXd g = testing::normal_vector(16, 3);
  detail::optimizer_step(o, w64, g, m64, v64, steps64);
  EXPECT_EQ(w64, VectorXd(w32 - 0.1 * g));  // float64: the plain step, bit for bit
  o.precision = Precision::kFloat32;
  detail::optimizer_step(o, w32, g, m32, v32, steps32);
  EXPECT_TRUE(is_float(w32) && is_float(m32));
  EXPECT_LT((w32 - w64).norm(), 1e-6 * w64.norm());
  EXPECT_NE(w32, w64);
}

TEST(Float32Training, ClosedFormGlmsRefuseFloat32) {
  DpSgdOptions o;
  o.kind = ModelKind::kSoftmax;
  o.batch_size = 4;
  o.steps = 2;
  o.precision = Precision::kFloat32;
  const Dataset train = testing::random_classification(20, 3, 3, 1);
  EXPECT_INVALID_ARGUMENT(train_dpsgd(train, train, o), {"precision", "float32", "float64 only", "networks"});
}

TEST(Float32Training, NetworksInFloat32AreTheirFloat64RunsToSinglePrecision) {
  if (!networks_available()) GTEST_SKIP() << "built without LibTorch";
  const Dataset train = testing::random_classification(40, 6, 3, 4), test = testing::random_classification(30, 6, 3, 5);
  for (const NetworkArchitecture architecture : {NetworkArchitecture::kSoftmax, NetworkArchitecture::kMlp}) {
    DpSgdOptions o;
    o.network = NetworkOptions{architecture, {8}, false, 7};
    o.batch_size = 10;
    o.steps = 8;
    o.step_size = 0.05;
    o.optimizer = Optimizer::kAdam;
    o.clip_norm = 0.5;
    o.noise_multiplier = 0.7;
    o.init_scale = 0.3;
    o.trace = TraceMethod::kGaussian;
    o.probes = 2;
    o.runs = 2;
    o.seed = 6;
    const DpSgdResult f64 = train_dpsgd(train, test, o);
    o.precision = Precision::kFloat32;
    const DpSgdResult f32 = train_dpsgd(train, test, o);
    const std::string name = to_string(architecture);
    for (int r = 0; r < o.runs; ++r) {
      EXPECT_TRUE(is_float(f32.parameters[r])) << name;
      // Single precision's rounding carried through 8 steps: ~1e-6 relative; another gradient,
      // clip or noise would move w by the step size.
      EXPECT_LT((f32.parameters[r] - f64.parameters[r]).norm(), 1e-4 * f64.parameters[r].norm()) << name;
      EXPECT_NE(f32.parameters[r], f64.parameters[r]) << name << ": the float32 run computed in float64";
    }
    const DpSgdSnapshot &a = f64.final_snapshot(), &b = f32.final_snapshot();
    EXPECT_EQ(a.times_sampled, b.times_sampled);
    EXPECT_LT((a.fisher_trace - b.fisher_trace).norm(), 1e-4 * a.fisher_trace.norm()) << name;
    EXPECT_DOUBLE_EQ(a.privacy.eps, b.privacy.eps);  // the accountants are float64 and data-independent
  }
}

}  // namespace
}  // namespace filkit
