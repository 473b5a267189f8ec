// Private training with public data refuses bad options, naming them.
#include "filkit/public_data/public_data_training.hpp"

#include "public_data_fixtures.hpp"
#include "test_util.hpp"

#include <gtest/gtest.h>

#include <functional>

namespace filkit {
namespace {

TEST(TrainWithPublicData, RefusesBadOptionsWithTheirNames) {
  const Dataset data = testing::image_data(30, 2, 51);
  const PublicPrivateSplit split = split_public_private(data, 0.5, 1);
  const auto refuses = [&](const std::function<void(PublicDataTrainingOptions&)>& change,
                           std::vector<std::string> fragments) {
    PublicDataTrainingOptions o = testing::small_options();
    change(o);
    testing::expect_invalid([&] { train_with_public_data(split.public_part, split.private_part, Dataset{}, o); },
                            fragments);
  };
  refuses([](auto& o) { o.public_fraction = 1.0; }, {"public_fraction", "(0, 1)"});
  refuses([](auto& o) { o.freeze_fraction = 1.0; }, {"freeze_fraction"});
  refuses([](auto& o) { o.methods.clear(); }, {"methods"});
  refuses([](auto& o) { o.gradient_model.hidden = {}; }, {"gradient_hidden"});
  refuses([](auto& o) { o.gradient_model.probes = 0; }, {"gradient_probes"});
  refuses([](auto& o) { o.gradient_model.lambda = -1; }, {"lambda"});
  refuses([](auto& o) { o.private_phase.trace = TraceMethod::kCoordinates; }, {"trace = coordinates"});
  refuses([](auto& o) { o.private_phase.spectral = SpectralMethod::kExact; }, {"spectral = exact"});
  refuses([](auto& o) { o.private_phase.checkpoint_path = "x"; }, {"checkpoint", "one method at a time"});
  refuses(
      [](auto& o) {
        o.private_phase.checkpoint_path = "x";
        o.methods = {PrivateTrainingMethod::kSgd};
      },
      {"checkpoint", "one method at a time"});
  refuses(
      [](auto& o) {
        o.private_phase.checkpoint_path = "x";
        o.methods = {PrivateTrainingMethod::kFim};
        o.gradient_model.kind = GradientModelKind::kConditional;
      },
      {"checkpoint", "conditional gradient model", "gradient_model"});
  refuses([](auto& o) { o.private_phase.kind = ModelKind::kLogistic; }, {"softmax"});
  refuses([](auto& o) { o.gradient_model.precision = Precision::kFloat32; },
          {"gradient_precision = float32", "networks", "float64"});
  refuses(
      [](auto& o) {
        o.gradient_model.state_precision = Precision::kFloat32;
        o.gradient_model.kind = GradientModelKind::kConditional;
      },
      {"gradient_state_precision = float32", "constant or vector", "float64"});
  refuses(
      [](auto& o) {
        o.gradient_model.probe_draws = ProbeDraws::kStep;
        o.gradient_model.trace = GradientTrace::kExact;
      },
      {"gradient_probe_draws = step", "gradient_trace = probes"});
  refuses(
      [](auto& o) {
        o.gradient_model.probe_draws = ProbeDraws::kStep;
        o.gradient_model.kind = GradientModelKind::kConditional;
      },
      {"gradient_probe_draws = step", "constant or vector"});
  refuses([](auto& o) { o.pretrain.step_size = 0; }, {"pretrain_step_size"});
  refuses([](auto& o) { o.pretrain.sampling = BatchSampling::kPoisson; }, {"pretrain_sampling", "poisson"});
  refuses(
      [](auto& o) {
        o.gradient_model.batch_size = 1000;
        o.methods = {PrivateTrainingMethod::kFim};
      },
      {"gradient_batch_size", "public part"});
  PublicDataTrainingOptions o = testing::small_options();
  testing::expect_invalid([&] { train_with_public_data(split.public_part, Dataset{}, Dataset{}, o); },
                          {"private part is empty"});
}

}  // namespace
}  // namespace filkit
