"""What filkit.torch reads from the compiled module filkit._filkit, in Python, for where that module
did not load (library() returns this module then): FilAccountant's
epsilon(), rdp(), privacy_spent() and write_summary() work without it. The RDP accountant is NumPy
(filkit/_rdp.py, compared with the C++ one to 1e-12 by python/tests/test_standalone.py); the PLD
accountant is the compiled module's only, and asking for it raises an ImportError saying so. The
wording below is the C++ library's (the same test compares every string), and the writer makes
the same promise as filkit's (src/base/output_files.cpp): the outputs are written as a set, each
regular file through a synced temporary beside it, renamed into place only when all are written.
"""
import math
import os
import stat
import sys
import tempfile

from ._rdp import PrivacySpent, RdpAccountant  # noqa: F401 (what filkit.torch reads)

try:
    from ._version import __version__  # written by the build (python/CMakeLists.txt)
except ImportError:  # the source tree itself on the path, not a build of it
    __version__ = "unknown"



def library():
    """filkit's compiled module; where it did not load, this module: what filkit.torch reads from it in
    Python (the RDP accountant in NumPy; the PLD one an ImportError naming what it needs)."""
    from . import _filkit
    if _filkit is None:  # filkit/__init__.py keeps the name, None, where the module did not load
        return sys.modules[__name__]
    return _filkit


# src/privacy/step_privacy.cpp (kEffectiveNoiseMultiplierReason).
EFFECTIVE_NOISE_MULTIPLIER_REASON = (
    "the smooth (GELU) clip bounds a clipped gradient's norm by 1.11524 C, not C, so the noise sigma C is "
    "sigma / 1.11524 per unit of sensitivity")
# src/privacy/privacy_accountant.cpp (neighbouring_relation).
_NEIGHBOURING_RELATIONS = {
    "poisson": "add/remove one example (Poisson sampling)",
    "uniform": "replace one example (fixed-size batches without replacement; sensitivity 2C)"}
# src/dpsgd/dpsgd_result.cpp (sampling_note).
_SHUFFLE_NOTE = (
    "shuffled epochs (every example once an epoch): kappa and epsilon (RDP or PLD accountant) are computed for "
    "Poisson sampling at rate B/n and do not cover shuffling, which has no subsampling amplification guarantee")


class NumericalError(ArithmeticError):
    """filkit.NumericalError: a result that is not a finite number."""


def PldAccountant(*args, **kwargs):
    raise ImportError("the PLD accountant (accountant='pld') needs filkit's compiled module filkit._filkit, which "
                      "did not load here; install filkit with it (pip install . in a checkout, README.md) or "
                      "use accountant='rdp', which works without it")


def neighbouring_relation(sampling):
    if sampling not in _NEIGHBOURING_RELATIONS:
        raise ValueError(f"sampling = {sampling!r}: must be 'poisson' or 'uniform'")
    return _NEIGHBOURING_RELATIONS[sampling]


def sampling_note(sampler):
    if sampler not in ("uniform", "poisson", "shuffle"):
        raise ValueError(f"sampler = {sampler!r}: must be 'uniform', 'poisson' or 'shuffle'")
    return _SHUFFLE_NOTE if sampler == "shuffle" else None


def rdp_mse_bound(epsilon, diameter=1.0):
    """Theorem 1's bound on an unbiased reconstruction's MSE, diameter^2 / (4 (e^eps - 1))."""
    if not epsilon >= 0:
        raise ValueError(f"epsilon = {epsilon!r}: must be >= 0")
    return diameter * diameter / (4.0 * math.expm1(epsilon)) if epsilon > 0 else math.inf


def _written_through(path):
    """Standard output, links, devices and FIFOs are written in place, not replaced."""
    if path == "-":
        return True
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    return stat.S_ISLNK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISFIFO(mode)


def _check_output_paths(outputs):
    """Refuses (ValueError) outputs (name, path) that cannot be written: a flag for a path, a
    directory, a missing or unwritable directory, two names of one file."""
    seen = {}
    for name, path in outputs:
        if path == "-":
            continue
        if len(path) > 1 and path.startswith("-"):
            raise ValueError(f"{name} {path}: looks like a flag, not a path; for a file whose name begins with '-', "
                             f"write ./{path}")
        if os.path.isdir(path):
            raise ValueError(f"{name} {path}: is a directory; expected a file")
        directory = os.path.dirname(os.path.abspath(os.path.realpath(path)))
        if not os.path.isdir(directory):
            raise ValueError(f"{name} {path}: the directory {directory} does not exist")
        if not os.access(directory, os.W_OK | os.X_OK) and not _written_through(path):
            raise ValueError(f"{name} {path}: the directory {directory} is not writable")
        resolved = os.path.realpath(path)
        if os.path.exists(resolved) and not os.path.isfile(resolved):
            continue  # a device or FIFO: may be named twice
        if resolved in seen:
            raise ValueError(f"{name} {path}: the same file as {seen[resolved]}; each output needs a file of its own")
        seen[resolved] = name


def _write_output_files(files):
    """Writes (path, bytes) pairs as a set: regular files through synced temporaries renamed into
    place once every file is written; '-', links, devices and FIFOs written through."""
    staged = []
    try:
        for path, content in files:
            if _written_through(path):
                continue
            handle, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                                 dir=os.path.dirname(os.path.abspath(path)))
            staged.append((temporary, path))
            with os.fdopen(handle, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temporary, 0o666 & ~_umask())
        for path, content in files:
            if path == "-":
                sys.stdout.buffer.write(content)
                sys.stdout.flush()
            elif _written_through(path):
                with open(path, "wb") as out:
                    out.write(content)
    except BaseException:
        for temporary, _ in staged:
            os.unlink(temporary)
        raise
    for temporary, path in staged:
        os.replace(temporary, path)
    for directory in {os.path.dirname(os.path.abspath(path)) for _, path in staged}:
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask
