#include "filkit/privacy/privacy_loss_distribution.hpp"

#include "filkit/base/checks.hpp"
#include "privacy/log_space.hpp"

#include <unsupported/Eigen/FFT>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdio>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace filkit {
namespace {

using detail::kInf;

// A single-step PLD wider than this many grid points means h is far too fine for sigma (at
// h = 1e-4 the widest useful case, sigma ~ 0.3 without subsampling, needs about 1e6).
constexpr std::int64_t kMaxGridPoints = 50'000'000;
// A grid beyond kMaxGridPoints: an OptionError about the discretization, which a coarser one (or
// fewer steps) cures.
[[noreturn]] void grid_too_large(const std::string& message) {
  throw OptionError::with_text("discretization", message);
}
// Refuses a grid of `points` points (an FFT of fft_size, 0 for none) beyond max_memory, with what
// shrinks it.
void check_grid_memory(std::uint64_t points, std::uint64_t fft_size, ByteSize max_memory, const std::string& what) {
  check_memory(pld_grid_bytes(points, fft_size), max_memory,
               what + " (a loss grid of " + std::to_string(points) + " points; a coarser " +
                   option_name("discretization") + " or fewer steps shrink it)");
}
// Below this many terms on the shorter side a direct convolution beats the FFT.
constexpr std::size_t kDirectConvolutionBelow = 64;
// Entries of an FFT convolution below this many times its round-off scale count as round-off.
constexpr double kNoiseFloor = 2.0;

// log(1 - q + q e^u), without cancellation for u of either sign: log1p(q expm1(u)) wherever
// expm1(u) is finite (for u > 0 the form u + log(q + (1 - q) e^-u) cancelled to round-off, even
// below 0, when q e^u is far below 1: q = 1e-19 put the grid's top loss below 0 and a third of P's
// mass at an infinite loss, eps = inf; issue 50).
// Where 1 - q + q e^u is below 1/2 (q near 1, u far below 0), it is a sum of two positive terms,
// taken in logs: at q = 1 and u = -800 (noise 0.03) e^u underflowed, the loss was -inf and the grid
// "needed inf points".
double log_mixture_ratio(double sample_rate, double u) {
  if (u > 700) return u + std::log(sample_rate + (1 - sample_rate) * std::exp(-u));  // q e^u >> e^-u: no cancellation
  const double m = sample_rate * std::expm1(u);
  if (m > -0.5) return std::log1p(m);
  const double a = std::log1p(-sample_rate), b = std::log(sample_rate) + u;  // log(1 - q), log(q e^u)
  return std::max(a, b) + std::log1p(std::exp(std::min(a, b) - std::max(a, b)));
}

// The u with log(1 - q + q e^u) = l; -inf where no u reaches l (l <= log(1 - q)). Away from
// l = 0, u = l + log(1 - (1 - q) e^-l) - log q with (1 - q) e^-l in logs (e^-l overflowed for
// l < -709, and e^l - (1 - q) lost every digit at q = 1).
double inverse_log_mixture_ratio(double sample_rate, double l) {
  if (l > 1 || l < -1) {
    const double log_t = std::log1p(-sample_rate) - l;  // log((1 - q) e^-l)
    return log_t < 0 ? l + std::log1p(-std::exp(log_t)) - std::log(sample_rate) : -kInf;
  }
  const double v = std::expm1(l) + sample_rate;
  return v > 0 ? std::log(v) - std::log(sample_rate) : -kInf;
}

// Mass of N(mean, s^2) on [a, b], from the erfc of whichever side keeps relative precision.
double normal_mass(double a, double b, double mean, double s) {
  const double scale = 1 / (s * std::numbers::sqrt2);
  const double za = (a - mean) * scale;
  const double zb = (b - mean) * scale;
  if (za >= 0) return 0.5 * (std::erfc(za) - std::erfc(zb));
  if (zb <= 0) return 0.5 * (std::erfc(-zb) - std::erfc(-za));
  return 1 - 0.5 * (std::erfc(-za) + std::erfc(zb));
}

// z with P(N(0, 1) > z) = tail, by bisection (monotone; 200 halvings reach double precision).
double normal_upper_quantile(double tail) {
  double low = 0.0, high = 40.0;
  for (int k = 0; k < 200 && high - low > 1e-15 * high; ++k) {
    const double middle = 0.5 * (low + high);
    (0.5 * std::erfc(middle / std::numbers::sqrt2) > tail ? low : high) = middle;
  }
  return high;
}

// The one-step pair of the top of the header: loss, its inverse, and the masses of P and Q.
struct GaussianPair {
  double s, sample_rate;
  PldDirection direction;
  double u(double x) const { return (2 * x - 1) / (2 * s * s); }
  double loss(double x) const {
    const double l = log_mixture_ratio(sample_rate, u(x));
    return direction == PldDirection::kRemove ? l : -l;
  }
  // The x where the loss is l (+-inf at the ends of its range).
  double x_of_loss(double l) const {
    const double v = inverse_log_mixture_ratio(sample_rate, direction == PldDirection::kRemove ? l : -l);
    return 0.5 + s * s * v;
  }
  double mixture_mass(double a, double b) const {
    return (1 - sample_rate) * normal_mass(a, b, 0.0, s) + sample_rate * normal_mass(a, b, 1.0, s);
  }
  double p_mass(double a, double b) const {
    return direction == PldDirection::kRemove ? mixture_mass(a, b) : normal_mass(a, b, 0.0, s);
  }
  double q_mass(double a, double b) const {
    return direction == PldDirection::kRemove ? normal_mass(a, b, 0.0, s) : mixture_mass(a, b);
  }
};

std::vector<double> convolve_direct(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size() + b.size() - 1, 0.0);
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = 0; j < b.size(); ++j) out[i + j] += a[i] * b[j];
  return out;
}

// Linear convolution by FFT with zero padding to a power of two (no wrap-around). Returns the
// absolute round-off scale of the result in `noise`.
std::vector<double> convolve(const std::vector<double>& a, const std::vector<double>& b, double& noise,
                             ByteSize max_memory) {
  noise = 0.0;
  const std::size_t n = a.size() + b.size() - 1;
  if (std::min(a.size(), b.size()) < kDirectConvolutionBelow) {
    check_grid_memory(n, 0, max_memory, "a composition of two PLDs");
    return convolve_direct(a, b);
  }
  std::size_t size = 1;
  while (size < n) size *= 2;
  check_grid_memory(n, size, max_memory, "a composition of two PLDs");
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<double> padded(a);
  padded.resize(size, 0.0);
  std::vector<std::complex<double>> fa, fb;
  fft.fwd(fa, padded);
  if (&a == &b) {
    for (auto& c : fa) c *= c;
  } else {
    padded.assign(b.begin(), b.end());
    padded.resize(size, 0.0);
    fft.fwd(fb, padded);
    for (std::size_t k = 0; k < fa.size(); ++k) fa[k] *= fb[k];
  }
  std::vector<double> out;
  fft.inv(out, fa, static_cast<Eigen::Index>(size));
  out.resize(n);
  // Round-off of an FFT convolution is about eps_machine sqrt(log2(size)) |a|_2 |b|_2 per entry
  // (root mean square); entries below kNoiseFloor times that are indistinguishable from it.
  double norm_a = 0, norm_b = 0;
  for (double v : a) norm_a += v * v;
  for (double v : b) norm_b += v * v;
  noise = kNoiseFloor * std::numeric_limits<double>::epsilon() * std::sqrt(std::log2(static_cast<double>(size))) *
          std::sqrt(norm_a * norm_b);
  return out;
}

// Cuts both tails pessimistically (see the top of the header): the lowest losses, up to
// tail_mass / 2 or below the noise floor, move up to the first kept one; the highest go to
// L = inf.
void truncate_tails(DiscretePld& pld, double tail_mass, double noise) {
  std::vector<double>& p = pld.probabilities;
  for (double& v : p) v = std::max(v, 0.0);  // FFT round-off
  std::size_t low = 0;
  double lower = 0.0;
  while (low + 1 < p.size() && (lower + p[low] <= tail_mass / 2 || p[low] <= noise)) lower += p[low++];
  std::size_t high = p.size() - 1;
  double upper = 0.0;
  while (high > low && (upper + p[high] <= tail_mass / 2 || p[high] <= noise)) upper += p[high--];
  std::vector<double> kept(p.begin() + static_cast<std::ptrdiff_t>(low),
                           p.begin() + static_cast<std::ptrdiff_t>(high) + 1);
  kept.front() += lower;
  pld.offset += static_cast<std::int64_t>(low);
  pld.infinity_mass = std::min(1.0, pld.infinity_mass + upper);
  p = std::move(kept);
}

}  // namespace

void PldSettings::validate() const {
  require_in_interval("discretization", discretization, 0.0, End::kOpen, kMaxDiscretization, End::kClosed);
  require_in_interval("truncation_mass", truncation_mass, 0.0, End::kOpen, 1.0, End::kOpen);
}

DiscretePld gaussian_pld(double s, double sample_rate, PldDirection direction, const PldSettings& settings) {
  settings.validate();
  require_positive("s", s);
  require_in_interval("sample_rate", sample_rate, 0.0, End::kOpen, 1.0, End::kClosed);
  const GaussianPair pair{s, sample_rate, direction};
  const double h = settings.discretization;
  // The x-range that holds all but truncation_mass of P (each component's tails <= mass / 2).
  const double z = normal_upper_quantile(settings.truncation_mass / 2);
  const double x_low = -z * s;
  const double x_high = (direction == PldDirection::kRemove ? 1.0 : 0.0) + z * s;
  const double loss_a = pair.loss(x_low), loss_b = pair.loss(x_high);
  const double first = std::floor(std::min(loss_a, loss_b) / h);
  const double last = std::max(std::ceil(std::max(loss_a, loss_b) / h), first + 1);
  if (!(last - first < static_cast<double>(kMaxGridPoints))) {
    grid_too_large("discretization = " + shown_value(h) + " needs " + shown_value(last - first + 1) +
                   " grid points for noise " + shown_value(s) + " (at most " + std::to_string(kMaxGridPoints) +
                   "); use a coarser discretization");
  }
  const auto i_first = static_cast<std::int64_t>(first);
  const auto n = static_cast<std::size_t>(static_cast<std::int64_t>(last) - i_first + 1);
  check_grid_memory(n, 0, settings.max_memory, "the PLD of one step at noise " + shown_value(s));
  std::vector<double> x(n);
  for (std::size_t k = 0; k < n; ++k)
    x[k] = pair.x_of_loss(static_cast<double>(i_first + static_cast<std::int64_t>(k)) * h);
  const bool increasing = direction == PldDirection::kRemove;
  // The x-interval of the losses between grid points k and k + 1, and the tails beyond.
  const auto between = [&](std::size_t k) {
    return increasing ? std::pair{x[k], x[k + 1]} : std::pair{x[k + 1], x[k]};
  };
  DiscretePld pld;
  pld.offset = i_first;
  pld.probabilities.assign(n, 0.0);
  pld.probabilities[0] = increasing ? pair.p_mass(-kInf, x[0]) : pair.p_mass(x[0], kInf);
  pld.infinity_mass = increasing ? pair.p_mass(x[n - 1], kInf) : pair.p_mass(-kInf, x[n - 1]);
  const double one_minus_e_minus_h = -std::expm1(-h);
  for (std::size_t k = 0; k + 1 < n; ++k) {
    const auto [a, b] = between(k);
    const double p = pair.p_mass(a, b);
    if (!(p > 0)) continue;
    const double l_k = static_cast<double>(i_first + static_cast<std::int64_t>(k)) * h;
    const double q_mass = pair.q_mass(a, b);
    // a_k = (Q_k e^{l_k} - P_k e^{-h}) / (1 - e^{-h}), kept in [0, P_k] against round-off.
    const double scaled_q = q_mass > 0 ? std::exp(std::log(q_mass / p) + l_k) : 0.0;
    const double at_low = std::clamp(p * (scaled_q - std::exp(-h)) / one_minus_e_minus_h, 0.0, p);
    pld.probabilities[k] += at_low;
    pld.probabilities[k + 1] += p - at_low;
  }
  return pld;
}

std::uint64_t pld_grid_bytes(std::uint64_t points, std::uint64_t fft_size) {
  return fft_size == 0 ? saturating_product(points, 2 * sizeof(double))
                       : saturating_sum(saturating_product(fft_size, 8 * sizeof(double)),
                                        saturating_product(points, sizeof(double)));
}

DiscretePld compose(const DiscretePld& a, const DiscretePld& b, double truncation_mass, ByteSize max_memory) {
  DiscretePld out;
  double noise = 0.0;
  out.probabilities = convolve(a.probabilities, b.probabilities, noise, max_memory);
  if (__builtin_add_overflow(a.offset, b.offset, &out.offset))
    grid_too_large("a composition needs more grid points (at most " + std::to_string(kMaxGridPoints) +
                   "; its lowest index is beyond int64's range); use a coarser discretization");
  out.infinity_mass = std::min(1.0, a.infinity_mass + b.infinity_mass - a.infinity_mass * b.infinity_mass);
  truncate_tails(out, truncation_mass, noise);
  return out;
}

DiscretePld self_compose_by_squaring(const DiscretePld& a, std::int64_t k, double truncation_mass) {
  require_non_negative("steps", k);
  DiscretePld result;
  DiscretePld power = a;
  while (k > 0) {
    if (k & 1) result = compose(result, power, truncation_mass);
    k >>= 1;
    if (k > 0) power = compose(power, power, truncation_mass);
  }
  return result;
}

DiscretePld self_compose(const DiscretePld& a, std::int64_t k, double truncation_mass, ByteSize max_memory) {
  require_non_negative("steps", k);
  if (k == 0) return DiscretePld{};
  if (k == 1) return a;
  const std::vector<double>& p = a.probabilities;
  const std::size_t n = p.size();
  DiscretePld out;
  // The composition's lowest grid index, k times one step's: beyond int64 (k = 1e17 at a grid of
  // -101: signed overflow, caught by the sanitizer build) no grid could hold the composition.
  if (__builtin_mul_overflow(a.offset, k, &out.offset))
    grid_too_large("the composition of " + std::to_string(k) + " steps needs more grid points (at most " +
                   std::to_string(kMaxGridPoints) +
                   "; its lowest index is beyond int64's range); use "
                   "a coarser discretization or fewer steps");
  // 1 - (1 - inf)^k: some step has an infinite loss.
  out.infinity_mass = std::min(1.0, -std::expm1(static_cast<double>(k) * std::log1p(-a.infinity_mass)));
  double mass = 0.0;
  for (double v : p) mass += v;
  if (n == 1 || !(mass > 0)) {
    out.probabilities = {std::pow(mass, static_cast<double>(k))};
    return out;
  }
  // The window [low, high] of S = j_1 + ... + j_k (indices into p) holding all but
  // truncation_mass / 2 on each side, by Chernoff bounds on the normalised PMF:
  // P(S >= t) <= exp(k log M(l) - l t) and P(S <= t) <= exp(k log M(-l) + l t), M(l) = E e^{l j},
  // at rates l around the scale of the composition's spread (any l gives a valid bound).
  std::vector<double> log_p(n);
  double mean = 0.0, square = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    log_p[j] = p[j] > 0 ? std::log(p[j] / mass) : -kInf;
    mean += p[j] / mass * static_cast<double>(j);
    square += p[j] / mass * static_cast<double>(j) * static_cast<double>(j);
  }
  const double spread = std::sqrt(std::max(square - mean * mean, 0.0) * static_cast<double>(k)) + 1.0;
  const auto log_mgf = [&](double rate) {  // one pass of log-sum-exp, rescaled when a term leads
    double top = -kInf, sum = 0.0;
    for (std::size_t j = 0; j < n; ++j) {
      const double term = log_p[j] + rate * static_cast<double>(j);
      if (term == -kInf) continue;  // p_j = 0
      if (term <= top) {
        sum += std::exp(term - top);
      } else {
        sum = sum * std::exp(top - term) + 1.0;
        top = term;
      }
    }
    return top + std::log(sum);
  };
  const double c = -std::log(truncation_mass / 2);
  const double kk = static_cast<double>(k);
  const double last = kk * static_cast<double>(n - 1);
  double high = last, low = 0.0;
  for (int e = -4; e <= 12; ++e) {
    const double rate = std::ldexp(1.0, e) / spread;
    high = std::min(high, (kk * log_mgf(rate) + c) / rate);
    low = std::max(low, (-c - kk * log_mgf(-rate)) / rate);
  }
  // At a huge k (2e15 steps) k log M(l) loses every digit to round-off and the bounds above can
  // cross or collapse to a point (whose one-point FFT crashed). A window narrower than 2 standard
  // deviations of S, or not finite, is widened to hold mean +- z sd, z = sqrt(2 c) + 1 (a Gaussian
  // tail of truncation_mass / 2, and a margin): a wider window only costs grid points (the mass
  // outside it is still counted as above), and the grid check below refuses one too wide.
  const double sd = std::sqrt(std::max(square - mean * mean, 0.0) * kk);
  if (!std::isfinite(high) || !std::isfinite(low) || high - low < 2 * sd) {
    const double z = std::sqrt(2 * c) + 1;
    high = std::isfinite(high) ? std::max(high, std::min(last, mean * kk + z * sd)) : last;
    low = std::isfinite(low) ? std::max(0.0, std::min(low, mean * kk - z * sd)) : 0.0;
  }
  high = std::ceil(high);
  low = std::min(std::floor(low), high);
  if (!(high - low < static_cast<double>(kMaxGridPoints))) {
    grid_too_large("the composition of " + std::to_string(k) + " steps needs " + shown_value(high - low + 1) +
                   " grid points (at most " + std::to_string(kMaxGridPoints) + "); use a coarser discretization");
  }
  const auto width = static_cast<std::size_t>(high - low) + 1;
  std::size_t size = 2;  // (Eigen's FFT of one point is not one)
  while (size < width) size *= 2;
  check_grid_memory(width, size, max_memory, "the composition of " + std::to_string(k) + " steps");
  // DFT of p at `size` points (p folded modulo size where longer), raised to the k-th power: the
  // DFT of the distribution of S modulo size. Outside the window S aliases into it: mass below
  // `low` lands at higher losses (only adds to delta); the mass above `high` (at most
  // truncation_mass / 2, when the window does not reach the largest possible S) is also counted
  // at L = inf, so delta stays an upper bound.
  std::vector<double> folded(size, 0.0);
  double norm = 0.0;
  for (std::size_t j = 0; j < n; ++j) {
    folded[j % size] += p[j];
    norm += p[j] * p[j];
  }
  Eigen::FFT<double> fft;
  fft.SetFlag(Eigen::FFT<double>::HalfSpectrum);
  std::vector<std::complex<double>> f;
  fft.fwd(f, folded);
  // Round-off (root mean square, as in convolve): the forward transform's error per coefficient,
  // about eps sqrt(log2 size) |p|_2, grows by k |f|^{k-1} in the power.
  const double unit = std::numeric_limits<double>::epsilon() * std::sqrt(std::log2(static_cast<double>(size)) + 1);
  double error_square = 0.0;
  for (auto& coefficient : f) {
    std::complex<double> base = coefficient, power = 1.0;
    for (std::int64_t e = k; e > 0; e >>= 1) {
      if (e & 1) power *= base;
      base *= base;
    }
    const double magnitude = std::abs(coefficient);
    // k |f|^{k-1} = k |f^k| / |f|
    const double grown =
        magnitude > 0 ? kk * std::abs(power) / magnitude * (unit * std::sqrt(norm) + unit * magnitude) : 0.0;
    error_square += 2 * grown * grown;  // the half spectrum stands for both halves
    coefficient = power;
  }
  std::vector<double> g;
  fft.inv(g, f, static_cast<Eigen::Index>(size));
  double g_norm = 0.0;
  for (double v : g) g_norm += v * v;
  const double noise = kNoiseFloor * (std::sqrt(error_square) / static_cast<double>(size) +
                                      unit * std::sqrt(g_norm / static_cast<double>(size)));
  const auto first = static_cast<std::size_t>(low);
  out.probabilities.resize(width);
  for (std::size_t r = 0; r < width; ++r) out.probabilities[r] = g[(first + r) % size];
  if (__builtin_add_overflow(out.offset, static_cast<std::int64_t>(first), &out.offset))
    grid_too_large("the composition of " + std::to_string(k) + " steps needs more grid points (at most " +
                   std::to_string(kMaxGridPoints) +
                   "; its lowest index is beyond int64's range); use "
                   "a coarser discretization or fewer steps");
  if (high < last) out.infinity_mass = std::min(1.0, out.infinity_mass + truncation_mass / 2);
  truncate_tails(out, truncation_mass, noise);
  return out;
}

double pld_delta(const DiscretePld& pld, double h, double eps) {
  double delta = 0.0;
  for (std::size_t j = pld.probabilities.size(); j-- > 0;) {
    const double loss = static_cast<double>(pld.offset + static_cast<std::int64_t>(j)) * h;
    if (loss <= eps) break;
    delta += pld.probabilities[j] * -std::expm1(eps - loss);
  }
  return std::min(1.0, pld.infinity_mass + delta);
}

double pld_epsilon(const DiscretePld& pld, double h, double delta) {
  if (pld.infinity_mass > delta) return kInf;
  const std::vector<double>& p = pld.probabilities;
  // Walking down the grid: above_mass = sum of p_i over l_i > l_j, scaled = sum p_i e^{l_j - l_i}
  // over the same i, so delta(eps) = inf + above_mass - e^{eps - l_j} scaled on [l_j, l_{j+1}].
  double above_mass = 0.0, scaled = 0.0;
  const double e_minus_h = std::exp(-h);
  for (std::size_t j = p.size(); j-- > 0;) {
    const double loss = static_cast<double>(pld.offset + static_cast<std::int64_t>(j)) * h;
    const double excess = pld.infinity_mass + above_mass - delta;
    if (excess > scaled) return std::max(0.0, loss + std::log(excess / scaled));
    scaled = (scaled + p[j]) * e_minus_h;
    above_mass += p[j];
  }
  // Below the lowest grid loss l_0: delta(eps) = inf + mass - e^{eps - l_0} sum p_i e^{l_0 - l_i}.
  const double l0 = static_cast<double>(pld.offset) * h;
  const double excess = pld.infinity_mass + above_mass - delta;
  if (!(excess > 0)) return 0.0;
  return std::max(0.0, l0 + std::log(excess / (scaled / e_minus_h)));
}

}  // namespace filkit
