"""OpenBLAS kernels named from the CPU's instruction sets, before NumPy or PyTorch load OpenBLAS.

Debian 12's OpenBLAS (0.3.21; NumPy's and PyTorch's BLAS through libblas.so.3) picks its kernels
from the CPU's family and model, and falls back to its oldest x86-64 kernels (Prescott: SSE3) for
a model it does not know, such as the 5th-generation Xeons (model 207): its double GEMM is then
4 times slower (bench/blas_kernels.py). The same rule as the C++ plugin loader (src/networks/network_plugin.cpp,
choose_openblas_kernels): unless OPENBLAS_CORETYPE is set, name the kernels the CPU supports. It
takes effect only if OpenBLAS is not loaded yet, i.e. when filkit is imported before NumPy and
PyTorch.
"""

import os


def choose_openblas_kernels(cpuinfo="/proc/cpuinfo"):
    """Sets OPENBLAS_CORETYPE from the CPU's flags unless it is set; returns the value or None."""
    if "OPENBLAS_CORETYPE" in os.environ:
        return os.environ["OPENBLAS_CORETYPE"]
    try:
        with open(cpuinfo) as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return None
    flags = set(flags)
    if {"avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512cd"} <= flags:
        core = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        core = "Haswell"
    elif "avx" in flags:
        core = "Sandybridge"
    else:
        return None
    os.environ["OPENBLAS_CORETYPE"] = core
    return core
