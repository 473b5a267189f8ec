// One DP-SGD training run (docs/mathematics.md, section 7): its parameters, optimiser, generator,
// batch sampler and the per-example accountant's running sums. train_dpsgd (training.cpp) runs
// several and averages their accounting; the resume state (resume_state.hpp) saves one mid-run.
#pragma once

#include "filkit/dpsgd/training.hpp"

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
  VectorXd trace, spectral, sampled;
};

/// A training run between steps: everything its next step depends on (saved by resume_state).
struct TrainerState {
  VectorXd parameters;
  VectorXd first_moment;   ///< SGD: the velocity; Adam: the first moment
  VectorXd second_moment;  ///< Adam only (empty for SGD)
  Index adam_steps = 0;    ///< Adam's bias-correction count: the steps taken (0 for SGD)
  std::mt19937_64 generator;
  std::vector<Index> order;  ///< the uniform sampler's permutation of 0..n-1
  RunAccountant accountant;
};

/// One training run: parameters, optimiser, generator, sampler, accountant.
class Trainer {
 public:
  Trainer(const Dataset& train, const DpSgdOptions& options, const DpSgdModel& model, std::uint64_t run_seed)
      : train_(train), options_(options), model_(model), run_seed_(run_seed) {
    state_.generator.seed(run_seed);
    state_.parameters = model.initial_parameters(state_.generator);
    state_.first_moment = VectorXd::Zero(state_.parameters.size());
    if (options.optimizer == Optimizer::kAdam) state_.second_moment = VectorXd::Zero(state_.parameters.size());
    state_.order.resize(train.n());
    for (Index i = 0; i < train.n(); ++i) state_.order[i] = i;
    state_.accountant = RunAccountant(train.n());
  }

  /// One DP-SGD step with its accounting.
  void step(Index t) {
    const std::vector<Index> batch = sample_batch();
    const StepAccounting a = model_.step(state_.parameters, batch, run_seed_, t);
    RunAccountant& accountant = state_.accountant;
    for (std::size_t b = 0; b < batch.size(); ++b) {
      accountant.trace(batch[b]) += a.trace(b);
      accountant.spectral(batch[b]) += a.spectral(b);
      accountant.sampled(batch[b]) += 1.0;
    }
    update(a.clipped_sum);
  }

  const VectorXd& parameters() const { return state_.parameters; }
  const RunAccountant& accountant() const { return state_.accountant; }

  const TrainerState& state() const { return state_; }
  /// Continues from a saved state. Its sizes must fit this run (load_state checks them against
  /// the job): the step indexes examples and parameters by them.
  void restore(const TrainerState& state) { state_ = state; }

 private:
  std::vector<Index> sample_batch() {
    const Index n = train_.n();
    std::vector<Index> batch;
    std::vector<Index>& order = state_.order;
    if (options_.sampling == BatchSampling::kUniform) {
      // Partial Fisher-Yates: the first B entries of order become a uniform B-subset.
      for (Index j = 0; j < options_.batch_size; ++j) {
        std::uniform_int_distribution<Index> pick(j, n - 1);
        std::swap(order[j], order[pick(state_.generator)]);
      }
      batch.assign(order.begin(), order.begin() + options_.batch_size);
    } else {
      const double q = static_cast<double>(options_.batch_size) / n;
      std::uniform_real_distribution<double> uniform;
      for (Index i = 0; i < n; ++i)
        if (uniform(state_.generator) < q) batch.push_back(i);
    }
    return batch;
  }

  /// Releases the noisy sum and moves the parameters (post-processing of the release).
  void update(VectorXd gradient) {
    VectorXd& w = state_.parameters;
    // A scaled unit normal (the same numbers as normal_distribution(0, scale)), since a noise
    // multiplier of 0 would be a standard deviation of 0, which normal_distribution does not admit.
    const double scale = options_.noise_multiplier * options_.clip_norm;
    std::normal_distribution<double> unit_normal;
    for (Index i = 0; i < gradient.size(); ++i) gradient(i) += scale * unit_normal(state_.generator);
    gradient = gradient / static_cast<double>(options_.batch_size) + options_.weight_decay * w;
    if (const std::vector<bool>* frozen = model_.frozen())  // never released, never moved
      for (Index i = 0; i < gradient.size(); ++i)
        if ((*frozen)[static_cast<std::size_t>(i)]) gradient(i) = 0.0;
    VectorXd& m = state_.first_moment;
    if (options_.optimizer == Optimizer::kSgd) {
      m = options_.momentum * m + gradient;  // the velocity
      w -= options_.step_size * m;
      return;
    }
    VectorXd& v = state_.second_moment;
    const Index t = ++state_.adam_steps;
    const double b1 = options_.adam_beta1, b2 = options_.adam_beta2;
    m = b1 * m + (1.0 - b1) * gradient;
    v = b2 * v + (1.0 - b2) * gradient.cwiseAbs2();
    const double c1 = 1.0 - std::pow(b1, t), c2 = 1.0 - std::pow(b2, t);
    w.array() -= options_.step_size * (m.array() / c1) / ((v.array() / c2).sqrt() + options_.adam_epsilon);
  }

  const Dataset& train_;
  const DpSgdOptions& options_;
  const DpSgdModel& model_;
  std::uint64_t run_seed_;
  TrainerState state_;
};

}  // namespace filkit::detail
