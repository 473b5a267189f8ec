"""filkit.torch.FilAccountant against independent ground truths: the C++ backend's per-example
traces and Jacobian products (filkit.Network, LibTorch) on the builtin networks and a random layer
chain, softmax regression's closed form (docs/mathematics.md, section 7.7) and filkit dpsgd's own
exact traces, finite differences for hard clipping and a private label, and the Gaussian estimator's
mean by Monte Carlo with a tolerance from its variance."""
import json
import math
import os
import subprocess

import numpy as np
import pytest

import filkit

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import SOFT_CLIP_NORM_BOUND, FilAccountant, check_module  # noqa: E402
from filkit.torch.functional import ClippedGradient, assign_flat, split_parameters  # noqa: E402

networks = pytest.mark.skipif(not filkit.networks_available(), reason="built without LibTorch")
SIGMA = 1.3


def traces(module, X, y, C, image=None, **options):
    """The accountant's per-example Tr(G^T G) (undoing the 1/(sigma C)^2)."""
    accountant = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=SIGMA,
                               sample_rate=0.1, **options)
    inputs = torch.from_numpy(X).reshape((len(X),) + (image or (X.shape[1],)))
    return accountant.step(inputs, torch.from_numpy(y).long(), range(len(X))).numpy() * (SIGMA * C) ** 2


def typical_clip(network, w, X, y):
    """A clip norm inside the range of the gradient norms, so that the clip bends every example's gradient."""
    return float(np.median(np.linalg.norm(network.gradients(w, X, y), axis=1)))


ARCHITECTURES = {
    "mlp": (lambda: nn.Sequential(nn.Flatten(), nn.Linear(64, 7), nn.Tanh(), nn.Linear(7, 4)), None, 64, 4, [7]),
    "cnn": (lambda: nn.Sequential(nn.Conv2d(1, 16, 8, 2, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Conv2d(16, 32, 4, 2),
                                  nn.Tanh(), nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(512, 32), nn.Tanh(),
                                  nn.Linear(32, 10)), (1, 28, 28), 784, 10, [128]),
}


@networks
def test_defaults_are_the_networks_accounting_defaults():
    """FilAccountant (pure Python, so that it runs without the compiled module) writes its own
    defaults; they must be the C++ NetworkAccountingRequest's, which Network.account_batch and
    filkit dpsgd's autos for networks use (issue 29: every default written once, the rest checked)."""
    import inspect
    import re
    core = pytest.importorskip("filkit._filkit")
    signature = core.Network.account_batch.__doc__.splitlines()[0]
    cpp = {name: value.strip("'\"") for name, value in re.findall(r"(\w+): \w+ = ([^,)]+)", signature)}
    python = inspect.signature(FilAccountant).parameters
    assert python["trace"].default == cpp["trace"]
    assert python["probes"].default == int(cpp["probes"])
    assert python["power_iterations"].default == int(cpp["power_iterations"])
    assert (cpp["spectral"] == "none") == (python["spectral"].default is False)


@networks
@pytest.mark.parametrize("architecture", ["mlp", "cnn"])
def test_exact_traces_equal_the_cpp_backend_on_the_builtin_networks(architecture):
    make, image, d, K, hidden = ARCHITECTURES[architecture]
    network = filkit.Network(architecture, d, K, hidden=hidden, image=image)
    w = network.initial_parameters(seed=3)
    module = make().double()
    assign_flat(module, w)
    rng = np.random.default_rng(0)
    B = 2 if architecture == "cnn" else 5
    X, y = rng.uniform(size=(B, d)), (np.arange(B) % K).astype(float)
    inputs = torch.from_numpy(X).reshape((B,) + (image or (d,)))
    np.testing.assert_allclose(module(inputs).detach().numpy(), network.logits(w, X), rtol=1e-12, atol=1e-14)
    C = typical_clip(network, w, X, y)
    _, expected, _ = network.account_batch(w, X, y, C, trace="exact")
    np.testing.assert_allclose(traces(module, X, y, C, image, trace="exact"), expected, rtol=1e-10)


ACTIVATIONS = {"tanh": nn.Tanh, "sigmoid": nn.Sigmoid, "softplus": nn.Softplus, "gelu": nn.GELU}


def random_chain(seed):
    """A random layer specification (filkit's --arch syntax) and the same chain in PyTorch."""
    rng = np.random.default_rng(seed)
    channels, side = int(rng.integers(1, 3)), int(rng.integers(7, 10))
    spec, layers = [], []
    c, s = channels, side
    for _ in range(int(rng.integers(1, 3))):
        out, k, stride, pad = int(rng.integers(2, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(0, 2))
        if (s + 2 * pad - k) // stride + 1 < 2:
            break
        spec.append(f"conv:{out}:{k}:{stride}:{pad}")
        layers.append(nn.Conv2d(c, out, k, stride, pad))
        c, s = out, (s + 2 * pad - k) // stride + 1
        act = str(rng.choice(list(ACTIVATIONS)))
        spec.append(act)
        layers.append(ACTIVATIONS[act]())
        if s >= 3 and rng.uniform() < 0.5:
            spec.append("avgpool:2:1")
            layers.append(nn.AvgPool2d(2, 1))
            s -= 1
    spec.append("flatten")
    layers.append(nn.Flatten())
    width, K = int(rng.integers(3, 6)), 3
    act = str(rng.choice(list(ACTIVATIONS)))
    spec += [f"dense:{width}", act, f"dense:{K}"]
    layers += [nn.Linear(c * s * s, width), ACTIVATIONS[act](), nn.Linear(width, K)]
    return ",".join(spec), nn.Sequential(*layers).double(), (channels, side, side), K


@networks
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exact_traces_equal_the_cpp_backend_on_a_random_layer_chain(seed):
    spec, module, image, K = random_chain(seed)
    d = math.prod(image)
    network = filkit.Network("custom", d, K, arch=spec, image=image)
    w = network.initial_parameters(seed=seed)
    assign_flat(module, w)
    rng = np.random.default_rng(seed)
    X, y = rng.uniform(size=(4, d)), np.array([0.0, 1.0, 2.0, 1.0])
    C = typical_clip(network, w, X, y)
    _, expected, _ = network.account_batch(w, X, y, C, trace="exact")
    np.testing.assert_allclose(traces(module, X, y, C, image, trace="exact"), expected, rtol=1e-10, err_msg=spec)


@networks
def test_jacobian_products_equal_the_cpp_backend_on_the_cifar_cnn():
    image = (3, 32, 32)
    network = filkit.Network("cifar-cnn", 3072, 10, image=image)
    w = network.initial_parameters(seed=1)
    module = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.Tanh(), nn.Conv2d(32, 32, 3, padding=1), nn.Tanh(),
                           nn.AvgPool2d(2, 2), nn.Conv2d(32, 64, 3, padding=1), nn.Tanh(),
                           nn.Conv2d(64, 64, 3, padding=1), nn.Tanh(), nn.AvgPool2d(2, 2),
                           nn.Conv2d(64, 128, 3, padding=1), nn.Tanh(), nn.Conv2d(128, 128, 3, padding=1), nn.Tanh(),
                           nn.AvgPool2d(2, 2), nn.Flatten(), nn.Linear(2048, 128), nn.Tanh(), nn.Linear(128, 10)).double()
    assign_flat(module, w)
    rng = np.random.default_rng(2)
    X, y = rng.uniform(size=(2, 3072)), np.array([3.0, 7.0])
    C = typical_clip(network, w, X, y)
    U = rng.standard_normal((2, network.parameter_count))
    g = ClippedGradient(module, F.cross_entropy, C, "smooth", image)
    params, constants = split_parameters(module)
    Z = torch.from_numpy(X)
    gtu = g.transpose_products(params, constants, Z, torch.from_numpy(y).long(), torch.from_numpy(U))
    np.testing.assert_allclose(gtu.numpy(), network.vector_jacobian_products(w, X, y, C, U), rtol=1e-10, atol=1e-14)


# ---- softmax regression: the closed form of section 7.7 --------------------------------------------
def gelu_tanh(t):
    return 0.5 * t * (1 + np.tanh(np.sqrt(2 / np.pi) * (t + 0.044715 * t ** 3)))


def closed_form_traces(W, X, Y, C, label):
    """Tr(G~^T G~) of softmax regression (logits W x, W K x d, no intercept), docs/mathematics.md 7.7."""
    out = []
    K, d = W.shape
    for x, yk in zip(X, Y):
        a = W @ x
        s = np.exp(a - a.max())
        s /= s.sum()
        r = s - np.eye(K)[yk]
        M = np.diag(s) - np.outer(s, s)
        V = M @ W  # K x d
        g = np.outer(x, r).ravel()  # vec(x r^T), x's index outer
        # Dense G (p x d_z) from the columns of section 7.7, then clipped by P = f I + beta g g^T.
        cols = [np.outer(np.eye(d)[m], r).ravel() + np.outer(x, V[:, m]).ravel() for m in range(d)]
        if label:
            cols += [-np.outer(x, np.eye(K)[k]).ravel() for k in range(K)]
        G = np.stack(cols, 1)
        u = np.linalg.norm(g)
        t = u / C - 1
        f = 1 / (gelu_tanh(t) + 1)
        k = np.sqrt(2 / np.pi)
        th = np.tanh(k * (t + 0.044715 * t ** 3))
        dgelu = 0.5 * (1 + th) + 0.5 * t * (1 - th ** 2) * k * (1 + 3 * 0.044715 * t ** 2)
        beta = -dgelu * f ** 2 / C / u
        Gt = f * G + beta * np.outer(g, g @ G)
        out.append((Gt ** 2).sum())
    return np.array(out)


class Softmax(nn.Module):
    """Logits W x with W's entries in filkit's GLM order (vec(x r^T): feature-major) as the parameter."""

    def __init__(self, W):
        super().__init__()
        self.weight = nn.Parameter(torch.from_numpy(W.T.copy()))  # d x K: flat index m K + k

    def forward(self, x):
        return x @ self.weight


def label_loss(logits, targets):
    """Cross-entropy with r = s - y for a soft label y (filkit's GLM convention, section 7.7)."""
    return (torch.logsumexp(logits, 1) - (targets * logits).sum(1)).mean()


@pytest.mark.parametrize("private", ["input", "input+label"])
def test_softmax_regression_traces_equal_the_closed_form(private):
    rng = np.random.default_rng(4)
    K, d, B = 3, 5, 6
    W, X, Y = rng.normal(size=(K, d)), rng.uniform(size=(B, d)), rng.integers(0, K, B)
    C = 0.5
    expected = closed_form_traces(W, X, Y, C, private == "input+label")
    loss = label_loss if private == "input+label" else F.cross_entropy
    for trace in ("exact",):
        acc = FilAccountant(Softmax(W), loss_fn=loss, clip_norm=C, noise_multiplier=SIGMA, sample_rate=0.1,
                            trace=trace, private=private)
        got = acc.step(torch.from_numpy(X), torch.from_numpy(Y), range(B)).numpy() * (SIGMA * C) ** 2
        np.testing.assert_allclose(got, expected, rtol=1e-12)
        assert acc.private_dims == d + (K if private == "input+label" else 0)


@pytest.mark.parametrize("label", ["public", "private"])
def test_softmax_traces_equal_filkit_dpsgd_one_full_batch_step(label):
    """filkit dpsgd's own accountant (closed form) after one step on the whole set, at w_0 = 0."""
    rng = np.random.default_rng(5)
    n, d, K = 12, 4, 3
    X, y = rng.uniform(size=(n, d)), (np.arange(n) % K).astype(float)
    data = filkit.Dataset(X, y)
    C = 0.3
    result, _ = filkit.train_dpsgd(data, data, model="softmax", batch_size=n, steps=1, clip_norm=C,
                                   noise_multiplier=SIGMA, subsampling="one", label=label, seed=1)
    acc = FilAccountant(Softmax(np.zeros((K, d))), loss_fn=label_loss if label == "private" else F.cross_entropy,
                        clip_norm=C, noise_multiplier=SIGMA, sample_rate=1.0, trace="exact", subsampling="one",
                        private="input+label" if label == "private" else "input")
    acc.step(torch.from_numpy(X), torch.from_numpy(y).long(), range(n))
    np.testing.assert_allclose(acc.fisher_trace(), result.final_snapshot.fisher_trace, rtol=1e-12)
    np.testing.assert_allclose(acc.dfil(), result.final_snapshot.dfil, rtol=1e-12)
    assert acc.private_dims == result.private_dims


# ---- estimators, clipping, private label ----------------------------------------------------------
def small_cnn(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(1, 3, 3, 2, 1), nn.Softplus(), nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(12, 4),
                         nn.Tanh(), nn.Linear(4, 3)).double()


def test_gaussian_trace_agrees_with_the_exact_one_in_expectation():
    module = small_cnn()
    X = torch.rand(4, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(1))
    Y = torch.tensor([0, 1, 2, 1])
    options = dict(loss_fn=F.cross_entropy, clip_norm=0.2, noise_multiplier=1.0, sample_rate=0.1)
    exact = FilAccountant(module, trace="exact", **options).step(X, Y, range(4)).numpy()
    m = 400
    estimate = FilAccountant(module, trace="gaussian", probes=m, seed=7, **options).step(X, Y, range(4)).numpy()
    # Var of one probe |G^T u|^2 is 2 |G G^T|_F^2 <= 2 Tr(G^T G)^2; five standard errors.
    assert np.all(np.abs(estimate - exact) <= 5 * np.sqrt(2 / m) * exact), (estimate, exact)
    assert not np.allclose(estimate, exact, rtol=1e-6)  # an estimate, not the exact value by accident


def dense_jacobian(module, loss, C, clipping, x, y, h=1e-6):
    """G = d g~ / d z by central differences (z: the flat input)."""
    g = ClippedGradient(module, loss, C, clipping, x.shape)
    params, constants = split_parameters(module)
    z = x.reshape(-1)
    cols = []
    for k in range(z.numel()):
        e = torch.zeros_like(z)
        e[k] = h
        cols.append((g(params, constants, z + e, y) - g(params, constants, z - e, y)) / (2 * h))
    return torch.stack(cols, 1), g(params, constants, z, y).norm(), g.gradient(params, constants, z, y).norm()


def test_hard_clipping_matches_finite_differences_away_from_the_boundary():
    module = small_cnn(2)
    X = torch.rand(6, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(3))
    Y = torch.tensor([0, 1, 2, 1, 0, 2])
    params, constants = split_parameters(module)
    unclipped = ClippedGradient(module, F.cross_entropy, 1.0, "hard", (1, 5, 5))
    norms = torch.stack([unclipped.gradient(params, constants, X[b].reshape(-1), Y[b]).norm() for b in range(6)])
    ordered = norms.sort().values
    gap = int((ordered[1:] - ordered[:-1]).argmax())
    C = float(ordered[gap] + ordered[gap + 1]) / 2  # in the widest gap: some clipped, some not
    assert np.all(np.abs(norms.numpy() / C - 1) > 0.01), "an example sits at the clip boundary"
    got = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=1.0, sample_rate=0.1,
                        trace="exact", clipping="hard").step(X, Y, range(6)).numpy() * C ** 2
    expected = [dense_jacobian(module, F.cross_entropy, C, "hard", X[b], Y[b])[0].pow(2).sum().item() for b in range(6)]
    np.testing.assert_allclose(got, expected, rtol=1e-7)
    clipped = norms.numpy() > C  # Opacus' rule: the clipped ones have norm C exactly
    for b in range(6):
        _, clipped_norm, _ = dense_jacobian(module, F.cross_entropy, C, "hard", X[b], Y[b])
        assert clipped_norm.item() == pytest.approx(C if clipped[b] else norms[b].item(), rel=1e-12)


def test_a_private_label_matches_finite_differences_in_the_one_hot_label():
    module = small_cnn(3)
    X = torch.rand(3, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(4))
    Y = torch.tensor([2, 0, 1])
    C = 0.1
    acc = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=1.0, sample_rate=0.1,
                        trace="exact", private="input+label")
    got = acc.step(X, Y, range(3)).numpy() * C ** 2
    assert acc.private_dims == 25 + 3
    g = ClippedGradient(module, F.cross_entropy, C, "smooth", (1, 5, 5), num_classes=3)
    params, constants = split_parameters(module)
    for b in range(3):
        z = torch.cat([X[b].reshape(-1), F.one_hot(Y[b], 3).double()])
        h = 1e-6
        fd = sum(((g(params, constants, z + h * e, None) - g(params, constants, z - h * e, None)) / (2 * h)).pow(2).sum()
                 for e in torch.eye(z.numel(), dtype=torch.double))
        assert got[b] == pytest.approx(fd.item(), rel=1e-7)


def test_power_iteration_estimates_the_spectral_norm_from_below():
    module = small_cnn(4)
    X = torch.rand(2, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(5))
    Y = torch.tensor([1, 2])
    C = 0.1
    acc = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=1.0, sample_rate=0.5,
                        spectral=True, power_iterations=60, subsampling="one")
    acc.step(X, Y, [0, 1])
    for b in range(2):
        G, _, _ = dense_jacobian(module, F.cross_entropy, C, "smooth", X[b], Y[b])
        top = torch.linalg.matrix_norm(G, 2).item() ** 2 / C ** 2
        assert acc.eta()[b] ** 2 <= top * (1 + 1e-6)
        assert acc.eta()[b] ** 2 == pytest.approx(top, rel=1e-4)


# ---- the run: kappa, RDP, dFIL, state, summary ----------------------------------------------------
def test_soft_clip_bound_kappa_and_rdp_are_filkits():
    n, d = 40, 3
    rng = np.random.default_rng(6)
    data = filkit.Dataset(rng.uniform(size=(n, d)), (np.arange(n) % 2).astype(float))
    # Poisson batches: FilAccountant's RDP is the Poisson one (dpsgd accounts fixed-size batches without replacement).
    _, summary = filkit.train_dpsgd(data, data, model="logistic", batch_size=10, steps=5, noise_multiplier=SIGMA,
                                    sampling="poisson")
    assert SOFT_CLIP_NORM_BOUND == pytest.approx(summary["soft_clip_norm_bound"], rel=1e-12)
    acc = FilAccountant(nn.Linear(d, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=SIGMA,
                        sample_rate=10 / n, num_examples=n)
    for t in range(5):
        ids = rng.choice(n, 10, replace=False)
        acc.step(torch.from_numpy(data.X[ids]), torch.from_numpy(data.y[ids]).long(), ids)
    assert acc.kappa_delta == pytest.approx(summary["kappa_delta"], rel=1e-15)  # 1/(n T)
    assert acc.kappa == pytest.approx(summary["kappa"], rel=1e-14)
    rdp = summary["snapshots"][-1]["rdp"]
    assert acc.effective_noise_multiplier == pytest.approx(rdp["noise_multiplier"], rel=1e-12)
    assert acc.epsilon(rdp["delta"]) == pytest.approx(rdp["eps"], rel=1e-12)
    assert acc.rdp([2.0])[0] == pytest.approx(rdp["order2_eps"], rel=1e-12)
    # Section 7.10's check value through the same accountant: q = 0.04, sigma_eff = 1.5, 2250 steps.
    spent = filkit.RdpAccountant()
    spent.compose(noise_multiplier=1.5, sample_rate=0.04, steps=2250)
    assert spent.get_privacy_spent(1e-5).eps == pytest.approx(7.32911, abs=5e-6)
    hard = FilAccountant(nn.Linear(d, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=SIGMA,
                         sample_rate=0.25, clipping="hard", kappa_delta=1e-5)
    assert hard.effective_noise_multiplier == SIGMA  # Opacus' clip bounds the norm by C itself
    eps0 = 2 * math.sqrt(2 * math.log(1.25e5)) / SIGMA
    assert hard.kappa == pytest.approx(0.25 / (0.25 + 0.75 * math.exp(-eps0)), rel=1e-12)
    # kappa in Python (no compiled module needed) is filkit's subsampling_kappa (step_privacy.hpp).
    assert acc.kappa == pytest.approx(filkit.subsampling_kappa(10 / n, SIGMA, acc.kappa_delta), rel=1e-15)
    assert hard.kappa == pytest.approx(filkit.subsampling_kappa(0.25, SIGMA * SOFT_CLIP_NORM_BOUND, 1e-5), rel=1e-15)


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_fixed_size_batches_are_accounted_without_replacement_as_filkit_dpsgd_does(accountant):
    """sampling='uniform' (B of n without replacement every step) gives filkit dpsgd's epsilon for
    --sampling uniform: replace-one neighbours, by the accountant asked for."""
    n, d, B, T = 40, 3, 10, 5
    rng = np.random.default_rng(6)
    data = filkit.Dataset(rng.uniform(size=(n, d)), (np.arange(n) % 2).astype(float))
    _, summary = filkit.train_dpsgd(data, data, model="logistic", batch_size=B, steps=T, noise_multiplier=SIGMA,
                                    sampling="uniform", accountant=accountant)
    acc = FilAccountant(nn.Linear(d, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=SIGMA,
                        sample_rate=B / n, num_examples=n, sampling="uniform", accountant=accountant)
    for _ in range(T):
        ids = rng.choice(n, B, replace=False)
        acc.step(torch.from_numpy(data.X[ids]), torch.from_numpy(data.y[ids]).long(), ids)
    last = summary["snapshots"][-1]
    assert acc.accounted_sampling == "uniform"
    assert acc.epsilon(1e-5) == pytest.approx(last["epsilon"], rel=1e-12)
    assert acc.privacy_spent(1e-5).eps == pytest.approx(last["rdp"]["eps"], rel=1e-12)
    assert acc.rdp([2.0])[0] == pytest.approx(last["rdp"]["order2_eps"], rel=1e-12)
    poisson = FilAccountant(nn.Linear(d, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=SIGMA,
                            sample_rate=B / n, num_examples=n, sampling="poisson", accountant=accountant)
    poisson.steps = T
    assert poisson.epsilon(1e-5) < acc.epsilon(1e-5)  # replace-one doubles the sensitivity


def run_accountant(module, steps=3, seed=0, **options):
    rng = np.random.default_rng(seed)
    acc = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=0.5, noise_multiplier=1.0, sample_rate=0.25,
                        num_examples=12, **options)
    X = torch.from_numpy(rng.uniform(size=(12, 1, 5, 5)))
    Y = torch.from_numpy(np.arange(12) % 3)
    for _ in range(steps):
        ids = np.sort(rng.choice(12, 3, replace=False))
        acc.step(X[ids], Y[ids], ids)
    return acc, X, Y


def test_dfil_accumulates_and_the_state_round_trips():
    acc, X, Y = run_accountant(small_cnn(5), steps=4, spectral=True, power_iterations=3)
    sampled = acc.times_sampled()
    assert sampled.sum() == 12 and acc.steps == 4
    dfil = acc.dfil()
    np.testing.assert_array_equal(dfil[sampled == 0], 0.0)
    np.testing.assert_allclose(dfil, np.sqrt(acc.fisher_trace() / 25))
    np.testing.assert_allclose(acc.mse_bound()[sampled > 0], 1 / dfil[sampled > 0] ** 2)
    np.testing.assert_allclose(acc.dfil([3, 5]), dfil[[3, 5]])
    assert np.all(acc.eta()[sampled > 0] > 0)
    state = acc.state_dict()
    again = FilAccountant(small_cnn(5), loss_fn=F.cross_entropy, clip_norm=0.5, noise_multiplier=1.0,
                          sample_rate=0.25, num_examples=12, spectral=True, power_iterations=3)
    again.load_state_dict(state)
    np.testing.assert_array_equal(again.dfil(), dfil)
    a = acc.step(X[:3], Y[:3], [0, 1, 2])  # same generator state: the same probes
    b = again.step(X[:3], Y[:3], [0, 1, 2])
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    other = FilAccountant(small_cnn(5), loss_fn=F.cross_entropy, clip_norm=0.7, noise_multiplier=1.0,
                          sample_rate=0.25)
    with pytest.raises(ValueError, match="saved with settings"):
        other.load_state_dict(state)
    # On the CPU the probes come from NumPy's generator; a state saved on a GPU (torch's) is refused.
    assert isinstance(state["generator"], dict)
    moved = dict(state, generator=torch.Generator().get_state())
    with pytest.raises(ValueError, match="saved with the model on another device"):
        again.load_state_dict(moved)


def filkit_binary():
    for path in (os.environ.get("FILKIT_BINARY"), os.path.join(os.path.dirname(filkit.__file__), "..", "..", "filkit")):
        if path and os.path.isfile(path):
            return path
    return None


def test_the_summary_has_filkit_dpsgds_format_and_filkit_report_draws_it(tmp_path):
    acc, _, _ = run_accountant(small_cnn(6), steps=2)
    acc.record(test_accuracy=0.5, train_accuracy=0.6)
    acc.step(torch.rand(2, 1, 5, 5, dtype=torch.double), torch.tensor([0, 1]), [4, 7])
    acc.write_summary(tmp_path / "fil.json", tmp_path / "fil.csv", test_accuracy=0.55)
    summary = json.loads((tmp_path / "fil.json").read_text())
    assert summary["command"] == "dpsgd" and summary["n"] == 12 and summary["private_dims"] == 25
    assert [s["step"] for s in summary["snapshots"]] == [2, 3]
    last = summary["snapshots"][-1]
    assert last["dfil"]["max"] == pytest.approx(acc.dfil().max(), rel=1e-15)
    assert last["rdp"]["eps"] == pytest.approx(acc.epsilon(1e-5), rel=1e-15)
    assert last["epsilon"] == last["rdp"]["eps"]  # the RDP accountant, the default
    assert last["test_accuracy"] == 0.55 and last["eta"] is None
    # The accounting object of filkit dpsgd's summary: the default sampler (a shuffled DataLoader)
    # is not covered, and the summary says so.
    accounting = summary["accounting"]
    assert accounting["accountant"] == "rdp" and accounting["sampling"] == "poisson"
    assert accounting["covers_sampler"] is False and "shuffled epochs" in accounting["note"]
    assert summary["sampling_note"] == accounting["note"]
    assert "add/remove" in accounting["neighbouring_relation"]
    assert accounting["effective_noise_multiplier"] == pytest.approx(1.0 / SOFT_CLIP_NORM_BOUND, rel=1e-15)
    assert "1.11524" in accounting["effective_noise_multiplier_reason"]
    assert summary["settings"]["dpsgd"]["sampling"] == "shuffle"
    rows = np.genfromtxt(tmp_path / "fil.csv", delimiter=",", names=True)
    assert rows.dtype.names[:7] == ("step", "epoch", "index", "label", "times_sampled", "eta", "dfil")
    final = rows[rows["step"] == 3]
    np.testing.assert_allclose(final["dfil"], acc.dfil(), rtol=1e-15)
    assert final["label"][4] == 0 and final["label"][7] == 1
    binary = filkit_binary()
    if binary is None:
        pytest.skip("no filkit binary (set FILKIT_BINARY) to run filkit report on the summary")
    out = subprocess.run([binary, "report", "--input", str(tmp_path / "fil.json"), "--table", str(tmp_path / "fil.csv"),
                          "--report", str(tmp_path / "report")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert os.path.isfile(tmp_path / "report" / "index.html") or os.listdir(tmp_path / "report")


# ---- refusals and bad input -----------------------------------------------------------------------
def test_layers_that_fil_cannot_take_are_refused_and_nonsmooth_ones_noted():
    with pytest.raises(ValueError, match=r"layer '1' \(BatchNorm2d\).*couples the examples"):
        check_module(nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2)))
    dropout = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
    with pytest.raises(ValueError, match=r"layer '1' \(Dropout\).*train mode"):
        FilAccountant(dropout, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.1)
    assert check_module(dropout.eval()) == []
    caveats = check_module(nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.MaxPool2d(2)))
    assert len(caveats) == 1 and "'1', '2'" in caveats[0] and "almost everywhere" in caveats[0]


def test_relu_networks_are_accounted_with_the_caveat():
    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(25, 6), nn.ReLU(), nn.Linear(6, 3)).double()
    acc = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=0.1, noise_multiplier=1.0, sample_rate=0.1,
                        trace="exact")
    X = torch.rand(2, 1, 5, 5, dtype=torch.double)
    got = acc.step(X, torch.tensor([0, 2]), [0, 1]).numpy() * 0.01
    for b in range(2):
        G, _, _ = dense_jacobian(module, F.cross_entropy, 0.1, "smooth", X[b], torch.tensor([0, 2])[b])
        assert got[b] == pytest.approx(G.pow(2).sum().item(), rel=1e-6)
    assert "almost everywhere" in acc.caveats[0]


@pytest.mark.parametrize("option, value, message", [
    ("clip_norm", 0.0, "clip_norm = 0.0: must be a finite number > 0"),
    ("noise_multiplier", -1.0, "noise_multiplier = -1.0"),
    ("sample_rate", 1.5, r"sample_rate = 1.5: must be a finite number > 0 and <= 1.0"),
    ("clipping", "soft", "clipping = 'soft': must be one of 'smooth', 'hard'"),
    ("trace", "hutchinson", "trace = 'hutchinson'"),
    ("private", "label", "private = 'label'"),
    ("probes", 0, "probes = 0: must be an integer from 1 to"),
    ("kappa_delta", 2.0, "kappa_delta = 2.0"),
    ("sampling", "random", "sampling = 'random': must be one of 'poisson', 'uniform', 'shuffle'"),
    ("accountant", "prv", "accountant = 'prv': must be one of 'rdp', 'pld'"),
    ("loss_fn", "ce", "loss_fn: expected a callable"),
])
def test_bad_options_are_refused_by_name(option, value, message):
    options = dict(loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.1)
    options[option] = value
    with pytest.raises(ValueError, match=message):
        FilAccountant(nn.Linear(3, 2), **options)


def test_bad_batches_are_refused():
    acc = FilAccountant(nn.Linear(3, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0,
                        sample_rate=0.1, num_examples=5)
    X, Y = torch.rand(2, 3, dtype=torch.double), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="expected 2 integer ids"):
        acc.step(X, Y, [0])
    with pytest.raises(ValueError, match="an id appears twice"):
        acc.step(X, Y, [1, 1])
    with pytest.raises(ValueError, match="id 5 is not below num_examples = 5"):
        acc.step(X, Y, [0, 5])
    with pytest.raises(ValueError, match="share the batch dimension"):
        acc.step(X, Y[:1], [0, 1])
    with pytest.raises(ValueError, match="no step yet"):
        acc.dfil()
    acc.step(X, Y, [0, 1])
    with pytest.raises(ValueError, match="4 input coordinates, earlier batches had 3"):
        acc.step(torch.rand(2, 4, dtype=torch.double), Y, [2, 3])
    with pytest.raises(ValueError, match="rdp_delta"):
        acc.write_summary("/tmp/x.json", "/tmp/x.csv", rdp_delta=0.0)
    with pytest.raises(ValueError, match="the directory of '/nonexistent/x.json' does not exist"):
        acc.write_summary("/nonexistent/x.json", "/tmp/x.csv")
    with pytest.raises(ValueError, match="assign_flat: 7 values for 8 parameters"):
        assign_flat(nn.Linear(3, 2), np.zeros(7))


def test_chunks_give_the_same_traces_as_one_batch():
    module = small_cnn(7)
    X = torch.rand(5, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(8))
    Y = torch.tensor([0, 1, 2, 1, 0])
    options = dict(loss_fn=F.cross_entropy, clip_norm=0.2, noise_multiplier=1.0, sample_rate=0.1, trace="exact")
    whole = FilAccountant(module, **options).step(X, Y, range(5))
    pieces = FilAccountant(module, memory_budget=30000, **options).step(X, Y, range(5))
    np.testing.assert_allclose(pieces.numpy(), whole.numpy(), rtol=1e-13)


def test_add_traces_adds_what_a_step_accounts():
    """add_traces (what finish_step adds of the other ranks' examples under torch.distributed) adds
    given traces exactly as account() adds its own; vectors of different lengths are refused."""
    options = dict(loss_fn=F.cross_entropy, clip_norm=0.5, noise_multiplier=1.0, sample_rate=0.25, spectral=True,
                   power_iterations=3)
    X = torch.rand(3, 1, 5, 5, dtype=torch.double, generator=torch.Generator().manual_seed(9))
    Y = torch.tensor([2, 0, 1])
    stepped, given = FilAccountant(small_cnn(5), **options), FilAccountant(small_cnn(5), **options)
    ids = torch.tensor([4, 0, 2])
    trace = stepped.step(X, Y, ids.tolist())
    spectral = torch.from_numpy(stepped.eta(ids.tolist()) ** 2 / stepped.kappa)
    given.add_traces(ids, trace, spectral, Y.double())
    given.finish_step()
    np.testing.assert_array_equal(given.fisher_trace(), stepped.fisher_trace())
    np.testing.assert_array_equal(given.times_sampled(), stepped.times_sampled())
    np.testing.assert_array_equal(given.labels(), stepped.labels())
    np.testing.assert_allclose(given.eta(), stepped.eta(), rtol=1e-14)
    with pytest.raises(ValueError, match=r"add_traces: .* one length, not of shapes \(3,\), \(2,\), \(3,\), \(3,\)"):
        given.add_traces(ids, trace[:2], trace, trace)
