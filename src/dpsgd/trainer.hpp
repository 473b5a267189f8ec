// One DP-SGD training run (docs/mathematics.md, section 7): its parameters, optimiser, generator,
// batch sampler and the per-example accountant's running sums. train_dpsgd (training.cpp) runs
// several and averages their accounting; the resume state (resume_state.hpp) saves one mid-run.
#pragma once

#include "filkit/dpsgd/training.hpp"

#include "dpsgd/trainable_models.hpp"
#include "dpsgd/vector_json.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <vector>

namespace filkit::detail {

/// Per-run running sums of the accountant (before the 1/(sigma C)^2 and kappa factors).
struct RunAccountant {
  explicit RunAccountant(Index n) : trace(VectorXd::Zero(n)), spectral(VectorXd::Zero(n)), sampled(VectorXd::Zero(n)) {}
  VectorXd trace, spectral, sampled;
};

/// The state of one training run: parameters, optimiser, generator, sampler, accountant.
class Trainer {
 public:
  Trainer(const Dataset& train, const DpSgdOptions& options, const DpSgdModel& model, std::uint64_t run_seed)
      : train_(train), options_(options), model_(model), run_seed_(run_seed), rng_(run_seed), accountant_(train.n()) {
    w_ = model.initial_parameters(rng_);
    first_moment_ = VectorXd::Zero(w_.size());
    if (options.optimizer == Optimizer::kAdam) second_moment_ = VectorXd::Zero(w_.size());
    order_.resize(train.n());
    for (Index i = 0; i < train.n(); ++i) order_[i] = i;
  }

  /// One DP-SGD step with its accounting.
  void step(Index t) {
    const std::vector<Index> batch = sample_batch();
    const StepAccounting a = model_.step(w_, batch, run_seed_, t);
    for (std::size_t b = 0; b < batch.size(); ++b) {
      accountant_.trace(batch[b]) += a.trace(b);
      accountant_.spectral(batch[b]) += a.spectral(b);
      accountant_.sampled(batch[b]) += 1.0;
    }
    update(a.clipped_sum);
  }

  const VectorXd& parameters() const { return w_; }
  const RunAccountant& accountant() const { return accountant_; }

  nlohmann::json state() const {
    std::ostringstream generator;
    generator << rng_;
    return {{"parameters", to_list(w_)},
            {"first_moment", to_list(first_moment_)},
            {"second_moment", to_list(second_moment_)},
            {"adam_steps", adam_steps_},
            {"generator", generator.str()},
            {"order", order_},
            {"trace", to_list(accountant_.trace)},
            {"spectral", to_list(accountant_.spectral)},
            {"sampled", to_list(accountant_.sampled)}};
  }

  void restore(const nlohmann::json& state) {
    w_ = to_vector(state.at("parameters"));
    first_moment_ = to_vector(state.at("first_moment"));
    second_moment_ = to_vector(state.at("second_moment"));
    adam_steps_ = state.at("adam_steps").get<Index>();
    std::istringstream generator(state.at("generator").get<std::string>());
    generator >> rng_;
    order_ = state.at("order").get<std::vector<Index>>();
    accountant_.trace = to_vector(state.at("trace"));
    accountant_.spectral = to_vector(state.at("spectral"));
    accountant_.sampled = to_vector(state.at("sampled"));
  }

 private:
  std::vector<Index> sample_batch() {
    const Index n = train_.n();
    std::vector<Index> batch;
    if (options_.sampling == BatchSampling::kUniform) {
      // Partial Fisher-Yates: the first B entries of order_ become a uniform B-subset.
      for (Index j = 0; j < options_.batch_size; ++j) {
        std::uniform_int_distribution<Index> pick(j, n - 1);
        std::swap(order_[j], order_[pick(rng_)]);
      }
      batch.assign(order_.begin(), order_.begin() + options_.batch_size);
    } else {
      const double q = static_cast<double>(options_.batch_size) / n;
      std::uniform_real_distribution<double> uniform;
      for (Index i = 0; i < n; ++i)
        if (uniform(rng_) < q) batch.push_back(i);
    }
    return batch;
  }

  /// Releases the noisy sum and moves the parameters (post-processing of the release).
  void update(VectorXd gradient) {
    std::normal_distribution<double> noise(0.0, options_.noise_multiplier * options_.clip_norm);
    for (Index i = 0; i < gradient.size(); ++i) gradient(i) += noise(rng_);
    gradient = gradient / static_cast<double>(options_.batch_size) + options_.weight_decay * w_;
    if (options_.optimizer == Optimizer::kSgd) {
      first_moment_ = options_.momentum * first_moment_ + gradient;  // the velocity
      w_ -= options_.step_size * first_moment_;
      return;
    }
    ++adam_steps_;
    const double b1 = options_.adam_beta1, b2 = options_.adam_beta2;
    first_moment_ = b1 * first_moment_ + (1.0 - b1) * gradient;
    second_moment_ = b2 * second_moment_ + (1.0 - b2) * gradient.cwiseAbs2();
    const double c1 = 1.0 - std::pow(b1, adam_steps_), c2 = 1.0 - std::pow(b2, adam_steps_);
    w_.array() -= options_.step_size * (first_moment_.array() / c1) /
                  ((second_moment_.array() / c2).sqrt() + options_.adam_epsilon);
  }

  const Dataset& train_;
  const DpSgdOptions& options_;
  const DpSgdModel& model_;
  std::uint64_t run_seed_;
  std::mt19937_64 rng_;
  VectorXd w_, first_moment_, second_moment_;
  Index adam_steps_ = 0;
  std::vector<Index> order_;
  RunAccountant accountant_;
};

}  // namespace filkit::detail
