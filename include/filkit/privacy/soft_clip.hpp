// The smooth clip of DP-SGD's per-example gradients (GELU's tanh form, as jax.nn.gelu) and the
// sensitivity it gives the Gaussian mechanism (docs/mathematics.md, section 7.2):
//   GELU(t) = t/2 (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))),
//   g~ = f(||g||) g,   f(u) = 1 / (GELU(u/C - 1) + 1),
// so ||g~|| <= soft_clip_norm_bound() * C = 1.11524 C (attained at ||g|| = 1.5489 C); the
// reconstruction paper rounds the constant to 1.115. The GLMs' clip (dpsgd/clipped_gradient.hpp) and
// the accounting (step_privacy.hpp) take it from here; the LibTorch plugin writes the same GELU on
// tensors.
#pragma once

namespace filkit {

/// JAX's GELU (tanh form) and its derivative.
double gelu(double t);
double gelu_derivative(double t);
/// GELU''(t) (the constant perturbation's objective differentiates the clip's Jacobian).
double gelu_second_derivative(double t);
/// The soft clip factor f(u) = 1 / (GELU(u/C - 1) + 1) of a gradient of norm u >= 0, C > 0.
double soft_clip_factor(double gradient_norm, double clip_norm);
/// max_u u f(u) / C = 1.1152382... : the clipped gradient's norm is at most this times C.
double soft_clip_norm_bound();

}  // namespace filkit
