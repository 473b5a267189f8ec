"""make_private inside loops it did not expect: the gradient privatised and accounted is the one the
loop computed, or the step refuses. Ground truth: plain autograd, one example at a time (a
per-example loss.backward() for the gradient, torch.autograd.functional.jacobian of the clipped
gradient for the Fisher trace), on exactly the inputs and loss the loop used."""
import warnings

import pytest

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import BatchMemoryManager, LoopMismatch, LossError, make_private, with_example_ids  # noqa: E402
from filkit.torch.functional import hard_clip_factor, soft_clip_factor  # noqa: E402

N, B, C, SIGMA = 40, 8, 0.5, 1.3


def data(n=N, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 1, 6, 6, generator=g, dtype=torch.float64)
    return torch.utils.data.TensorDataset(X, torch.arange(n) % 3)


def smooth_net():
    torch.manual_seed(1)
    return nn.Sequential(nn.Conv2d(1, 3, 3), nn.GroupNorm(1, 3), nn.Tanh(), nn.Flatten(), nn.Linear(48, 5),
                         nn.LayerNorm(5), nn.Tanh(), nn.Linear(5, 3)).double()


class LeNetish(nn.Module):
    """Functional ReLU and max pooling, a layer on a sequence (Linear on B x T x F)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.conv = nn.Conv2d(1, 4, 3, padding=1, groups=1)
        self.seq = nn.Linear(6, 6)
        self.head = nn.Linear(4 * 3 * 6, 3)
        self.double()

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x)), (2, 1))  # B x 4 x 3 x 6
        h = torch.tanh(self.seq(h.reshape(x.shape[0], 12, 6)))
        return self.head(h.reshape(x.shape[0], -1))


smoothed = lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)


def private(model, loss_fn=smoothed, account=True, loader=None, **options):
    loader = loader or torch.utils.data.DataLoader(data(), batch_size=B, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_private(model, optimizer, loader, noise_multiplier=SIGMA, max_grad_norm=C, account=account,
                            loss_fn=loss_fn, seed=7, **options)


def flat_grad(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def reference_clipped(reference, x, y, loss_fn, factor=soft_clip_factor):
    """sum_b f(|g_b|) g_b by one backward per example."""
    total = 0
    for b in range(x.shape[0]):
        reference.zero_grad()
        loss_fn(reference(x[b:b + 1]), y[b:b + 1]).backward()
        g = flat_grad(reference)
        total = total + factor(g.norm(), C) * g
    return total


def reference_trace(reference, z, y, loss_fn):
    """Tr(G^T G) / (sigma C)^2, G the Jacobian of the clipped gradient in the example (autograd's
    dense Jacobian of one example's clipped gradient: no vmap, no expansion of the loss)."""
    params = list(reference.parameters())

    def clipped(z_):
        g = torch.autograd.grad(loss_fn(reference(z_.unsqueeze(0)), y.unsqueeze(0)), params, create_graph=True)
        g = torch.cat([t.reshape(-1) for t in g])
        return soft_clip_factor(g.norm(), C) * g

    G = torch.autograd.functional.jacobian(clipped, z)
    return float(G.pow(2).sum()) / (SIGMA * C) ** 2


def copy_into(reference, model):
    with torch.no_grad():
        for p, q in zip(reference.parameters(), model.parameters()):
            p.copy_(q)


@pytest.mark.parametrize("account", [False, True])
@pytest.mark.parametrize("architecture", [smooth_net, LeNetish])
def test_the_privatised_gradient_is_the_loops_own_with_augmentation_and_a_smoothed_loss(account, architecture):
    model, optimizer, loader = private(architecture(), account=account, trace="exact") if account else \
        private(architecture(), account=False)
    reference = architecture()
    shifts = torch.Generator().manual_seed(5)
    traces = {}
    for step, (x, y) in enumerate(loader):
        if step == 3:
            break
        x = torch.roll(x, shifts=int(torch.randint(-2, 3, (1,), generator=shifts)), dims=3)  # in-loop augmentation
        x = x + 0.05 * torch.randn(x.shape, generator=shifts, dtype=x.dtype)
        optimizer.zero_grad()
        smoothed(model(x), y).backward()
        copy_into(reference, model)
        expected_sum = reference_clipped(reference, x, y, smoothed)
        ids = loader.current[2]
        if account:
            for b in range(x.shape[0]):
                traces[int(ids[b])] = traces.get(int(ids[b]), 0.0) + reference_trace(reference, x[b], y[b], smoothed)
        optimizer.step()
        want = (expected_sum + optimizer.noise) / B
        torch.testing.assert_close(flat_grad(model), want, rtol=1e-10, atol=1e-13)
    if account:
        acc = optimizer.accountant
        got = acc._trace[list(traces)].numpy()
        torch.testing.assert_close(torch.from_numpy(got), torch.tensor(list(traces.values()), dtype=torch.float64),
                                   rtol=1e-9, atol=0)
        if architecture is LeNetish:  # functional ReLU and max pooling: recorded, not refused
            assert any("ReluBackward" in c and "MaxPool2DWithIndicesBackward" in c for c in acc.caveats)


@pytest.mark.parametrize("trace", ["exact", "gaussian"])
def test_accumulation_over_physical_batches_equals_one_logical_batch(trace):
    def run(physical):
        model, optimizer, loader = private(smooth_net(), trace=trace,
                                           loader=torch.utils.data.DataLoader(data(), batch_size=10))
        batches = loader if physical is None else BatchMemoryManager(
            data_loader=loader, max_physical_batch_size=physical, optimizer=optimizer)
        sizes = []
        for x, y in batches:
            sizes.append(x.shape[0])
            optimizer.zero_grad()
            smoothed(model(x), y).backward()
            optimizer.step()
            if optimizer.steps == 3:
                break
        return torch.cat([p.detach().reshape(-1) for p in model.parameters()]), optimizer.accountant, sizes

    whole, a, whole_sizes = run(None)
    split, b, sizes = run(4)
    assert max(sizes) <= 4 < max(whole_sizes) and len(sizes) > 3 and sum(sizes) == sum(whole_sizes)
    torch.testing.assert_close(split, whole, rtol=1e-12, atol=1e-14)
    assert a.steps == b.steps == 3
    torch.testing.assert_close(b._sampled, a._sampled)
    if trace == "exact":  # (the Gaussian probes are drawn per physical batch: the same expectation)
        torch.testing.assert_close(b._trace, a._trace, rtol=1e-12, atol=0)


def check_one_step(architecture, loss_fn=smoothed, factor=soft_clip_factor, **options):
    """One step of the loop; the .grad handed to the optimizer against the one-example reference."""
    model, optimizer, loader = private(architecture(), loss_fn=loss_fn, **options)
    reference = architecture()
    x, y = next(iter(loader))
    optimizer.zero_grad()
    loss_fn(model(x), y).backward()
    copy_into(reference, model)
    expected = reference_clipped(reference, x, y, loss_fn, factor=factor)
    optimizer.step()
    torch.testing.assert_close(flat_grad(model), (expected + optimizer.noise) / B, rtol=1e-10, atol=1e-13)
    return model, optimizer, x


def test_hard_clipping_and_a_sum_reduced_custom_loss():
    def loss(out, y):  # a custom criterion, reduced by sum
        return (out.logsumexp(1) - out.gather(1, y[:, None]).squeeze(1)).sum() + 0.1 * out.pow(2).sum()

    check_one_step(smooth_net, loss_fn=loss, factor=hard_clip_factor, loss_reduction="sum", clipping="hard",
                   trace="exact")


def test_batchnorm_with_its_running_statistics_is_accepted():
    def bn_net():
        torch.manual_seed(4)
        net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Tanh(), nn.Flatten(), nn.Linear(32, 3)).double()
        net[1].running_mean.uniform_(-0.1, 0.1)
        net[1].running_var.uniform_(0.5, 2.0)
        return net.eval()

    for account in (False, True):
        check_one_step(bn_net, account=account)
    with pytest.raises(ValueError, match="batch normalisation in train mode"):
        private(bn_net().train(), account=False)
    model, optimizer, loader = private(bn_net(), account=False)
    model.train()  # switched after make_private: refused at the step
    with pytest.raises(ValueError, match="batch normalisation in train mode"):
        one_step(model, optimizer, loader)


def one_step(model, optimizer, loader, loss_fn=smoothed, transform=lambda m, x: m(x)):
    x, y = next(iter(loader))
    optimizer.zero_grad()
    loss_fn(transform(model, x), y).backward()
    optimizer.step()


def test_a_loss_other_than_loss_fn_is_refused_naming_it():
    model, optimizer, loader = private(smooth_net(), loss_fn=F.cross_entropy)
    with pytest.raises(LoopMismatch, match="not that of loss_fn"):
        one_step(model, optimizer, loader, loss_fn=smoothed)


def test_a_weight_used_outside_the_forward_is_refused():
    """Weight decay added to the loss in the loop: not a per-example gradient of the forward."""
    for account in (False, True):
        model, optimizer, loader = private(smooth_net(), account=account)
        decay = lambda out, y: smoothed(out, y) + 1e-2 * model[4].weight.pow(2).sum()
        with pytest.raises(LoopMismatch, match="'4.weight' do not sum to the gradient"):
            one_step(model, optimizer, loader, loss_fn=decay)


def test_a_coupled_or_misdeclared_loss_is_refused():
    coupled = lambda out, y: F.cross_entropy(out - out.mean(0, keepdim=True), y)
    model, optimizer, loader = private(smooth_net(), loss_fn=coupled)
    with pytest.raises(LossError, match="couples the examples"):
        one_step(model, optimizer, loader, loss_fn=coupled)
    summed = lambda out, y: F.cross_entropy(out, y, reduction="sum")
    model, optimizer, loader = private(smooth_net(), loss_fn=summed)
    with pytest.raises(LossError, match="loss_reduction='sum'"):
        one_step(model, optimizer, loader, loss_fn=summed)


def test_iterating_the_original_loader_is_refused():
    original = torch.utils.data.DataLoader(data(), batch_size=B, shuffle=True)
    for account in (False, True):
        model, optimizer, loader = private(smooth_net(), account=account, loader=original)
        x, y = next(iter(original))
        smoothed(model(x), y).backward()
        with pytest.raises(LoopMismatch, match="no batch was drawn from the loader make_private returned"):
            optimizer.step()


def test_two_backwards_between_steps_without_batchmemorymanager_are_refused():
    model, optimizer, loader = private(smooth_net(), account=False)
    batches = iter(loader)
    x, y = next(batches)
    smoothed(model(x[:4]), y[:4]).backward()
    smoothed(model(x[4:]), y[4:]).backward()
    with pytest.raises(LoopMismatch, match="BatchMemoryManager"):
        optimizer.step()


def test_a_forward_on_other_examples_is_refused():
    model, optimizer, loader = private(smooth_net(), account=False)
    x, y = next(iter(loader))
    smoothed(model(x[:3]), y[:3]).backward()
    with pytest.raises(LoopMismatch, match="received 3 examples"):
        optimizer.step()


def test_changing_requires_grad_after_make_private_is_refused():
    model, optimizer, loader = private(smooth_net(), account=False)
    model[0].weight.requires_grad_(False)
    with pytest.raises(LoopMismatch, match="'0.weight' \\(now frozen\\)"):
        one_step(model, optimizer, loader)


class FunctionalDropout(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = smooth_net()

    def forward(self, x):
        return self.body[7](F.dropout(self.body[:7](x), 0.5, training=self.training))


def test_random_operations_are_refused_for_accounting_and_allowed_without():
    model, optimizer, loader = private(FunctionalDropout())
    with pytest.raises(LoopMismatch, match="draws random numbers"):
        one_step(model, optimizer, loader)
    model, optimizer, loader = private(FunctionalDropout(), account=False)
    one_step(model, optimizer, loader)  # DP-SGD's per-example gradients of the masked loss (the sum is checked)


def test_nonfinite_inputs_are_refused_naming_the_example_and_step():
    for account in (False, True):
        model, optimizer, loader = private(smooth_net(), account=account)
        x, y = next(iter(loader))
        x = x.clone()
        x[2, 0, 1, 1] = float("nan")
        smoothed(model(x), y).backward()
        with pytest.raises(LoopMismatch, match=f"step 1: .*example id\\(s\\) {int(loader.current[2][2])}\\b"):
            optimizer.step()


def test_empty_poisson_batches_are_empty_tensors_and_release_noise_alone():
    loader = torch.utils.data.DataLoader(data(6), batch_size=1)
    model, optimizer, loader = private(smooth_net(), loader=loader)
    empties = 0
    for x, y in loader:
        assert isinstance(x, torch.Tensor) and x.shape[1:] == (1, 6, 6) and y.shape[0] == x.shape[0]
        optimizer.zero_grad()
        smoothed(model(x), y).backward() if x.shape[0] else None
        before = [p.detach().clone() for p in model.parameters()]
        optimizer.step()
        if x.shape[0] == 0:
            empties += 1
            torch.testing.assert_close(flat_grad(model), optimizer.noise / 1)
            assert any((p - q).abs().sum() > 0 for p, q in zip(model.parameters(), before))
    assert empties > 0 and optimizer.accountant.steps == len(loader)


def test_the_replaced_sampler_is_announced():
    loader = torch.utils.data.DataLoader(data(), batch_size=B, sampler=torch.utils.data.WeightedRandomSampler(
        torch.ones(N), N), drop_last=True)
    with pytest.warns(UserWarning, match="replaces the DataLoader's WeightedRandomSampler and drop_last=True with "
                                         "Poisson sampling"):
        model = smooth_net()
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.1), loader, noise_multiplier=1.0,
                     max_grad_norm=1.0)


def test_eval_between_steps_is_not_taken_for_a_training_pass():
    model, optimizer, loader = private(smooth_net(), account=True)
    x, y = next(iter(loader))
    optimizer.zero_grad()
    smoothed(model(x), y).backward()
    model(x)  # an evaluation with gradients enabled and no backward: not the loop's training pass
    with torch.no_grad():
        model(torch.zeros(3, 1, 6, 6, dtype=torch.float64))
    optimizer.step()
    assert optimizer.accountant.steps == 1


def test_with_example_ids_keeps_the_loaders_batches():
    loader = torch.utils.data.DataLoader(data(), batch_size=B, shuffle=False)
    for (x, y), (x2, y2, ids) in zip(loader, with_example_ids(loader)):
        torch.testing.assert_close(x2, x)
        torch.testing.assert_close(y2, y)
        assert ids.dtype == torch.long and ids.shape == (x.shape[0],)
    assert ids[-1] == N - 1


def test_mixed_precision_is_refused_with_the_reason():
    model, optimizer, loader = private(smooth_net().float(), account=False,
                                       loader=torch.utils.data.DataLoader(
                                           torch.utils.data.TensorDataset(data().tensors[0].float(), data().tensors[1]),
                                           batch_size=B))
    x, y = next(iter(loader))
    with pytest.raises(LoopMismatch, match="torch.autocast"):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(x)


class ConvKinds(nn.Module):
    """Convolutions with dilation, groups and stride, each held either way (per_example.ConvBlock:
    formed with the batch as groups, or as factors with Gram-matrix norms; the grouped one is always
    formed)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(6)
        self.wide = nn.Conv2d(1, 8, 3, stride=1, padding=2, dilation=2)
        self.grouped = nn.Conv2d(8, 8, 3, groups=2, padding=1, bias=False)
        self.deep = nn.Conv2d(8, 16, 3, stride=2)
        self.head = nn.Linear(16 * 2 * 2, 3)
        self.double()

    def forward(self, x):
        h = torch.tanh(self.grouped(torch.tanh(self.wide(x))))
        return self.head(torch.tanh(self.deep(h)).flatten(1))


@pytest.mark.parametrize("formed_elements", [2 ** 26, 1000])
def test_every_way_of_holding_a_convolutions_gradients_is_the_loops(formed_elements, monkeypatch):
    from filkit.torch import per_example
    from filkit.torch.per_example import ConvBlock
    monkeypatch.setattr(per_example, "FORMED_ELEMENTS", formed_elements)  # 1000: the ungrouped ones as factors
    model, optimizer, x = check_one_step(ConvKinds, account=False)
    with torch.no_grad():
        h = torch.tanh(model.grouped(torch.tanh(model.wide(x))))
    block = ConvBlock(model.deep, h, torch.randn(h.shape[0], 16, 2, 2, dtype=torch.float64))
    assert (block.formed is None) == (formed_elements == 1000)
    torch.testing.assert_close(block.squared_norms(), block.dense().reshape(h.shape[0], -1).pow(2).sum(1))


def per_sample_reference(model, x, y, loss_fn=smoothed):
    """Per-example gradients by plain autograd, one example at a time: what Opacus' grad_sample holds."""
    rows = []
    for b in range(x.shape[0]):
        model.zero_grad()
        loss_fn(model(x[b:b + 1]), y[b:b + 1]).backward()
        rows.append([p.grad.detach().clone() for p in model.parameters()])
    return [torch.stack([r[k] for r in rows]) for k in range(len(rows[0]))]


def test_the_accountant_takes_the_per_sample_gradients_the_user_has_and_checks_them():
    from filkit.torch import FilAccountant
    model = smooth_net()
    dataset = data()
    x, y = dataset.tensors[0][:6], dataset.tensors[1][:6]
    given = per_sample_reference(model, x, y)
    for trace in ("gaussian", "exact"):
        acc = FilAccountant(model, loss_fn=smoothed, clip_norm=C, noise_multiplier=SIGMA, sample_rate=0.1,
                            trace=trace)
        acc.step(x, y, range(6), per_sample_gradients=given)  # the same gradients: accepted
        names = [n for n, _ in model.named_parameters()]
        acc.step(x, y, range(6), per_sample_gradients=dict(zip(names, given)))
        for p, g in zip(model.parameters(), given):  # as Opacus' GradSampleModule leaves them
            p.grad_sample = g
        acc.step(x, y, range(6), per_sample_gradients="grad_sample")
        shifted = per_sample_reference(model, torch.roll(x, 1, dims=3), y)  # gradients of other inputs
        with pytest.raises(LoopMismatch, match="step 4: the per-sample gradients given for example id"):
            acc.step(x, y, range(6), per_sample_gradients=shifted)
    with pytest.raises(ValueError, match="expected shape"):
        acc.step(x, y, range(6), per_sample_gradients=[g[:3] for g in given])
