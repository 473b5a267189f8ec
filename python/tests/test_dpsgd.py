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
    sampled = high.final_snapshot.fisher_trace > 0  # never-sampled examples have no information
    assert sampled.sum() > train.n // 2
    ratio = np.median(low.final_snapshot.fisher_trace[sampled] / high.final_snapshot.fisher_trace[sampled])
    assert 8 < ratio < 32
    again, _ = filkit.train_dpsgd(train, test, noise_multiplier=1.0, **options)
    np.testing.assert_array_equal(again.final_snapshot.fisher_trace, low.final_snapshot.fisher_trace)
    assert "'seed': 3" in str(summary)  # the seed is recorded
    assert low.final_snapshot.dfil.shape == (train.n,)
    with pytest.raises(TypeError, match="unknown option 'sigma'"):
        filkit.train_dpsgd(train, test, sigma=1.0)


@pytest.mark.skipif(not filkit.networks_available(), reason="built without LibTorch")
def test_network_products_match_finite_differences_and_train():
    net = filkit.Network("mlp", 6, 3, hidden=[5])
    rng = np.random.default_rng(0)
    w = net.initial_parameters(seed=1)
    X = rng.uniform(size=(4, 6))
    y = np.array([0.0, 1.0, 2.0, 1.0])
    V = rng.normal(size=(4, 6))
    h = 1e-5
    fd = (net.clipped_gradients(w, X + h * V, y, 0.3) - net.clipped_gradients(w, X - h * V, y, 0.3)) / (2 * h)
    np.testing.assert_allclose(net.jacobian_vector_products(w, X, y, 0.3, V), fd, rtol=1e-6, atol=1e-10)
    _, trace, _ = net.account_batch(w, X, y, 0.3, trace="exact")
    columns = []  # G e_k of every example by central differences
    for k in range(6):
        E = np.zeros_like(X)
        E[:, k] = h
        columns.append((net.clipped_gradients(w, X + E, y, 0.3) - net.clipped_gradients(w, X - E, y, 0.3)) / (2 * h))
    np.testing.assert_allclose(trace, sum(np.square(c).sum(axis=1) for c in columns), rtol=1e-6)
    train = filkit.Dataset(rng.uniform(size=(30, 6)), (np.arange(30) % 3).astype(float))
    result, summary = filkit.train_dpsgd(train, train, model="mlp", hidden=[4], batch_size=10, steps=3,
                                         trace="gaussian", probes=1, spectral="none", seed=2)
    assert result.parameter_count == net.parameter_count - (6 * 5 + 5 + 5 * 3 + 3) + (6 * 4 + 4 + 4 * 3 + 3)
    assert summary["settings"]["dpsgd"]["network"]["architecture"] == "mlp"  # the training options as resumed
    assert len(result.models) == 0 and len(result.parameters) == 1


def test_network_objects_have_the_command_line_memory_budget_and_a_keyword_to_change_it():
    """filkit.Network is refused before anything is allocated (and before LibTorch loads) when its
    training estimate exceeds max_memory: by default half the physical memory, as --max-memory."""
    with pytest.raises(filkit.MemoryLimitError, match=r"a network of 23000002 parameters.*more than max_memory = 64M"):
        filkit.Network("mlp", 20, 2, hidden=[1000000], max_memory="64M")
    with pytest.raises(filkit.MemoryLimitError, match="more than max_memory = 1000") as error:
        filkit.Network("mlp", 20, 2, hidden=[100], max_memory=1000)
    assert "chunk" in str(error.value)
    # No max_memory: the default budget still refuses a network of 2e10 parameters.
    with pytest.raises(MemoryError, match="a network of 23000000002 parameters"):
        filkit.Network("mlp", 20, 2, hidden=[1000000000])
    with pytest.raises(filkit.OptionError, match="max_memory = '2X'"):
        filkit.Network("mlp", 20, 2, max_memory="2X")
    # Errors name the keyword as typed.
    with pytest.raises(filkit.OptionError, match=r"^arch = 'dense:4,softplus:1e-300,dense:2': layer 2") as error:
        filkit.Network("custom", 4, 2, arch="dense:4,softplus:1e-300,dense:2")
    assert error.value.option == "arch"
    with pytest.raises(filkit.OptionError, match=r"^architecture = custom: give a layer specification \(arch\)") as error:
        filkit.Network("custom", 4, 2)
    assert error.value.option == "architecture"
