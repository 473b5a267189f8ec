// Non-private training (pre-training on the public part, and the sgd method) and what every method
// of a run starts from: the pre-trained parameters and their frozen coordinates.
#pragma once

#include "filkit/dpsgd/training.hpp"
#include "filkit/public_data/public_data_options.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "public_data/trained_model.hpp"

#include <cstdint>
#include <vector>

namespace filkit {

/// Pre-training's optimizer: Adam with its usual moment decays and epsilon (the thesis' jax
/// optimizers.adam), its bias corrections offset as the private phase's (the thesis' code calls
/// both alike); the step size is PlainTrainingOptions'.
DpSgdOptions pretraining_optimizer(const DpSgdOptions& private_phase);

/// Non-private minibatch training on the mean cross-entropy (plus weight decay times w), from w, by
/// `optimizer` (its optimizer, momentum, Adam settings; o's step size); with o.clip_norm > 0 each
/// example's gradient is smoothly clipped before the mean. `fixed` (empty, or one flag per
/// coordinate): coordinates that keep their value (zero gradient).
VectorXd train_without_privacy(const TrainedModel& model, const Dataset& data, VectorXd w,
                               const PlainTrainingOptions& o, DpSgdOptions optimizer, std::uint64_t seed,
                               const std::vector<bool>& fixed);

/// Run `run_seed`'s start: the model's initialisation (fixed coordinates at 0) pre-trained on the
/// public part, and its smallest-magnitude coordinates frozen (no first gradient model).
RunStart pretrained_start(const TrainedModel& model, const Dataset& public_part,
                          const PublicDataTrainingOptions& options, const std::vector<bool>& fixed,
                          std::uint64_t run_seed);

}  // namespace filkit
