"""DP-SGD with FIL accounting from Python: seeded, and dFIL falls as the noise grows."""
import numpy as np
import pytest

import filkit


def data(seed=0, n=200, d=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, d)) / np.sqrt(d)
    y = (X @ rng.normal(size=d) > 0).astype(float)
    return filkit.Dataset(X, y)


def test_dfil_scales_as_one_over_sigma_and_runs_are_seeded():
    train, test = data(0), data(1)
    options = dict(batch_size=20, steps=30, step_size=0.5, clip_norm=1.0, seed=3, subsampling="one")
    low, summary = filkit.train_dpsgd(train, test, noise_multiplier=1.0, **options)
    high, _ = filkit.train_dpsgd(train, test, noise_multiplier=4.0, **options)
    d_z = low.private_dims
    # Same seed: same batches, and the clipped-gradient Jacobians differ only through the noise
    # path; Tr(I) carries 1/sigma^2 explicitly, so the ratio is near 16 (not exactly: w_t differs).
    sampled = high.final_checkpoint.fisher_trace > 0  # never-sampled examples have no information
    assert sampled.sum() > train.n // 2
    ratio = np.median(low.final_checkpoint.fisher_trace[sampled] / high.final_checkpoint.fisher_trace[sampled])
    assert 8 < ratio < 32
    again, _ = filkit.train_dpsgd(train, test, noise_multiplier=1.0, **options)
    np.testing.assert_array_equal(again.final_checkpoint.fisher_trace, low.final_checkpoint.fisher_trace)
    assert "'seed': 3" in str(summary)  # the seed is recorded
    assert low.final_checkpoint.dfil(d_z).shape == (train.n,)
    with pytest.raises(ValueError, match="unknown option"):
        filkit.train_dpsgd(train, test, sigma=1.0)
