// Arithmetic in log space, shared by the accountants' mathematics (sampled_gaussian_rdp.cpp,
// privacy_loss_distribution.cpp).
#pragma once

#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

namespace filkit::detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();

/// log(exp(a) + exp(b)).
inline double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -kInf || a == kInf) return a;
  return a + std::log1p(std::exp(b - a));
}

/// log(exp(a) - exp(b)) for a >= b; the two branches keep full precision for a - b near 0 and
/// large (Maechler 2012, "Accurately computing log(1 - exp(-|a|))").
inline double log_sub(double a, double b) {
  if (b == -kInf) return a;
  const double gap = a - b;
  return a + (gap < std::numbers::ln2 ? std::log(-std::expm1(-gap)) : std::log1p(-std::exp(-gap)));
}

}  // namespace filkit::detail
