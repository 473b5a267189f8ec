// What the DP-SGD loop (dpsgd.cpp) needs from a model: its clipped per-example gradients with
// their accounting, and its accuracy. GLMs answer in closed form (clipped_gradient.hpp), networks
// through LibTorch (networks.hpp); the loop, the sampler, the noise, the optimiser, the
// accountant and the snapshots are shared, so the two give identical numbers where they meet
// (the softmax network against the softmax GLM).
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/dpsgd/training.hpp"

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace filkit {

/// The clipped gradients of one batch and their accounting.
struct StepAccounting {
  VectorXd clipped_sum;  ///< sum over the batch of g~ (parameter order)
  VectorXd trace;        ///< Tr(G^T G) of each batch member
  VectorXd spectral;     ///< ||G||_2^2 of each batch member (NaN when not requested)
};

class DpSgdModel {
 public:
  virtual ~DpSgdModel() = default;
  virtual Index parameter_count() const = 0;
  /// w_0, drawn from the run's generator (before its first batch).
  virtual VectorXd initial_parameters(std::mt19937_64& rng) const = 0;
  /// At parameters w, the batch's clipped gradients and accounting; the estimators' probes are
  /// seeded from (run_seed, step).
  virtual StepAccounting step(const VectorXd& w, const std::vector<Index>& batch, std::uint64_t run_seed,
                              Index step) const = 0;
  virtual double accuracy(const VectorXd& w, const Dataset& data) const = 0;
  /// A GLM Model of the parameters (closed-form GLMs only).
  virtual bool is_glm() const { return false; }
  virtual Model glm(const VectorXd& w) const;
  /// One line a layer (networks), for the summary.
  virtual std::string describe() const { return {}; }
};

/// The model `options` asks for on `train` with K classes: the GLM of options.kind, or
/// options.network through LibTorch.
std::unique_ptr<DpSgdModel> make_dpsgd_model(const Dataset& train, const DpSgdOptions& options, Index num_classes);

}  // namespace filkit
