"""A FilAccountant as `filkit dpsgd`'s outputs: the summary JSON (src/dpsgd/dpsgd_result.cpp,
src/jobs/dpsgd.cpp) and the per-example CSV, so that `filkit report` draws it. One run: no
bootstrap intervals (as filkit dpsgd with runs = 1)."""
import json
import math
import os

import numpy as np

from .accountant import extension

TABLE_HEADER = ["step", "epoch", "index", "label", "times_sampled", "eta", "dfil", "attribute_mse_bound",
                "example_mse_bound", "fisher_trace", "fisher_trace_standard_error"]


def snapshot(accountant, test_accuracy, train_accuracy):
    """The raw sums at this step (kappa is applied when written: it depends on the final T)."""
    return {"step": accountant.steps, "trace": accountant._trace.clone(), "spectral": accountant._spectral.clone(),
            "times_sampled": accountant._sampled.clone(), "test_accuracy": test_accuracy,
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


def _leakage_summary(values):
    """filkit's Summary (count, mean, sample std, min, median, max) with the MSE bounds 1/v^2."""
    if values.size == 0 or np.isnan(values).any():
        return None
    median, top = float(np.median(values)), float(values.max())
    with np.errstate(divide="ignore"):
        return {"count": int(values.size), "mean": float(values.mean()),
                "std": float(values.std(ddof=1)) if values.size > 1 else 0.0, "min": float(values.min()),
                "median": median, "max": top, "mse_bound_at_median": 1.0 / np.float64(median) ** 2,
                "mse_bound_at_max": 1.0 / np.float64(top) ** 2}


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
    filkit = extension("write_summary (the summary's epsilon)")
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
    summary = {"command": "dpsgd", "filkit_version": filkit.__version__, "seed": st["seed"], "mpi_ranks": 1,
               "accountant": "filkit.torch.FilAccountant (the user's PyTorch training loop)",
               "settings": {"dpsgd": settings, "model": f"pytorch {model}", "data": "the user's (filkit.torch)"},
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


def write_summary(accountant, json_path, csv_path, *, labels, rdp_delta, test_accuracy, train_accuracy):
    accountant._require_steps()
    if not 0 < rdp_delta < 1:
        raise ValueError(f"rdp_delta = {rdp_delta!r}: must be in (0, 1)")
    snapshots = list(accountant.snapshots)
    if not snapshots or snapshots[-1]["step"] != accountant.steps:
        snapshots.append(snapshot(accountant, test_accuracy, train_accuracy))
    if labels is None:
        labels = accountant.labels()
    labels = np.asarray(labels, dtype=float)
    if labels.shape != (accountant.n,):
        raise ValueError(f"labels: expected {accountant.n} labels (one per example), got shape {labels.shape}")
    for path in (json_path, csv_path):
        directory = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(directory):
            raise ValueError(f"write_summary: the directory of '{path}' does not exist")
    with open(json_path, "w") as out:
        json.dump(_finite(summary_json(accountant, rdp_delta, snapshots)), out, indent=2, allow_nan=False)
        out.write("\n")
    with open(csv_path, "w") as out:
        out.write(",".join(TABLE_HEADER) + "\n")
        for row in table_rows(accountant, snapshots, labels):
            out.write(",".join(_number(v) for v in row) + "\n")
