// The GLM reconstruction attack of Balle, Cherubin and Hayes ("Reconstructing training data with
// informed adversaries", IEEE S&P 2022, section IV) on an output-perturbed binary GLM with an
// intercept, as used by Guo, Karrer, Chaudhuri and van der Maaten (ICML 2022, section 7.1) to
// test their reconstruction bounds (docs/mathematics.md, section 6.2).
//
// The adversary knows lambda, every training example but the target i, and the target's label
// (public), and sees w' = w* + N(0, sigma^2 I). At the exact optimum
//   0 = grad F(w*) = sum_j l'(w*.x~_j, y_j) x~_j + n lambda w*,
// so B_i = -(sum_{j != i} grad_w l(w'; x_j, y_j) + n lambda w') equals l'_i x~_i when sigma = 0,
// and because the intercept coordinate of x~_i is 1:
//   x_hat_i = B_i[1:] / B_i[0].
// B_i = grad l_i(w') - grad F(w'): one full gradient per noise draw serves every target, so a
// draw costs O(n d). With g = grad F(w') and r_i = l'(w'.x~_i, y_i) the error has the closed form
//   x_hat_i - x_i = (g_0 x_i - g_{1:}) / (r_i - g_0),
// which is what is evaluated (no cancellation between x_hat_i and x_i).
//
// Linearised prediction (delta method): for small sigma, g = H b + O(sigma^2), so
//   E||x_hat_i - x_i||^2 / d ~ sigma^2 ||[x_i, -I] H||_F^2 / (d r_i^2)    (r_i at w*),
// the variance of an (asymptotically) unbiased estimator, which Cramer-Rao bounds below by the
// dFIL bound 1 / eta_bar_i^2. It fails when r_i is comparable to the noise in g_0 (examples fitted
// to near certainty): there the attack's divisor is dominated by noise and it is strongly biased.
//
// Bias and Jacobian of the attack's mean (leakage/biased_attacker.hpp; docs/mathematics.md,
// section 6.7), from the same trials: the bias from the mean error over the trials, tr J_mu by
// Stein's lemma as the mean of s = eps^T J_i e / sigma with J_i = -H^{-1} B_i, eps = (w' - w*) / sigma,
//   eps^T J_i e = -nu^T B_i e = -(r_i nu_{1:}.e + c_i (x~_i.nu)(w_{1:}.e)),   nu = H^{-1} eps,
// (B_i = c_i x~_i w_{1:}^T + r_i E at w*, docs/mathematics.md section 2.3), whose control variate is
// the same term of the linearised error e_lin = sigma [x_i, -I] H eps / r_i, of mean exactly d.
// Every term is a few inner products of shared per-trial vectors and x_i: one more GEMM of the
// attacked rows with the trials' nu, and one for the sum of the errors.
#pragma once

#include "filkit/data/dataset.hpp"
#include "filkit/models/glm.hpp"

#include <cstdint>
#include <functional>
#include <vector>

namespace filkit {

/// The attack on one released model: reconstructions of `rows` (empty = all), one a row.
struct GlmReconstruction {
  std::vector<Index> rows;
  RowMatrix x_hat;   ///< |rows| x d: B_i[1:] / B_i[0]
  VectorXd divisor;  ///< B_i[0] = r_i - g_0; |divisor| ~ 0 makes x_hat meaningless
};

/// Runs the GLM attack on `released` (binary logistic or least squares with an intercept; l2
/// and n_train as fitted) against `train`, the adversary's knowledge of the other examples.
/// Throws std::invalid_argument for a model without intercept, softmax, a shape mismatch or a
/// row index out of range.
GlmReconstruction glm_attack(const Model& released, const Dataset& train, const std::vector<Index>& rows = {});

/// Settings of the Monte-Carlo evaluation of the attack over independent noise draws.
struct GlmAttackOptions {
  /// Standard deviation of the output perturbation, finite and >= 0 (0 = the exact model).
  double sigma = 1e-5;
  /// Noise draws (trials), >= 1. The paper uses 10000.
  Index trials = 10000;
  /// Base seed; trial t releases perturb_output(model, sigma, trial_seed(seed, t)).
  std::uint64_t seed = 0;
  /// Examples attacked (indices into the training set); empty = all.
  std::vector<Index> rows;
  /// Examples whose mean reconstruction over the valid trials is kept (a subset of `rows`).
  std::vector<Index> keep_reconstructions;
  /// A trial of example i is excluded (guarded) when |B_i[0]| < divisor_guard or its squared
  /// error is not finite. Range [0, 1e-3]; default 1e-300 (only true underflow).
  double divisor_guard = 1e-300;
  void validate() const;
};

/// Per-example outcome of the attack, in the order of GlmAttackOptions::rows.
struct GlmAttackResult {
  std::vector<Index> rows;
  VectorXd mean_mse;            ///< mean over valid trials of ||x_hat - x||^2 / d (NaN: none valid)
  VectorXd mse_standard_error;  ///< its standard error (the trials' standard deviation / sqrt(valid))
  /// The attack's squared bias ||E x_hat - x||^2 / d and the mean diagonal of the Jacobian of its
  /// mean, tr J_mu / d (1 for an unbiased attacker), with their standard errors (header comment).
  /// NaN for an example with a guarded trial, or at sigma = 0.
  VectorXd squared_bias, squared_bias_standard_error;
  VectorXd jacobian_trace, jacobian_trace_standard_error;
  Eigen::VectorXi guarded;         ///< trials excluded per example
  VectorXd linearised_mse;         ///< the delta-method prediction (header comment)
  Index total_guarded = 0;         ///< sum of `guarded`
  Index examples_all_guarded = 0;  ///< examples with no valid trial
  Index trials = 0;
  std::vector<Index> reconstruction_rows;  ///< = options.keep_reconstructions
  RowMatrix reconstructions;               ///< mean x_hat over valid trials, one a kept row
  RowMatrix originals;                     ///< the kept examples' features x_i, one a kept row
};

/// The seed of trial t: a SplitMix64 hash of (seed, t), so trials are independent of how they
/// are scheduled and any one can be replayed.
std::uint64_t trial_seed(std::uint64_t seed, Index trial);

/// Reports (trials done, trials in total) from the calling thread; may be empty.
using TrialProgress = std::function<void(Index, Index)>;

/// Evaluates the attack on `options.trials` releases of `model` (the exact fit; it should be
/// fitted to a tight gradient tolerance, or the attack is biased by the optimisation error).
/// Draws are processed in blocks of GEMMs, blocks in parallel with OpenMP and summed in block
/// order; results are bitwise identical for any thread count. Cost O(trials n d + n d^2); memory
/// |rows| x d doubles for the sums of the errors, besides the data.
///
/// On several ranks of `comm` (collective), `train` is this rank's shard and `options.rows` and
/// `keep_reconstructions` index the whole training set: each rank attacks its own examples in
/// every trial, the trials' gradients grad F are added over the ranks, and the per-example results
/// are gathered at rank 0 in the order of `rows` (empty elsewhere; the counts are of all ranks).
GlmAttackResult evaluate_glm_attack(const Model& model, const Dataset& train, const GlmAttackOptions& options,
                                    const TrialProgress& progress = {},
                                    const Communicator& comm = Communicator::local());

/// The delta-method prediction of the attack's MSE for `rows` (empty = all) at noise sigma.
/// On several ranks (collective): H of all shards, `rows` of this rank's shard.
VectorXd linearised_attack_mse(const Model& model, const Dataset& train, double sigma,
                               const std::vector<Index>& rows = {}, const Communicator& comm = Communicator::local());

}  // namespace filkit
