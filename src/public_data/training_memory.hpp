// The memory check of private training with public data, before pre-training.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/public_data/public_data_options.hpp"

#include "public_data/trained_model.hpp"

namespace filkit {

/// Refuses, before pre-training, what training holds at once beyond phase.max_memory: a network
/// (estimate_network_memory) with a chunk of its per-example gradients (the mean gradients of
/// pre-training, sgd and fim's diagnostics form them a chunk of rows at a time, p doubles a row)
/// and fim's released gradients of a private batch (B x m), and fim's gradient model
/// (estimate_gradient_model_memory). Returns whether fim on a network keeps the public examples'
/// records for a private step (per-batch probes over epochs): where they fit beside the rest.
bool check_training_memory(const TrainedModel& trained, const PublicDataTrainingOptions& options,
                           const DpSgdOptions& phase, const Dataset& private_part, Index public_rows, Index trainable);

}  // namespace filkit
