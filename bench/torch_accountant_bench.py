#!/usr/bin/python3
"""Throughput of filkit.torch.FilAccountant.step beside filkit's C++ backend and the batched PyTorch
baselines of bench/network_throughput.py, in one run, on the reconstruction paper's MNIST ConvNet
(B = 100 synthetic 28 x 28 images, float64, C = 1, one Gaussian probe per example: the "probe"
workload of network_throughput.py).

Workloads (examples/s; each batch computes the clipped sum's work and one Gaussian probe of the trace
per example, except FilAccountant.step, which computes the probe only):
  filkit probe                Network.account_batch (C++, LibTorch);
  pytorch probe               network_throughput.py's batched autograd reference (hand-written layers);
  pytorch probe by hand       filkit's algorithm in PyTorch;
  FilAccountant.step          filkit.torch on an nn.Sequential of the same network: the per-example
                              gradients by vmap(grad) of the user's loss inside ordinary autograd, and
                              the batch's G_b^T u_b by one reverse pass of sum_b <g~_b(x_b), u_b>
                              (functional.py, BatchedClippedGradients);
  make_private step           FilAccountant.step_and_clip: the same, and the clipped sum from the same
                              per-example gradients (what make_private's optimizer step computes);
  previous FilAccountant.step the algorithm before (vmap over examples of grad of <g~(x), u>, each
                              example's gradient taken inside: ClippedGradient.transpose_products);
  previous make_private step  that, and the clipped sum by a second vmap(grad) (as make_private did).
Before timing, both FilAccountant paths' G^T u for a fixed U are checked against filkit's
Network.vector_jacobian_products (1e-10 relative). The workloads alternate within every repeat; the
table gives the median and range over --repeats. Compare at a low load average (network_throughput.py's
header explains how load from other processes distorts PyTorch's numbers), or with --cpu-time (CPU
seconds of the process instead of wall seconds; with --threads 1 the steadier measure on a busy
machine).

  PYTHONPATH=build/python /usr/bin/python3 bench/torch_accountant_bench.py [--repeats 5] [--threads 2]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--wait-policy", choices=["passive", "active", "default"], default="default",
                        help="OMP_WAIT_POLICY, as network_throughput.py (passive: steadier on a loaded machine)")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batches", type=int, default=3, help="batches per timed repeat")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--memory-budget", type=float, default=2 ** 30, help="FilAccountant's, in bytes")
    parser.add_argument("--cpu-time", action="store_true", help="examples per CPU-second instead of per second")
    return parser.parse_args()


def load_throughput_module(args):
    """bench/network_throughput.py (its Problem, baselines and check), with its own flags."""
    argv = sys.argv
    sys.argv = [os.path.join(HERE, "network_throughput.py"), "--threads", str(args.threads), "--batch", str(args.batch),
                "--wait-policy", args.wait_policy]
    try:
        spec = importlib.util.spec_from_file_location("network_throughput", sys.argv[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.argv = argv
    return module


def main():
    args = parse_args()
    nt = load_throughput_module(args)  # sets OMP_NUM_THREADS before torch loads
    import numpy as np
    import torch
    import filkit
    from filkit.torch import FilAccountant
    from filkit.torch.functional import BatchedClippedGradients, ClippedGradient, assign_flat, split_parameters
    nn, F = torch.nn, torch.nn.functional
    torch.set_num_threads(args.threads)

    problem = nt.Problem(filkit, args.batch, 1.0)
    errors = problem.check()
    module = nn.Sequential(nn.Conv2d(1, 16, 8, 2, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Conv2d(16, 32, 4, 2), nn.Tanh(),
                           nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(512, 32), nn.Tanh(), nn.Linear(32, 10)).double()
    assign_flat(module, torch.from_numpy(problem.w))
    images = problem.Xt.reshape(-1, 1, 28, 28)
    U = np.random.default_rng(2).standard_normal((args.batch, nt.P))
    g = ClippedGradient(module, F.cross_entropy, 1.0, "smooth", (1, 28, 28))
    params, constants = split_parameters(module)
    expected = problem.network.vector_jacobian_products(problem.w, problem.X, problem.y, 1.0, U)
    batched = BatchedClippedGradients(g, params, constants, problem.Xt, problem.labels)
    errors["FilAccountant G^T u"] = nt.relative_error(batched.transpose_products(torch.from_numpy(U)).numpy(), expected)
    gtu = g.transpose_products(params, constants, problem.Xt, problem.labels, torch.from_numpy(U)).numpy()
    errors["previous G^T u"] = nt.relative_error(gtu, expected)
    if not max(errors.values()) <= 1e-10:
        raise SystemExit(f"FilAccountant and filkit disagree: {errors}")

    accountant = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0,
                               sample_rate=0.01, memory_budget=args.memory_budget)
    ids = list(range(args.batch))
    workloads = {name: run for name, run in problem.workloads().items() if "probe" in name}
    workloads["FilAccountant.step"] = lambda: accountant.step(images, problem.labels, ids)
    workloads["make_private step"] = lambda: accountant.step_and_clip(images, problem.labels, ids)
    p = accountant.parameter_count

    def previous_step():
        normals = torch.randn((args.batch, p), dtype=torch.float64)
        return g.transpose_products(params, constants, problem.Xt, problem.labels, normals).pow(2).sum(1)

    workloads["previous FilAccountant.step"] = previous_step
    workloads["previous make_private step"] = lambda: (
        previous_step(), g.clipped(params, constants, problem.Xt, problem.labels).sum(0))
    clock = time.process_time if args.cpu_time else time.perf_counter
    rates = {name: [] for name in workloads}
    for run in workloads.values():
        run()
    for _ in range(args.repeats):
        for name, run in workloads.items():
            start = clock()
            for _ in range(args.batches):
                run()
            rates[name].append(args.batch * args.batches / (clock() - start))
    print("check (relative differences): " + ", ".join(f"{k} {v:.1e}" for k, v in errors.items()))
    print(f"# B = {args.batch}, {args.threads} threads, OMP_WAIT_POLICY {args.wait_policy}, p = {nt.P}, "
          f"{'examples per CPU-second' if args.cpu_time else 'wall time'}, "
          f"torch {torch.__version__}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'workload':<28} {'median ex/s':>12} {'min':>9} {'max':>9}")
    for name, values in rates.items():
        print(f"{name:<28} {statistics.median(values):>12.0f} {min(values):>9.0f} {max(values):>9.0f}")


if __name__ == "__main__":
    main()
