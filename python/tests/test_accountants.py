"""The incremental accountants from Python (filkit.RdpAccountant, filkit.PldAccountant; docs/accountants.md)
against one-shot composition, closed forms and their own state round trip."""
import itertools
import json
import math

import pytest

import filkit


def normal_cdf(x):
    return 0.5 * math.erfc(-x / math.sqrt(2))


def gaussian_delta(s, eps):
    """delta(eps) of the Gaussian mechanism with noise s per unit of sensitivity (Balle and Wang 2018, Theorem 8)."""
    return normal_cdf(-eps * s + 1 / (2 * s)) - math.exp(eps) * normal_cdf(-eps * s - 1 / (2 * s))


ACCOUNTANTS = [
    pytest.param(lambda: filkit.RdpAccountant(), id="rdp-poisson"),
    pytest.param(lambda: filkit.RdpAccountant(sampling="uniform"), id="rdp-uniform"),
    pytest.param(lambda: filkit.PldAccountant(discretization=1e-3), id="pld-poisson"),
    pytest.param(lambda: filkit.PldAccountant(sampling="uniform", discretization=1e-3), id="pld-uniform"),
]


@pytest.mark.parametrize("make", ACCOUNTANTS)
def test_empty_accountant_reports_zero(make):
    accountant = make()
    assert accountant.epsilon(1e-5) == 0.0
    assert accountant.delta(0.5) == 0.0
    assert accountant.history == []


@pytest.mark.parametrize("make", ACCOUNTANTS)
def test_incremental_steps_equal_one_shot(make):
    incremental, one_shot = make(), make()
    for _ in range(40):
        incremental.step(1.1, 0.02)
    for _ in range(3):
        incremental.step(noise_multiplier=2.0, sample_rate=0.05, steps=10)
    one_shot.step(1.1, 0.02, steps=40)
    one_shot.step(2.0, 0.05, steps=30)
    assert incremental.history == one_shot.history == [
        {"noise_multiplier": 1.1, "sample_rate": 0.02, "steps": 40},
        {"noise_multiplier": 2.0, "sample_rate": 0.05, "steps": 30},
    ]
    eps = one_shot.epsilon(1e-5)
    assert incremental.epsilon(1e-5) == pytest.approx(eps, rel=1e-12)
    assert incremental.delta(eps) == pytest.approx(one_shot.delta(eps), rel=1e-12)
    assert one_shot.delta(eps) == pytest.approx(1e-5, rel=1e-3)


def test_rdp_steps_add_the_one_step_curves():
    # The RDP of the composition is the sum of the curves (Mironov 2017, Proposition 1).
    accountant = filkit.RdpAccountant(orders=[1.5, 2.0, 8.0])
    accountant.step(1.1, 0.02, steps=40)
    accountant.step(2.0, 0.05, steps=30)
    first = filkit.subsampled_gaussian_rdp(0.02, 1.1, [1.5, 2.0, 8.0])
    second = filkit.subsampled_gaussian_rdp(0.05, 2.0, [1.5, 2.0, 8.0])
    for composed, a, b in zip(accountant.rdp, first, second):
        assert composed == pytest.approx(40 * a + 30 * b, rel=1e-13)


def test_pld_of_composed_gaussians_is_one_gaussian():
    # k Gaussian steps with sigma = one Gaussian with sigma / sqrt(k) (closed form), pessimistic within k h.
    h, k, sigma = 1e-4, 16, 4.0
    accountant = filkit.PldAccountant(discretization=h)
    accountant.step(sigma, 1.0, steps=k)
    s = sigma / math.sqrt(k)
    for eps in (0.0, 0.5, 1.0, 2.0):
        exact = gaussian_delta(s, eps)
        assert exact <= accountant.delta(eps) <= gaussian_delta(s, eps - k * h)
    exact_eps = 1.0
    eps = accountant.epsilon(gaussian_delta(s, exact_eps))
    assert exact_eps - 1e-9 <= eps <= exact_eps + k * h


@pytest.mark.parametrize("make", ACCOUNTANTS)
def test_state_round_trip(make):
    accountant = make()
    accountant.step(1.3, 0.01, steps=200)
    accountant.step(0.9, 0.03, steps=5)
    state = accountant.state_dict()
    restored = make()
    restored.load_state_dict(json.loads(json.dumps(state)))  # JSON-compatible
    assert restored.state_dict() == state
    assert restored.epsilon(1e-6) == accountant.epsilon(1e-6)
    # Recording more after a restore continues the same composition.
    accountant.step(1.3, 0.01)
    restored.step(1.3, 0.01)
    assert restored.epsilon(1e-6) == pytest.approx(accountant.epsilon(1e-6), rel=1e-12)


def test_state_of_another_accountant_is_refused():
    rdp = filkit.RdpAccountant()
    rdp.step(1.0, 0.1)
    with pytest.raises(ValueError, match="pld"):
        filkit.PldAccountant().load_state_dict(rdp.state_dict())
    with pytest.raises(ValueError, match="history"):
        filkit.RdpAccountant().load_state_dict({"accountant": "rdp"})


@pytest.mark.parametrize("make", ACCOUNTANTS)
def test_noise_multiplier_for_a_target_epsilon(make):
    accountant = make()
    sigma = accountant.noise_multiplier(target_eps=2.0, delta=1e-5, sample_rate=0.01, steps=500)
    check = make()
    check.step(sigma, 0.01, steps=500)
    eps = check.epsilon(1e-5)
    assert eps <= 2.0 and eps == pytest.approx(2.0, rel=1e-3)
    assert accountant.history == []  # the search uses fresh accountants


def test_rdp_noise_search_agrees_with_the_module_function():
    sigma = filkit.RdpAccountant().noise_multiplier(2.0, 1e-5, 0.01, 1000)
    reference, _ = filkit.noise_multiplier_for_epsilon(target_eps=2.0, delta=1e-5, sample_rate=0.01, steps=1000)
    assert sigma == pytest.approx(reference, rel=1e-3)


def test_without_replacement_costs_more_and_pld_is_tighter():
    eps = {}
    for name, make in [("rdp", filkit.RdpAccountant), ("pld", filkit.PldAccountant)]:
        for sampling in ("poisson", "uniform"):
            accountant = make(sampling=sampling)
            accountant.step(1.1, 0.01, steps=1000)
            eps[name, sampling] = accountant.epsilon(1e-5)
    assert eps["pld", "poisson"] < eps["rdp", "poisson"] < eps["rdp", "uniform"]
    assert eps["pld", "uniform"] < eps["rdp", "uniform"]


# ---- sampling without replacement against the datasets it is stated for ----------------------------
def one_step_density(data, batch, sigma, grid):
    """The density on `grid` of one step's release on a dataset of scalar clipped gradients: the sum
    of a batch of `batch` drawn uniformly without replacement, plus N(0, sigma^2) (clip norm 1)."""
    np = pytest.importorskip("numpy")
    combos = list(itertools.combinations(data, batch))
    means = np.array([sum(c) for c in combos])
    return np.exp(-(grid[:, None] - means) ** 2 / (2 * sigma ** 2)).sum(1) / (len(combos) * math.sqrt(2 * math.pi) * sigma)


def test_without_replacement_pld_dominates_every_dataset_and_is_reached():
    """The without-replacement PLD (docs/accountants.md: the pair (q N(2, s^2) + (1-q) N(0, s^2),
    N(0, s^2)) and its reverse, per unit of C) against the brute force: every pair of neighbouring
    datasets (replace one) of n = 4 scalar gradients in {-1, 0, 1}, the exact law of one step's
    release (all C(4, 2) batches) and of two steps (the product), and the hockey-stick divergence by
    dense quadrature. No dataset may exceed the accountant's delta (a wrong pair, or one direction
    missing, would), and the worst one (the others all equal to the replacement) reaches it up to
    the discretisation's k h in eps."""
    np = pytest.importorskip("numpy")
    n, batch, sigma, h, dx = 4, 2, 2.0, 1e-4, 0.04
    grid = np.arange(-batch - 10 * sigma, batch + 10 * sigma, dx)
    quadrature = 2e-5  # the dense sums' error at dx = 0.04 (against dx = 0.02: below 1e-5)
    epsilons = (0.25, 1.0)
    worst = {}  # (steps, eps) -> (delta, datasets)
    for others in itertools.combinations_with_replacement((-1.0, 0.0, 1.0), n - 1):
        for x, replaced in itertools.permutations((-1.0, 0.0, 1.0), 2):
            p = one_step_density(others + (x,), batch, sigma, grid)
            q = one_step_density(others + (replaced,), batch, sigma, grid)
            for steps, (p_k, q_k) in ((1, (p, q)), (2, (np.outer(p, p), np.outer(q, q)))):
                for eps in epsilons:
                    delta = np.maximum(p_k - math.exp(eps) * q_k, 0).sum() * dx ** steps
                    if delta > worst.get((steps, eps), (0.0,))[0]:
                        worst[steps, eps] = (delta, (x, replaced, others), p_k, q_k)
    for steps in (1, 2):
        pld = filkit.PldAccountant(sampling="uniform", discretization=h)
        rdp = filkit.RdpAccountant(sampling="uniform")
        for accountant in (pld, rdp):  # sigma: the noise / C; the relation's sensitivity is 2C
            accountant.step(sigma, batch / n, steps)
        for eps in epsilons:
            delta, (x, replaced, others), p_k, q_k = worst[steps, eps]
            accounted = pld.delta(eps)
            assert delta <= accounted + quadrature, (steps, eps, delta, accounted)
            assert rdp.delta(eps) >= delta - quadrature
            assert abs(x - replaced) == 2 and set(others) == {replaced}, (steps, eps, x, replaced, others)
            # Reached: the worst pair's delta at eps - steps h is at least the accountant's at eps.
            reached = np.maximum(p_k - math.exp(eps - steps * h) * q_k, 0).sum() * dx ** steps
            assert reached >= accounted - quadrature, (steps, eps, reached, accounted)


@pytest.mark.parametrize("make", ACCOUNTANTS)
@pytest.mark.parametrize(
    "call, keyword",
    [
        (lambda a: a.step(0.0, 0.1), "noise_multiplier"),
        (lambda a: a.step(float("nan"), 0.1), "noise_multiplier"),
        (lambda a: a.step(1.0, 1.5), "sample_rate"),
        (lambda a: a.step(1.0, -0.1), "sample_rate"),
        (lambda a: a.step(1.0, 0.1, steps=-1), "steps"),
        (lambda a: a.epsilon(0.0), "delta"),
        (lambda a: a.epsilon(1.0), "delta"),
        (lambda a: a.delta(-1.0), "epsilon"),
        (lambda a: a.noise_multiplier(-1.0, 1e-5, 0.01, 10), "target_eps"),
        (lambda a: a.noise_multiplier(1.0, 1e-5, 0.0, 10), "sample_rate"),
        (lambda a: a.noise_multiplier(1.0, 1e-5, 0.01, 0), "steps"),
    ],
)
def test_bad_inputs_raise_value_error_naming_the_keyword(make, call, keyword):
    with pytest.raises(ValueError, match=keyword):
        call(make())


@pytest.mark.parametrize(
    "make, keyword",
    [
        (lambda: filkit.PldAccountant(discretization=0.0), "discretization"),
        (lambda: filkit.PldAccountant(truncation_mass=1.0), "truncation_mass"),
        (lambda: filkit.PldAccountant(sampling="shuffle"), "sampling"),
        (lambda: filkit.RdpAccountant(sampling="with-replacement"), "sampling"),
        (lambda: filkit.RdpAccountant(orders=[0.5]), "orders"),
    ],
)
def test_bad_settings_raise_value_error_naming_the_keyword(make, keyword):
    with pytest.raises(ValueError, match=keyword):
        make()


def test_pld_at_a_huge_step_count_is_refused_by_its_grid_not_crashed():
    """Issue 50: PldAccountant.step(1.0, 0.01, 10**17) crashed (SIGSEGV) when epsilon was asked."""
    for steps in (2 * 10 ** 15, 10 ** 17, 2 ** 63 - 1):
        accountant = filkit.PldAccountant()
        accountant.step(1.0, 0.01, steps)
        with pytest.raises(ValueError, match="grid points"):
            accountant.epsilon(1e-5)
