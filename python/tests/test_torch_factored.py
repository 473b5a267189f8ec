"""Dense layers held in factors (filkit.torch.functional: FactoredLinear, BatchedClippedGradients):
the same Jacobian products and clipped sums as the unfactored batch and filkit's C++ backend for a
fixed probe, the reduced Gaussian draws of (U a, U^T dz) with the mean and variance of a full
Gaussian probe (Monte Carlo against the exact G), and the layers that cannot be factored left whole."""
import numpy as np
import pytest

import filkit

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import FilAccountant  # noqa: E402
from filkit.torch.functional import (BatchedClippedGradients, ClippedGradient, assign_flat,  # noqa: E402
                                     factorable_linears, split_parameters, verify_factored)

networks = pytest.mark.skipif(not filkit.networks_available(), reason="built without LibTorch")


def small_cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 3, 3, 2, 1), nn.Softplus(), nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(12, 4),
                         nn.Tanh(), nn.Linear(4, 3)).double()


def batch(count=5, seed=1):
    X = torch.rand(count, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(seed))
    return X, torch.arange(count) % 3


def both(module, X, Y, C=0.2):
    """The batch factored (the verified layers) and unfactored, and the layers."""
    g = ClippedGradient(module, F.cross_entropy, C, "smooth", X.shape[1:])
    params, constants = split_parameters(module)
    Z = X.reshape(len(X), -1)
    layers = verify_factored(g, params, constants, factorable_linears(module, params), Z[0], Y[0])
    return (BatchedClippedGradients(g, params, constants, Z, Y, layers),
            BatchedClippedGradients(g, params, constants, Z, Y), layers)


def relative(a, b):
    return float((a - b).norm() / b.norm())


def test_factored_products_and_clipped_sum_equal_the_unfactored_ones():
    module = small_cnn()
    X, Y = batch()
    factored, whole, layers = both(module, X, Y)
    assert [layer.name for layer in layers] == ["4", "6"]
    p = sum(w.numel() for w in module.parameters())
    U = torch.randn(len(X), p, dtype=torch.double, generator=torch.Generator().manual_seed(2))
    assert relative(factored.norm, whole.norm) < 1e-14
    assert relative(factored.transpose_products(U, retain_graph=True), whole.transpose_products(U)) < 1e-13
    assert relative(factored.clipped_sum(), whole.clipped_sum()) < 1e-14
    # A bias that is not trained stays with the constants; the weight is still factored.
    module[6].bias.requires_grad_(False)
    factored, whole, layers = both(module, X, Y)
    assert [layer.bias for layer in layers] == ["4.bias", None]
    U = U[:, :p - 3]
    assert relative(factored.transpose_products(U, retain_graph=True), whole.transpose_products(U)) < 1e-13
    assert relative(factored.clipped_sum(), whole.clipped_sum()) < 1e-14


@networks
def test_factored_products_equal_the_cpp_backend_on_the_mnist_cnn():
    network = filkit.Network("cnn", 784, 10, image=(1, 28, 28))
    w = network.initial_parameters(seed=5)
    module = nn.Sequential(nn.Conv2d(1, 16, 8, 2, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Conv2d(16, 32, 4, 2), nn.Tanh(),
                           nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(512, 32), nn.Tanh(), nn.Linear(32, 10)).double()
    assign_flat(module, w)
    rng = np.random.default_rng(3)
    X, y = rng.uniform(size=(3, 784)), np.array([1.0, 4.0, 9.0])
    C = float(np.median(np.linalg.norm(network.gradients(w, X, y), axis=1)))
    U = rng.standard_normal((3, network.parameter_count))
    factored, _, layers = both(module, torch.from_numpy(X).reshape(3, 1, 28, 28), torch.from_numpy(y).long(), C)
    assert len(layers) == 2
    np.testing.assert_allclose(factored.transpose_products(torch.from_numpy(U)).numpy(),
                               network.vector_jacobian_products(w, X, y, C, U), rtol=1e-10, atol=1e-14)


def test_reduced_gaussian_draws_have_the_mean_and_variance_of_a_full_probe():
    """|G^T u|^2 with u ~ N(0, I_p) has mean Tr(G^T G) and variance 2 Tr((G^T G)^2); the reduced
    draws must give the same (a wrong joint law of U a and U^T dz changes the mean: their
    cross-covariance is dz a^T)."""
    torch.manual_seed(4)
    module = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3)).double()
    x = torch.rand(1, 6, dtype=torch.double, generator=torch.Generator().manual_seed(5))
    y = torch.tensor([2])
    g = ClippedGradient(module, F.cross_entropy, 0.3, "smooth", (6,))
    params, constants = split_parameters(module)
    p = sum(w.numel() for w in module.parameters())
    # G^T (d_z x p), row by row of the identity, from the unfactored batch.
    rows = BatchedClippedGradients(g, params, constants, x.repeat(p, 1), y.repeat(p))
    Gt = rows.transpose_products(torch.eye(p, dtype=torch.double))  # row j: G^T e_j
    A = Gt.t() @ Gt  # G^T G, d_z x d_z
    mean, variance = float(A.trace()), float(2 * (A @ A).trace())
    draws = 40000
    layers = verify_factored(g, params, constants, factorable_linears(module, params), x[0], y[0])
    assert len(layers) == 2
    batched = BatchedClippedGradients(g, params, constants, x.repeat(draws, 1), y.repeat(draws), layers)
    generator = torch.Generator().manual_seed(6)
    estimates = batched.gaussian_transpose_products(
        lambda shape: torch.randn(shape, dtype=torch.double, generator=generator)).pow(2).sum(1)
    sample_mean, sample_variance = float(estimates.mean()), float(estimates.var())
    fourth = float(((estimates - sample_mean) ** 4).mean())
    assert abs(sample_mean - mean) <= 5 * np.sqrt(variance / draws), (sample_mean, mean)
    assert abs(sample_variance - variance) <= 5 * np.sqrt((fourth - sample_variance ** 2) / draws), \
        (sample_variance, variance)


class CalledTwice(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(4, 4)
        self.out = nn.Linear(4, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.inner(torch.tanh(self.inner(x)))))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
        self.b.weight = self.a.weight
        self.out = nn.Linear(4, 3)

    def forward(self, x):
        return self.out(torch.tanh(self.b(torch.tanh(self.a(x)))))


class Sequence(nn.Module):
    """A dense layer on every position of a sequence: its gradient is a sum of outer products."""

    def __init__(self):
        super().__init__()
        self.dense = nn.Linear(2, 3)

    def forward(self, x):
        return self.dense(x.reshape(x.shape[0], 2, 2)).sum(1)


@pytest.mark.parametrize("make, shape, expected", [(CalledTwice, (4,), ["out"]), (Tied, (4,), ["out"]),
                                                   (Sequence, (4,), [])])
def test_layers_that_are_not_one_outer_product_are_left_whole(make, shape, expected):
    torch.manual_seed(7)
    module = make().double()
    X = torch.rand(3, *shape, dtype=torch.double, generator=torch.Generator().manual_seed(8))
    Y = torch.tensor([0, 1, 2])
    g = ClippedGradient(module, F.cross_entropy, 0.3, "smooth", shape)
    params, constants = split_parameters(module)
    candidates = factorable_linears(module, params)
    layers = verify_factored(g, params, constants, candidates, X[0], Y[0])
    if make is CalledTwice:  # in the module tree once; only the forward shows it called twice
        assert [layer.name for layer in candidates] == ["inner", "out"] and layers == []
        layers = verify_factored(g, params, constants, candidates[1:], X[0], Y[0])
    assert [layer.name for layer in layers] == expected
    p = sum(w.numel() for w in module.parameters())
    U = torch.randn(3, p, dtype=torch.double, generator=torch.Generator().manual_seed(9))
    batched = BatchedClippedGradients(g, params, constants, X, Y, layers)
    reference = g.transpose_products(params, constants, X, Y, U)  # per example, no batching
    assert relative(batched.transpose_products(U), reference) < 1e-12


def test_the_accountant_factors_the_dense_layers_and_its_gaussian_trace_stays_unbiased():
    module = small_cnn(3)
    X, Y = batch(4, 2)
    options = dict(loss_fn=F.cross_entropy, clip_norm=0.2, noise_multiplier=1.0, sample_rate=0.1)
    exact = FilAccountant(module, trace="exact", **options).step(X, Y, range(4)).numpy()
    m = 400
    accountant = FilAccountant(module, trace="gaussian", probes=m, seed=11, **options)
    estimate = accountant.step(X, Y, range(4)).numpy()
    assert [len(layers) for layers in accountant._factored.values()] == [2]
    assert np.all(np.abs(estimate - exact) <= 5 * np.sqrt(2 / m) * exact), (estimate, exact)
