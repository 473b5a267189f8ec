"""filkit.torch.make_private: DP-SGD in the user's own loop, against a reference loop over filkit's
C++ backend (filkit.Network: clipped per-example gradients and exact traces) fed the same batches
and the same noise draws, and Opacus' hard clip against per-example autograd.

filkit dpsgd itself draws its batches and noise inside C++ and cannot be fed others, so the
reference is its step written out (docs/mathematics.md, section 7.1 with momentum 0) over the same
backend it trains with."""
import copy

import numpy as np
import pytest

import filkit

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import SOFT_CLIP_NORM_BOUND, make_private  # noqa: E402
from filkit.torch.functional import assign_flat  # noqa: E402

networks = pytest.mark.skipif(not filkit.networks_available(), reason="built without LibTorch")


def flat(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy()


def user_loop(model, optimizer, loader, epochs):
    """A plain PyTorch training loop, unchanged by make_private; records what the loader sampled."""
    batches, noises = [], []
    for _ in range(epochs):
        for x, y in loader:
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()  # an empty Poisson batch too: its gradient is 0
            optimizer.step()
            batches.append(None if len(loader.current[2]) == 0 else loader.current[2].numpy())
            noises.append(optimizer.noise.numpy().copy())
    return batches, noises


@networks
@pytest.mark.parametrize("poisson", [True, False])
def test_make_private_equals_the_reference_dpsgd_step_over_filkits_backend(poisson):
    n, d, K, B, C, sigma, rho = 30, 6, 3, 6, 0.3, 1.1, 0.5
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(n, d)), (np.arange(n) % K).astype(float)
    network = filkit.Network("mlp", d, K, hidden=[5])
    w0 = network.initial_parameters(seed=2)
    model = nn.Sequential(nn.Linear(d, 5), nn.Tanh(), nn.Linear(5, K)).double()
    assign_flat(model, w0)
    data = torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(y).long())
    loader = torch.utils.data.DataLoader(data, batch_size=B, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=rho)
    model, optimizer, loader = make_private(model, optimizer, loader, noise_multiplier=sigma, max_grad_norm=C,
                                            poisson_sampling=poisson, seed=4, trace="exact")
    batches, noises = user_loop(model, optimizer, loader, epochs=2)
    assert len(batches) == 2 * round(n / B)
    sizes = [0 if b is None else len(b) for b in batches]
    assert (len(set(sizes)) > 1) if poisson else (set(sizes) == {B})

    w, trace = w0.copy(), np.zeros(n)
    for ids, noise in zip(batches, noises):
        total = np.zeros_like(w)
        if ids is not None:
            total = network.clipped_gradients(w, X[ids], y[ids], C).sum(0)
            _, tr, _ = network.account_batch(w, X[ids], y[ids], C, trace="exact")
            trace[ids] += tr / (sigma * C) ** 2
        w = w - rho * (total + noise) / B
    np.testing.assert_allclose(flat(model), w, rtol=1e-10, atol=1e-13)
    accountant = optimizer.accountant
    assert accountant.steps == len(batches)  # empty Poisson batches count: they release noise
    kappa = filkit.subsampling_kappa(B / n, sigma, 1.0 / (n * accountant.steps))
    np.testing.assert_allclose(accountant.dfil(), np.sqrt(kappa * trace / d), rtol=1e-10)
    # The sampler is accounted as what it is: Poisson, or B without replacement (replace-one).
    sampling = "poisson" if poisson else "uniform"
    assert accountant.settings["sampling"] == accountant.accounted_sampling == sampling
    expected = filkit.RdpAccountant(sampling=sampling)
    expected.step(sigma / SOFT_CLIP_NORM_BOUND, B / n, accountant.steps)
    assert accountant.epsilon(1e-5) == pytest.approx(expected.epsilon(1e-5), rel=1e-14)


def test_the_noise_is_opacus_scale_and_seeded():
    torch.manual_seed(0)
    model = nn.Linear(400, 10).double()
    data = torch.utils.data.TensorDataset(torch.rand(20, 400, dtype=torch.double), torch.arange(20) % 10)
    loader = torch.utils.data.DataLoader(data, batch_size=5)
    _, optimizer, private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), loader,
                                         noise_multiplier=2.0, max_grad_norm=0.5, seed=3, account=False)
    assert optimizer.accountant is None
    for x, y in private:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        break
    noise = optimizer.noise
    assert noise.std().item() == pytest.approx(2.0 * 0.5, rel=0.05)  # 4010 draws of N(0, (sigma C)^2)
    again = nn.Linear(400, 10).double()
    _, optimizer2, private2 = make_private(again, torch.optim.SGD(again.parameters(), lr=0.1), loader,
                                           noise_multiplier=2.0, max_grad_norm=0.5, seed=3, account=False)
    x, y = next(iter(private2))
    F.cross_entropy(again(x), y).backward()
    optimizer2.step()
    np.testing.assert_array_equal(optimizer2.noise.numpy(), noise.numpy())


def test_hard_clipping_is_opacus_rule_on_per_example_autograd():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(18, 3)).double()
    X, Y = torch.rand(6, 1, 5, 5, dtype=torch.double), torch.tensor([0, 1, 2, 0, 1, 2])
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=3)
    reference = copy.deepcopy(model)  # (a backward through the private model counts as the loop's)
    _, optimizer, private = make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), loader,
                                         noise_multiplier=1.0, max_grad_norm=0.05, clipping="hard", account=False,
                                         poisson_sampling=False)
    x, y = next(iter(private))
    expected = 0
    for b in range(len(y)):
        grads = torch.autograd.grad(F.cross_entropy(reference(x[b:b + 1]), y[b:b + 1]), list(reference.parameters()))
        g = torch.cat([t.reshape(-1) for t in grads])
        expected = expected + g * min(1.0, 0.05 / g.norm().item())
    F.cross_entropy(model(x), y).backward()
    optimizer.step()
    clipped_sum = torch.cat([p.grad.reshape(-1) for p in model.parameters()]) * 3 - optimizer.noise
    np.testing.assert_allclose(clipped_sum.numpy(), expected.numpy(), rtol=1e-11, atol=1e-14)


def test_empty_poisson_batches_release_noise_alone_and_count_as_steps():
    torch.manual_seed(2)
    model = nn.Linear(3, 2).double()
    data = torch.utils.data.TensorDataset(torch.rand(40, 3, dtype=torch.double), torch.arange(40) % 2)
    _, optimizer, loader = make_private(model, torch.optim.SGD(model.parameters(), lr=1.0),
                                        torch.utils.data.DataLoader(data, batch_size=1), noise_multiplier=1.0,
                                        max_grad_norm=1.0, seed=5)
    empty, sampled = 0, 0
    for x, y in loader:
        before = flat(model)
        if len(x):  # (an empty batch's forward and backward may also run: they add nothing)
            sampled += len(x)
            F.cross_entropy(model(x), y).backward()
        optimizer.step()
        if len(x) == 0:
            empty += 1
            np.testing.assert_allclose(flat(model), before - optimizer.noise.numpy(), rtol=1e-15)  # lr 1, B = 1
    assert empty > 0 and optimizer.accountant.steps == len(loader) == 40
    assert optimizer.accountant.times_sampled().sum() == sampled


def test_a_learning_rate_scheduler_drives_the_wrapped_optimizer():
    model = nn.Linear(3, 2).double()
    data = torch.utils.data.TensorDataset(torch.rand(4, 3, dtype=torch.double), torch.tensor([0, 1, 0, 1]))
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    _, optimizer, loader = make_private(model, sgd, torch.utils.data.DataLoader(data, batch_size=2),
                                        noise_multiplier=1.0, max_grad_norm=1.0, account=False)
    assert isinstance(optimizer, torch.optim.Optimizer)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    for x, y in loader:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    scheduler.step()
    assert sgd.param_groups[0]["lr"] == pytest.approx(0.05)


def test_bad_arguments_are_refused():
    model = nn.Linear(3, 2)
    data = torch.utils.data.TensorDataset(torch.rand(4, 3), torch.tensor([0, 1, 0, 1]))
    loader = torch.utils.data.DataLoader(data, batch_size=2)
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="max_grad_norm = 0"):
        make_private(model, sgd, loader, noise_multiplier=1.0, max_grad_norm=0)
    with pytest.raises(ValueError, match="optimizer: expected a torch.optim.Optimizer"):
        make_private(model, None, loader, noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(ValueError, match="must optimize every parameter"):
        make_private(model, torch.optim.SGD([model.weight], lr=0.1), loader, noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(ValueError, match="batch_size = 9"):
        make_private(model, sgd, torch.utils.data.DataLoader(data, batch_size=9), noise_multiplier=1.0,
                     max_grad_norm=1.0)
    bn = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    with pytest.raises(ValueError, match=r"layer '1' \(BatchNorm1d\)"):
        make_private(bn, torch.optim.SGD(bn.parameters(), lr=0.1), loader, noise_multiplier=1.0, max_grad_norm=1.0)
    _, optimizer, _ = make_private(model, sgd, loader, noise_multiplier=1.0, max_grad_norm=1.0)
    with pytest.raises(ValueError, match="closure is not supported"):
        optimizer.step(lambda: 0.0)
