#include "filkit/privacy/step_privacy.hpp"

#include "filkit/base/checks.hpp"
#include "filkit/base/io.hpp"
#include "filkit/privacy/soft_clip.hpp"

#include <cmath>
#include <stdexcept>
#include <string>

namespace filkit {

double step_epsilon(double noise_multiplier, double delta) {
  return soft_clip_norm_bound() * 2.0 * std::sqrt(2.0 * std::log(1.25 / delta)) / noise_multiplier;
}

double rdp_noise_multiplier(double noise_multiplier) { return noise_multiplier / soft_clip_norm_bound(); }

const char* const kEffectiveNoiseMultiplierReason =
    "the smooth (GELU) clip bounds a clipped gradient's norm by 1.11524 C, not C, so the noise sigma C is "
    "sigma / 1.11524 per unit of sensitivity";

double subsampling_kappa(double sample_rate, double noise_multiplier, double delta) {
  require_in_interval("sample_rate", sample_rate, 0.0, End::kOpen, 1.0, End::kClosed);
  require_positive("noise_multiplier", noise_multiplier);
  require_in_interval("delta", delta, 0.0, End::kOpen, 1.0, End::kOpen);
  const double q = sample_rate;
  return q / (q + (1.0 - q) * std::exp(-step_epsilon(noise_multiplier, delta)));
}

}  // namespace filkit
