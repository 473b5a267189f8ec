"""IRFIL, attribute inference, reconstruction bounds and the GLM attack from Python."""
import numpy as np
import pytest

import filkit


def unit_ball_data(n=150, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d)) / np.sqrt(d)
    y = (X @ rng.normal(size=d) + 0.1 * rng.normal(size=n) > 0).astype(float)
    return filkit.Dataset(X, y)


def test_reconstruction_bounds_and_exact_attack_without_noise():
    data = unit_ball_data()
    model = filkit.fit(data, model="logistic", l2=1e-2, intercept=True, tolerance=1e-13)
    bounds = filkit.reconstruction_bounds(model, data, sigma=1e-2)
    assert bounds.rdp_epsilon == pytest.approx(4 / (150 * 1e-2 * 1e-2) ** 2)
    np.testing.assert_allclose(bounds.dfil_bound, 1 / bounds.fil.dfil ** 2)
    attack = filkit.glm_reconstruction_attack(model, data, sigma=0.0, trials=1, save_reconstructions=[3])
    assert attack.mean_mse.max() < 1e-16
    np.testing.assert_allclose(attack.reconstructions[0], data.X[3], atol=1e-8)
    assert np.isnan(attack.jacobian_trace).all()  # no noise: nothing to estimate them from


def test_glm_attack_bias_and_jacobian_at_small_noise_are_an_unbiased_attackers():
    data = unit_ball_data()
    model = filkit.fit(data, model="logistic", l2=1e-2, intercept=True, tolerance=1e-13)
    attack = filkit.glm_reconstruction_attack(model, data, sigma=1e-6, trials=200, rows=[0, 1, 2])
    np.testing.assert_allclose(attack.jacobian_trace, 1.0, atol=1e-3)  # the linearised attack is unbiased
    assert (attack.jacobian_trace_standard_error < 1e-3).all()
    assert (np.abs(attack.squared_bias) < 1e-3 * attack.mean_mse + 4 * attack.squared_bias_standard_error).all()


def test_irfil_flattens_eta():
    data = unit_ball_data(n=120, d=3, seed=1)
    result = filkit.irfil(data, data, model="least-squares", l2=1e-2, iterations=6)
    spread = lambda eta: np.std(eta) / np.mean(eta)
    assert spread(result.eta_after) < 0.2 * spread(result.eta_before)
    assert len(result.weights) == 7 and result.summary


def test_attribute_inference_needs_a_named_attribute():
    data = unit_ball_data()
    with pytest.raises(ValueError):
        filkit.attribute_inference(data, data, attribute="SEX")


def test_white_box_attack_is_exact_without_noise_and_near_prior_with_much():
    rng = np.random.default_rng(4)
    n = 120
    level = rng.integers(0, 3, size=n)
    onehot = np.zeros((n, 2))
    onehot[level == 0, 0] = 1
    onehot[level == 1, 1] = 1  # level 2 is the dropped (all-zero) level
    other = rng.normal(size=(n, 2))
    X = np.hstack([onehot, other])
    y = X @ np.array([1.0, -1.0, 0.5, 0.3]) + 0.1 * rng.normal(size=n)
    data = filkit.Dataset(X, y)
    result = filkit.attribute_inference(data, data, attribute="0,1", model="least-squares", regression=True,
                                        intercept=True, l2=1e-3, sigmas=[1e-8, 1e3], trials=5, seed=1)
    by_sigma = result.summary["by_sigma"] if "by_sigma" in result.summary else None
    assert by_sigma is not None
    assert by_sigma[0]["white_box"] == pytest.approx(1.0)
    assert by_sigma[1]["white_box"] < 0.6
