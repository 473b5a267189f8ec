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
from filkit.torch.functional import (BatchedClippedGradients, ClippedGradient, factorable_linears,  # noqa: E402
                                     split_parameters, verify_factored)

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
        # The Gaussian trace's products G^T u for the same probes, from the batched graph, with the
        # dense layers whole and in factors.
        p = sum(w.numel() for w in make().parameters())
        U = torch.randn(len(X), p, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
        products = {}
        for device in ("cpu", "cuda"):
            module = make().to(device)
            g = ClippedGradient(module, F.cross_entropy, 0.3, "smooth", (1, 5, 5))
            params, constants = split_parameters(module)
            Z, T = X.reshape(len(X), -1).to(device), Y.to(device)
            layers = verify_factored(g, params, constants, factorable_linears(module, params), Z[0], T[0])
            assert layers, make.__name__
            for factored in (False, True):
                batched = BatchedClippedGradients(g, params, constants, Z, T, layers if factored else ())
                products[device, factored] = batched.transpose_products(U.to(device))
        for factored in (False, True):
            assert products["cuda", factored].device.type == "cuda"
            assert relative(products["cuda", factored], products["cpu", False]) < 1e-10, (make.__name__, factored)


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
            assert next(module.parameters()).device.type == "cuda"
            optimizer.zero_grad()
            F.cross_entropy(module(x.cuda()), y.cuda()).backward()
            optimizer.step()
            batches.append(loader.current[2])
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


@requires_cuda
def test_the_loops_own_gradient_on_cuda_equals_the_cpus_in_float64():
    """make_private in a loop with an augmentation on the device and a label-smoothed loss, on CUDA
    and on the CPU in lockstep (the CPU model takes the CUDA model's parameters before each step):
    the clipped sums (the .grad times B less the recorded noise) and, with accounting, the exact
    per-example traces agree to 1e-10, from the hooks' per-example gradients (account=False) and
    from the accountant's (account=True)."""
    import warnings
    smoothed = lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1)
    n, B, C, sigma = 24, 6, 0.3, 1.1
    X, Y = batch(n, seed=6)
    for account in (False, True):
        runs = {}
        for device in ("cuda", "cpu"):
            module = cnn().to(device)
            loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, Y), batch_size=B)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                runs[device] = make_private(module, torch.optim.SGD(module.parameters(), lr=0.5), loader,
                                            noise_multiplier=sigma, max_grad_norm=C, loss_fn=smoothed, seed=3,
                                            account=account, **({"trace": "exact"} if account else {}))
        (gpu, gpu_opt, gpu_loader), (cpu, cpu_opt, cpu_loader) = runs["cuda"], runs["cpu"]
        shifts = torch.Generator().manual_seed(8)
        for step, ((x, y), (x_cpu, _)) in enumerate(zip(gpu_loader, cpu_loader)):
            with torch.no_grad():
                for p, q in zip(cpu.parameters(), gpu.parameters()):
                    p.copy_(q.cpu())
            noise = 0.05 * torch.randn(x.shape, generator=shifts, dtype=x.dtype)
            sums = []
            for model, optimizer, inputs in ((gpu, gpu_opt, (x + noise).cuda()), (cpu, cpu_opt, x_cpu + noise)):
                optimizer.zero_grad()
                smoothed(model(torch.flip(inputs, dims=[3])), y.to(inputs.device)).backward()
                optimizer.step()
                grad = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
                sums.append(grad * B - optimizer.noise)
            if len(y):
                assert relative(sums[0], sums[1]) < 1e-10, (account, step, relative(sums[0], sums[1]))
        if account:
            assert relative(torch.from_numpy(gpu_opt.accountant.dfil()), torch.from_numpy(cpu_opt.accountant.dfil())) \
                < 1e-10


def test_accounting_needs_no_compiled_module(tmp_path):
    """filkit.torch from the source tree (python/, no filkit._filkit there): accounting works, and
    epsilon by the NumPy RDP accountant; the PLD accountant says what it needs."""
    script = ("import torch, torch.nn.functional as F\n"
              "from filkit.torch import FilAccountant\n"
              "acc = FilAccountant(torch.nn.Linear(3, 2).double(), loss_fn=F.cross_entropy, clip_norm=1.0, "
              "noise_multiplier=1.0, sample_rate=0.5)\n"
              "acc.step(torch.rand(2, 3, dtype=torch.double), torch.tensor([0, 1]), [0, 1])\n"
              "assert acc.dfil().shape == (2,) and acc.kappa > 0\n"
              "assert acc.epsilon(1e-5) > 0\n"
              "try:\n    acc.privacy_accountant('pld')\nexcept ImportError as error:\n    print('ImportError:', error)\n"
              "else:\n    print('pld available')\n")
    source = os.path.dirname(HERE)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": source}, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr
    has_module = any(name.startswith("_filkit") for name in os.listdir(os.path.join(source, "filkit")))
    if not has_module:
        assert "the PLD accountant (accountant='pld') needs filkit's compiled module" in out.stdout, out.stdout


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
