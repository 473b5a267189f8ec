"""FilAccountant.load_state_dict's checks of a state, apart from the accountant: every field of
state_dict()'s dict checked (the settings, the model's parameter count, the sums' types, lengths,
signs and finiteness, the counts) before anything is assigned, so that a refused state leaves the
accountant as it was. Each refusal is a ValueError "load_state_dict: <what>"."""

import torch

from .arguments import count

KEYS = ("settings", "parameter_count", "num_examples", "steps", "seconds", "private_dims", "trace", "spectral",
        "times_sampled", "labels", "private_dims_label", "snapshots", "generator")


def state_error(what):
    return ValueError(f"load_state_dict: {what}")


def checked_state(state, settings, parameter_count):
    """The checked fields of `state` for an accountant of `settings` and `parameter_count` trained
    parameters (the probes' generator is the accountant's to restore): num_examples, steps,
    private_dims, private_dims_label, seconds, the sums (trace, spectral, times_sampled, labels) and
    snapshots."""
    if not isinstance(state, dict):
        raise state_error(f"expected the dict state_dict() returns, got {type(state).__name__}")
    missing = [k for k in KEYS if k not in state]
    if missing:
        raise state_error(f"the state lacks {', '.join(map(repr, missing))} (not a state_dict() of this version)")
    if state["settings"] != settings:
        raise state_error(f"the state was saved with settings {state['settings']!r}, this accountant has {settings!r}")
    if state["parameter_count"] != parameter_count:
        raise state_error(f"the state was saved for a model with {state['parameter_count']!r} trained parameters, "
                          f"this model has {parameter_count}")
    try:
        num_examples = None if state["num_examples"] is None else count("num_examples", state["num_examples"], 1)
        steps = count("steps", state["steps"], 0)
        private_dims = None if state["private_dims"] is None else count("private_dims", state["private_dims"], 1)
        label_dims = None if state["private_dims_label"] is None else \
            count("private_dims_label", state["private_dims_label"], 1)
        seconds = float(state["seconds"])
    except (ValueError, TypeError) as error:
        raise state_error(str(error)) from error
    sums = {}
    for key in ("trace", "spectral", "times_sampled", "labels"):
        value = state[key]
        if not isinstance(value, torch.Tensor) or value.dtype != torch.float64 or value.dim() != 1:
            raise state_error(f"'{key}' must be a 1-d float64 tensor, got "
                              f"{type(value).__name__ if not isinstance(value, torch.Tensor) else value.dtype}")
        sums[key] = value
    size = sums["trace"].numel()
    if any(v.numel() != size for v in sums.values()):
        raise state_error("'trace', 'spectral', 'times_sampled' and 'labels' must have one entry per example each")
    for key in ("trace", "spectral", "times_sampled"):
        if not bool(torch.isfinite(sums[key]).all()) or bool((sums[key] < 0).any()):
            raise state_error(f"'{key}' holds a negative or non-finite value: sums of squares and counts are >= 0")
    if bool((sums["times_sampled"] != sums["times_sampled"].round()).any()):
        raise state_error("'times_sampled' holds a value that is not a whole count")
    if num_examples is not None and size > num_examples:
        raise state_error(f"{size} per-example sums for num_examples = {num_examples}")
    if not isinstance(state["snapshots"], list) or any(
            not isinstance(s, dict) or not {"step", "trace", "spectral", "times_sampled"} <= set(s)
            for s in state["snapshots"]):
        raise state_error("'snapshots' must be a list of the snapshots record() keeps")
    return {"num_examples": num_examples, "steps": steps, "private_dims": private_dims,
            "private_dims_label": label_dims, "seconds": seconds, "snapshots": state["snapshots"], **sums}
