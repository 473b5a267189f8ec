// Pre-training and the sgd method's training without privacy (pretraining.hpp).
#include "public_data/pretraining.hpp"

#include "filkit/base/errors.hpp"
#include "filkit/base/io.hpp"
#include "filkit/public_data/public_private_split.hpp"

#include "base/seeding.hpp"
#include "dpsgd/optimizer_steps.hpp"

#include <numeric>
#include <random>
#include <stdexcept>

namespace filkit {

DpSgdOptions pretraining_optimizer(const DpSgdOptions& private_phase) {
  DpSgdOptions adam;
  adam.optimizer = Optimizer::kAdam;
  adam.adam_bias_correction_offset = private_phase.adam_bias_correction_offset;
  adam.precision = private_phase.precision;
  return adam;
}

/// Non-private minibatch training on the mean cross-entropy (plus weight decay times w), from w, by
/// `optimizer` (its optimizer, momentum, Adam settings; o's step size). `fixed` (empty, or one flag
/// per coordinate): coordinates that keep their value (zero gradient).
VectorXd train_without_privacy(const TrainedModel& model, const Dataset& data, VectorXd w,
                               const PlainTrainingOptions& o, DpSgdOptions optimizer, std::uint64_t seed,
                               const std::vector<bool>& fixed) {
  if (o.steps == 0) return w;
  const Index n = data.n(), B = std::min(o.batch_size, n);
  std::mt19937_64 rng(seed);
  std::vector<Index> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), Index{0});
  if (optimizer.precision == Precision::kFloat32) detail::round_to_float(w);
  VectorXd m = VectorXd::Zero(w.size()), v = VectorXd::Zero(w.size());
  Index adam_steps = 0;
  optimizer.step_size = o.step_size;
  for (Index t = 1; t <= o.steps; ++t) {
    std::vector<Index> batch;
    if (o.sampling == BatchSampling::kShuffle) {
      batch = detail::epoch_batch(order, B, t, rng);
    } else {
      detail::shuffle_batch_to_front(order, B, rng);
      batch.assign(order.begin(), order.begin() + B);
    }
    VectorXd g = (o.clip_norm > 0.0 ? model.mean_clipped_gradient(data, batch, w, o.clip_norm, fixed)
                                    : model.mean_gradient(data, batch, w)) +
                 o.weight_decay * w;
    for (Index i = 0; i < static_cast<Index>(fixed.size()); ++i)
      if (fixed[static_cast<std::size_t>(i)]) g(i) = 0.0;  // Adam then leaves them where they are
    detail::optimizer_step(optimizer, w, g, m, v, adam_steps);
  }
  if (!w.allFinite())
    throw NumericalError("training without privacy diverged: lower its step size (now " + format_double(o.step_size) +
                         ")");
  return w;
}

RunStart pretrained_start(const TrainedModel& model, const Dataset& public_part,
                          const PublicDataTrainingOptions& options, const std::vector<bool>& fixed,
                          std::uint64_t run_seed) {
  std::mt19937_64 rng(run_seed);
  VectorXd initial = model.initial_parameters(rng);
  for (Index i = 0; i < static_cast<Index>(fixed.size()); ++i)
    if (fixed[static_cast<std::size_t>(i)]) initial(i) = 0.0;
  RunStart start;
  start.parameters = train_without_privacy(model, public_part, std::move(initial), options.pretrain,
                                           pretraining_optimizer(options.private_phase),
                                           splitmix64(run_seed ^ 0xbb67ae8584caa73bULL), fixed);
  start.frozen = smallest_magnitude_mask(start.parameters, options.freeze_fraction, fixed);
  return start;
}

}  // namespace filkit
