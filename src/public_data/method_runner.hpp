// The private phase of each method of private training with public data (public_data_training.hpp):
// one runner a method, made by MethodRunner::create (as Ceres' TrustRegionStrategy::Create makes
// one strategy an option). sgd trains without privacy; dpsgd, prune and fim run train_dpsgd's
// trainer and accountant with a PublicDataModel a run, differing in the coordinates they freeze
// and in what fim's gradient model reports.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"
#include "filkit/public_data/public_data_training.hpp"

#include "public_data/pretraining.hpp"
#include "public_data/trained_model.hpp"

#include <memory>
#include <vector>

namespace filkit {

/// What every method's private phase starts from: the data, the options as run, the trained model
/// and each run's pre-trained start.
struct PrivatePhase {
  const Dataset& public_part;
  const Dataset& private_part;
  const Dataset& test;
  const PublicDataTrainingOptions& options;
  const DpSgdOptions& phase;  ///< options.private_phase as run (resolved_private_phase)
  const TrainedModel& model;
  const std::vector<RunStart>& starts;  ///< one a run
  const std::vector<bool>& fixed;       ///< the model's fixed coordinates (reference_logit), or empty
  Index trainable = 0;                  ///< parameters less the fixed ones
  bool keep_public_records = false;     ///< check_training_memory's answer for fim on a network
  bool progress = false;
  CheckpointWhenDone when_done = CheckpointWhenDone::kRemove;
  /// The ranks that train the runs together (train_with_public_data): fim's constant gradient
  /// model splits its public batches over them, and dpsgd, prune and fim the members of their
  /// private batches (each rank its shard of the private rows); pre-training and sgd run on every
  /// rank alike.
  const Communicator& ranks = Communicator::local();
};

/// One method's private phase over every run.
class MethodRunner {
 public:
  virtual ~MethodRunner() = default;
  /// The runner of `method`.
  static std::unique_ptr<MethodRunner> create(PrivateTrainingMethod method);
  /// Trains every run from its start; training.complete is false when private_phase.stop_after
  /// stopped it (the state is then in the checkpoint and the rest of the result is left empty).
  virtual MethodResult run(const PrivatePhase& phase) = 0;
};

}  // namespace filkit
