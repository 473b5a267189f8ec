// One DP-SGD training run (docs/mathematics.md, section 7): its parameters, optimiser, generator,
// batch sampler and the per-example accountant's running sums. train_dpsgd (training.cpp) runs
// several and averages their accounting; the resume state (resume_state.hpp) saves one mid-run.
#pragma once

#include "filkit/base/communicator.hpp"
#include "filkit/dpsgd/training.hpp"

#include "dpsgd/optimizer_steps.hpp"
#include "dpsgd/trainable_models.hpp"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace filkit::detail {

/// Per-run running sums of the accountant (before the 1/(sigma C)^2 and kappa factors).
struct RunAccountant {
  RunAccountant() = default;
  explicit RunAccountant(Index n) : trace(VectorXd::Zero(n)), spectral(VectorXd::Zero(n)), sampled(VectorXd::Zero(n)) {}
  VectorXd trace, spectral, sampled;  ///< per example of this process's rows
};

/// A training run between steps: everything its next step depends on (saved by resume_state).
struct TrainerState {
  VectorXd parameters;
  VectorXd first_moment;   ///< SGD: the velocity; Adam: the first moment
  VectorXd second_moment;  ///< Adam only (empty for SGD)
  Index adam_steps = 0;    ///< Adam's bias-correction count: the steps taken (0 for SGD)
  std::mt19937_64 generator;
  std::vector<Index> order;  ///< the uniform sampler's permutation of 0..n-1 (all rows, on every rank)
  RunAccountant accountant;
};

/// One training run: parameters, optimiser, generator, sampler, accountant.
///
/// On the ranks of an MPI job (docs/distributed.md) every rank runs the same Trainer over its
/// shard of the rows: the generator, the sampler (over all n rows), the noise and the parameters
/// are the same on every rank, each rank clips and accounts the batch members among its rows, and
/// the clipped sums are added over the ranks (identical bits everywhere). The accountant holds the
/// rank's rows only.
class Trainer {
 public:
  /// `train`: this process's rows, the global rows first_row .. first_row + train.n() - 1 of n_total.
  Trainer(const Dataset& train, const DpSgdOptions& options, TrainableModel& model, std::uint64_t run_seed,
          Index first_row, Index n_total, const Communicator& comm)
      : train_(train),
        options_(options),
        model_(model),
        run_seed_(run_seed),
        first_row_(first_row),
        n_total_(n_total),
        comm_(comm) {
    state_.generator.seed(run_seed);
    state_.parameters = model.initial_parameters(state_.generator);
    if (options.precision == Precision::kFloat32) round_to_float(state_.parameters);
    state_.first_moment = VectorXd::Zero(state_.parameters.size());
    if (options.optimizer == Optimizer::kAdam) state_.second_moment = VectorXd::Zero(state_.parameters.size());
    state_.order.resize(n_total);
    for (Index i = 0; i < n_total; ++i) state_.order[i] = i;
    state_.accountant = RunAccountant(train.n());
  }

  /// One DP-SGD step with its accounting.
  void step(Index t) {
    const std::vector<Index> members = sample_batch(t);
    const LocalBatch batch = local_part(members);
    StepAccounting a = batch.rows.empty() && !model_.steps_on_every_rank()
                           ? StepAccounting{VectorXd::Zero(state_.parameters.size()), VectorXd(), VectorXd()}
                           : model_.step(state_.parameters, batch, run_seed_, t);
    RunAccountant& accountant = state_.accountant;
    for (std::size_t b = 0; b < batch.rows.size(); ++b) {
      accountant.trace(batch.rows[b]) += a.trace(b);
      accountant.spectral(batch.rows[b]) += a.spectral(b);
      accountant.sampled(batch.rows[b]) += 1.0;
    }
    comm_.sum(a.clipped_sum);
    // Shuffled epochs divide by the realised size (the last batch is short), as the thesis' code.
    const Index divisor =
        options_.sampling == BatchSampling::kShuffle ? static_cast<Index>(members.size()) : options_.batch_size;
    update(std::move(a.clipped_sum), divisor);
  }

  const VectorXd& parameters() const { return state_.parameters; }
  const RunAccountant& accountant() const { return state_.accountant; }

  const TrainerState& state() const { return state_; }
  /// Continues from a saved state. Its sizes must fit this run (load_state checks them against
  /// the job): the step indexes examples and parameters by them.
  void restore(const TrainerState& state) { state_ = state; }

 private:
  /// Step t's batch over all n rows, in increasing order (the same on every rank).
  std::vector<Index> sample_batch(Index t) {
    std::vector<Index> batch;
    std::vector<Index>& order = state_.order;
    if (options_.sampling == BatchSampling::kShuffle) {
      // The position in the epoch follows from t, so a resumed run continues the saved permutation.
      batch = detail::epoch_batch(order, options_.batch_size, t, state_.generator);
    } else if (options_.sampling == BatchSampling::kUniform) {
      shuffle_batch_to_front(order, options_.batch_size, state_.generator);  // a uniform B-subset
      batch.assign(order.begin(), order.begin() + options_.batch_size);
      std::sort(batch.begin(), batch.end());  // so that each rank's members are consecutive
    } else {
      const double q = static_cast<double>(options_.batch_size) / n_total_;
      std::uniform_real_distribution<double> uniform;
      for (Index i = 0; i < n_total_; ++i)
        if (uniform(state_.generator) < q) batch.push_back(i);
    }
    return batch;
  }

  /// The members of `batch` among this process's rows.
  LocalBatch local_part(const std::vector<Index>& batch) const {
    const auto first = std::lower_bound(batch.begin(), batch.end(), first_row_);
    const auto last = std::lower_bound(first, batch.end(), first_row_ + train_.n());
    LocalBatch local;
    for (auto it = first; it != last; ++it) local.rows.push_back(*it - first_row_);
    local.row_offset = first_row_;
    local.total_rows = n_total_;
    local.position = first - batch.begin();
    local.batch_size = static_cast<Index>(batch.size());
    return local;
  }

  /// Releases the noisy sum and moves the parameters (post-processing of the release).
  void update(VectorXd gradient, Index divisor) {
    VectorXd& w = state_.parameters;
    // A scaled unit normal (the same numbers as normal_distribution(0, scale)), since a noise
    // multiplier of 0 would be a standard deviation of 0, which normal_distribution does not admit.
    const double scale = options_.noise_multiplier * options_.clip_norm;
    std::normal_distribution<double> unit_normal;
    for (Index i = 0; i < gradient.size(); ++i) gradient(i) += scale * unit_normal(state_.generator);
    gradient = gradient / static_cast<double>(divisor) + options_.weight_decay * w;
    if (const std::vector<bool>* frozen = model_.frozen())  // never released, never moved
      for (Index i = 0; i < gradient.size(); ++i)
        if ((*frozen)[static_cast<std::size_t>(i)]) gradient(i) = 0.0;
    optimizer_step(options_, w, gradient, state_.first_moment, state_.second_moment, state_.adam_steps);
  }

  const Dataset& train_;
  const DpSgdOptions& options_;
  TrainableModel& model_;
  std::uint64_t run_seed_;
  Index first_row_, n_total_;
  const Communicator& comm_;
  TrainerState state_;
};

}  // namespace filkit::detail
