#!/usr/bin/env python3
"""OpenBLAS' own kernel choice against filkit's (python/filkit/_blas.py, and the plugin loader's
choose_openblas_kernels), in one run: a float64 GEMM (N x N times N x N, one thread) and the
kernels OpenBLAS reports (openblas_get_corename), each in a fresh process, since OpenBLAS picks its
kernels once, when it is loaded.

  /usr/bin/python3 bench/blas_kernels.py [--size 1000] [--repeats 5] [--rounds 3]
"""
import argparse
import importlib.util
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r"""
import ctypes, ctypes.util, sys, time
import numpy as np
size, repeats = int(sys.argv[1]), int(sys.argv[2])
core = "?"
for name in ("libopenblas.so.0", ctypes.util.find_library("openblas")):
    try:
        lib = ctypes.CDLL(name)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
        break
    except (OSError, AttributeError, TypeError):
        pass
rng = np.random.default_rng(0)
a, b = rng.random((size, size)), rng.random((size, size))
a @ b
times = []
for _ in range(repeats):
    start = time.process_time()
    a @ b
    times.append(time.process_time() - start)
times.sort()
print(core, times[len(times) // 2])
"""


def measure(env, size, repeats):
    out = subprocess.run([sys.executable, "-c", WORKER, str(size), str(repeats)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    return out[0], float(out[1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    # The module alone (importing the package needs the build).
    spec = importlib.util.spec_from_file_location("filkit_blas", os.path.join(ROOT, "python", "filkit", "_blas.py"))
    blas = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(blas)

    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    base["OPENBLAS_NUM_THREADS"] = "1"
    saved = dict(os.environ)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    chosen = blas.choose_openblas_kernels()
    os.environ.clear()
    os.environ.update(saved)
    flops = 2.0 * args.size ** 3
    print(f"float64 GEMM {args.size}^3, one thread, CPU seconds (median of {args.repeats}), {args.rounds} rounds")
    for round_ in range(args.rounds):
        own_core, own = measure(base, args.size, args.repeats)
        line = f"round {round_}: OpenBLAS' choice {own_core}: {own * 1e3:.0f} ms ({flops / own / 1e9:.1f} GFLOP/s)"
        if chosen:
            filkit_core, filkit = measure(dict(base, OPENBLAS_CORETYPE=chosen), args.size, args.repeats)
            line += f"; filkit's {filkit_core}: {filkit * 1e3:.0f} ms ({flops / filkit / 1e9:.1f} GFLOP/s), {own / filkit:.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
