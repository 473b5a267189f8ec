// The memory check of private training with public data (training_memory.hpp).
#include "public_data/training_memory.hpp"

#include "filkit/base/options.hpp"
#include "filkit/base/resources.hpp"
#include "filkit/networks/gradient_model.hpp"
#include "filkit/networks/networks.hpp"

#include <algorithm>
#include <cmath>

namespace filkit {

bool check_training_memory(const TrainedModel& trained, const PublicDataTrainingOptions& options,
                           const DpSgdOptions& phase, const Dataset& private_part, Index public_rows, Index trainable) {
  const Index private_rows = private_part.n();
  const bool fim =
      std::find(options.methods.begin(), options.methods.end(), PrivateTrainingMethod::kFim) != options.methods.end();
  const Index released = trainable - std::llround(options.freeze_fraction * static_cast<double>(trainable));
  const auto u = [](Index value) { return static_cast<std::uint64_t>(value); };
  std::uint64_t bytes = 0;
  Message what, shrink;
  if (phase.network) {
    const NetworkMemoryEstimate network =
        estimate_network_memory(trained.plan(), network_rows_in_flight(*phase.network));
    const Index rows =
        std::min(trained.rows_at_once(), std::max({std::min(options.pretrain.batch_size, public_rows),
                                                   std::min(phase.batch_size, private_rows), fim ? public_rows : 0}));
    std::uint64_t gradients = saturating_product(u(rows) * sizeof(double), u(trained.parameter_count()));
    if (fim)
      gradients = saturating_sum(gradients, saturating_product(u(phase.batch_size) * sizeof(double), u(released)));
    bytes = saturating_sum(network.total(), gradients);
    what = "training " + network.describe() + " with " + readable_bytes(gradients) + " of per-example gradients";
    shrink = option_name("chunk") + ", " + option_name("batch_size") + ", " + option_name("pretrain_batch_size");
  }
  bool keep_records = false;
  if (fim) {
    const auto estimate = [&](const NetworkPlan* kept_records) {
      return estimate_gradient_model_memory(options.gradient_model, released, private_part.d(), private_part.image,
                                            public_rows, phase.network.has_value(), kept_records);
    };
    GradientModelMemoryEstimate model = estimate(nullptr);
    if (phase.network) {
      const GradientModelMemoryEstimate kept = estimate(&trained.plan());
      keep_records = kept.kept_records > 0 && saturating_sum(bytes, kept.total()) <= phase.max_memory.bytes;
      if (keep_records) model = kept;
    }
    bytes = saturating_sum(bytes, model.total());
    what += Message(phase.network ? " and " : "") + model.describe();
    shrink += Message(phase.network ? ", " : "") + "a narrower " + option_name("gradient_hidden") + ", a smaller " +
              option_name("gradient_batch_size") + " or fewer " + option_name("gradient_probes");
  }
  if (bytes > 0) check_memory(bytes, phase.max_memory, what + " (" + shrink + ")");
  return keep_records;
}

}  // namespace filkit
