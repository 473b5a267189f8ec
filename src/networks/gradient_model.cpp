// The schedule and the rules of fim's gradient model's options (gradient_model.hpp): the public
// epochs and the Fisher term's weight before each private step, and validate().
#include "filkit/networks/gradient_model.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"

#include <algorithm>

namespace filkit {

Index GradientModelOptions::steps_before(Index t) const {
  const Index decayed = steps - (t - 1) * decay;
  return std::max(std::min(min_steps, steps), decayed);
}

double GradientModelOptions::lambda_before(Index t) const {
  return std::max(lambda_min, lambda - lambda_decay * static_cast<double>(t - 1));
}

void GradientModelOptions::validate() const {
  require_non_negative("lambda", lambda);
  require_non_negative("lambda_decay", lambda_decay);
  if (!(lambda_min >= 0.0 && lambda_min <= lambda))
    option_error("lambda_min", format_double(lambda_min),
                 "must lie in [0, " + option_name("lambda") + " = " + format_double(lambda) + "]");
  if (lambda_decay > 0.0 && kind == GradientModelKind::kConditional)
    option_error(
        "lambda_decay", format_double(lambda_decay),
        "only the constant gradient models decay lambda (" + option_name("gradient_model") + " = conditional)");
  if (kind != GradientModelKind::kConditional && objective != GradientObjective::kPerturbation)
    option_error("objective", "gradient",
                 "the " + to_string(kind) + " gradient model is a perturbation added to the gradient; use " +
                     option_name("gradient_model") + " = conditional for the gradient objective");
  if (hidden.empty()) option_error("gradient_hidden", "the gradient model needs at least one hidden layer");
  for (Index width : hidden) require_positive("gradient_hidden", width);
  if (kind == GradientModelKind::kConstant && hidden.size() < 2)
    option_error("gradient_hidden",
                 "the constant gradient model needs at least two widths (its last normalisation "
                 "stands before the last hidden layer, whose input is that width)");
  require_non_negative("gradient_steps", steps);
  require_non_negative("gradient_decay", decay);
  require_non_negative("gradient_min_steps", min_steps);
  require_positive("gradient_batch_size", batch_size);
  require_positive("gradient_step_size", step_size);
  require_non_negative("gradient_weight_decay", weight_decay);
  require_positive("gradient_probes", probes);
  if (state_precision == Precision::kFloat32 && kind == GradientModelKind::kConditional)
    option_error("gradient_state_precision", "float32",
                 "applies to the constant gradient models (" + option_name("gradient_model") +
                     " = constant or vector); the conditional model trains in float64");
  if (probe_draws == ProbeDraws::kStep && (kind == GradientModelKind::kConditional || trace != GradientTrace::kProbes))
    option_error("gradient_probe_draws", "step",
                 "draws the probes of the constant models' probe estimate (" + option_name("gradient_model") +
                     " = constant or vector, " + option_name("gradient_trace") + " = probes)");
}

}  // namespace filkit
