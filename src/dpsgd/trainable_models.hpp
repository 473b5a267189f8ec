// What the DP-SGD loop (dpsgd.cpp) needs from a model: its clipped per-example gradients with
// their accounting, and its accuracy. GLMs answer in closed form (clipped_gradient.hpp), networks
// through LibTorch (networks.hpp); the loop, the sampler, the noise, the optimiser, the
// accountant and the snapshots are shared, so the two give identical numbers where they meet
// (the softmax network against the softmax GLM).
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace filkit {

class Network;

/// A step's batch as one process sees it: on one process the whole batch, on a rank of an MPI job
/// (docs/distributed.md) the members among its shard of rows. The estimators' probes are keyed by
/// where the members sit in the whole run (global row, position in the sorted batch), so that a
/// sharded step draws the probes of the single-process step.
struct LocalBatch {
  std::vector<Index> rows;  ///< row indices into this process's training rows, increasing
  Index row_offset = 0;     ///< global index of this process's row 0
  Index total_rows = 0;     ///< n: training rows over all ranks
  Index position = 0;       ///< position of rows[0] in the whole batch
  Index batch_size = 0;     ///< the whole batch's members over all ranks
};

/// The clipped gradients of one batch and their accounting.
struct StepAccounting {
  VectorXd clipped_sum;  ///< sum over the batch of g~ (parameter order)
  VectorXd trace;        ///< Tr(G^T G) of each batch member
  VectorXd spectral;     ///< ||G||_2^2 of each batch member (NaN when not requested)
};

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  virtual Index parameter_count() const = 0;
  /// w_0, drawn from the run's generator (before its first batch).
  virtual VectorXd initial_parameters(std::mt19937_64& rng) const = 0;
  /// At parameters w, the batch's clipped gradients and accounting; the estimators' probes are
  /// seeded from (run_seed, step) and the members' global rows or batch positions. Not const: a
  /// model may change as it trains (fim's gradient model, trained before each private step).
  virtual StepAccounting step(const VectorXd& w, const LocalBatch& batch, std::uint64_t run_seed, Index step) = 0;
  /// Whether step() is collective over the ranks (fim's gradient model trains on all of them
  /// together): the trainer then calls it on every rank, with no members where a rank has none.
  /// Otherwise a rank without members skips it.
  virtual bool steps_on_every_rank() const { return false; }
  virtual double accuracy(const VectorXd& w, const Dataset& data) const = 0;
  /// A GLM Model of the parameters (closed-form GLMs only).
  virtual bool is_glm() const { return false; }
  virtual Model glm(const VectorXd& w) const;
  /// One line a layer (networks), for the summary.
  virtual std::string describe() const { return {}; }
  /// The network trained through LibTorch; nullptr for a closed-form GLM.
  virtual const Network* network() const { return nullptr; }
  /// Coordinates that are never released (magnitude pruning, public_data_training.hpp): the
  /// trainer adds no noise to them and leaves them where they are. nullptr: none.
  virtual const std::vector<bool>* frozen() const { return nullptr; }

  /// A model that changes as it trains (fim's gradient model and its diagnostics) keeps that state
  /// in the resume file: what a saved state must have been made under (null: nothing beyond the
  /// job's settings and data), its state after the steps done, and the restoring of it.
  virtual nlohmann::json resume_fingerprint() const { return nullptr; }
  virtual nlohmann::json resume_state() const { return nullptr; }
  /// Restores resume_state() as saved after `steps_done` steps of the run; throws
  /// a DataError naming the field (relative to `state`) that does not fit. The default
  /// accepts only null.
  virtual void restore(const nlohmann::json& state, Index steps_done);
};

/// The model of each run of train_dpsgd_with_models, given the run's index and seed; the reference
/// stays valid until the training returns. Private training with public data builds one a run (its
/// pre-trained start, frozen coordinates and gradient model).
using TrainableModelOfRun = std::function<TrainableModel&(int run, std::uint64_t run_seed)>;

/// train_dpsgd with the model of each run given (every run's must have the same parameter count
/// and be a GLM or not alike); the resume file holds each run's resume_state() beside the loop's.
/// On the ranks of `comm` (docs/distributed.md), as train_dpsgd: `train` and `test` are this
/// rank's shards, the models built on every rank alike, and rank 0 returns the whole result.
DpSgdResult train_dpsgd_with_models(const Dataset& train, const Dataset& test, const DpSgdOptions& options,
                                    const TrainableModelOfRun& model_of_run, bool progress = false,
                                    const std::string& progress_label = "dpsgd",
                                    CheckpointWhenDone when_done = CheckpointWhenDone::kRemove,
                                    const Communicator& comm = Communicator::local());

/// The seed of run `run` (what train_dpsgd records in run_seeds).
std::uint64_t dpsgd_run_seed(const DpSgdOptions& options, int run);

/// The model `options` asks for on `train` with K classes: the GLM of options.kind, or
/// options.network through LibTorch.
std::unique_ptr<TrainableModel> make_trainable_model(const Dataset& train, const DpSgdOptions& options,
                                                     Index num_classes);

}  // namespace filkit
