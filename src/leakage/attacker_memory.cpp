// The memory estimate of the learned attack's attacker (learned_reconstruction.hpp), in a file of
// its own so that the attack's code stays as it is.
#include "filkit/base/resources.hpp"
#include "filkit/leakage/learned_reconstruction.hpp"

#include <omp.h>

#include <algorithm>

namespace filkit {

std::uint64_t AttackerMemoryEstimate::total() const {
  return saturating_sum(saturating_sum(parameters, activations), inputs);
}

std::string AttackerMemoryEstimate::describe() const {
  return "the attacker of " + std::to_string(parameter_count) + " parameters (" + readable_bytes(parameters) +
         " of parameters and optimiser state, " + readable_bytes(activations) + " of activations, " +
         readable_bytes(inputs) + " of the shadow models' parameters)";
}

AttackerMemoryEstimate estimate_attacker_memory(const LearnedReconstructionOptions& options, Index parameter_count,
                                                Index num_classes, Index features) {
  const auto u = [](Index value) { return static_cast<std::uint64_t>(value); };
  const auto doubles = [](std::uint64_t values, std::uint64_t copies) {
    return saturating_product(values, copies * sizeof(double));
  };
  const std::uint64_t models = saturating_sum(u(options.train_shadow_models), u(options.target_shadow_models));
  AttackerMemoryEstimate estimate;
  // The shadow models' parameters as trained and standardised (models x p each).
  estimate.inputs = doubles(saturating_product(models, u(parameter_count)), 2);
  std::uint64_t count = 0;
  if (options.attacker_hidden.empty()) {  // one (p + 1) x features map a label; X^T X and its LDLT
    const std::uint64_t rows = saturating_sum(u(parameter_count), 1);
    count = saturating_product(saturating_product(u(num_classes), rows), u(features));
    estimate.parameters = doubles(count, 1);
    estimate.activations = doubles(saturating_product(rows, rows), 2);
  } else {
    std::uint64_t in = saturating_sum(u(parameter_count), u(num_classes)), widths = in;
    for (Index width : options.attacker_hidden) {
      count = saturating_sum(count, saturating_product(saturating_sum(in, 1), u(width)));
      in = u(width);
      widths = saturating_sum(widths, in);
    }
    count = saturating_sum(count, saturating_product(saturating_sum(in, 1), u(features)));
    widths = saturating_sum(widths, u(features));
    estimate.parameters = doubles(count, 4);  // weights, gradient, Adam's two moments
    estimate.activations = doubles(saturating_product(u(options.attacker_batch_size), widths), 2);
    // mlp_inputs: the training models' standardised parameters with their one-hot labels.
    estimate.inputs = saturating_sum(
        estimate.inputs,
        doubles(saturating_product(u(options.train_shadow_models), saturating_sum(u(parameter_count), u(num_classes))),
                1));
  }
  estimate.parameter_count = static_cast<Index>(std::min<std::uint64_t>(count, std::uint64_t{1} << 62));
  return estimate;
}

void check_attacker_memory(const LearnedReconstructionOptions& options, Index parameter_count, Index num_classes,
                           Index features) {
  const AttackerMemoryEstimate estimate = estimate_attacker_memory(options, parameter_count, num_classes, features);
  check_memory(estimate.total(), options.max_memory,
               estimate.describe() + " (narrower " + option_name("attacker_hidden") + ", a smaller " +
                   option_name("attacker_batch_size") + " or fewer shadow models: " +
                   option_name("train_shadow_models") + ", " + option_name("target_shadow_models") + ")");
}

std::uint64_t LearnedAttackMemoryEstimate::shadow_training() const {
  // While the models train, their parameters so far (the attacker's inputs, half of which are
  // the standardised copy made after training) are kept beside the ones training.
  return saturating_sum(saturating_sum(saturating_product(static_cast<std::uint64_t>(threads), shadow_model), kept),
                        attacker.inputs / 2);
}

std::uint64_t LearnedAttackMemoryEstimate::total() const { return std::max(shadow_training(), attacker.total()); }

std::string LearnedAttackMemoryEstimate::describe() const {
  return "the learned attack (" + std::to_string(threads) + " shadow models trained at once, " +
         readable_bytes(shadow_model) + " each" +
         (kept > 0 ? ", and " + readable_bytes(kept) + " of kept shadow models" : "") + "; then " +
         attacker.describe() + ")";
}

void check_learned_attack_memory(const LearnedReconstructionOptions& options, Index parameter_count, Index num_classes,
                                 Index features, std::uint64_t shadow_model, std::uint64_t kept) {
  LearnedAttackMemoryEstimate estimate;
  estimate.kept = kept;
  estimate.attacker = estimate_attacker_memory(options, parameter_count, num_classes, features);
  estimate.shadow_model = shadow_model;
  estimate.threads = std::max<Index>(
      1, std::min<Index>(omp_get_max_threads(), options.train_shadow_models + options.target_shadow_models));
  check_memory(estimate.total(), options.max_memory,
               estimate.describe() + " (fewer shadow models: " + option_name("train_shadow_models") + ", " +
                   option_name("target_shadow_models") + "; fewer at once: " + option_name("threads") +
                   "; a narrower " + option_name("attacker_hidden") + " or smaller " +
                   option_name("attacker_batch_size") + ")");
}

}  // namespace filkit
