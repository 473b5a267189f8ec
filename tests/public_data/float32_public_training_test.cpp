// Private training with public data in float32 (DpSgdOptions::precision; docs/mathematics.md,
// section 11, "float32"): the released vectors, their traces and Jacobian products against the
// same backend in float64, and every method's training against its float64 run: single
// precision's rounding, with the parameters held in single precision throughout.
#include "filkit/public_data/public_data_training.hpp"

#include "networks/network_plugin.hpp"
#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <string>

namespace filkit {
namespace {

using testing::expect_single_precision_of;
using testing::is_float;

TEST(Float32PublicTraining, ReleasesTracesAndProductsAreFloat64sToSinglePrecision) {
  REQUIRE_PLUGIN();
  const int K = 3;
  Dataset data = testing::image_data(7, K, 61, 8);
  data.X = data.X.cast<float>().cast<double>();
  NetworkOptions options;
  options.architecture = NetworkArchitecture::kCustom;
  options.layers = "conv:3:3:1:1,tanh,avgpool:2:2,flatten,dense:3";
  const Network network(options, 64, K, data.image);
  std::mt19937_64 rng(62);
  VectorXd w = network.initial_parameters(rng);
  w = w.cast<float>().cast<double>();
  ReleasedGradientSpec spec;
  spec.plan = network.plan();
  spec.input_dim = 64;
  spec.image = data.image;
  spec.num_classes = K;
  for (Index i = 0; i < network.parameter_count(); i += 2) spec.released.push_back(i);
  spec.clip_norm = 0.3;
  const auto f64 = create_released_gradient_backend(spec);
  spec.precision = Precision::kFloat32;
  const auto f32 = create_released_gradient_backend(spec);
  const Index m = static_cast<Index>(spec.released.size());
  for (const bool shifted : {false, true}) {  // the constant models' c, added before the clip
    const VectorXd c = shifted ? testing::normal_vector(m, 63, 0.05) : VectorXd();
    f64->set_shift(c);
    f32->set_shift(c);
    const std::string name = shifted ? "with a shift" : "without a shift";
    expect_single_precision_of(f32->released(w, data.X, data.y), f64->released(w, data.X, data.y), "r, " + name);
    const RowMatrix U = testing::normal_vector(7 * m, 64).reshaped<Eigen::RowMajor>(7, m);
    expect_single_precision_of(f32->released_vjp(w, data.X, data.y, U), f64->released_vjp(w, data.X, data.y, U),
                               "J^T u, " + name, 1e-4);
    for (const TraceMethod trace : {TraceMethod::kExact, TraceMethod::kGaussian}) {
      NetworkAccountingRequest request;
      request.trace = trace;
      request.probes = 2;
      const NetworkBatchAccounting a = f64->account_batch(w, data.X, data.y, request, 65, 0, data.X.rows());
      const NetworkBatchAccounting b = f32->account_batch(w, data.X, data.y, request, 65, 0, data.X.rows());
      expect_single_precision_of(b.clipped_sum, a.clipped_sum, "sum, " + name);
      expect_single_precision_of(b.trace, a.trace, "trace " + to_string(trace) + ", " + name, 1e-4);
    }
  }
}

TEST(Float32PublicTraining, EveryMethodIsItsFloat64RunToSinglePrecision) {
  REQUIRE_PLUGIN();
  const Dataset data = testing::image_data(60, 3, 71, 8);
  const PublicPrivateSplit split = split_public_private(data, 0.4, 1);
  PublicDataTrainingOptions o = testing::small_options();
  o.gradient_model.kind = GradientModelKind::kConstant;
  o.gradient_model.lambda = 10.0;
  o.private_phase.intercept = true;  // the thesis' linear layer
  o.methods = {PrivateTrainingMethod::kSgd, PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kPrune,
               PrivateTrainingMethod::kFim};
  const PublicDataTrainingResult f64 = train_with_public_data(split.public_part, split.private_part, data, o);
  o.private_phase.precision = Precision::kFloat32;
  const PublicDataTrainingResult f32 = train_with_public_data(split.public_part, split.private_part, data, o);
  for (std::size_t r = 0; r < f32.pretrain_parameters.size(); ++r) {
    EXPECT_TRUE(is_float(f32.pretrain_parameters[r]));
    expect_single_precision_of(f32.pretrain_parameters[r], f64.pretrain_parameters[r], "pre-training", 1e-4);
  }
  for (std::size_t k = 0; k < o.methods.size(); ++k) {
    const DpSgdResult &a = f64.methods[k].training, &b = f32.methods[k].training;
    const std::string name = to_string(o.methods[k]);
    for (std::size_t r = 0; r < b.parameters.size(); ++r) {
      EXPECT_TRUE(is_float(b.parameters[r])) << name;
      expect_single_precision_of(b.parameters[r], a.parameters[r], name, 1e-4);
    }
    if (o.methods[k] != PrivateTrainingMethod::kSgd)
      expect_single_precision_of(b.final_snapshot().fisher_trace, a.final_snapshot().fisher_trace, name + "'s traces",
                                 1e-3);
  }
}

TEST(Float32PublicTraining, TheConditionalGradientModelRefusesFloat32) {
  PublicDataTrainingOptions o = testing::small_options();
  o.gradient_model.kind = GradientModelKind::kConditional;
  o.private_phase.precision = Precision::kFloat32;
  o.methods = {PrivateTrainingMethod::kDpSgd, PrivateTrainingMethod::kFim};
  testing::expect_invalid([&] { o.validate(); }, {"precision", "float32", "conditional"});
  o.methods = {PrivateTrainingMethod::kDpSgd};  // without fim there is no gradient model to train
  EXPECT_NO_THROW(o.validate());
}

}  // namespace
}  // namespace filkit
