// Random starting weights that more than one layer draws.
#pragma once

#include "filkit/base/enum_names.hpp"
#include "filkit/base/types.hpp"

#include <cmath>
#include <random>

namespace filkit {

/// How a network (or the learned attack's MLP attacker) draws its starting weights. pytorch:
/// PyTorch's default, every weight and bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)); jax: jax stax's
/// defaults, as the thesis' code draws its networks and its attacker: weights glorot_normal (below),
/// biases N(0, kJaxDenseBiasStddev^2) for a dense layer and N(0, kJaxConvBiasStddev^2) for a
/// convolution.
enum class NetworkInitialisation { kPyTorch, kJax };
template <>
struct EnumNames<NetworkInitialisation> {
  static constexpr const char* what = "network initialisation";
  static constexpr std::pair<NetworkInitialisation, const char*> names[] = {
      {NetworkInitialisation::kPyTorch, "pytorch"}, {NetworkInitialisation::kJax, "jax"}};
};

/// stax's bias initialisers: normal(1e-2) of Dense, normal(1e-6) of Conv.
constexpr double kJaxDenseBiasStddev = 1e-2;
constexpr double kJaxConvBiasStddev = 1e-6;

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
