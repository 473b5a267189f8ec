#!/usr/bin/python3
"""Throughput of per-example clipped gradients on the reconstruction paper's MNIST ConvNet: filkit's
LibTorch plugin against batched PyTorch implementations of the same work, in the same run.

Workloads, each on a batch of B examples (default 100, 28 x 28 synthetic pixels, K = 10, float64,
clip norm C = 1, the GELU-form smooth clip of include/filkit/dpsgd/clipped_gradient.hpp):
  clipped  the per-example clipped gradients g~_b = f_b g_b as a B x p array, and their sum
           (filkit: Network.clipped_gradients, then the column sums);
  probe    the clipped sum and, per example, one Gaussian probe of the trace, ||G_b^T u_b||^2 with
           u_b ~ N(0, I_p), G_b = d g~_b / d x_b: one VJP through the clipped gradients about the
           input, the normals drawn inside the timed region (filkit: Network.account_batch with
           trace='gaussian', spectral='none', probes=1).
PyTorch (Debian's python3-torch), batched:
  pytorch clipped / probe   the reference of issue 13: convolutions unfolded (F.unfold) with one
           GEMM a layer, per-example convolution gradients by bmm of the pre-activation gradients
           with the patches, dense layers from their factors (norms ||dz||^2 ||a||^2, the probe's
           inner product dz^T U a, the batch sum (f dz)^T a), one backward to every pre-activation
           with create_graph, torch.randn for u, and the double backward of sum_b f_b <g_b, u_b> to
           the input;
  pytorch probe by hand     filkit's algorithm written in PyTorch (docs/mathematics.md, section
           7.9): hand-derived cotangents of the records (dz, input) of every layer and one reverse
           pass through their graph, a dense layer's (U a, U^T dz) drawn from their joint law; what
           filkit adds beyond it is engineering (pieces of the batch on separate threads, ziggurat
           normals, malloc tuning, no Python).

Before timing, all are checked to compute the same numbers: the B x p clipped gradients and their
sum, and ||G_b^T u_b||^2 for one fixed U (filkit's Network.vector_jacobian_products), each to 1e-10
relative; the check fails the script otherwise. (filkit's own probes are drawn differently from
torch.randn and, for dense layers, in reduced form; tests/networks/networks_test.cpp checks their
estimate's mean and variance.)

Timing: one repeat runs each workload --batches times (after a warm-up) and records examples/s;
the workloads alternate within every repeat so that load from other processes hits them alike, and
the report gives the median and the range over --repeats. --threads (default 2) sets OpenMP's and
LibTorch's threads for all, and --wait-policy OMP_WAIT_POLICY. With libgomp's default (threads
spin a while at every join) PyTorch is fastest on an idle machine, but on one shared with other
work its many short parallel regions wait for descheduled threads and its throughput falls 3 to 10
times at a load of 4 on 2 cores, where filkit's (a few long regions) hardly moves; passive keeps
PyTorch steady there at about 20-35 % below its idle speed. Compare at a low load average. With
--plugin LABEL=PATH (repeatable) the script instead runs rounds of
worker processes, one per plugin (FILKIT_TORCH_PLUGIN=PATH, e.g. a baseline build's
libfilkit_torch.so beside the current one), alternating, and reports every worker's numbers
labelled by its plugin. The PyTorch numbers too: filkit's plugin, once loaded, keeps freed blocks
below 32 MB in glibc's heap (mallopt), which speeds PyTorch up as well (its clipped workload by
half), so PyTorch is measured as fast as it gets beside filkit. --cpu-time counts CPU seconds
instead of wall seconds (steadier on a busy machine; use with --threads 1). --profile prints
LibTorch's operator profile of filkit's and PyTorch's probe.

  PYTHONPATH=build/python /usr/bin/python3 bench/network_throughput.py [--repeats 7] [--json FILE]

--check-only runs the check alone (the test network_throughput_check, at --batch 60: three pieces).
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--wait-policy", choices=["passive", "active", "default"], default="default",
                        help="OMP_WAIT_POLICY for all (default: as the environment has it; see the header)")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=5, help="batches per timed repeat")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--clip-norm", type=float, default=1.0)
    parser.add_argument("--plugin", action="append", default=[], metavar="LABEL=PATH",
                        help="compare plugins in alternating worker processes")
    parser.add_argument("--rounds", type=int, default=5, help="with --plugin: worker rounds")
    parser.add_argument("--cpu-time", action="store_true",
                        help="examples per CPU-second of the process instead of per second: steadier on a busy "
                             "machine, comparable across builds at --threads 1")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--check-only", action="store_true",
                        help="only check that filkit and PyTorch agree (a test: exit 77 without torch)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--json", help="also write the results here")
    return parser.parse_args(argv)


ARGS = parse_args()
# Before torch and filkit load: libgomp reads its settings once.
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
if ARGS.wait_policy != "default":
    os.environ["OMP_WAIT_POLICY"] = ARGS.wait_policy

import numpy as np  # noqa: E402

try:
    import torch
    import torch.nn.functional as F
except ImportError as error:  # python3-torch is not installed: a skipped test
    print(f"network_throughput: no PyTorch ({error})", file=sys.stderr)
    sys.exit(77)

SIDE, CLASSES = 28, 10
# (name, shape) of every parameter block in filkit's flat order (networks.hpp): each layer's weight
# (out x in, convolutions out x in k^2) then its bias.
BLOCKS = [("conv1", (16, 64)), ("conv1_bias", (16,)), ("conv2", (32, 256)), ("conv2_bias", (32,)),
          ("dense1", (32, 512)), ("dense1_bias", (32,)), ("dense2", (CLASSES, 32)), ("dense2_bias", (CLASSES,))]
SIZES = [math.prod(shape) for _, shape in BLOCKS]
P = sum(SIZES)  # 26,010


def split(flat, batch=None):
    """Blocks of a flat parameter vector (p) or of per-example rows (B x p)."""
    parts = torch.split(flat, SIZES, dim=-1)
    if batch is None:
        return [part.reshape(shape) for part, (_, shape) in zip(parts, BLOCKS)]
    return [part.reshape((batch,) + shape) for part, (_, shape) in zip(parts, BLOCKS)]


def forward(params, x):
    """Logits, pre-activations z_l and every parameter layer's input (patches for convolutions)."""
    W1, b1, W2, b2, W3, b3, W4, b4 = params
    B = x.shape[0]
    P1 = F.unfold(x.view(B, 1, SIDE, SIDE), 8, padding=2, stride=2)  # B x 64 x 169
    z1 = (P1.transpose(1, 2) @ W1.t()).transpose(1, 2) + b1[:, None]  # one GEMM: B 169 x 64 by 64 x 16
    a1 = F.avg_pool2d(torch.tanh(z1).view(B, 16, 13, 13), 2, 1)
    P2 = F.unfold(a1, 4, stride=2)  # B x 256 x 25
    z2 = (P2.transpose(1, 2) @ W2.t()).transpose(1, 2) + b2[:, None]
    a2 = F.avg_pool2d(torch.tanh(z2).view(B, 32, 5, 5), 2, 1).reshape(B, 512)
    z3 = a2 @ W3.t() + b3
    a3 = torch.tanh(z3)
    z4 = a3 @ W4.t() + b4
    return z4, [z1, z2, z3, z4], [P1, P2, a2, a3]


class PerExample:
    """Per-example gradients of the summed cross-entropy: conv blocks by bmm, dense from factors."""

    def __init__(self, params, x, labels, clip_norm, create_graph):
        logits, zs, self.inputs = forward(params, x)
        loss = F.cross_entropy(logits, labels, reduction="sum")
        self.dz = torch.autograd.grad(loss, zs, create_graph=create_graph)
        d1, d2, d3, d4 = self.dz
        P1, P2, a2, a3 = self.inputs
        self.conv = [torch.bmm(d1, P1.transpose(1, 2)), torch.bmm(d2, P2.transpose(1, 2))]  # B x out x in k^2
        self.conv_bias = [d1.sum(2), d2.sum(2)]
        squared = sum(g.pow(2).sum((1, 2)) for g in self.conv) + sum(c.pow(2).sum(1) for c in self.conv_bias)
        squared = squared + d3.pow(2).sum(1) * (a2.pow(2).sum(1) + 1) + d4.pow(2).sum(1) * (a3.pow(2).sum(1) + 1)
        t = squared.sqrt() / clip_norm - 1
        gelu = 0.5 * t * (1 + torch.tanh(math.sqrt(2 / math.pi) * (t + 0.044715 * t ** 3)))
        self.factor = 1 / (gelu + 1)

    def clipped_sum(self):
        f = self.factor.detach()
        d3, d4 = (d.detach() for d in self.dz[2:])
        a2, a3 = (a.detach() for a in self.inputs[2:])
        parts = [f @ self.conv[0].detach().flatten(1), f @ self.conv_bias[0].detach(),
                 f @ self.conv[1].detach().flatten(1), f @ self.conv_bias[1].detach(),
                 ((d3 * f[:, None]).t() @ a2).flatten(), f @ d3, ((d4 * f[:, None]).t() @ a3).flatten(), f @ d4]
        return torch.cat(parts)

    def clipped(self):
        """B x p."""
        d3, d4 = self.dz[2:]
        a2, a3 = self.inputs[2:]
        parts = [self.conv[0].flatten(1), self.conv_bias[0], self.conv[1].flatten(1), self.conv_bias[1],
                 (d3[:, :, None] * a2[:, None, :]).flatten(1), d3, (d4[:, :, None] * a3[:, None, :]).flatten(1), d4]
        return torch.cat(parts, 1) * self.factor[:, None]

    def contract(self, U):
        """sum_b <g~_b, U_b>, U B x p."""
        B = U.shape[0]
        U1, u1, U2, u2, U3, u3, U4, u4 = split(U, B)
        d3, d4 = self.dz[2:]
        a2, a3 = self.inputs[2:]
        inner = (self.conv[0] * U1).sum((1, 2)) + (self.conv_bias[0] * u1).sum(1) \
            + (self.conv[1] * U2).sum((1, 2)) + (self.conv_bias[1] * u2).sum(1) \
            + (d3 * (torch.bmm(U3, a2[:, :, None])[:, :, 0] + u3)).sum(1) \
            + (d4 * (torch.bmm(U4, a3[:, :, None])[:, :, 0] + u4)).sum(1)
        return (self.factor * inner).sum()


def torch_clipped(params, X, labels, clip_norm):
    x = X.detach().requires_grad_(True)
    g = PerExample(params, x, labels, clip_norm, create_graph=False)
    clipped = g.clipped().detach()
    return clipped, clipped.sum(0)


def torch_probe(params, X, labels, clip_norm, U=None):
    x = X.detach().requires_grad_(True)
    g = PerExample(params, x, labels, clip_norm, create_graph=True)
    if U is None:
        U = torch.randn(X.shape[0], P, dtype=torch.float64)
    gtu, = torch.autograd.grad(g.contract(U), x)
    return g.clipped_sum(), gtu.pow(2).sum(1)


def torch_probe_by_hand(params, X, labels, clip_norm, U=None):
    """The probe as filkit computes it, in PyTorch: G^T u as one reverse pass through the graph of
    the records R = (dz, input) of every layer with hand-derived cotangents (no bmm, norm or clip
    factor in the graph), and a dense layer's U a and U^T dz drawn from their joint law."""
    x = X.detach().requires_grad_(True)
    logits, zs, inputs = forward(params, x)
    dz = torch.autograd.grad(F.cross_entropy(logits, labels, reduction="sum"), zs, create_graph=True)
    records = list(dz) + list(inputs)
    B = X.shape[0]
    with torch.no_grad():
        d1, d2, d3, d4 = (d.detach() for d in dz)
        P1, P2, a2, a3 = (t.detach() for t in inputs)
        conv = [(torch.bmm(d1, P1.transpose(1, 2)), d1, P1), (torch.bmm(d2, P2.transpose(1, 2)), d2, P2)]
        dense = [(d3, a2), (d4, a3)]
        squared = sum(G.flatten(1).pow(2).sum(1) + d.sum(2).pow(2).sum(1) for G, d, _ in conv)
        squared = squared + sum(d.pow(2).sum(1) * (a.pow(2).sum(1) + 1) for d, a in dense)
        n = squared.sqrt()
        t = n / clip_norm - 1
        k = math.sqrt(2 / math.pi)
        th = torch.tanh(k * (t + 0.044715 * t ** 3))
        f = 1 / (0.5 * t * (1 + th) + 1)
        slope = -(0.5 * (1 + th) + 0.5 * t * (1 - th * th) * k * (1 + 3 * 0.044715 * t * t)) * f * f / (clip_norm * n)
        total = torch.cat([torch.cat([f @ G.flatten(1), f @ d.sum(2)]) for G, d, _ in conv] +
                          [torch.cat([((d * f[:, None]).t() @ a).flatten(), f @ d]) for d, a in dense])
        # Per block: the weight probe (conv) or (U a, U^T dz) (dense), and the bias probe.
        probes = []
        if U is None:
            for G, d, _ in conv:
                probes.append((torch.randn(G.shape, dtype=torch.float64), torch.randn(B, G.shape[1], dtype=torch.float64)))
            for d, a in dense:
                z, z2 = torch.randn(d.shape, dtype=torch.float64), torch.randn(a.shape, dtype=torch.float64)
                norm = a.norm(dim=1, keepdim=True)
                direction = a / norm
                Ua = norm * z
                Utd = direction * (d * z).sum(1, keepdim=True) + d.norm(dim=1, keepdim=True) * (
                    z2 - direction * (direction * z2).sum(1, keepdim=True))
                probes.append(((Ua, Utd), torch.randn(d.shape, dtype=torch.float64)))
        else:
            blocks = split(U, B)
            for i in range(2):
                probes.append((blocks[2 * i], blocks[2 * i + 1]))
            for i, (d, a) in enumerate(dense):
                W = blocks[4 + 2 * i]
                probes.append(((torch.bmm(W, a[:, :, None])[:, :, 0], torch.bmm(W.transpose(1, 2), d[:, :, None])[:, :, 0]),
                               blocks[5 + 2 * i]))
        inner = sum((G * u).sum((1, 2)) + (d.sum(2) * ub).sum(1) for (G, d, _), (u, ub) in zip(conv, probes))
        inner = inner + sum((d * (Ua + ub)).sum(1) for (d, _), ((Ua, _), ub) in zip(dense, probes[2:]))
        beta = inner * slope
        delta_cot, input_cot = [], []
        for (G, d, Pm), (u, ub) in zip(conv, probes):
            Ut = u * f[:, None, None] + G * beta[:, None, None]
            delta_cot.append(torch.bmm(Ut, Pm) + (ub * f[:, None] + d.sum(2) * beta[:, None])[:, :, None])
            input_cot.append(torch.bmm(Ut.transpose(1, 2), d))
        for (d, a), ((Ua, Utd), ub) in zip(dense, probes[2:]):
            delta_cot.append((Ua + ub) * f[:, None] + d * (beta * (a.pow(2).sum(1) + 1))[:, None])
            input_cot.append(Utd * f[:, None] + a * (beta * d.pow(2).sum(1))[:, None])
    gtu, = torch.autograd.grad(records, x, delta_cot + input_cot)
    return total, gtu.pow(2).sum(1)


def relative_error(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


class Problem:
    def __init__(self, filkit, batch, clip_norm):
        rng = np.random.default_rng(1)
        self.network = filkit.Network("cnn", SIDE * SIDE, CLASSES, chunk=batch)
        self.w = np.asarray(self.network.initial_parameters(1))
        self.X = np.ascontiguousarray(rng.uniform(0.0, 1.0, (batch, SIDE * SIDE)))
        self.y = (np.arange(batch) % CLASSES).astype(np.float64)
        self.C = clip_norm
        self.params = split(torch.from_numpy(self.w))
        self.Xt = torch.from_numpy(self.X)
        self.labels = torch.from_numpy(self.y).long()
        self.seed = 0

    def filkit_clipped(self):
        clipped = self.network.clipped_gradients(self.w, self.X, self.y, self.C)
        return clipped, clipped.sum(0)

    def filkit_probe(self):
        self.seed += 1
        return self.network.account_batch(self.w, self.X, self.y, self.C, trace="gaussian", spectral="none",
                                          probes=1, seed=self.seed)

    def check(self):
        """The same numbers from both, to 1e-10 relative, or SystemExit."""
        errors = {}
        clipped, total = self.filkit_clipped()
        t_clipped, t_total = torch_clipped(self.params, self.Xt, self.labels, self.C)
        errors["clipped gradients"] = relative_error(clipped, t_clipped.numpy())
        errors["clipped sum"] = relative_error(total, t_total.numpy())
        U = np.random.default_rng(2).standard_normal((self.X.shape[0], P))
        gtu = self.network.vector_jacobian_products(self.w, self.X, self.y, self.C, U)
        t_sum, t_trace = torch_probe(self.params, self.Xt, self.labels, self.C, torch.from_numpy(U))
        errors["||G^T u||^2"] = relative_error((gtu ** 2).sum(1), t_trace.numpy())
        h_sum, h_trace = torch_probe_by_hand(self.params, self.Xt, self.labels, self.C, torch.from_numpy(U))
        errors["||G^T u||^2 by hand"] = relative_error(h_trace.numpy(), t_trace.numpy())
        errors["clipped sum by hand"] = relative_error(h_sum.numpy(), t_sum.numpy())
        errors["probe path's clipped sum"] = relative_error(self.filkit_probe()[0], t_sum.numpy())
        worst = max(errors.values())
        if not worst <= 1e-10:
            raise SystemExit(f"filkit and PyTorch disagree: {errors}")
        return errors

    def workloads(self):
        p, X, labels, C = self.params, self.Xt, self.labels, self.C
        return {"filkit clipped": self.filkit_clipped, "filkit probe": self.filkit_probe,
                "pytorch clipped": lambda: torch_clipped(p, X, labels, C),
                "pytorch probe": lambda: torch_probe(p, X, labels, C),
                "pytorch probe by hand": lambda: torch_probe_by_hand(p, X, labels, C)}


def measure(problem, repeats, batches):
    """examples/s of every workload, one list of `repeats` values each, workloads interleaved."""
    clock = time.process_time if ARGS.cpu_time else time.perf_counter
    workloads = problem.workloads()
    rates = {name: [] for name in workloads}
    for run in workloads.values():  # warm-up
        run()
    batch = problem.X.shape[0]
    for _ in range(repeats):
        for name, run in workloads.items():
            start = clock()
            for _ in range(batches):
                run()
            rates[name].append(batch * batches / (clock() - start))
    return rates


def profile(problem):
    from torch.profiler import ProfilerActivity, profile as torch_profile
    for name in ("filkit probe", "pytorch probe", "pytorch probe by hand"):
        run = problem.workloads()[name]
        run()
        with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(ARGS.batches):
                run()
        print(f"== {name}: {ARGS.batches} batches of {problem.X.shape[0]}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def load_average():
    return os.getloadavg()[0]


def print_table(results, info):
    print(f"# {info}")
    unit = "ex/CPU-s" if ARGS.cpu_time else "ex/s"
    print(f"{'workload':<34} {'median ' + unit:>16} {'min':>9} {'max':>9} {'n':>4}")
    for name, values in results.items():
        s = summary(values)
        print(f"{name:<34} {s['median']:>16.0f} {s['min']:>9.0f} {s['max']:>9.0f} {s['n']:>4}")


def run_single():
    import filkit
    torch.set_num_threads(ARGS.threads)
    problem = Problem(filkit, ARGS.batch, ARGS.clip_norm)
    if ARGS.profile:
        profile(problem)
        return
    errors = problem.check()
    if ARGS.check_only:
        print("filkit and PyTorch agree (relative differences): " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
        return
    load_before = load_average()
    rates = measure(problem, ARGS.repeats, ARGS.batches)
    output = {"rates": rates, "errors": errors, "load": [load_before, load_average()]}
    if ARGS.worker:
        print(json.dumps(output))
        return
    print("check (relative differences, filkit vs PyTorch): " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    print_table(rates, f"B = {ARGS.batch}, {ARGS.threads} threads, OMP_WAIT_POLICY {ARGS.wait_policy}, p = {P}, "
                       f"load average {load_before:.2f} -> {load_average():.2f}")
    if ARGS.json:
        with open(ARGS.json, "w") as out:
            json.dump({"args": vars(ARGS), **output}, out, indent=1)


def run_plugins():
    plugins = [entry.split("=", 1) for entry in ARGS.plugin]
    pooled = {}
    loads = []
    for _ in range(ARGS.rounds):
        for label, path in plugins:
            env = dict(os.environ, FILKIT_TORCH_PLUGIN=os.path.abspath(path))
            command = [sys.executable, os.path.abspath(__file__), "--worker", "--threads", str(ARGS.threads),
                       "--wait-policy", ARGS.wait_policy, "--batch", str(ARGS.batch), "--batches", str(ARGS.batches),
                       "--repeats", str(ARGS.repeats), "--clip-norm", str(ARGS.clip_norm)]
            command += ["--cpu-time"] if ARGS.cpu_time else []
            out = json.loads(subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout)
            loads += out["load"]
            for name, values in out["rates"].items():
                key = f"{name} [{label}]"
                pooled.setdefault(key, []).extend(values)
    print_table(pooled, f"B = {ARGS.batch}, {ARGS.threads} threads, OMP_WAIT_POLICY {ARGS.wait_policy}, "
                        f"{ARGS.rounds} rounds x {ARGS.repeats} repeats, "
                        f"load average {min(loads):.2f} to {max(loads):.2f}")
    if ARGS.json:
        with open(ARGS.json, "w") as out:
            json.dump({"args": vars(ARGS), "rates": pooled, "load": loads}, out, indent=1)


if __name__ == "__main__":
    run_plugins() if ARGS.plugin and not ARGS.worker else run_single()
