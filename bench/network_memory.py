#!/usr/bin/python3
"""Calibration of the networks' memory estimate (estimate_network_memory, networks/networks.hpp)
against the peak resident memory of `filkit dpsgd` on convolutional networks.

For each network and batch size it runs, on seeded random images in an .npz:
  1. `filkit dpsgd ...` with a --max-memory just above what the data take, whose refusal states the
     network's estimate ("training a network of P parameters with R examples in flight (...) needs
     X"), read from the message;
  2. the same run without the limit under /usr/bin/time -v: its peak resident memory;
and the same with the smallest network (`--arch flatten,dense:10`), whose peak is LibTorch's, the
data's and the process's own memory (the baseline the estimate does not count). It prints the
table docs cite: estimate, peak, peak - baseline and (peak - baseline) / estimate.

  /usr/bin/python3 bench/network_memory.py --filkit build/filkit [--batches 16,64,256] [--threads 2]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

UNITS = {"bytes": 1, "KiB": 2 ** 10, "MiB": 2 ** 20, "GiB": 2 ** 30, "TiB": 2 ** 40}

# (name, image shape, flags): the built-in ConvNets and a conv layer specification.
NETWORKS = [
    ("cnn (MNIST ConvNet)", (1, 28, 28), ["--model", "cnn"]),
    ("cifar-cnn (CIFAR-10 ConvNet)", (3, 32, 32), ["--model", "cifar-cnn"]),
    ("conv arch", (3, 32, 32),
     ["--model", "custom", "--arch", "conv:32:3:1:1,tanh,conv:64:3:1:1,tanh,avgpool:2:2,flatten,dense:64,tanh,dense:10"]),
]
BASELINE = ["--model", "custom", "--arch", "flatten,dense:10"]


def write_images(path, shape, n, classes=10, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 256, size=(n,) + shape).astype(np.uint8)
    y = np.arange(n) % classes
    np.savez(path, X=X, y=y)


def readable(text):
    number, unit = text.split()
    return float(number) * UNITS[unit]


def estimate_of(filkit, flags, data_bytes):
    budget = f"{int(data_bytes * 1.5) // 1024 + 64}K"  # the data load, not the network
    done = subprocess.run([filkit] + flags + ["--max-memory", budget], capture_output=True, text=True)
    match = re.search(r"training a network of (\d+) parameters with (\d+) examples in flight .*? needs ([\d.]+ \w+),",
                      done.stderr)
    if not match:
        sys.exit(f"no estimate in: {done.stderr}")
    return int(match.group(1)), int(match.group(2)), readable(match.group(3))


def peak_of(filkit, flags):
    done = subprocess.run(["/usr/bin/time", "-v", filkit] + flags, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"failed: {' '.join(flags)}\n{done.stderr[-2000:]}")
    return int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1)) * 1024


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--filkit", default="build/filkit")
    parser.add_argument("--batches", default="16,64,256")
    parser.add_argument("--threads", default="2")
    parser.add_argument("--steps", default="2")
    args = parser.parse_args()
    MiB = 2 ** 20
    print("| network | B | parameters | in flight | estimate | peak | baseline | (peak - baseline) / estimate |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    n = max(int(b) for b in args.batches.split(",")) + 20  # the training split holds every batch
    with tempfile.TemporaryDirectory() as tmp:
        for name, shape, network in NETWORKS:
            data = os.path.join(tmp, "x".join(map(str, shape)) + ".npz")
            if not os.path.exists(data):
                write_images(data, shape, n)
            data_bytes = n * int(np.prod(shape)) * 8
            for batch in args.batches.split(","):
                common = ["dpsgd", "-q", "--data", data, "--pixel-scale", "true", "--classes", "all", "--test-fraction", "0",
                          "--batch-size", batch, "--steps", args.steps, "--threads", args.threads, "--runs", "1"]
                parameters, rows, estimate = estimate_of(args.filkit, common + network, data_bytes)
                peak = peak_of(args.filkit, common + network)
                baseline = peak_of(args.filkit, common + BASELINE)
                print(f"| {name} | {batch} | {parameters} | {rows} | {estimate / MiB:.0f} MiB | {peak / MiB:.0f} MiB | "
                      f"{baseline / MiB:.0f} MiB | {(peak - baseline) / estimate:.2f} |", flush=True)


if __name__ == "__main__":
    main()
