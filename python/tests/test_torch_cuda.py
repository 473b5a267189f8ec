"""filkit.torch on a CUDA device against the same computation on the CPU, and without filkit's
compiled module: the GPU check (python/tests/gpu_check.sh) runs this file on a machine with a GPU
and no filkit build. Every test runs under pytest or, where pytest is missing, as a script
(`python3 python/tests/test_torch_cuda.py`); without a CUDA device the CUDA tests are skipped and
say so.

Ground truth: float64 on the CPU. On the device in float64 the per-example traces (exact, and the
Gaussian estimator's G^T u for the same probes) must agree to 1e-10 relative, make_private's
parameters and accountant after a few steps must equal a CPU replay of the same batches and noise
to 1e-10, and a float32 run must agree to float32's accuracy (1e-3)."""
import os
import subprocess
import sys

import torch
from torch import nn
import torch.nn.functional as F

from filkit.torch import FilAccountant, make_private
from filkit.torch.functional import BatchedClippedGradients, ClippedGradient, split_parameters

HERE = os.path.dirname(os.path.abspath(__file__))

try:
    import pytest
except ImportError:  # run as a script (below)
    pytest = None

NO_CUDA = "no CUDA device: the GPU path is not exercised here"


def requires_cuda(test):
    test.requires_cuda = True
    if pytest is not None:
        return pytest.mark.skipif(not torch.cuda.is_available(), reason=NO_CUDA)(test)
    return test


def mlp():
    torch.manual_seed(1)
    return nn.Sequential(nn.Flatten(), nn.Linear(25, 7), nn.Tanh(), nn.Linear(7, 3)).double()


def cnn():
    torch.manual_seed(2)
    return nn.Sequential(nn.Conv2d(1, 4, 3), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(4 * 2 * 2, 6),
                         nn.Tanh(), nn.Linear(6, 3)).double()


def batch(size=5, seed=3):
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(size, 1, 5, 5, dtype=torch.float64, generator=generator), torch.arange(size) % 3


def relative(a, b):
    return ((a.double().cpu() - b.double().cpu()).norm() / b.double().cpu().norm()).item()


def exact_traces(module, X, Y, **options):
    accountant = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=0.3, noise_multiplier=1.0,
                               sample_rate=0.1, trace="exact", **options)
    return accountant.step(X, Y, range(len(X)))


@requires_cuda
def test_traces_on_cuda_equal_the_cpu_in_float64():
    for make in (mlp, cnn):
        X, Y = batch()
        cpu = exact_traces(make(), X, Y)
        gpu = exact_traces(make().cuda(), X, Y)
        assert relative(gpu, cpu) < 1e-10, (make.__name__, relative(gpu, cpu))
        # The Gaussian trace's products G^T u for the same probes, from the batched graph.
        p = sum(w.numel() for w in make().parameters())
        U = torch.randn(len(X), p, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
        products = {}
        for device in ("cpu", "cuda"):
            module = make().to(device)
            g = ClippedGradient(module, F.cross_entropy, 0.3, "smooth", (1, 5, 5))
            batched = BatchedClippedGradients(g, *split_parameters(module), X.reshape(len(X), -1).to(device),
                                              Y.to(device))
            products[device] = batched.transpose_products(U.to(device))
        assert products["cuda"].device.type == "cuda"
        assert relative(products["cuda"], products["cpu"]) < 1e-10, make.__name__


@requires_cuda
def test_float32_on_cuda_agrees_to_single_precision():
    for make in (mlp, cnn):
        X, Y = batch()
        cpu = exact_traces(make(), X, Y)
        single = exact_traces(make().float().cuda(), X, Y)
        assert relative(single, cpu) < 1e-3, (make.__name__, relative(single, cpu))


def sgd_replay(module, batches, noises, X, Y, C, B, lr):
    """DP-SGD on the CPU (section 7.1, momentum 0) through the given batches (empty: noise alone)
    and noise draws: w <- w - lr (sum of smooth-clipped gradients + noise) / B."""
    params = [p for p in module.parameters()]
    for ids, noise in zip(batches, noises):
        g = ClippedGradient(module, F.cross_entropy, C, "smooth", (1, 5, 5))
        named, constants = split_parameters(module)
        total = g.clipped(named, constants, X[ids].reshape(len(ids), -1), Y[ids]).sum(0) if len(ids) else 0.0
        step = (total + noise) / B
        with torch.no_grad():
            offset = 0
            for p in params:
                p -= lr * step[offset:offset + p.numel()].view_as(p)
                offset += p.numel()


@requires_cuda
def test_make_private_on_cuda_equals_a_cpu_replay():
    n, B, C, sigma, lr = 24, 6, 0.3, 1.1, 0.5
    X, Y = batch(n, seed=5)
    for poisson in (True, False):
        module = cnn().cuda()
        data = torch.utils.data.TensorDataset(X, Y)
        loader = torch.utils.data.DataLoader(data, batch_size=B)
        optimizer = torch.optim.SGD(module.parameters(), lr=lr)
        module, optimizer, loader = make_private(module, optimizer, loader, noise_multiplier=sigma, max_grad_norm=C,
                                                 poisson_sampling=poisson, seed=7, trace="exact")
        batches, noises = [], []
        for x, y in loader:
            if x is not None:
                assert next(module.parameters()).device.type == "cuda"
                optimizer.zero_grad()
                F.cross_entropy(module(x.cuda()), y.cuda()).backward()
            optimizer.step()
            batches.append(loader.current[2] if loader.current is not None else torch.zeros(0, dtype=torch.long))
            noises.append(optimizer.noise.cpu())
        reference = cnn()
        sgd_replay(reference, batches, noises, X, Y, C, B, lr)
        got = torch.cat([p.detach().reshape(-1).cpu() for p in module.parameters()])
        expected = torch.cat([p.detach().reshape(-1) for p in reference.parameters()])
        assert relative(got, expected) < 1e-10, (poisson, relative(got, expected))
        # The accountant on the device against a CPU accountant through the same batches.
        replayed = cnn()
        cpu = FilAccountant(replayed, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=sigma, sample_rate=B / n,
                            trace="exact", num_examples=n)
        for ids, noise in zip(batches, noises):
            cpu.step(X[ids], Y[ids], ids) if len(ids) else cpu.empty_step()
            sgd_replay(replayed, [ids], [noise], X, Y, C, B, lr)
        assert relative(torch.from_numpy(optimizer.accountant.dfil()), torch.from_numpy(cpu.dfil())) < 1e-10
        assert optimizer.accountant.accounted_sampling == ("poisson" if poisson else "uniform")


def test_accounting_needs_no_compiled_module(tmp_path):
    """filkit.torch from the source tree (python/, no filkit._filkit there): accounting works,
    epsilon says what it needs."""
    script = ("import torch, torch.nn.functional as F\n"
              "from filkit.torch import FilAccountant\n"
              "acc = FilAccountant(torch.nn.Linear(3, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, "
              "noise_multiplier=1.0, sample_rate=0.5)\n"
              "acc.step(torch.rand(2, 3, dtype=torch.double), torch.tensor([0, 1]), [0, 1])\n"
              "assert acc.dfil().shape == (2,) and acc.kappa > 0\n"
              "try:\n    acc.epsilon(1e-5)\nexcept ImportError as error:\n    print('ImportError:', error)\n"
              "else:\n    print('epsilon available')\n")
    source = os.path.dirname(HERE)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": source}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    has_module = any(name.startswith("_filkit") for name in os.listdir(os.path.join(source, "filkit")))
    if not has_module:
        assert "epsilon and rdp needs filkit's compiled module" in out.stdout, out.stdout


if __name__ == "__main__":  # without pytest: run every test, report skips, fail on the first error
    import tempfile
    import pathlib
    failed = 0
    for name, test in sorted(globals().items()):
        if not (name.startswith("test_") and callable(test)):
            continue
        if getattr(test, "requires_cuda", False) and not torch.cuda.is_available():
            print(f"SKIPPED {name}: {NO_CUDA}")
            continue
        try:
            if "tmp_path" in test.__code__.co_varnames[:test.__code__.co_argcount]:
                with tempfile.TemporaryDirectory() as directory:
                    test(pathlib.Path(directory))
            else:
                test()
            print(f"PASSED {name}")
        except Exception as error:  # noqa: BLE001 - report every failure, then exit non-zero
            failed += 1
            print(f"FAILED {name}: {type(error).__name__}: {error}")
    sys.exit(1 if failed else 0)
