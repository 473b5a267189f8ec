// The privacy of one DP-SGD step on soft-clipped gradients (docs/mathematics.md, section 7):
// its (eps0, delta)-DP, which sets the subsampling factor kappa of the per-step FIM (reconstruction
// paper, Theorem 4), and the noise multiplier the RDP accountant sees.
#pragma once

namespace filkit {

/// kappa of the per-step FIM for sample rate q in (0, 1], noise multiplier sigma > 0 and
/// failure probability delta in (0, 1): q / (q + (1 - q) e^{-eps0}), eps0 = step_epsilon(...)
/// (the paper's argument order, kept). Throws std::invalid_argument for arguments outside those ranges.
double subsampling_kappa(double sample_rate, double noise_multiplier, double delta);
/// The noise multiplier the RDP accountant sees: sigma / soft_clip_norm_bound().
double rdp_noise_multiplier(double noise_multiplier);
/// Why every accountant sees rdp_noise_multiplier(sigma) rather than sigma: a sentence for summaries.
extern const char* const kEffectiveNoiseMultiplierReason;
/// eps0 = soft_clip_norm_bound() * 2 sqrt(2 ln(1.25/delta)) / sigma: one step of the Gaussian
/// mechanism on soft-clipped gradients is (eps0, delta)-DP (Dwork and Roth 2014, Theorem A.1).
double step_epsilon(double noise_multiplier, double delta);

}  // namespace filkit
