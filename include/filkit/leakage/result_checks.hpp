// Checks after a fit and after FIL that what must be finite is: a NaN or Inf in a result is an
// error naming the stage and the likely cause, never a number in the outputs.
#pragma once

#include "filkit/base/finite.hpp"
#include "filkit/leakage/fil.hpp"
#include "filkit/models/glm.hpp"

namespace filkit {

/// The fitted weights (w*), after the stage "fit".
inline void require_finite_model(const Model& model) {
  require_finite(model.weights, "fit", "a weight of the fitted model",
                 "the data may be far from unit scale (try " + option_name("scale") + " global-max) or " +
                     option_name("l2") + " too small for them");
}

/// Per-example eta and dFIL, after the stage `stage` (e.g. "FIL").
inline void require_finite_fil(const PerExampleFil& fil, const std::string& stage) {
  const Message cause = option_name("sigma") +
                        " may be too small for a double, or the model's Hessian nearly singular (raise " +
                        option_name("l2") + ")";
  require_finite(fil.eta, stage, "eta", cause);
  require_finite(fil.dfil, stage, "dFIL", cause);
}

}  // namespace filkit
