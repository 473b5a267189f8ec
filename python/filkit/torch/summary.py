"""A FilAccountant as `filkit dpsgd`'s outputs: the summary JSON (src/dpsgd/dpsgd_result.cpp,
src/jobs/dpsgd.cpp) and the per-example CSV, so that `filkit report` draws it. One run: no
bootstrap intervals (as filkit dpsgd with runs = 1). With images, the training examples go to an
.npy beside the summary, which names it (its "images" object), for the report's montages of the
most and least exposed examples (src/report/montage.cpp, stored_training_images). Everything is
checked before anything is written, and the files are written as a set by filkit's own writer:
synced temporaries renamed into place once all are written, as every filkit command does."""
import io
import json
import math
import os

import numpy as np
import torch

from .._standalone import library

TABLE_HEADER = ["step", "epoch", "index", "label", "times_sampled", "eta", "dfil", "attribute_mse_bound",
                "example_mse_bound", "fisher_trace", "fisher_trace_standard_error"]


def snapshot(accountant, test_accuracy, train_accuracy):
    """The raw sums at this step (kappa is applied when written: it depends on the final T)."""
    return {"step": accountant.steps, **accountant.sums(), "test_accuracy": test_accuracy,
            "train_accuracy": train_accuracy}


def _finite(value):
    """JSON has no inf or NaN: null, as nlohmann::json writes them."""
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    return value


def _statistics(values):
    """filkit's Summary (base/summary.hpp): the compiled summarize where the module loaded, so that
    filkit dpsgd and filkit.torch state one set of statistics; else the same in NumPy (count, mean,
    sample std, min, median as the mean of the middle two, max)."""
    compiled = library()
    if hasattr(compiled, "_summarize"):
        return compiled._summarize(np.ascontiguousarray(values, dtype=np.float64))
    return {"count": int(values.size), "mean": float(values.mean()),
            "std": float(values.std(ddof=1)) if values.size > 1 else 0.0, "min": float(values.min()),
            "median": float(np.median(values)), "max": float(values.max())}


def _leakage_summary(values):
    """filkit's Summary with the MSE bounds 1/v^2 at the median and the max."""
    if values.size == 0 or np.isnan(values).any():
        return None
    statistics = _statistics(values)
    with np.errstate(divide="ignore"):
        statistics.update({"mse_bound_at_median": 1.0 / np.float64(statistics["median"]) ** 2,
                           "mse_bound_at_max": 1.0 / np.float64(statistics["max"]) ** 2})
    return statistics


def _padded(tensor, n):
    values = tensor.numpy()
    return np.concatenate([values, np.zeros(n - values.size)])


def _per_example(accountant, s):
    n, kappa = accountant.n, accountant.kappa
    trace = kappa * _padded(s["trace"], n)
    dfil = np.sqrt(trace / accountant.private_dims)
    eta = np.sqrt(kappa * _padded(s["spectral"], n)) if accountant.settings["spectral"] else np.full(n, np.nan)
    return trace, dfil, eta, _padded(s["times_sampled"], n)


def _snapshot_json(accountant, s, rdp_delta, filkit):
    trace, dfil, eta, sampled = _per_example(accountant, s)
    q = accountant.settings["sample_rate"]
    sigma = accountant.effective_noise_multiplier
    spent = accountant.privacy_accountant("rdp", steps=s["step"]).get_privacy_spent(rdp_delta)
    order2 = accountant.privacy_accountant("rdp", steps=s["step"], orders=[2.0]).rdp[0]
    chosen = accountant.privacy_accountant(steps=s["step"])
    d = _leakage_summary(dfil)
    with np.errstate(divide="ignore"):
        bound = lambda v: 1.0 / np.float64(v) ** 2
        d.update({"max_interval": None, "median_interval": None, "mse_bound_at_max_interval": None,
                  "mse_bound_at_median_interval": None, "max_per_run": [d["max"]], "median_per_run": [d["median"]],
                  "mse_bound_at_max_per_run": [bound(d["max"])], "mse_bound_at_median_per_run": [bound(d["median"])]})
    mean_or_none = lambda v: None if v is None else float(v)
    return {"step": s["step"], "epoch": s["step"] * q, "dfil": d, "eta": _leakage_summary(eta),
            "times_sampled_mean": float(sampled.mean()), "epsilon": chosen.epsilon(rdp_delta),
            "pld_infinity_mass": getattr(chosen, "infinity_mass", 0.0),
            "rdp": {"eps": spent.eps, "delta": spent.delta, "optimal_order": spent.optimal_order,
                    "order_status": spent.status, "warning": spent.warning, "noise_multiplier": sigma,
                    "order2_eps": order2, "mse_bound": filkit.rdp_mse_bound(order2)},
            "train_accuracy": mean_or_none(s["train_accuracy"]), "test_accuracy": mean_or_none(s["test_accuracy"]),
            "train_accuracy_per_run": [mean_or_none(s["train_accuracy"])],
            "test_accuracy_per_run": [mean_or_none(s["test_accuracy"])]}


def accounting_json(accountant, rdp_delta, filkit):
    """filkit dpsgd's "accounting" object (training.hpp, accounting_summary) for this accountant."""
    st = accountant.settings
    note = filkit.sampling_note(st["sampling"])
    smooth = st["clipping"] == "smooth"
    return {"accountant": st["accountant"], "sampling": accountant.accounted_sampling,
            "neighbouring_relation": filkit.neighbouring_relation(accountant.accounted_sampling),
            "delta": rdp_delta, "noise_multiplier": st["noise_multiplier"],
            "effective_noise_multiplier": accountant.effective_noise_multiplier,
            "effective_noise_multiplier_reason": filkit.EFFECTIVE_NOISE_MULTIPLIER_REASON if smooth else
            "the hard clip bounds a clipped gradient's norm by C: the accountant sees sigma itself",
            "covers_sampler": note is None, "note": note}


def summary_json(accountant, rdp_delta, snapshots):
    filkit = library()
    st = accountant.settings
    settings = {"clip_norm": st["clip_norm"], "noise_multiplier": st["noise_multiplier"], "clipping": st["clipping"],
                "sampling_rate": st["sample_rate"], "trace": st["trace"], "probes": st["probes"],
                "spectral": "power-iteration" if st["spectral"] else "none",
                "power_iterations": st["power_iterations"],
                "label": "private" if st["private"] == "input+label" else "public",
                "subsampling": st["subsampling"], "kappa_delta": accountant.kappa_delta, "rdp_delta": rdp_delta,
                "steps": accountant.steps, "sampling": st["sampling"], "accountant": st["accountant"], "runs": 1,
                "seed": st["seed"]}
    model = type(accountant.model).__name__
    # Flat, as filkit dpsgd's settings (one key an option), for the report's settings table; the
    # expected batch size B = q n; and nested under "dpsgd" as before.
    flat = {"data": "the user's (filkit.torch)", "model": f"pytorch {model}",
            "batch_size": st["sample_rate"] * accountant.n, "steps": accountant.steps,
            "clip_norm": st["clip_norm"], "noise_multiplier": st["noise_multiplier"], "clipping": st["clipping"],
            "sampling": st["sampling"], "accountant": st["accountant"], "label": settings["label"],
            "rdp_delta": rdp_delta, "runs": 1, "seed": st["seed"]}
    summary = {"command": "dpsgd", "filkit_version": filkit.__version__, "seed": st["seed"], "mpi_ranks": 1,
               "accountant": "filkit.torch.FilAccountant (the user's PyTorch training loop)",
               "settings": dict(flat, dpsgd=settings),
               "n": accountant.n, "d": accountant.private_dims - (accountant.private_dims_label or 0),
               "num_classes": accountant.private_dims_label, "private_dims": accountant.private_dims,
               "sampling_rate": st["sample_rate"], "step_epsilon": accountant.step_epsilon, "kappa": accountant.kappa,
               "kappa_delta": accountant.kappa_delta,
               "kappa_failure_probability": min(1.0, accountant.kappa_delta * accountant.steps),
               "soft_clip_norm_bound": accountant.clip_norm_bound, "clipping": st["clipping"],
               "accounting": accounting_json(accountant, rdp_delta, filkit),
               "caveats": list(accountant.caveats), "run_seeds": [st["seed"]],
               "bootstrap": {"method": "none: one run", "runs": 1, "intervals": False, "level": None, "resamples": 0,
                             "seed": None,
                             "note": "one run: no confidence intervals (nothing varies between runs); use runs > 1"},
               "parameter_count": accountant.parameter_count, "architecture": model, "resumed": False,
               "snapshots": [_snapshot_json(accountant, s, rdp_delta, filkit) for s in snapshots],
               "seconds": {"accounting": accountant.seconds}}
    if summary["accounting"]["note"]:
        summary["sampling_note"] = summary["accounting"]["note"]
    return summary


def table_rows(accountant, snapshots, labels):
    rows = []
    for s in snapshots:
        trace, dfil, eta, sampled = _per_example(accountant, s)
        with np.errstate(divide="ignore", invalid="ignore"):
            for i in range(accountant.n):
                rows.append([s["step"], s["step"] * accountant.settings["sample_rate"], i, labels[i], sampled[i],
                             eta[i], dfil[i], 1.0 / eta[i] ** 2, 1.0 / dfil[i] ** 2, trace[i], 0.0])
    return rows


def _number(value):
    """A cell as filkit writes it (base/io.hpp, numeric_csv): integers as integers, a value that is not
    a finite number (eta not computed, the infinite bound of an example never sampled) empty."""
    value = float(value)
    if not math.isfinite(value):
        return ""
    if value == math.floor(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(value)


def _refuse_nonfinite(accountant, snapshots):
    """A trace that is not a finite number (a diverged step) would reach the summary as null and the
    report as nothing: refused before anything is written, naming the examples."""
    for s in snapshots:
        for name, values in (("Tr(G^T G)", s["trace"]), ("||G||_2^2", s["spectral"])):
            bad = torch.nonzero(~torch.isfinite(values)).flatten().tolist()
            if bad:
                filkit = library()
                shown = ", ".join(str(i) for i in bad[:10]) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
                raise filkit.NumericalError(
                    f"write_summary: the accounted {name} of example(s) {shown} at step {s['step']} is not a finite "
                    "number (training diverged: a step size too large, or inputs far from unit scale); nothing "
                    "written")


def _checked_labels(accountant, labels, class_names):
    if labels is None:
        labels = accountant.labels()
    raw = np.asarray(labels.detach().cpu() if isinstance(labels, torch.Tensor) else labels)
    if raw.dtype.kind not in "biuf":
        raise ValueError(f"labels: expected numeric class indices (one per example), got {raw.dtype} values such as "
                         f"{raw.reshape(-1)[:1].tolist()}; give the classes' names as class_names=, label k's at k")
    labels = raw.astype(float)
    if labels.shape != (accountant.n,):
        raise ValueError(f"labels: expected {accountant.n} labels (one per example), got shape {labels.shape}")
    if np.isinf(labels).any():
        raise ValueError(f"labels: example(s) {np.flatnonzero(np.isinf(labels))[:10].tolist()} have an infinite "
                         "label (NaN, for an example never seen, is allowed)")
    if class_names is None:
        return labels, None
    if isinstance(class_names, str) or not all(isinstance(name, str) for name in class_names):
        raise ValueError("class_names: expected a list of strings, label k's name at k")
    class_names = list(class_names)
    bad = np.flatnonzero(~np.isnan(labels) & ((labels != np.floor(labels)) | (labels < 0) |
                                               (labels >= len(class_names))))
    if bad.size:
        raise ValueError(f"class_names: {len(class_names)} names, but example(s) {bad[:10].tolist()} have labels "
                         f"{labels[bad[:10]].tolist()}, not class indices 0..{len(class_names) - 1}")
    return labels, class_names


def images_path(json_path):
    """Where write_summary puts the images: beside the summary, named after it (fil.json:
    fil.images.npy)."""
    json_path = os.fspath(json_path)
    stem = os.path.splitext(os.path.basename(json_path))[0]
    return os.path.join(os.path.dirname(json_path), stem + ".images.npy")


def _checked_images(images, n):
    """The training images as (n, C, H, W) and their npy bytes: a grey image (n, H, W), C x H x W
    (n, C, H, W), H x W x C (n, H, W, C) where only the last axis is 1 or 3, or flat rows (n, d) of a
    square grey image. uint8 stays uint8; other values are written as float32 where they fit, else
    float64 (what filkit's .npy reader takes)."""
    if isinstance(images, torch.Tensor):
        images = images.detach().cpu().numpy()
    array = np.asarray(images)
    if array.dtype == bool:
        array = array.astype(np.uint8)
    if not (np.issubdtype(array.dtype, np.number) and not np.iscomplexobj(array)):
        raise ValueError(f"images: expected an array or tensor of numbers, got dtype {array.dtype}")
    if array.ndim < 2 or array.shape[0] != n:
        raise ValueError(f"images: expected the {n} training examples (one per example id, first axis), got shape "
                         f"{array.shape}")
    if array.ndim == 2:
        side = math.isqrt(array.shape[1])
        if side * side != array.shape[1]:
            raise ValueError(f"images: rows of {array.shape[1]} values are not a square grey image; pass them as "
                             "(n, H, W) or (n, C, H, W)")
        array = array.reshape(n, 1, side, side)
    elif array.ndim == 3:
        array = array.reshape(n, 1, *array.shape[1:])
    elif array.ndim == 4:
        if array.shape[1] not in (1, 3) and array.shape[3] in (1, 3):
            array = array.transpose(0, 3, 1, 2)
    else:
        raise ValueError(f"images: shape {array.shape}: expected (n, H, W), (n, C, H, W), (n, H, W, C) or (n, d)")
    if 0 in array.shape:
        raise ValueError(f"images: shape {array.shape} has an empty axis")
    if array.dtype != np.uint8:
        values = array.astype(np.float64)
        flat = values.reshape(n, -1)
        bad = np.flatnonzero(~(np.isfinite(flat) & (np.abs(flat) <= 1e150)).all(axis=1))
        if bad.size:
            raise ValueError(f"images: example(s) {bad[:10].tolist()} hold a value that is NaN, infinite or beyond "
                             "1e150")
        fits = np.abs(flat).max() < 3e38
        array = values.astype(np.float32) if fits else values
    out = io.BytesIO()
    np.lib.format.write_array(out, np.ascontiguousarray(array), allow_pickle=False)
    return array.shape[1:], out.getvalue()


def _csv_text(accountant, snapshots, labels):
    lines = [",".join(TABLE_HEADER)]
    lines.extend(",".join(_number(v) for v in row) for row in table_rows(accountant, snapshots, labels))
    return "\n".join(lines) + "\n"


def write_summary(accountant, json_path, csv_path, *, labels, rdp_delta, test_accuracy, train_accuracy, images=None,
                  class_names=None):
    """The summary JSON and per-example CSV of `filkit dpsgd` (and with `images`, the training
    examples beside the summary, images_path(json_path)), checked first and written together or
    not at all."""
    accountant.require_steps()
    if not (isinstance(rdp_delta, (int, float)) and 0 < rdp_delta < 1):
        raise ValueError(f"rdp_delta = {rdp_delta!r}: must be in (0, 1)")
    json_path, csv_path = os.fspath(json_path), os.fspath(csv_path)
    outputs = [("json_path", json_path), ("csv_path", csv_path)]
    if images is not None:
        if json_path == "-" or not os.path.basename(json_path):
            raise ValueError(f"images: the summary '{json_path}' must be a file, whose folder holds the images")
        outputs.append(("images", images_path(json_path)))
    for _, path in outputs:
        directory = os.path.dirname(os.path.abspath(path))
        if path != "-" and not os.path.isdir(directory):
            raise ValueError(f"write_summary: the directory of '{path}' does not exist")
    filkit = library()
    filkit._check_output_paths(outputs)  # writable, and no two the same file, as a job's outputs
    snapshots = list(accountant.snapshots)
    if not snapshots or snapshots[-1]["step"] != accountant.steps:
        snapshots.append(snapshot(accountant, test_accuracy, train_accuracy))
    else:  # a snapshot at this step already (an automatic one): the accuracies given here complete it
        last = dict(snapshots[-1])
        for key, value in (("test_accuracy", test_accuracy), ("train_accuracy", train_accuracy)):
            if value is not None:
                last[key] = value
        snapshots[-1] = last
    _refuse_nonfinite(accountant, snapshots)
    labels, class_names = _checked_labels(accountant, labels, class_names)
    summary = summary_json(accountant, rdp_delta, snapshots)
    files = []
    if class_names is not None:
        summary["class_names"] = class_names  # label k is class_names[k] (the report's titles)
    if images is not None:
        shape, npy = _checked_images(images, accountant.n)
        summary["images"] = {"file": os.path.basename(outputs[2][1]), "shape": [int(v) for v in shape],
                             "layout": "(n, C, H, W), row i the example of id i"}
        files.append((outputs[2][1], npy))
    text = json.dumps(_finite(summary), indent=2, allow_nan=False) + "\n"
    if hasattr(filkit, "_check_written_summary"):  # the dpsgd summary schema (schemas/summary/), as filkit dpsgd's
        filkit._check_written_summary(text)
    files = [(json_path, text.encode()), (csv_path, _csv_text(accountant, snapshots, labels).encode())] + files
    filkit._write_output_files(files)
