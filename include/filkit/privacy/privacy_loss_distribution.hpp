// Privacy loss distributions (PLD) of the sampled Gaussian mechanism, their composition and their
// (eps, delta): the mathematics of the PLD accountant (pld_accountant.hpp), the tightest
// accountant DP-SGD users compare against (Google's dp_accounting, pld/; Koskela, Jälkö,
// Honkela 2020; Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the Dots: Tighter
// Discrete Approximations of Privacy Loss Distributions", PETS).
//
// Privacy loss. For a pair (P, Q) of output distributions of neighbouring datasets the privacy
// loss is L(x) = log(P(x) / Q(x)), and the hockey-stick divergence gives delta exactly:
//   delta(eps) = P(L = inf) + E_{x~P}[(1 - e^{eps - L(x)})_+],
// a function that composition preserves: the PLD of a composition is the convolution of the
// PLDs. For one step (filkit units, neighbouring_relation.hpp: s = sigma / sensitivity), with
// u(x) = (2x - 1) / (2 s^2) and the mixture M = (1 - q) N(0, s^2) + q N(1, s^2):
//   remove (P = M, Q = N(0, s^2)):   L(x) =  log(1 - q + q e^{u(x)}), increasing in x;
//   add    (P = N(0, s^2), Q = M):   L(x) = -log(1 - q + q e^{u(x)}), decreasing in x.
// Poisson sampling under add/remove composes each direction separately and reports the larger
// delta (the smaller guarantee), as dp_accounting does. Sampling without replacement under
// replace-one uses the same pair with sensitivity 2 (s = sigma / 2): (q P' + (1 - q) Q', Q') is a
// dominating pair of the subsampled mechanism when (P', Q') = (N(2, sigma^2), N(0, sigma^2))
// dominates the Gaussian under replace-one (Zhu, Dong, Wang 2022, "Optimal Accounting of
// Differential Privacy via Characteristic Function", AISTATS, the subsampling results for
// replace-one); both directions are composed
// and the larger delta is reported, which can only add to the bound.
//
// Discretisation ("connect the dots", pessimistic). Losses live on the grid l_i = i h (h the
// discretisation interval). The x-range holding all but `truncation_mass` of P is cut at the
// grid points l_i; the P-mass P_k and Q-mass Q_k of each loss interval [l_k, l_{k+1}] are split
// between its two ends so that both masses are kept:
//   a_k + b_k = P_k,   a_k e^{-l_k} + b_k e^{-l_{k+1}} = Q_k   (a_k at l_k, b_k at l_{k+1}).
// The resulting delta(eps) is the piecewise-linear interpolation in e^eps of the true (convex)
// delta through the grid points, so it lies above it: an upper bound, and composition of such
// dominating PLDs stays an upper bound (Doroshenko et al.). The P-mass below the
// range goes to the lowest grid loss (its loss rounded up), the mass above it to L = inf (it
// counts fully towards delta): both pessimistic.
//
// Composition. Two PLDs on the same grid compose by the linear convolution of their
// probabilities (by FFT, Eigen's unsupported FFT with its kissfft backend) and
// inf_mass = 1 - (1 - a)(1 - b). After each convolution the tails are cut pessimistically again:
// at most truncation_mass / 2 of the lowest losses moves up to the first kept one, and at most
// truncation_mass / 2 of the highest (plus FFT round-off below the noise floor of the
// convolution) moves to L = inf, so it stays in delta. k-fold self-composition takes ONE
// transform, as dp_accounting's pld_pmf.self_compose does: Chernoff bounds on the sum of k losses
// (at rates spanning its spread) give a window of the composed grid outside which at most
// truncation_mass / 2 lies on each side; the DFT of the one-step PMF on that window (folded
// modulo its size) is raised to the k-th power and transformed back. What lies outside aliases
// into the window: the low tail to higher losses (only adds to delta), the high tail anywhere,
// so truncation_mass / 2 is added to the mass at L = inf for it. Repeated squaring
// (self_compose_by_squaring, log2 k truncated convolutions) is kept as the reference.
//
// Conversion. delta(eps) by the formula above over the discrete PLD; eps(delta) exactly for the
// discrete PLD: delta is inf + S_p - e^eps S_e between grid points (S_p, S_e the sums of p_i and
// p_i e^{-l_i} over l_i > eps), so eps = log((inf + S_p - delta) / S_e) in the right interval.
// eps is reported >= 0, and inf when the mass at L = inf alone exceeds delta.
#pragma once

#include "filkit/base/resources.hpp"

#include <cstdint>
#include <vector>

namespace filkit {

/// A discrete PLD: probability p[j] of the loss (offset + j) h, and the probability of L = inf.
struct DiscretePld {
  std::int64_t offset = 0;
  std::vector<double> probabilities{1.0};  ///< the identity: L = 0 with probability 1
  double infinity_mass = 0.0;
};

/// Which of the two hockey sticks of an add/remove pair (see the top of this file).
enum class PldDirection { kRemove, kAdd };

/// Discretisation settings: both > 0, truncation_mass < 1. Defaults as dp_accounting's
/// PLDAccountant (interval 1e-4) and its tail truncation (1e-15).
/// The coarsest loss grid: every step's loss is rounded up by up to h, so beyond a nat eps is the
/// grid's rather than the mechanism's (1000 reported eps = inf).
inline constexpr double kMaxDiscretization = 1.0;

struct PldSettings {
  double discretization = 1e-4;    ///< h, the loss grid's spacing, in (0, kMaxDiscretization]
  double truncation_mass = 1e-15;  ///< tail mass cut (pessimistically) per discretisation / convolution
  /// The memory the grids and their FFTs may take (pld_grid_bytes): a grid beyond it is refused
  /// with its estimate (MemoryLimitError) before it is allocated.
  ByteSize max_memory = default_memory_budget();
  void validate() const;  ///< throws OptionError naming the field
};

/// The bytes a step of the PLD's computation takes for a grid of `points` points: the grid and its
/// loss values (16 bytes a point) when fft_size is 0, else an FFT of fft_size points with its
/// padded input, half spectra and output (64 bytes a point, Eigen's scratch included).
std::uint64_t pld_grid_bytes(std::uint64_t points, std::uint64_t fft_size);

/// The help of the option that sets PldSettings::discretization (`filkit accountant` and the
/// training jobs' `--discretization`).
inline constexpr const char* kDiscretizationHelp =
    "PLD accountant: spacing h of the privacy loss grid (pessimistic rounding: eps is an upper bound, within steps "
    "x h of the exact one and usually far closer), in (0, 1]";

/// The pessimistic connect-the-dots PLD of one step of the Gaussian mechanism with noise s per
/// unit of sensitivity, Poisson subsampled with rate q (sample_rate), in one direction.
/// s > 0, sample_rate in (0, 1].
DiscretePld gaussian_pld(double s, double sample_rate, PldDirection direction, const PldSettings& settings);

/// The PLD of the composition of a and b (same grid). Throws MemoryLimitError when the
/// convolution needs more than max_memory (pld_grid_bytes).
DiscretePld compose(const DiscretePld& a, const DiscretePld& b, double truncation_mass,
                    ByteSize max_memory = default_memory_budget());
/// The k-fold composition of a with itself; k >= 0 (k = 0 is the identity): one FFT of a on
/// the window that Chernoff bounds give the composition, raised to the k-th power, one inverse
/// FFT (see the top of this file).
DiscretePld self_compose(const DiscretePld& a, std::int64_t k, double truncation_mass,
                         ByteSize max_memory = default_memory_budget());
/// The same by repeated squaring (log2 k convolutions, each truncated): the slower reference.
DiscretePld self_compose_by_squaring(const DiscretePld& a, std::int64_t k, double truncation_mass);

/// delta(eps) of a discrete PLD on the grid of spacing h; eps finite (negative allowed).
double pld_delta(const DiscretePld& pld, double h, double eps);
/// The smallest eps >= 0 with pld_delta(eps) <= delta; inf when infinity_mass > delta.
double pld_epsilon(const DiscretePld& pld, double h, double delta);

}  // namespace filkit
