#include "filkit/leakage/biased_attacker.hpp"

#include <algorithm>
#include <cmath>

namespace filkit {

McEstimate control_variate_mean(const ControlVariateSums& sums, double control_mean) {
  const double T = sums.count;
  if (T < 2) return {kNaN, kNaN};
  const double y_bar = sums.y / T, c_bar = sums.c / T;
  // Sample (co)variances with the T - 1 divisor.
  const double var_y = std::max(0.0, (sums.y2 - T * y_bar * y_bar) / (T - 1));
  const double var_c = std::max(0.0, (sums.c2 - T * c_bar * c_bar) / (T - 1));
  const double cov = (sums.yc - T * y_bar * c_bar) / (T - 1);
  const double beta = var_c > 0 ? cov / var_c : 0.0;
  const double residual = std::max(0.0, var_y - beta * cov);
  return {y_bar - beta * (c_bar - control_mean), std::sqrt(residual / T)};
}

McEstimate squared_norm_of_mean(const VectorXd& sum_e, double sum_squared_norms, double count) {
  const double T = count;
  if (T < 2) return {kNaN, kNaN};
  const double sum_norm2 = sum_e.squaredNorm();
  const double value = (sum_norm2 - sum_squared_norms) / (T * (T - 1));
  // tr Cov(e) = (sum ||e_t||^2 - ||sum e_t||^2 / T) / (T - 1)
  const double trace_cov = std::max(0.0, (sum_squared_norms - sum_norm2 / T) / (T - 1));
  const double variance = 4.0 * std::max(0.0, value) * trace_cov / T + 2.0 * trace_cov * trace_cov / (T * T);
  return {value, std::sqrt(variance)};
}

McEstimate biased_mse_bound(double unbiased_bound, const McEstimate& t, const McEstimate& b) {
  const double variance_term = t.value * t.value * unbiased_bound;
  // 0 * inf: an attacker whose mean ignores z pays only its bias, whatever the bound.
  const double value = (t.value == 0.0 ? 0.0 : variance_term) + std::max(0.0, b.value);
  const double error =
      (t.value == 0.0 ? 0.0 : 2.0 * std::abs(t.value) * unbiased_bound * t.standard_error) + b.standard_error;
  return {value, error};
}

}  // namespace filkit
