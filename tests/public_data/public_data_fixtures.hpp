// What the tests of private training with public data share (tests/public_data/): the image
// problems, the small training options and ConvNet they train, the refusal checks, and the skip
// without the LibTorch plugin.
#pragma once

#include "filkit/networks/networks.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "test_util.hpp"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#define REQUIRE_PLUGIN() \
  if (!networks_available()) GTEST_SKIP() << "no LibTorch plugin (built with FILKIT_WITH_TORCH=OFF?)"

namespace filkit::testing {

inline void expect_invalid(const std::function<void()>& statement, const std::vector<std::string>& fragments) {
  EXPECT_INVALID_ARGUMENT(statement(), fragments);
}

inline void expect_data_error(const std::function<void()>& statement, const std::vector<std::string>& fragments) {
  EXPECT_THROW_NAMING(statement(), DataError, fragments);
}

/// A 1 x 16 x 16 image problem (the smallest the gradient model's conv branch takes) with K classes.
inline Dataset image_data(Index n, int K, unsigned seed, Index side = 16) {
  Dataset data = testing::random_classification(n, side * side, K, seed);
  data.X = (data.X.array() * 4.0).matrix();  // pixels of order one
  data.image = ImageShape{1, side, side};
  return data;
}

/// A small ConvNet for 16 x 16 images of 2 classes (image_data).
inline NetworkOptions small_conv_network() {
  NetworkOptions network;
  network.architecture = NetworkArchitecture::kCustom;
  network.layers = "conv:2:3:2:1,tanh,avgpool:2:2,flatten,dense:2";
  return network;
}

inline PublicDataTrainingOptions small_options() {
  PublicDataTrainingOptions o;
  o.public_fraction = 0.4;
  o.pretrain = {.steps = 20, .batch_size = 16, .step_size = 0.05, .weight_decay = 1e-4};
  o.freeze_fraction = 0.5;
  DpSgdOptions& p = o.private_phase;
  p.kind = ModelKind::kSoftmax;
  p.batch_size = 12;
  p.steps = 6;
  p.step_size = 0.05;
  p.optimizer = Optimizer::kAdam;
  p.clip_norm = 1.0;
  p.noise_multiplier = 1.0;
  p.trace = TraceMethod::kExact;
  p.runs = 2;
  p.seed = 3;
  o.gradient_model.hidden = {10, 6};
  o.gradient_model.steps = 3;
  o.gradient_model.decay = 1;
  o.gradient_model.min_steps = 1;
  o.gradient_model.batch_size = 8;
  return o;
}

}  // namespace filkit::testing
