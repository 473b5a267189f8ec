"""filkit.torch on 2 processes (torch.distributed, gloo on the CPU; docs/pytorch.md, "Several
processes") against one process on the same global batches and noise: make_private with and
without DistributedDataParallel, Poisson batches over uneven shards with empty shares, uniform
batches in BatchMemoryManager's physical batches, and FilAccountant alone beside a
DistributedSampler; the parameters, per-example dFIL, epsilon and the summary agree to 1e-12 in
float64. Ranks started differently, and a step one rank refuses, stop every rank with one message.

One spawn of 2 processes runs every scenario (SCENARIOS) in turn and saves what each rank saw;
the tests compare those with the scenario run here, in one process."""
import datetime
import json
import os
import sys
import time

import numpy as np
import pytest

import filkit

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional
from filkit.torch import BatchMemoryManager, FilAccountant, LoopMismatch, RanksDisagree, make_private  # noqa: E402

RANKS = 2
TIMEOUT_S = 120  # a hung collective fails the test instead of blocking it
epsilon_available = pytest.mark.skipif(getattr(filkit, "_filkit", None) is None, reason="no compiled module")


def flat(module):
    return torch.cat([p.detach().reshape(-1) for p in module.parameters()]).numpy().copy()


def dataset(n, d, classes, seed):
    generator = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=generator, dtype=torch.float64)
    return torch.utils.data.TensorDataset(X, torch.arange(n) % classes)


def mlp(d, classes, seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, 4), nn.Tanh(), nn.Linear(4, classes)).double()


def distributed():
    return torch.distributed.is_initialized()


def rank():
    return torch.distributed.get_rank() if distributed() else 0


# ---- the scenarios: each runs on one process (the reference) or on every rank ----------------------

def poisson_ddp(out):
    """Poisson batches of expected size 4 over 41 examples (shards of 21 and 20: many steps leave a
    rank's share empty), a DDP model initialised differently on each rank (DDP copies rank 0's),
    SGD with momentum, exact traces; rank 0 writes the summary."""
    data = dataset(41, 5, 3, seed=1)
    model = mlp(5, 3, seed=10 + rank())
    if distributed():
        model = nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.5)
    model, optimizer, loader = make_private(model, optimizer, torch.utils.data.DataLoader(data, batch_size=4),
                                            noise_multiplier=1.3, max_grad_norm=0.4, seed=7, trace="exact")
    shares, noises = [], []
    for _ in range(2):
        for x, y in loader:  # every rank runs its forward and backward, also on an empty share
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            shares.append(loader.current[2].numpy().copy())
            noises.append(None if optimizer.noise is None else optimizer.noise.numpy().copy())
    accountant = optimizer.accountant
    if rank() == 0:
        accountant.write_summary(os.path.join(out, "fil.json"), os.path.join(out, "fil.csv"))
    return dict(parameters=flat(model), dfil=accountant.dfil(), times_sampled=accountant.times_sampled(),
                epsilon=accountant.epsilon(1e-5), steps=accountant.steps, shares=shares, noises=noises)


def uniform_physical(out):
    """Uniform batches of 6 in physical batches of at most 2 (BatchMemoryManager; a rank with
    fewer members gets empty ones), a plain module (no DDP) seeded alike on every rank, a
    label-smoothed loss with the hard clip."""
    data = dataset(41, 5, 3, seed=2)
    model = mlp(5, 3, seed=20)
    loss_fn = lambda outputs, targets: F.cross_entropy(outputs, targets, label_smoothing=0.1)  # noqa: E731
    optimizer = torch.optim.SGD(model.parameters(), lr=0.3)
    model, optimizer, loader = make_private(model, optimizer, torch.utils.data.DataLoader(data, batch_size=6),
                                            noise_multiplier=0.9, max_grad_norm=0.3, clipping="hard",
                                            poisson_sampling=False, seed=3, trace="exact", loss_fn=loss_fn)
    physical, empty = 0, 0
    with BatchMemoryManager(data_loader=loader, max_physical_batch_size=2, optimizer=optimizer) as batches:
        for x, y in batches:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
            physical += 1
            empty += len(x) == 0
    accountant = optimizer.accountant
    return dict(parameters=flat(model), dfil=accountant.dfil(), epsilon=accountant.epsilon(1e-5),
                steps=accountant.steps, physical=physical, empty=empty)


def accountant_alone(out):
    """FilAccountant beside the user's own loop over a DistributedSampler (with_example_ids), at
    fixed parameters, with an empty step: the reference steps the ranks' batches together."""
    data = dataset(30, 4, 2, seed=3)
    model = mlp(4, 2, seed=30)
    accountant = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=0.5, noise_multiplier=1.1,
                               sample_rate=10 / 30, num_examples=30, trace="exact", sampling="shuffle")
    X, Y = data.tensors
    for step in range(3):
        ids = torch.arange(10 * step, 10 * step + 10)
        mine = ids[rank()::RANKS] if distributed() else ids  # a DistributedSampler's split of the step's batch
        accountant.step(X[mine], Y[mine], mine)
    accountant.empty_step()
    return dict(dfil=accountant.dfil(), epsilon=accountant.epsilon(1e-5), steps=accountant.steps,
                labels=accountant.labels())


def gaussian_probes(out):
    """The Gaussian trace (the default): each rank draws its own examples' probes from a stream of
    its own, so the dFIL are another unbiased draw than one process's; the training is the same."""
    data = dataset(20, 4, 2, seed=5)
    model = mlp(4, 2, seed=80)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer, loader = make_private(model, optimizer, torch.utils.data.DataLoader(data, batch_size=5),
                                            noise_multiplier=1.0, max_grad_norm=0.5, seed=2, probes=4)
    skipped = 0
    for x, y in loader:
        if len(x):  # (without DDP a rank may skip an empty share's forward and backward)
            F.cross_entropy(model(x), y).backward()
        else:
            skipped += 1
        optimizer.step()
        optimizer.zero_grad()
    return dict(parameters=flat(model), dfil=optimizer.accountant.dfil(), skipped=skipped)


def empty_share_skipped_under_ddp(out):
    """Under DDP a rank that skips its empty share's forward is refused (DDP's forward is collective)."""
    data = dataset(20, 4, 2, seed=5)
    model = nn.parallel.DistributedDataParallel(mlp(4, 2, seed=90))
    _, optimizer, loader = make_private(model, torch.optim.SGD(model.parameters(), lr=0.5),
                                        torch.utils.data.DataLoader(data, batch_size=5), noise_multiplier=1.0,
                                        max_grad_norm=0.5, seed=2, account=False)
    for x, y in loader:
        if len(x):
            F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()


def clip_norms_differ(out):
    model = mlp(3, 2, seed=40)
    data = dataset(10, 3, 2, seed=4)
    make_private(nn.parallel.DistributedDataParallel(model), torch.optim.SGD(model.parameters(), lr=0.1),
                 torch.utils.data.DataLoader(data, batch_size=2), noise_multiplier=1.0, max_grad_norm=1.0 + rank())


def models_differ(out):
    model = mlp(3, 2, seed=50 + rank())  # no DDP to copy rank 0's parameters
    FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0, sample_rate=0.5)


def one_rank_refuses(out):
    """Rank 1's loop adds a weight decay to its loss, so its .grad is not its examples' gradients:
    both ranks stop at step 1 with rank 1's message, and neither changes its parameters."""
    model = nn.parallel.DistributedDataParallel(mlp(3, 2, seed=60))
    data = dataset(12, 3, 2, seed=6)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = make_private(model, optimizer, torch.utils.data.DataLoader(data, batch_size=6),
                                            noise_multiplier=1.0, max_grad_norm=1.0, poisson_sampling=False)
    before = flat(model)
    x, y = next(iter(loader))
    loss = F.cross_entropy(model(x), y)
    if rank() == 1:
        loss = loss + 0.01 * sum(p.pow(2).sum() for p in model.parameters())
    loss.backward()
    try:
        optimizer.step()
    finally:
        assert np.array_equal(flat(model), before)


def ddp_not_given(out):
    """The loop trains through a DDP wrapper that make_private was not given: DDP averages the
    ranks' gradients in backward(), which the step refuses, saying what to pass instead."""
    inner = mlp(3, 2, seed=70)
    model = nn.parallel.DistributedDataParallel(inner)
    data = dataset(12, 3, 2, seed=7)
    _, optimizer, loader = make_private(inner, torch.optim.SGD(model.parameters(), lr=0.1),
                                        torch.utils.data.DataLoader(data, batch_size=6), noise_multiplier=1.0,
                                        max_grad_norm=1.0, poisson_sampling=False)
    x, y = next(iter(loader))
    F.cross_entropy(model(x), y).backward()
    optimizer.step()


SCENARIOS = {f.__name__: f for f in (poisson_ddp, uniform_physical, accountant_alone, gaussian_probes,
                                     empty_share_skipped_under_ddp, clip_norms_differ, models_differ,
                                     one_rank_refuses, ddp_not_given)}


def run_scenario(name, out):
    """{'result': ...} or {'error': (type name, message)}, with warnings (the sampler's note) off."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return {"result": SCENARIOS[name](out)}
        except Exception as error:  # noqa: BLE001 - recorded for the test to read
            return {"error": (type(error).__name__, str(error))}


def worker(rank_, init_file, out):
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method="file://" + init_file, rank=rank_, world_size=RANKS,
                                         timeout=datetime.timedelta(seconds=TIMEOUT_S))
    try:
        for name in SCENARIOS:
            folder = os.path.join(out, name)
            os.makedirs(folder, exist_ok=True)
            torch.save(run_scenario(name, folder), os.path.join(folder, f"rank{rank_}.pt"))
    finally:
        torch.distributed.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Every scenario's outcome on each of the 2 ranks: {name: [rank 0's, rank 1's]}."""
    out = tmp_path_factory.mktemp("ranks")
    context = torch.multiprocessing.start_processes(worker, args=(str(out / "init"), str(out)), nprocs=RANKS,
                                                    join=False, start_method="spawn")
    deadline = time.monotonic() + 3 * TIMEOUT_S
    try:
        while not context.join(timeout=1):
            assert time.monotonic() < deadline, "the 2 ranks did not finish (a collective hung?)"
    finally:
        for process in context.processes:
            if process.is_alive():
                process.terminate()
    return {name: [torch.load(out / name / f"rank{r}.pt") for r in range(RANKS)] for name in SCENARIOS}, out


def results(ranks, name):
    outcomes, _ = ranks
    for r, outcome in enumerate(outcomes[name]):
        assert "error" not in outcome, f"rank {r}: {outcome.get('error')}"
    return [outcome["result"] for outcome in outcomes[name]]


def errors(ranks, name):
    outcomes, _ = ranks
    return [outcome.get("error") for outcome in outcomes[name]]


def one_process(name, folder):
    assert not distributed()
    return run_scenario(name, str(folder))["result"]


@epsilon_available
def test_poisson_batches_over_uneven_shards_with_ddp_equal_one_process(ranks, tmp_path):
    both, reference = results(ranks, "poisson_ddp"), one_process("poisson_ddp", tmp_path)
    r0, r1 = both
    # The shards (21 and 20 examples) partition each step's one-process batch; some shares are empty.
    assert len(r0["shares"]) == len(r1["shares"]) == reference["steps"] == r0["steps"] == 20
    assert all(s.size == 0 or s.max() < 21 for s in r0["shares"]) and all(s.size == 0 or s.min() >= 21
                                                                         for s in r1["shares"])
    assert any(s.size == 0 for s in r0["shares"] + r1["shares"])
    for s0, s1, whole in zip(r0["shares"], r1["shares"], reference["shares"]):
        np.testing.assert_array_equal(np.concatenate([s0, s1]), whole)
    # The noise is drawn once a step, by rank 0, as one process draws it.
    assert all(n is None for n in r1["noises"])
    for mine, theirs in zip(r0["noises"], reference["noises"]):
        np.testing.assert_array_equal(mine, theirs)
    for r in both:
        np.testing.assert_allclose(r["parameters"], reference["parameters"], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(r["dfil"], reference["dfil"], rtol=1e-12, atol=0)
        np.testing.assert_array_equal(r["times_sampled"], reference["times_sampled"])
        assert r["epsilon"] == pytest.approx(reference["epsilon"], rel=1e-12)
    assert (reference["dfil"] > 0).sum() > 30
    # Rank 0's summary describes every example, as the one process's does.
    _, out = ranks
    table = np.genfromtxt(out / "poisson_ddp" / "fil.csv", delimiter=",", names=True)
    expected = np.genfromtxt(tmp_path / "fil.csv", delimiter=",", names=True)
    assert table.shape == expected.shape == (2 * 41,)  # each example at the two epochs' snapshots
    for column in ("step", "index", "dfil", "fisher_trace", "times_sampled", "label"):
        np.testing.assert_allclose(table[column], expected[column], rtol=1e-12, atol=0)
    summary = json.loads((out / "poisson_ddp" / "fil.json").read_text())
    expected_summary = json.loads((tmp_path / "fil.json").read_text())
    assert summary["settings"] == expected_summary["settings"]


@epsilon_available
def test_uniform_batches_in_physical_batches_without_ddp_equal_one_process(ranks, tmp_path):
    both, reference = results(ranks, "uniform_physical"), one_process("uniform_physical", tmp_path)
    # Both ranks take as many physical batches a step (empty ones where a rank has fewer members).
    assert both[0]["physical"] == both[1]["physical"] and both[0]["empty"] + both[1]["empty"] > 0
    assert reference["empty"] == 0
    for r in both:
        assert r["steps"] == reference["steps"] == 7
        np.testing.assert_allclose(r["parameters"], reference["parameters"], rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(r["dfil"], reference["dfil"], rtol=1e-12, atol=0)
        assert r["epsilon"] == pytest.approx(reference["epsilon"], rel=1e-12)


@epsilon_available
def test_the_accountant_alone_gathers_every_ranks_examples(ranks, tmp_path):
    both, reference = results(ranks, "accountant_alone"), one_process("accountant_alone", tmp_path)
    for r in both:
        assert r["steps"] == reference["steps"] == 4
        np.testing.assert_allclose(r["dfil"], reference["dfil"], rtol=1e-12, atol=0)
        np.testing.assert_array_equal(r["labels"], reference["labels"])
        assert r["epsilon"] == pytest.approx(reference["epsilon"], rel=1e-12)
    assert (reference["dfil"] > 0).all()


def test_gaussian_probes_train_as_one_process_and_gather_every_example(ranks, tmp_path):
    both, reference = results(ranks, "gaussian_probes"), one_process("gaussian_probes", tmp_path)
    assert both[0]["skipped"] + both[1]["skipped"] > 0
    for r in both:
        np.testing.assert_allclose(r["parameters"], reference["parameters"], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(both[0]["dfil"], both[1]["dfil"])  # every rank holds the whole run
    sampled = reference["dfil"] > 0
    np.testing.assert_array_equal(both[0]["dfil"] > 0, sampled)
    assert not np.array_equal(both[0]["dfil"], reference["dfil"])  # other probes on rank 1
    # One draw of 4 probes each: the same examples' estimates within a factor of a few.
    ratio = both[0]["dfil"][sampled] / reference["dfil"][sampled]
    assert 0.3 < ratio.min() and ratio.max() < 3


def test_a_rank_skipping_its_empty_share_under_ddp_is_refused(ranks):
    found = errors(ranks, "empty_share_skipped_under_ddp")
    assert found[0] == found[1] and found[0][0] == LoopMismatch.__name__
    assert "under DistributedDataParallel every rank runs them on every batch the loader gives" in found[0][1]


def test_ranks_with_different_clip_norms_stop_with_one_message(ranks):
    message = "the torch.distributed ranks were started differently: max_grad_norm is 2.0 on rank 1 but 1.0 on rank 0"
    assert errors(ranks, "clip_norms_differ") == [(RanksDisagree.__name__, message)] * RANKS


def test_ranks_with_different_parameters_stop_with_one_message(ranks):
    found = errors(ranks, "models_differ")
    assert found[0] == found[1] and found[0][0] == RanksDisagree.__name__
    assert found[0][1].startswith("the torch.distributed ranks were started differently: the SHA-256 of the model's "
                                  "parameter values is ")
    assert "wrap the model in DistributedDataParallel" in found[0][1]


def test_a_step_one_rank_refuses_stops_every_rank_with_its_message(ranks):
    found = errors(ranks, "one_rank_refuses")
    assert found[0] == found[1] and found[0][0] == LoopMismatch.__name__
    assert found[0][1].startswith("step 1: rank 1 refused its part of the batch, so no rank released anything: "
                                  "LoopMismatch: step 1: the per-example gradients of parameter '")


def test_a_ddp_model_not_given_to_make_private_is_refused_with_what_to_do(ranks):
    found = errors(ranks, "ddp_not_given")
    assert found[0] == found[1] and found[0][0] == LoopMismatch.__name__
    assert "rank 0 refused its part of the batch" in found[0][1] and "(rank(s) 1 refused too)" in found[0][1]
    assert "give make_private the DistributedDataParallel model itself" in found[0][1]


def test_a_distributed_sampler_is_refused_on_one_process():
    model = mlp(3, 2, seed=0)
    data = dataset(10, 3, 2, seed=0)
    sampler = torch.utils.data.distributed.DistributedSampler(data, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="its sampler is a DistributedSampler, whose batch_size is a rank's"):
        make_private(model, torch.optim.SGD(model.parameters(), lr=0.1),
                     torch.utils.data.DataLoader(data, batch_size=2, sampler=sampler), noise_multiplier=1.0,
                     max_grad_norm=1.0)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
