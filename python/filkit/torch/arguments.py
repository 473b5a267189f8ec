"""The checks of filkit.torch's arguments, one definition each: a choice among names, a finite
number > 0, an integer in a range, and the noise scale sigma C. Each raises ValueError naming the
argument as the caller wrote it, the value and the rule, and returns the value as Python's type."""

import math
import numbers

import numpy as np


def choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name} = {value!r}: must be one of {', '.join(map(repr, allowed))}")


def positive(name, value, upper=None):
    """A real number > 0 (and <= upper): Python's or NumPy's, not a bool; returned as a float."""
    if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)) or not value > 0 or \
            (upper is not None and not value <= upper) or math.isinf(value):
        bound = f" and <= {upper}" if upper is not None else ""
        raise ValueError(f"{name} = {value!r}: must be a finite number > 0{bound}")
    return float(value)


def count(name, value, minimum, maximum=2 ** 63 - 1):
    """An integer in [minimum, maximum] (Python's or NumPy's, not a bool); returned as an int."""
    if not isinstance(value, numbers.Integral) or isinstance(value, (bool, np.bool_)) or \
            not minimum <= value <= maximum:
        raise ValueError(f"{name} = {value!r}: must be an integer from {minimum} to {maximum}")
    return int(value)


# sigma C, the noise's standard deviation on the clipped sum: the traces are divided by its square,
# which must be a normal float64 (1e-300 would make every dFIL infinite or NaN).
NOISE_SCALE_RANGE = (1e-100, 1e100)


def noise_scale(clip_name, clip_norm, noise_multiplier):
    """sigma C, checked to lie in NOISE_SCALE_RANGE (clip_name: the clip norm's argument name)."""
    low, high = NOISE_SCALE_RANGE
    if not low <= noise_multiplier * clip_norm <= high:
        raise ValueError(f"{clip_name} = {clip_norm!r} and noise_multiplier = {noise_multiplier!r}: the noise's "
                         f"standard deviation sigma C = {noise_multiplier * clip_norm:.3g} must lie in "
                         f"[{low:g}, {high:g}] (the traces are divided by its square)")
    return noise_multiplier * clip_norm
