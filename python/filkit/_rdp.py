"""The RDP accountant of DP-SGD's sampled Gaussian mechanism in NumPy, for filkit.torch where the
compiled module filkit._filkit did not load (filkit/_standalone.py). The C++ accountant
(include/filkit/privacy/sampled_gaussian_rdp.hpp, src/privacy/sampled_gaussian_rdp.cpp, and the accountant in
rdp_accountant.hpp) is the reference: this
one computes the same formulas (docs/accountants.md) in the same way, and
python/tests/test_standalone.py compares the two to 1e-12.

Poisson sampling (add/remove one; Mironov, Talwar, Zhang 2019, arXiv:1908.10530): one step's RDP at
an integer order alpha from the binomial sum of A_alpha, at any other order from the signed
two-sided erfc series, summed in log space until the first omitted term is below 1e-12 of log A;
q = 1 is the Gaussian mechanism, alpha / (2 sigma^2). Sampling without replacement (replace one;
Wang, Balle, Kasiviswanathan 2019, Theorem 27, as dp_accounting evaluates it) with the noise
multiplier per unit of replace-one sensitivity, sigma / 2. RDP adds up over steps, order by order;
eps = max(0, min_alpha [T r(alpha) + log1p(-1/alpha) - (log delta + log alpha) / (alpha - 1)])
(Balle et al. 2020, Theorem 21).
"""
import math

import numpy as np

MAX_ORDER = 1e6
# The erfc series stops once its next term is below SERIES_TOLERANCE max(log A, SERIES_TINY_LOG_A)
# in log A (sampled_gaussian_rdp.cpp's kSeriesTolerance, kSeriesTinyLogA, kMaxSeriesTerms).
SERIES_TOLERANCE = 1e-12
SERIES_TINY_LOG_A = 1e-4
MAX_SERIES_TERMS = 10_000_000
# erfc underflows past 26.5; from 20 its asymptotic series is exact to double precision.
ASYMPTOTIC_ERFC_FROM = 20.0
# The erfc series is summed term by term up to this many terms, in NumPy pieces beyond.
TERM_BY_TERM = 64
# Above this order the bound without replacement skips its O(alpha^2) forward differences.
MAX_DIFFERENCE_ORDER = 256
# The clipped sum's sensitivity under replace-one, in units of C (privacy_accountant.hpp).
REPLACE_ONE_SENSITIVITY = 2.0
SAMPLINGS = {"poisson": "poisson", "uniform": "uniform", "without-replacement": "uniform"}
ORDER_GRIDS = ("opacus", "tf-privacy", "tf")

_erfc = np.frompyfunc(math.erfc, 1, 1)


def rdp_orders(grid="opacus"):
    """The orders of a named grid: 'opacus' (1.1, ..., 10.9, 12, ..., 63) or 'tf-privacy' ('tf':
    1.1, ..., 10.9, 11, ..., 63, 128, 256, 512), built as the Python originals, 1 + x / 10.0."""
    if grid not in ORDER_GRIDS:
        raise ValueError(f"order grid = {grid!r}: must be one of {', '.join(map(repr, ORDER_GRIDS))}")
    orders = [1 + x / 10.0 for x in range(1, 100)] + [float(a) for a in range(12 if grid == "opacus" else 11, 64)]
    return orders + ([128.0, 256.0, 512.0] if grid != "opacus" else [])


def _orders_from(orders):
    """None (Opacus's), a grid's name or a list of orders, each in (1, 1e6]."""
    if orders is None:
        return np.array(rdp_orders("opacus"))
    if isinstance(orders, str):
        return np.array(rdp_orders(orders))
    values = np.asarray(orders, dtype=float).reshape(-1)
    if values.size == 0:
        raise ValueError("orders must not be empty")
    for k, alpha in enumerate(values):
        if not (1 < alpha <= MAX_ORDER):
            raise ValueError(f"orders[{k}] = {alpha!r} must be in (1, 1e6]")
    return values


def _log_sum(terms):
    """log sum exp(terms), the largest term factored out and the rest added by log1p (the sum of
    terms near 1 keeps its small part, as the C++ accountant's log_add does)."""
    top = int(np.argmax(terms))
    largest = terms[top]
    if largest == -math.inf:
        return -math.inf
    rest = np.delete(terms, top)
    return float(largest + np.log1p(np.exp(rest - largest).sum()))


def _log_sub(a, b):
    """log(exp(a) - exp(b)) for a >= b elementwise (log_space.hpp's log_sub): the two branches keep
    full precision for a - b near 0 and large."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        gap = a - b
        out = a + np.where(gap < math.log(2), np.log(-np.expm1(-gap)), np.log1p(-np.exp(-gap)))
    return np.where(b == -np.inf, a, out)


def log_erfc(x):
    """log erfc(x) elementwise, by an asymptotic series past x = 20 where erfc underflows."""
    x = np.asarray(x, dtype=float)
    out = np.empty_like(x)
    small = x <= ASYMPTOTIC_ERFC_FROM
    with np.errstate(divide="ignore"):
        out[small] = np.log(_erfc(x[small]).astype(float))
    large = x[~small]
    if large.size:
        # erfc(x) = exp(-x^2) / (x sqrt(pi)) sum_k (-1)^k (2k - 1)!! / (2 x^2)^k, each to |term| <= 1e-17.
        two_x_squared = 2 * large * large
        term, total, active, k = np.ones_like(large), np.ones_like(large), np.ones(large.size, bool), 1
        while active.any():
            term[active] *= -(2 * k - 1) / two_x_squared[active]
            total[active] += term[active]
            active &= np.abs(term) > 1e-17
            k += 1
        out[~small] = -large * large - np.log(large) - 0.5 * math.log(math.pi) + np.log(total)
    return out


def _binomial_coefficients(alpha, start, count, log_magnitude, negative):
    """log|C(alpha, i)| and its sign for i = start .. start + count - 1, by C(alpha, i) = C(alpha, i - 1)
    (alpha - i + 1) / i from C(alpha, start - 1) = (-1)^negative exp(log_magnitude)."""
    i = np.arange(start, start + count, dtype=float)
    factors = (alpha - i + 1) / i if start > 0 else np.concatenate([[1.0], (alpha - i[1:] + 1) / i[1:]])
    with np.errstate(divide="ignore"):
        log_magnitudes = log_magnitude + np.cumsum(np.log(np.abs(factors)))
    signs = negative ^ (np.cumsum(factors < 0) % 2 == 1)
    return i, log_magnitudes, signs


def _checked_series_arguments(q, noise_multiplier):
    if not 0 < q < 1:
        raise ValueError(f"q = {q!r} must be in (0, 1) for the sums")
    scale = 1 / (2 * noise_multiplier * noise_multiplier) if noise_multiplier > 0 else math.inf
    if not (math.isfinite(noise_multiplier) and math.isfinite(scale)):
        raise ValueError(f"noise_multiplier (sigma) = {noise_multiplier!r} must be finite and > 7.5e-155 "
                         "(1 / (2 sigma^2) finite) for the sums")
    return scale


def sampled_gaussian_log_a_integer(q, noise_multiplier, alpha):
    """log A_alpha of one Poisson-sampled Gaussian step at an integer order alpha >= 2: the finite
    binomial sum of A_alpha = sum_i C(alpha, i) (1 - q)^(alpha - i) q^i exp((i^2 - i) / (2 sigma^2))."""
    scale = _checked_series_arguments(q, noise_multiplier)
    alpha = int(alpha)
    if alpha < 2:
        raise ValueError(f"integer order alpha = {alpha} must be >= 2")
    # Term by term as the C++ accountant (log A near 0 shows the order of the additions).
    log_q, log_1mq, log_c, log_a = math.log(q), math.log1p(-q), 0.0, -math.inf
    for n in range(alpha + 1):
        k = float(n)
        log_a = _log_add(log_a, log_c + k * log_q + float(alpha - n) * log_1mq + (k * k - k) * scale)
        if n < alpha:
            log_c += math.log((alpha - k) / (k + 1))
    return log_a


def _log_erfc_scalar(x):
    if x <= ASYMPTOTIC_ERFC_FROM:
        return math.log(math.erfc(x))
    return float(log_erfc(np.array([x]))[0])


def _series_term_by_term(alpha, log_q, log_1mq, scale, z0, erfc_scale, max_terms):
    """The series as the C++ accountant sums it: term by term, each added in log space with its sign
    to the sum so far (the same calls of the same libm), stopping at the same term. Returns log A,
    or None and where it stopped (the next term's index, log|C(alpha, i)| and its sign of the last term,
    log A0, log A1)
    when it has not converged within max_terms."""
    log_c, negative, log_a0, log_a1 = 0.0, False, -math.inf, -math.inf
    for n in range(max_terms):
        i = float(n)
        j = alpha - i
        log_s0 = log_c + i * log_q + j * log_1mq + (i * i - i) * scale - math.log(2) + \
            _log_erfc_scalar((i - z0) * erfc_scale)
        log_s1 = log_c + j * log_q + i * log_1mq + (j * j - j) * scale - math.log(2) + \
            _log_erfc_scalar((z0 - j) * erfc_scale)
        if negative and (log_s0 > log_a0 or log_s1 > log_a1):
            raise ArithmeticError("the erfc series of the sampled Gaussian RDP lost positivity")
        log_a0 = _log_sub_scalar(log_a0, log_s0) if negative else _log_add(log_a0, log_s0)
        log_a1 = _log_sub_scalar(log_a1, log_s1) if negative else _log_add(log_a1, log_s1)
        log_a = _log_add(log_a0, log_a1)
        if i > alpha and max(log_s0, log_s1) < log_a + math.log(SERIES_TOLERANCE * max(log_a, SERIES_TINY_LOG_A)):
            return log_a, None
        last = (log_c, negative)
        factor = (alpha - (i + 1) + 1) / (i + 1)
        log_c += math.log(abs(factor))
        negative = negative != (factor < 0)
    return None, (max_terms, *last, log_a0, log_a1)


def sampled_gaussian_log_a_series(q, noise_multiplier, alpha):
    """log A_alpha at any real order alpha > 1 by the signed two-sided erfc series (the integral
    split at z0 = sigma^2 log(1/q - 1) + 1/2), until the first term past i > alpha that is omitted
    would change log A by less than 1e-12 of it. The first TERM_BY_TERM terms as the C++ accountant
    sums them; the tail, which the low orders need thousands of terms of (C(alpha, i) falls as
    i^-(alpha + 1)), in pieces: each term relative to the sum before the piece, their running sums
    added by log1p, so that a log A near 0 keeps its digits."""
    scale = _checked_series_arguments(q, noise_multiplier)
    if not 1 < alpha <= MAX_ORDER:
        raise ValueError(f"alpha = {alpha!r} must be in (1, 1e6]")
    log_q, log_1mq = math.log(q), math.log1p(-q)
    z0 = noise_multiplier * noise_multiplier * (log_1mq - log_q) + 0.5
    erfc_scale = 1 / (math.sqrt(2) * noise_multiplier)
    log_a, state = _series_term_by_term(alpha, log_q, log_1mq, scale, z0, erfc_scale, TERM_BY_TERM)
    if log_a is not None:
        return log_a
    start, log_magnitude, negative, log_a0, log_a1 = state
    count = 256
    while start < MAX_SERIES_TERMS:
        count = min(count, MAX_SERIES_TERMS - start)
        i, log_c, signs = _binomial_coefficients(alpha, start, count, log_magnitude, negative)
        j = alpha - i
        log_s0 = log_c + i * log_q + j * log_1mq + (i * i - i) * scale - math.log(2) + log_erfc((i - z0) * erfc_scale)
        log_s1 = log_c + j * log_q + i * log_1mq + (j * j - j) * scale - math.log(2) + log_erfc((z0 - j) * erfc_scale)
        sign = np.where(signs, -1.0, 1.0)
        relative0 = np.cumsum(sign * np.exp(log_s0 - log_a0))
        relative1 = np.cumsum(sign * np.exp(log_s1 - log_a1))
        if (relative0 <= -1).any() or (relative1 <= -1).any():
            raise ArithmeticError("the erfc series of the sampled Gaussian RDP lost positivity")
        running0, running1 = log_a0 + np.log1p(relative0), log_a1 + np.log1p(relative1)
        log_a = np.logaddexp(running0, running1)
        with np.errstate(divide="ignore", invalid="ignore"):
            done = (i > alpha) & (np.maximum(log_s0, log_s1) <
                                  log_a + np.log(SERIES_TOLERANCE * np.maximum(log_a, SERIES_TINY_LOG_A)))
        if done.any():
            return float(log_a[np.argmax(done)])
        log_a0, log_a1 = running0[-1], running1[-1]
        start, log_magnitude, negative, count = start + count, log_c[-1], bool(signs[-1]), 2 * count
    raise ArithmeticError(f"the erfc series of the sampled Gaussian RDP did not converge at q = {q!r}, "
                          f"noise_multiplier = {noise_multiplier!r}, alpha = {alpha!r}")


def _special_case(q, noise_multiplier, alpha):
    """r(alpha) where no sum is needed, else None: q = 0 gives 0; sigma = 0 (or so small that
    alpha / (2 sigma^2) overflows) inf; q = 1 is the Gaussian mechanism, alpha / (2 sigma^2)."""
    if q == 0:
        return 0.0
    if not noise_multiplier > 0 or math.isinf(1 / (2 * noise_multiplier * noise_multiplier)):
        return math.inf
    if q == 1:
        return alpha / (2 * noise_multiplier * noise_multiplier)
    return None


def _rdp_at_order(q, noise_multiplier, alpha):
    special = _special_case(q, noise_multiplier, alpha)
    if special is not None:
        return special
    log_a = (sampled_gaussian_log_a_integer(q, noise_multiplier, alpha) if alpha == math.floor(alpha)
             else sampled_gaussian_log_a_series(q, noise_multiplier, alpha))
    if math.isnan(log_a):
        raise ArithmeticError(f"RDP is NaN at q = {q!r}, noise_multiplier = {noise_multiplier!r}, order = {alpha!r}")
    return max(log_a, 0.0) / (alpha - 1)  # A >= 1 (Jensen): a negative log A is rounding


def _log_add(a, b):
    """log(exp(a) + exp(b)) of two numbers (log_space.hpp's log_add, with the same libm calls)."""
    if a < b:
        a, b = b, a
    return a if b == -math.inf or a == math.inf else a + math.log1p(math.exp(b - a))


def _log_sub_scalar(a, b):
    """_log_sub of two numbers with the C++ accountant's libm calls."""
    if b == -math.inf:
        return a
    gap = a - b
    return a + (math.log(-math.expm1(-gap)) if gap < math.log(2) else math.log1p(-math.exp(-gap)))


def _signed_difference(b_log, b_negative, a_log, a_negative):
    """b - a of two numbers given as log|x| and sign (sampled_gaussian_rdp.cpp's signed_difference)."""
    if a_negative != b_negative:
        return _log_add(a_log, b_log), b_negative
    if a_log == b_log:
        return -math.inf, False
    if b_log > a_log:
        return _log_sub_scalar(b_log, a_log), b_negative
    return _log_sub_scalar(a_log, b_log), not b_negative


_signed_differences = np.frompyfunc(_signed_difference, 4, 2)


def log_forward_differences(noise_multiplier, n):
    """log|D^k a_0| for k = 0..n, a_j = exp(j (j - 1) / (2 s^2)): n passes of differences in log
    space with signs. These differences cancel (a_j is near 1 for large s), so every pass makes the
    C++ accountant's calls in its order: the two agree to the last bit, not to a rounding amplified."""
    scale = 1 / (2 * noise_multiplier * noise_multiplier)
    magnitude = np.array([float(j) * (float(j) - 1) * scale for j in range(n + 1)], dtype=object)
    negative = np.zeros(n + 1, dtype=object)
    negative[:] = False
    out = [magnitude[0]]
    for _ in range(n):
        magnitude, negative = _signed_differences(magnitude[1:], negative[1:], magnitude[:-1], negative[:-1])
        out.append(magnitude[0])
    return np.array(out, dtype=float)


def _without_replacement_log_a(q, noise_multiplier, alpha, log_d):
    """log A of Wang, Balle, Kasiviswanathan's bound at an integer order alpha >= 1; log_d the
    forward differences (log_forward_differences) to at least alpha + 1, or None above order 256."""
    if alpha == 1:
        return 0.0
    scale = 1 / (2 * noise_multiplier * noise_multiplier)
    eps2 = 2 * scale
    i = np.arange(3, alpha + 1, dtype=float)
    bound = math.log(2) + (i - 1) * i * scale
    if alpha <= MAX_DIFFERENCE_ORDER:
        low, high = log_d[2 * (i.astype(int) // 2)], log_d[2 * ((i.astype(int) + 1) // 2)]
        bound = np.minimum(bound, math.log(4) + 0.5 * (low + high))
    log_binomial = np.array([math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
                             for k in [2.0] + list(i)])
    second = 2 * math.log(q) + log_binomial[0] + min(math.log(4) + eps2 + math.log(-math.expm1(-eps2)),
                                                     eps2 + math.log(2))
    return _log_sum(np.concatenate([[0.0, second], bound + i * math.log(q) + log_binomial[1:]]))


def _without_replacement_rdp_at_order(q, noise_multiplier, alpha, log_d):
    special = _special_case(q, noise_multiplier, alpha)
    if special is not None:
        return special
    lower = math.floor(alpha)
    log_a_lower = _without_replacement_log_a(q, noise_multiplier, lower, log_d)
    if alpha == lower:
        return log_a_lower / (alpha - 1)
    t = alpha - lower
    return ((1 - t) * log_a_lower + t * _without_replacement_log_a(q, noise_multiplier, lower + 1, log_d)) / (alpha - 1)


def _checked_rate_and_noise(q, noise_multiplier):
    if not 0 <= q <= 1:
        raise ValueError(f"sample_rate = {q!r}: must lie in [0, 1]")
    if not (noise_multiplier >= 0 and math.isfinite(noise_multiplier)):
        raise ValueError(f"noise_multiplier (sigma) = {noise_multiplier!r} must be finite and >= 0")


def subsampled_gaussian_rdp(q, noise_multiplier, orders=None):
    """r(alpha) of ONE Poisson-sampled Gaussian step at each order (a list)."""
    _checked_rate_and_noise(q, noise_multiplier)
    return [_rdp_at_order(q, noise_multiplier, float(alpha)) for alpha in _orders_from(orders)]


def sampled_without_replacement_gaussian_rdp(q, noise_multiplier, orders=None):
    """r(alpha) of ONE step on a batch drawn without replacement, replace-one neighbours;
    noise_multiplier per unit of replace-one sensitivity."""
    _checked_rate_and_noise(q, noise_multiplier)
    orders = _orders_from(orders)
    exact = 0 < q < 1 and noise_multiplier > 0 and math.isfinite(1 / (2 * noise_multiplier * noise_multiplier))
    # D^k a_0 does not depend on how far the sequence goes: one table serves every order.
    log_d = log_forward_differences(noise_multiplier, min(math.ceil(orders.max()), MAX_DIFFERENCE_ORDER) + 1) \
        if exact else None
    return [_without_replacement_rdp_at_order(q, noise_multiplier, float(alpha), log_d) for alpha in orders]


def _checked_delta(delta):
    if not 0 < delta < 1:
        raise ValueError(f"delta = {delta!r} must be in (0, 1)")


class PrivacySpent:
    """An (eps, delta) guarantee converted from an RDP curve (filkit.PrivacySpent's fields)."""

    def __init__(self, eps, delta, optimal_order, orders, rdp, status, warning):
        self.eps, self.delta, self.optimal_order = eps, delta, optimal_order
        self.orders, self.rdp, self.status, self.warning = orders, rdp, status, warning

    def __repr__(self):
        return f"<filkit.PrivacySpent eps={self.eps:f} order={self.optimal_order:f}>"


def privacy_spent_from_rdp(orders, rdp, delta):
    """(eps, delta) from an RDP curve, the minimising order and where it lies on the grid."""
    orders, rdp = _orders_from(orders), np.asarray(rdp, dtype=float)
    _checked_delta(delta)
    if rdp.shape != orders.shape:
        raise ValueError(f"rdp has {rdp.size} values but orders has {orders.size}")
    bad = np.flatnonzero(~(rdp >= 0))
    if bad.size:
        raise ValueError(f"rdp[{bad[0]}] = {rdp[bad[0]]!r} must be >= 0")
    eps = rdp + np.log1p(-1 / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    best = int(np.argmin(eps))
    if not math.isfinite(eps[best]):
        return PrivacySpent(math.inf, delta, math.nan, list(orders), list(rdp), "no-finite-bound",
                            "every order has infinite RDP (noise_multiplier = 0?), so eps is infinite")
    order = float(orders[best])
    status = "smallest" if order == orders.min() else "largest" if order == orders.max() else "interior"
    warning = "" if status == "interior" else (
        f"the optimal order {order:g} is the {status} order of the grid; add "
        f"{'smaller orders (> 1)' if status == 'smallest' else 'larger orders'} for a possibly smaller eps")
    return PrivacySpent(max(float(eps[best]), 0.0), delta, order, list(orders), list(rdp), status, warning)


class RdpAccountant:
    """RDP accountant of the sampled Gaussian mechanism, filkit.RdpAccountant's step, compose,
    epsilon, delta, get_privacy_spent, orders, rdp and sampling. orders: None (Opacus's), 'opacus',
    'tf-privacy' or a list; sampling: 'poisson' (add/remove) or 'uniform' (without replacement,
    replace-one)."""

    def __init__(self, orders=None, sampling="poisson"):
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling = {sampling!r}: must be one of {', '.join(map(repr, SAMPLINGS))}")
        self._orders = _orders_from(orders)
        self._rdp = np.zeros(self._orders.size)
        self._sampling = SAMPLINGS[sampling]
        self._cached = (None, None, None)  # (q, sigma, one step's curve) of the last compose

    @property
    def orders(self):
        return list(self._orders)

    @property
    def rdp(self):
        return list(self._rdp)

    @property
    def sampling(self):
        return self._sampling

    @property
    def neighbouring_relation(self):
        """'add-remove' (Poisson sampling) or 'replace-one' (without replacement)."""
        return "add-remove" if self._sampling == "poisson" else "replace-one"

    def compose(self, *, noise_multiplier, sample_rate=None, steps, q=None):
        """Adds `steps` steps at sample rate q: rdp += steps r(alpha). Keywords only, in step()'s
        order; q= is the sample rate's former keyword."""
        if (sample_rate is None) == (q is None):
            raise TypeError("compose(): give sample_rate (or its former keyword q), once")
        q = sample_rate if q is None else q
        if not isinstance(steps, (int, np.integer)) or steps < 0:
            raise ValueError(f"steps = {steps!r} must be an integer >= 0")
        # Training steps repeat one (q, sigma): its curve is kept rather than summed again.
        if self._cached[:2] != (q, noise_multiplier):
            if self._sampling == "poisson":
                step_rdp = subsampled_gaussian_rdp(q, noise_multiplier, self._orders)
            else:
                step_rdp = sampled_without_replacement_gaussian_rdp(q, noise_multiplier / REPLACE_ONE_SENSITIVITY,
                                                                    self._orders)
            self._cached = (q, noise_multiplier, np.asarray(step_rdp))
        if steps:  # 0 * inf would make the curve NaN
            self._rdp = self._rdp + steps * self._cached[2]

    def step(self, noise_multiplier, sample_rate, steps=1):
        """Records `steps` steps (noise multiplier sigma > 0 and finite, rate q in [0, 1])."""
        if not (noise_multiplier > 0 and math.isfinite(noise_multiplier)):
            raise ValueError(f"noise_multiplier (sigma) = {noise_multiplier!r} must be finite and > 0")
        self.compose(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps)

    def get_privacy_spent(self, delta):
        return privacy_spent_from_rdp(self._orders, self._rdp, delta)

    def epsilon(self, delta):
        """eps at delta; 0 with nothing recorded (the conversion's floor would be an artefact)."""
        _checked_delta(delta)
        return 0.0 if not self._rdp.any() else self.get_privacy_spent(delta).eps

    def delta(self, epsilon):
        """delta at eps: min(1, min_alpha exp((alpha - 1) (r - eps + log1p(-1/alpha)) - log alpha))."""
        if not (epsilon >= 0 and math.isfinite(epsilon)):
            raise ValueError(f"epsilon = {epsilon!r} must be finite and >= 0")
        if not self._rdp.any():
            return 0.0
        alpha = self._orders
        log_delta = (alpha - 1) * (self._rdp - epsilon + np.log1p(-1 / alpha)) - np.log(alpha)
        return float(math.exp(min(0.0, float(log_delta.min()))))
