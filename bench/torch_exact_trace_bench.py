#!/usr/bin/python3
"""The exact per-example Fisher trace Tr(G^T G) of filkit.torch.FilAccountant(trace="exact") beside
filkit's C++ backend (filkit.Network.account_batch(trace="exact"), what filkit dpsgd --trace exact
runs), in one run, on the reconstruction paper's MNIST ConvNet (float64, 784 private coordinates,
26,010 parameters): seconds per example, median (min-max) over --repeats, the two alternating, and
the traces checked equal (1e-10 relative) before timing.

  PYTHONPATH=build/python /usr/bin/python3 bench/torch_exact_trace_bench.py [--batch 4] [--repeats 3]
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import filkit
from filkit.torch import FilAccountant
from filkit.torch.functional import assign_flat

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "tests"))
from test_torch_accountant import ARCHITECTURES  # noqa: E402  (the ConvNet as filkit's and as PyTorch's)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    make, image, d, K, hidden = ARCHITECTURES["cnn"]
    network = filkit.Network("cnn", d, K, hidden=hidden, image=image)
    w = network.initial_parameters(seed=3)
    module = make().double()
    assign_flat(module, w)
    rng = np.random.default_rng(0)
    X, y = rng.uniform(size=(args.batch, d)), (np.arange(args.batch) % K).astype(float)
    C = 0.5
    inputs, targets = torch.from_numpy(X).reshape((args.batch,) + image), torch.from_numpy(y).long()
    scale = 1.0  # noise multiplier 1: the accountant divides by (sigma C)^2

    def cpp():
        return network.account_batch(w, X, y, C, trace="exact")[1]

    def pytorch():
        accountant = FilAccountant(module, loss_fn=F.cross_entropy, clip_norm=C, noise_multiplier=scale,
                                   sample_rate=0.1, trace="exact")
        return accountant.step(inputs, targets, range(args.batch)).numpy() * (scale * C) ** 2

    np.testing.assert_allclose(pytorch(), cpp(), rtol=1e-10)
    times = {"filkit C++ (Network.account_batch)": [], "filkit.torch (FilAccountant)": []}
    for _ in range(args.repeats):
        for name, run in zip(times, (cpp, pytorch)):
            began = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - began) / args.batch)
    print(f"# exact trace, MNIST ConvNet, float64, B = {args.batch}, {args.threads} thread(s), load average "
          f"{os.getloadavg()[0]:.2f}: seconds per example, median (min-max) of {args.repeats}")
    for name, values in times.items():
        print(f"{name:<36} {statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})")
    ratio = statistics.median(times["filkit.torch (FilAccountant)"]) / statistics.median(
        times["filkit C++ (Network.account_batch)"])
    print(f"ratio filkit.torch / C++: {ratio:.2f}")


if __name__ == "__main__":
    main()
