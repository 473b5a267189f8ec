#!/usr/bin/env python3
"""filkit.torch's throughput on a GPU beside the same model on the CPU, in one run: examples/s of
FilAccountant.step (one Gaussian probe per example) and of make_private's step work
(FilAccountant.step_and_clip: the probe and the clipped sum from the same per-example gradients)
on the reconstruction paper's MNIST ConvNet (synthetic 28 x 28 images, C = 1), for a few batch
sizes, in float32 and float64. Needs only PyTorch (not filkit's compiled module):

  PYTHONPATH=python python3 bench/torch_device_throughput.py [--batch-sizes 32,128,512] [--seconds 2]

Each (device, dtype, batch size) is warmed up once, then timed over whole steps until --seconds
have passed (at least --min-steps); CUDA is synchronised before each clock reading. Without a CUDA
device only the CPU lines are printed, with a line saying so.
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F
from torch import nn

from filkit.torch import FilAccountant


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-sizes", default="32,128,512")
    parser.add_argument("--dtypes", default="float32,float64")
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--min-steps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    return parser.parse_args()


def convnet():
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Conv2d(16, 32, 4, 2), nn.Tanh(),
                         nn.AvgPool2d(2, 1), nn.Flatten(), nn.Linear(512, 32), nn.Tanh(), nn.Linear(32, 10))


def rate(run, batch, device, seconds, min_steps):
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    run()
    sync()
    steps, began = 0, time.perf_counter()
    while steps < min_steps or time.perf_counter() - began < seconds:
        run()
        steps += 1
        sync()
    return steps * batch / (time.perf_counter() - began)


def main():
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} CPU threads, GPU: {gpu}, "
          f"load average {os.getloadavg()[0]:.2f}")
    if not torch.cuda.is_available():
        print("# no CUDA device: CPU lines only")
    print(f"{'device':<6} {'dtype':<8} {'B':>5} {'step ex/s':>11} {'step_and_clip ex/s':>19}")
    generator = torch.Generator().manual_seed(0)
    for dtype_name in args.dtypes.split(","):
        dtype = getattr(torch, dtype_name)
        for batch in (int(b) for b in args.batch_sizes.split(",")):
            images = torch.rand(batch, 1, 28, 28, generator=generator, dtype=torch.float64)
            labels = torch.randint(0, 10, (batch,), generator=generator)
            for device in devices:
                torch.manual_seed(1)
                model = convnet().to(device=device, dtype=dtype)
                accountant = FilAccountant(model, loss_fn=F.cross_entropy, clip_norm=1.0, noise_multiplier=1.0,
                                           sample_rate=0.01)
                x, y, ids = images.to(device=device, dtype=dtype), labels.to(device), range(batch)
                step = rate(lambda: accountant.step(x, y, ids), batch, device, args.seconds, args.min_steps)
                both = rate(lambda: accountant.step_and_clip(x, y, ids), batch, device, args.seconds, args.min_steps)
                print(f"{device:<6} {dtype_name:<8} {batch:>5} {step:>11.0f} {both:>19.0f}", flush=True)


if __name__ == "__main__":
    main()
