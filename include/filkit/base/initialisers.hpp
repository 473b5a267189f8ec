// Random starting weights that more than one layer draws.
#pragma once

#include "filkit/base/types.hpp"

#include <cmath>
#include <random>

namespace filkit {

/// jax's glorot_normal (jax.nn.initializers; the weights of stax's Dense and Conv layers) for a
/// weight with fan_in inputs and fan_out outputs: a normal truncated to +-2 standard deviations,
/// scaled so that the variance is 2 / (fan_in + fan_out) (0.87962566... is the standard deviation
/// of a standard normal truncated there).
inline double glorot_normal(std::mt19937_64& rng, Index fan_in, Index fan_out) {
  const double stddev = std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)) / 0.87962566103423978;
  std::normal_distribution<double> unit;
  for (;;) {
    const double z = unit(rng);
    if (std::abs(z) <= 2.0) return stddev * z;
  }
}

}  // namespace filkit
