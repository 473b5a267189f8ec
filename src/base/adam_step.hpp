// One bias-corrected Adam step (Kingma and Ba 2015), written once for every trainer of the library:
// DP-SGD's (dpsgd/trainer.hpp), non-private pre-training (public_data/public_data_training.cpp) and the
// learned reconstruction attack's MLP (leakage/learned_reconstruction.cpp). fim's constant gradient
// model has its own fused pass (public_data/constant_gradient_model.cpp): jax's rounding of the thesis'
// optimiser, with the output layer's gradient made where the update uses it.
#pragma once

#include "filkit/base/types.hpp"

#include <cmath>

namespace filkit::detail {

/// The update of w (any Eigen dense vector or matrix) with gradient g at step t >= 1 (1-based; the
/// count of the bias corrections), m and v its moment estimates.
template <class Parameters, class Gradient>
void adam_update(Parameters& w, const Gradient& g, Parameters& m, Parameters& v, Index t, double step_size,
                 double beta1, double beta2, double epsilon) {
  m = beta1 * m + (1.0 - beta1) * g;
  v = beta2 * v + (1.0 - beta2) * g.cwiseAbs2();
  const double c1 = 1.0 - std::pow(beta1, static_cast<double>(t)), c2 = 1.0 - std::pow(beta2, static_cast<double>(t));
  w.array() -= step_size * (m.array() / c1) / ((v.array() / c2).sqrt() + epsilon);
}

}  // namespace filkit::detail
