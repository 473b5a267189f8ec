// The bias and the Jacobian of an attacker's mean, estimated from Monte-Carlo trials of a Gaussian
// mechanism, and the biased forms of the reconstruction bounds (docs/mathematics.md, section 6.7;
// Guo, Karrer, Chaudhuri and van der Maaten, ICML 2022, Theorems 1 and 2).
//
// The release is w' = m(z) + sigma eps, eps ~ N(0, I_p), m with Jacobian J_m = dm/dz (p x d); the
// attacker outputs z_hat(w') with mean mu(z) = E z_hat and error e = z_hat - z.
// - Bias b = mu(z) - z = E e. ||b||^2 is estimated without bias from T trials by the U-statistic
//     (||sum_t e_t||^2 - sum_t ||e_t||^2) / (T (T - 1)).
// - Jacobian of the mean, by Stein's lemma (the score of w' about z is J_m^T eps / sigma):
//     J_mu = E[z_hat eps^T] J_m / sigma,  so  tr J_mu = E[s],  s = eps^T J_m e / sigma
//   (e may replace z_hat: eps has mean zero). A control variate c of known mean lowers the variance
//   of the mean of s (control_variate_mean).
// - Theorem 2 needs tr(J_mu I^{-1} J_mu^T) with I = J_m^T J_m / sigma^2. By Cauchy-Schwarz,
//   (tr J_mu)^2 = tr(J_mu I^{-1/2} I^{1/2})^2 <= tr(J_mu I^{-1} J_mu^T) tr I, so every attacker has
//     MSE >= (tr J_mu / d)^2 d / tr I + ||b||^2 / d = (tr J_mu / d)^2 / dfil^2 + ||b||^2 / d,
//   which is the unbiased dFIL bound 1 / dfil^2 when J_mu = I and b = 0; tr I <= d eta^2 gives the
//   same with 1 / eta^2. Theorem 1 (RDP) has the variance term sum_k gamma_k^2 diam_k^2 / (4 d (e^eps
//   - 1)) with gamma_k = inf over the data space of |d mu_k / d z_k|, which trials at one z cannot
//   give; filkit puts the example's own mean diagonal tr J_mu / d in place of every gamma_k (an
//   estimate of the bound at z, not a certified one: docs/mathematics.md, section 6.7).
#pragma once

#include "filkit/base/types.hpp"

namespace filkit {

/// A Monte-Carlo estimate and its standard error.
struct McEstimate {
  double value = 0.0;
  double standard_error = 0.0;
};

/// Sums over trials of a quantity y and a control variate c (whose mean is known), for
/// control_variate_mean. Added trial by trial or block by block (the sums commute).
struct ControlVariateSums {
  double count = 0, y = 0, y2 = 0, c = 0, c2 = 0, yc = 0;
  void add(double y_value, double c_value) {
    count += 1;
    y += y_value;
    y2 += y_value * y_value;
    c += c_value;
    c2 += c_value * c_value;
    yc += y_value * c_value;
  }
  void add(const ControlVariateSums& other) {
    count += other.count;
    y += other.y;
    y2 += other.y2;
    c += other.c;
    c2 += other.c2;
    yc += other.yc;
  }
};

/// E[y] by the regression estimator y_bar - beta (c_bar - control_mean), beta = cov(y, c) / var(c)
/// from the same trials (0 when c does not vary), with the standard error
/// sqrt((var y - cov(y, c)^2 / var c) / T). The estimate's bias from estimating beta is O(1/T)
/// (Glasserman 2003, section 4.1). NaN for fewer than 2 trials.
McEstimate control_variate_mean(const ControlVariateSums& sums, double control_mean);

/// ||E e||^2 from T trials: sum_e = sum_t e_t, sum_squared_norms = sum_t ||e_t||^2; the U-statistic
/// above (unbiased; negative when the noise exceeds the bias). Its standard error is bounded above
/// by sqrt(4 max(0, value) v / T + 2 v^2 / T^2), v = tr Cov(e) estimated from the same sums (the
/// delta method with Cov(e) <= v I and tr Cov(e)^2 <= v^2). NaN for fewer than 2 trials.
McEstimate squared_norm_of_mean(const VectorXd& sum_e, double sum_squared_norms, double count);

/// The biased form of a bound that an unbiased attacker obeys as MSE >= unbiased_bound, for an
/// attacker with mean diagonal t = tr J_mu / d and per-coordinate squared bias b = ||b||^2 / d:
///   t^2 unbiased_bound + max(0, b)
/// (the header comment: Theorem 2's trace form, or Theorem 1 with every gamma_k = t). Its standard
/// error is bounded by 2 |t| unbiased_bound se(t) + se(b) (the sum of the two terms' errors; the
/// unbiased bound is taken as exact).
McEstimate biased_mse_bound(double unbiased_bound, const McEstimate& jacobian_trace_per_dim,
                            const McEstimate& squared_bias_per_dim);

}  // namespace filkit
