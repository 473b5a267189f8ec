"""The RDP accountant from Python: the check values of docs/mathematics.md, section 7.10."""
import pytest

import filkit


def test_opacus_check_value():
    accountant = filkit.RdpAccountant()
    accountant.compose(q=0.04, noise_multiplier=1.5, steps=2250)
    spent = accountant.get_privacy_spent(1e-5)
    assert spent.eps == pytest.approx(7.32911, rel=1e-6)
    assert spent.optimal_order == pytest.approx(3.9)


def test_rdp_values_at_fractional_and_integer_orders():
    rdp = filkit.subsampled_gaussian_rdp(0.01, 2.5, [1.5, 5, 50, 100])
    expected = [6.5007e-4, 2.18076e-3, 2.38460e-2, 167.416]
    for value, reference in zip(rdp, expected):
        assert 50 * value == pytest.approx(reference, rel=2e-5)


def test_inverse_problem_does_not_exceed_the_target():
    sigma, spent = filkit.noise_multiplier_for_epsilon(target_eps=2.0, delta=1e-5, q=0.01, steps=1000)
    assert spent.eps <= 2.0 and spent.eps == pytest.approx(2.0, rel=1e-3)
    with pytest.raises(ValueError):
        filkit.RdpAccountant().compose(q=1.5, noise_multiplier=1.0, steps=1)
