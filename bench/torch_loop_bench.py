#!/usr/bin/python3
"""A whole iteration of a user's own PyTorch loop with filkit.torch.make_private, against
hand-written baselines in the same run (docs/pytorch.md; bench/README.md has the tables).

Per model, dtype and batch size B, milliseconds per iteration (median over --repeats, each the mean
of --steps iterations) of:
  plain                  forward, backward, SGD step (no privacy);
  dp-sgd by hand         per-example gradients by vmap(grad) (torch.func / functorch), the smooth
                         clip, their sum, Gaussian noise, SGD step: what a user writes by hand;
  make_private           the user's loop (forward, loss.backward(), optimizer.step()) with
                         make_private(account=False): per-example gradients from the hooks'
                         captured activations and output gradients (no second backward);
  trace by hand          a one-probe Gaussian trace by double backward, alone: the per-example
                         gradients by vmap(grad) inside autograd, then the gradient in the inputs
                         of sum_b f_b <g_b, u_b> (u_b ~ N(0, I_p));
  accounted by hand      the two sharing one vmap(grad) inside autograd (the clipped sum from the
                         same per-example gradients as the trace): the stronger baseline;
  make_private+FIL       the user's loop with make_private (one Gaussian probe, the default).
and the ratios: make_private / dp-sgd by hand; make_private+FIL / (dp-sgd by hand + trace by
hand), a DP-SGD step and a trace written separately (issue 49's baseline); make_private+FIL /
accounted by hand. Models: the reconstruction paper's MNIST ConvNet (tanh, average pooling), a
ReLU LeNet with max pooling, and (--models resnet18, for a GPU) a CIFAR-10 ResNet-18 with
GroupNorm. Synthetic data; the cross-entropy loss. --device cuda runs on the GPU (synchronised
before each clock reading) and prints the peak memory of each workload.

  PYTHONPATH=build/python /usr/bin/python3 bench/torch_loop_bench.py --threads 1 --batch-sizes 64,256
"""
import argparse
import json
import os
import statistics
import time
import warnings

import torch
import torch.nn.functional as F
from torch import nn

try:  # PyTorch >= 2.0
    from torch.func import functional_call, grad, vmap
except ImportError:  # PyTorch 1.13 (Debian 12): functorch
    from functorch import grad, vmap
    from torch.nn.utils.stateless import functional_call

from filkit.torch import make_private
from filkit.torch.functional import soft_clip_factor


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", default="convnet,lenet")
    parser.add_argument("--batch-sizes", default="64,256")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--threads", default="1", help="CPU thread counts, comma-separated")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=3, help="iterations per timed repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workloads", default="plain,dp-sgd by hand,make_private,trace by hand,accounted by hand,"
                                                "make_private+FIL")
    parser.add_argument("--json", help="also write the rows to this JSON file")
    return parser.parse_args()


def convnet():
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Conv2d(16, 32, 4, 2), nn.Tanh(),
                         nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(512, 32), nn.Tanh(), nn.Linear(32, 10))


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


class Block(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(32, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(32, cout)
        self.skip = nn.Sequential() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.GroupNorm(32, cout))

    def forward(self, x):
        h = F.silu(self.norm1(self.conv1(x)))
        return F.silu(self.norm2(self.conv2(h)) + self.skip(x))


def resnet18():
    """ResNet-18 for 32 x 32 images, GroupNorm (32 groups) and SiLU (smooth) in place of BatchNorm and ReLU."""
    layers, cin = [nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.GroupNorm(32, 64), nn.SiLU()], 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Block(cin, cout, stride), Block(cout, cout, 1)]
        cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


MODELS = {"convnet": (convnet, (1, 28, 28)), "lenet": (lenet, (1, 28, 28)), "resnet18": (resnet18, (3, 32, 32))}


class Workloads:
    """One iteration of each workload on a fixed batch (x, y), the model and its optimizer fresh."""

    def __init__(self, name, batch, dtype, device):
        make, shape = MODELS[name]
        self.make, self.dtype, self.device = make, dtype, device
        g = torch.Generator().manual_seed(0)
        self.n = 4 * batch
        self.X = torch.rand(self.n, *shape, generator=g).to(dtype)
        self.Y = torch.randint(0, 10, (self.n,), generator=g)
        self.x, self.y = self.X[:batch].to(device), self.Y[:batch].to(device)
        self.batch, self.C, self.sigma, self.lr = batch, 1.0, 1.0, 0.01

    def model(self):
        torch.manual_seed(1)
        return self.make().to(device=self.device, dtype=self.dtype)

    def plain(self):
        model = self.model()
        optimizer = torch.optim.SGD(model.parameters(), lr=self.lr)

        def run():
            optimizer.zero_grad()
            F.cross_entropy(model(self.x), self.y).backward()
            optimizer.step()
        return run

    def _by_hand(self, step, trace):
        """Per-example gradients by vmap(grad); with `trace` inside autograd and a one-probe trace by
        a backward in the inputs; with `step` the clipped sum, noise and an SGD step."""
        model = self.model()
        params = {k: v.detach() for k, v in model.named_parameters()}
        optimizer = torch.optim.SGD(params.values(), lr=self.lr)
        probe = torch.Generator(device=self.device).manual_seed(3)

        def loss(p, x, y):
            return F.cross_entropy(functional_call(model, p, (x.unsqueeze(0),)), y.unsqueeze(0))

        per_example = vmap(grad(loss), in_dims=(None, 0, 0))

        def run():
            x = self.x.detach().requires_grad_(trace)
            with torch.enable_grad():
                g = per_example(params, x, self.y)
                flat = torch.cat([t.reshape(self.batch, -1) for t in g.values()], 1)
                factor = soft_clip_factor(flat.norm(dim=1), self.C)
                if trace:
                    u = torch.randn(flat.shape, generator=probe, device=self.device, dtype=self.dtype)
                    S = (factor * (flat * u).sum(1)).sum()
                    torch.autograd.grad(S, x)[0].pow(2).reshape(self.batch, -1).sum(1)
            if not step:
                return
            with torch.no_grad():
                total = factor.detach() @ flat.detach()
                total += self.sigma * self.C * torch.randn(total.shape, generator=probe, device=self.device,
                                                           dtype=self.dtype)
                offset = 0
                for p in params.values():
                    p.grad = (total[offset:offset + p.numel()] / self.batch).view_as(p)
                    offset += p.numel()
            optimizer.step()
        return run

    def dpsgd_by_hand(self):
        return self._by_hand(step=True, trace=False)

    def trace_by_hand(self):
        return self._by_hand(step=False, trace=True)

    def accounted_by_hand(self):
        return self._by_hand(step=True, trace=True)

    def _private(self, account):
        model = self.model()
        optimizer = torch.optim.SGD(model.parameters(), lr=self.lr)
        data = torch.utils.data.TensorDataset(self.X, self.Y)
        loader = torch.utils.data.DataLoader(data, batch_size=self.batch)
        # On a GPU the accountant may hold a whole batch's per-example work at once.
        options = dict(memory_budget=64 * 2 ** 30) if account and self.device != "cpu" else {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the announcement of the replaced sampler
            model, optimizer, loader = make_private(model, optimizer, loader, noise_multiplier=self.sigma,
                                                    max_grad_norm=self.C, account=account, poisson_sampling=False,
                                                    **options)
        batches = iter(())

        def run():
            nonlocal batches
            try:
                x, y = next(batches)
            except StopIteration:
                batches = iter(loader)
                x, y = next(batches)
            x, y = x.to(self.device), y.to(self.device)
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
        return run

    def make_private(self):
        return self._private(False)

    def make_private_fil(self):
        return self._private(True)


RUNS = {"plain": "plain", "dp-sgd by hand": "dpsgd_by_hand", "make_private": "make_private",
        "trace by hand": "trace_by_hand", "accounted by hand": "accounted_by_hand",
        "make_private+FIL": "make_private_fil"}


def timed(run, steps, repeats, device):
    sync = torch.cuda.synchronize if device != "cpu" else (lambda: None)
    run()  # warm-up (and the first step's one-time checks)
    sync()
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        for _ in range(steps):
            run()
        sync()
        times.append((time.perf_counter() - began) / steps * 1e3)
    return statistics.median(times), min(times), max(times)


def main():
    args = parse_args()
    workloads = args.workloads.split(",")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# torch {torch.__version__}, device {args.device} (GPU: {gpu}), load average {os.getloadavg()[0]:.2f}; "
          f"ms per iteration, median (min-max) over {args.repeats} repeats of {args.steps}")
    rows = []
    for threads in (int(t) for t in args.threads.split(",")):
        torch.set_num_threads(threads)
        for name in args.models.split(","):
            for dtype_name in args.dtypes.split(","):
                for batch in (int(b) for b in args.batch_sizes.split(",")):
                    w = Workloads(name, batch, getattr(torch, dtype_name), args.device)
                    row = {"model": name, "dtype": dtype_name, "batch": batch, "threads": threads,
                           "device": args.device}
                    for workload in workloads:
                        if args.device != "cpu":
                            torch.cuda.reset_peak_memory_stats()
                        run = getattr(w, RUNS[workload])()
                        median, low, high = timed(run, args.steps, args.repeats, args.device)
                        row[workload] = {"ms": median, "min": low, "max": high}
                        if args.device != "cpu":
                            row[workload]["peak_gib"] = torch.cuda.max_memory_allocated() / 2 ** 30
                        del run
                    ratio = lambda a, b: row[a]["ms"] / row[b]["ms"] if a in row and b in row else float("nan")
                    row["make_private / dp-sgd by hand"] = ratio("make_private", "dp-sgd by hand")
                    row["make_private+FIL / accounted by hand"] = ratio("make_private+FIL", "accounted by hand")
                    row["make_private+FIL / (dp-sgd + trace by hand)"] = row["make_private+FIL"]["ms"] / (
                        row["dp-sgd by hand"]["ms"] + row["trace by hand"]["ms"]) if all(
                        k in row for k in ("make_private+FIL", "dp-sgd by hand", "trace by hand")) else float("nan")
                    rows.append(row)
                    cells = " | ".join(f"{k} {row[k]['ms']:.1f} ({row[k]['min']:.1f}-{row[k]['max']:.1f})"
                                       + (f" {row[k]['peak_gib']:.2f} GiB" if "peak_gib" in row[k] else "")
                                       for k in workloads)
                    print(f"{name} {dtype_name} B={batch} threads={threads}: {cells} | ratios "
                          f"{row['make_private / dp-sgd by hand']:.2f}, "
                          f"{row['make_private+FIL / (dp-sgd + trace by hand)']:.2f}, "
                          f"{row['make_private+FIL / accounted by hand']:.2f}", flush=True)
    if args.json:
        with open(args.json + ".tmp", "w") as out:
            json.dump(rows, out, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
