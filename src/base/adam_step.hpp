// One bias-corrected Adam step (Kingma and Ba 2015), written once for every trainer of the library:
// DP-SGD's (dpsgd/trainer.hpp), non-private pre-training (public_data/public_data_training.cpp) and the
// learned reconstruction attack's MLP (leakage/learned_reconstruction.cpp). fim's constant gradient
// model has its own fused pass (public_data/constant_gradient_model.cpp): jax's rounding of the thesis'
// optimiser, with the output layer's gradient made where the update uses it.
#pragma once

#include "filkit/base/types.hpp"

#include <cmath>

namespace filkit::detail {

/// The update of w (any Eigen dense vector or matrix of double or float) with gradient g at step
/// t >= 1 (1-based; the count of the bias corrections), m and v its moment estimates. In float the
/// constants are rounded to float and every operation is float's, as jax's adam in float32.
template <class Parameters, class Gradient>
void adam_update(Parameters& w, const Gradient& g, Parameters& m, Parameters& v, Index t, double step_size,
                 double beta1, double beta2, double epsilon) {
  using Real = typename Parameters::Scalar;
  const Real b1 = static_cast<Real>(beta1), b2 = static_cast<Real>(beta2);
  m = b1 * m + (Real(1) - b1) * g;
  v = b2 * v + (Real(1) - b2) * g.cwiseAbs2();
  const Real c1 = Real(1) - std::pow(b1, static_cast<Real>(t)), c2 = Real(1) - std::pow(b2, static_cast<Real>(t));
  w.array() -= static_cast<Real>(step_size) * (m.array() / c1) / ((v.array() / c2).sqrt() + static_cast<Real>(epsilon));
}

}  // namespace filkit::detail
