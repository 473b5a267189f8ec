"""The RDP accountant from Python: the check values of docs/mathematics.md, section 7.10."""
import pytest

import filkit


def test_opacus_check_value():
    accountant = filkit.RdpAccountant()
    accountant.compose(noise_multiplier=1.5, sample_rate=0.04, steps=2250)
    spent = accountant.get_privacy_spent(1e-5)
    assert spent.eps == pytest.approx(7.32911, rel=1e-6)
    assert spent.optimal_order == pytest.approx(3.9)
    # The former keyword q= is the sample rate still; positional arguments, whose order changed to
    # step()'s (noise_multiplier, sample_rate, steps), are refused rather than read the old way.
    former = filkit.RdpAccountant()
    former.compose(q=0.04, noise_multiplier=1.5, steps=2250)
    assert former.rdp == accountant.rdp
    with pytest.raises(TypeError):
        filkit.RdpAccountant().compose(0.04, 1.5, 2250)


def test_rdp_values_at_fractional_and_integer_orders():
    rdp = filkit.subsampled_gaussian_rdp(0.01, 2.5, [1.5, 5, 50, 100])
    expected = [6.5007e-4, 2.18076e-3, 2.38460e-2, 167.416]
    for value, reference in zip(rdp, expected):
        assert 50 * value == pytest.approx(reference, rel=2e-5)


def test_inverse_problem_does_not_exceed_the_target():
    sigma, spent = filkit.noise_multiplier_for_epsilon(target_eps=2.0, delta=1e-5, sample_rate=0.01, steps=1000)
    assert spent.eps <= 2.0 and spent.eps == pytest.approx(2.0, rel=1e-3)
    # One search: the accountants' own, with the same sigma.
    assert filkit.RdpAccountant().noise_multiplier(2.0, 1e-5, 0.01, 1000) == sigma
    checked = filkit.RdpAccountant()
    checked.step(sigma, 0.01, 1000)
    assert checked.get_privacy_spent(1e-5).eps == spent.eps
    with pytest.warns(DeprecationWarning, match="q= is now sample_rate="):
        assert filkit.noise_multiplier_for_epsilon(target_eps=2.0, delta=1e-5, q=0.01, steps=1000)[0] == sigma
    with pytest.raises(ValueError, match="sample_rate"):
        filkit.RdpAccountant().compose(q=1.5, noise_multiplier=1.0, steps=1)
