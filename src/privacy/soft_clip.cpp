#include "filkit/privacy/soft_clip.hpp"

#include <cmath>
#include <numbers>

namespace filkit {

namespace {
constexpr double kGeluCubic = 0.044715;
const double kGeluScale = std::sqrt(2.0 / std::numbers::pi);
}  // namespace

double gelu(double t) { return 0.5 * t * (1.0 + std::tanh(kGeluScale * (t + kGeluCubic * t * t * t))); }

double gelu_derivative(double t) {
  const double th = std::tanh(kGeluScale * (t + kGeluCubic * t * t * t));
  return 0.5 * (1.0 + th) + 0.5 * t * (1.0 - th * th) * kGeluScale * (1.0 + 3.0 * kGeluCubic * t * t);
}

double gelu_second_derivative(double t) {
  // With z = k (t + a t^3): GELU'' = (1 - tanh^2 z) (z' + t (z''/2 - tanh(z) z'^2)).
  const double th = std::tanh(kGeluScale * (t + kGeluCubic * t * t * t));
  const double dz = kGeluScale * (1.0 + 3.0 * kGeluCubic * t * t), d2z = 6.0 * kGeluScale * kGeluCubic * t;
  return (1.0 - th * th) * (dz + t * (0.5 * d2z - th * dz * dz));
}

double soft_clip_factor(double gradient_norm, double clip_norm) {
  return 1.0 / (gelu(gradient_norm / clip_norm - 1.0) + 1.0);
}

double soft_clip_norm_bound() {
  // t / (GELU(t - 1) + 1) is unimodal with its maximum near t = 1.549: golden-section search.
  static const double bound = [] {
    const auto ratio = [](double t) { return t / (gelu(t - 1.0) + 1.0); };
    const double golden = (std::sqrt(5.0) - 1.0) / 2.0;
    double lo = 1.0, hi = 2.5;
    while (hi - lo > 1e-12) {
      const double a = hi - golden * (hi - lo), b = lo + golden * (hi - lo);
      if (ratio(a) < ratio(b)) lo = a;
      else hi = b;
    }
    return ratio(0.5 * (lo + hi));
  }();
  return bound;
}

}  // namespace filkit
