#!/usr/bin/env python3
"""Accuracy vs reconstruction MSE lower bounds of DP-SGD on the paper's MNIST ConvNet, over a
reduced grid of (sigma, C, rho): figure 5 (left) of Guo et al., "Bounding training data
reconstruction in private (deep) learning" (ICML 2022), on MNIST and Fashion-MNIST.

For every setting `filkit dpsgd --model cnn` trains the ConvNet (conv 16 8x8/2, tanh, avgpool,
conv 32 4x4/2, tanh, avgpool, dense 32, tanh, dense 10; all 10 classes, pixels in [0, 1], labels
public, momentum 0.5, uniform batches) on a random subset of the training set and accounts every
training example's dFIL (Algorithm 1; Tr(G^T G) by one Gaussian probe per example and step, no
spectral norm). Per setting and per reported step T (the final step and, with --epochs, earlier
epochs of the same run) this script tabulates

  test accuracy;
  RDP bound  (Theorem 1): MSE >= 1 / (4 (e^eps2 - 1)), eps2 the (2, eps2)-RDP of the run so far;
  dFIL bound (Theorem 2): MSE >= 1 / dFIL^2 at the largest and at the median dFIL of the data;

marks the Pareto front of each bound (no other point has both higher accuracy and a higher bound),
reports each bound's crossing accuracy (the highest test accuracy among the points whose bound is
still >= 1, the perfect-privacy line; the README's "bound >= 1 up to"), draws figure 5 with gnuplot (log y; the paper's perfect-privacy line at MSE = 1: guessing any point
of [0,1]^784 has per-coordinate MSE <= 1) and, for the setting with the best final test accuracy, a
montage of the 8 highest- and 8 lowest-dFIL training images (the lowest among examples sampled at
least once: with one run an example never sampled has dFIL 0).

Usage:
  experiments/dpsgd_networks_grid.py                      # both datasets, the default grid (~23 min on 2 idle cores)
  experiments/dpsgd_networks_grid.py --datasets mnist --settings 1:1:0.1,2:1:0.1
  experiments/dpsgd_networks_grid.py --quick              # a smoke test (~15 s)
  experiments/dpsgd_networks_grid.py --runs 10            # the paper's 10 runs: intervals over runs (10x the time)
Settings are sigma:C:rho triples. Settings whose JSON summary exists are reused (--force reruns them).
K processes share the units of work round robin: --rank R --ranks K, or K copies under `mpirun -np K`
or a Slurm array (grid_ranks.py). With one run a setting the unit is a (dataset, setting): one `filkit
dpsgd`. With --runs R > 1 it is a (dataset, setting, run): `filkit dpsgd --run K --run-dir
<setting>.runs` trains run K of the setting's R as the R-run call would and writes its run file there
(kept: a run whose file exists is not trained again); whichever process finds all R files of a
setting present combines them (`filkit dpsgd --run-dir <setting>.runs`, no training) into the
setting's summary and table, the bytes of one `--runs R` call but for timings. The tables and figures
are made by the process that finds every setting's outputs present. --dry-run lists this process's
units.

With --runs R > 1 (the paper averages 10 runs) every setting trains R runs and dFIL is the run average
of the accounted traces. filkit reports bootstrap intervals of the max and median dFIL bounds per point
(drawn as error bars); this script propagates the run-to-run uncertainty through the crossing
accuracies: it resamples the run indices with replacement (the same resample for every setting: run r
of every setting has the same seed, so the runs are paired), recomputes every point's mean test
accuracy and dFIL bounds from each run's per-example traces (the per-run columns of filkit's CSV), and
recomputes the crossings and the gap between the max-dFIL and the RDP crossing; the percentile interval
of these replicates is reported (--confidence-level, --bootstrap-resamples). The RDP bound does not
depend on the run.
Needs build/filkit (or --binary / $FILKIT_BINARY), build/python (the filkit module, for the images;
or --python-path) and gnuplot. Outputs go to
${FILKIT_OUT:-/tmp/filkit-experiments}/dpsgd_networks_grid/<dataset>_n<N>_B<B>_T<T>_seed<S>/.
"""
import argparse
import concurrent.futures
import contextlib
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # grid_ranks.py, also when loaded from elsewhere
import grid_ranks  # noqa: E402

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# sigma:C:rho, from the paper's grid (plus sigma = 1.5). At q = 0.02 and T = 250..500 sigma spans the RDP bound
# from vacuous (0.2; 0.5: eps2 = 14..28) across the perfect-privacy line (1: bound 0.89..0.39; 1.5: 3.3..1.6)
# to private (2: 6.7..3.3; 5: 49..24). C = 8, rho = 0.1 learnt fastest of the values tried in a one-epoch
# pilot at sigma = 1 (test accuracy 0.73, against 0.66 for C = 4, 0.47 for C = 32 with rho = 0.03, 0.41 for
# C = 1); C = 1 at sigma = 1 shows that the dFIL bound, unlike the RDP bound, depends on C.
DEFAULT_SETTINGS = "0.2:8:0.1,0.5:8:0.1,1:8:0.1,1.5:8:0.1,2:8:0.1,5:8:0.1,1:1:0.1"
QUICK = {"train_size": 600, "test_size": 500, "batch_size": 100, "steps": 12, "epochs": "1",
         "settings": "1:8:0.1,5:8:0.1"}
SERIES = (("rdp_bound", "RDP (Theorem 1)", "#1f77b4"),
          ("max_dfil_bound", "max dFIL (Theorem 2)", "#d62728"),
          ("median_dfil_bound", "median dFIL (Theorem 2)", "#ff7f0e"))
PERFECT_PRIVACY = 1.0  # the paper's line: a blind guess in [0,1]^d has per-coordinate MSE <= 1


def parse_settings(text):
    settings = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) != 3:
            raise SystemExit(f"--settings: '{item}' is not sigma:C:rho")
        sigma, clip, rho = (float(p) for p in parts)
        settings.append({"sigma": sigma, "clip": clip, "step_size": rho})
    return settings


def number(x):
    return "%g" % x


def pareto_front(rows, key):
    """Indices of rows not dominated in (test accuracy, bound): nobody has both higher."""
    front = set()
    for i, a in enumerate(rows):
        dominated = any(b["test_accuracy"] >= a["test_accuracy"] and b[key] >= a[key] and
                        (b["test_accuracy"] > a["test_accuracy"] or b[key] > a[key]) for b in rows)
        if not dominated:
            front.add(i)
    return front


def crossing_accuracy(accuracies, bounds, line=PERFECT_PRIVACY):
    """The crossing accuracy of a bound: the highest test accuracy among the points whose bound is still
    >= line (the perfect-privacy line), or NaN when no point's is."""
    above = [a for a, b in zip(accuracies, bounds) if b >= line]
    return max(above) if above else math.nan


def run_resamples(runs, resamples, seed):
    """B x R counts: how often resample b draws run r (R runs with replacement)."""
    return np.random.default_rng(seed).multinomial(runs, [1.0 / runs] * runs, size=resamples).astype(float)


def dfil_bounds(traces, private_dims, counts, chunk=50):
    """The max- and median-dFIL bounds 1/dFIL^2 of each resample: dFIL_i = sqrt(mean_r Tr_ri / d_z), the
    mean over the resample's runs (counts: B x R; traces: R x n). Arrays of B."""
    runs = traces.shape[0]
    max_bound, median_bound = np.empty(len(counts)), np.empty(len(counts))
    for start in range(0, len(counts), chunk):
        means = counts[start:start + chunk] @ traces / runs
        dfil = np.sqrt(means / private_dims)
        max_bound[start:start + chunk] = 1.0 / dfil.max(axis=1) ** 2
        median_bound[start:start + chunk] = 1.0 / np.median(dfil, axis=1) ** 2
    return max_bound, median_bound


def crossing_replicates(points, counts):
    """Each series' crossing accuracy under each resample of the runs (counts: B x R, the same for every
    point) and the gap max-dFIL minus RDP. points: dicts with accuracy_per_run (R), traces (R x n),
    private_dims and rdp_bound. Returns {key: array of B}; NaN where no point of a resample crosses."""
    runs = counts.shape[1]
    accuracy = np.array([counts @ np.asarray(p["accuracy_per_run"], dtype=float) / runs for p in points])
    bounds = {"rdp_bound": np.array([np.full(len(counts), p["rdp_bound"]) for p in points])}
    # A point without traces (one run, its table not kept) carries its own bounds: every resample of one
    # run is that run.
    dfil = [dfil_bounds(p["traces"], p["private_dims"], counts) if "traces" in p else
            (np.full(len(counts), p["max_dfil_bound"]), np.full(len(counts), p["median_dfil_bound"])) for p in points]
    bounds["max_dfil_bound"] = np.array([d[0] for d in dfil])
    bounds["median_dfil_bound"] = np.array([d[1] for d in dfil])
    crossings = {key: np.array([crossing_accuracy(accuracy[:, b], bounds[key][:, b]) for b in range(len(counts))])
                 for key, _, _ in SERIES}
    crossings["gap_max_dfil_minus_rdp"] = crossings["max_dfil_bound"] - crossings["rdp_bound"]
    return crossings


def crossings_with_uncertainty(points, resamples, level, seed):
    """The crossing accuracies of the run-averaged points and, with more than one run, their percentile
    bootstrap intervals over runs: {key: {accuracy, interval, replicates_without_crossing}}."""
    runs = len(points[0]["accuracy_per_run"])
    estimate = crossing_replicates(points, np.ones((1, runs)))
    result = {}
    replicates = crossing_replicates(points, run_resamples(runs, resamples, seed)) if runs > 1 else None
    for key, value in estimate.items():
        entry = {"accuracy": None if math.isnan(value[0]) else float(value[0]), "interval": None,
                 "replicates_without_crossing": None}
        if replicates is not None:
            finite = replicates[key][np.isfinite(replicates[key])]
            entry["replicates_without_crossing"] = int(len(replicates[key]) - len(finite))
            if len(finite):
                entry["interval"] = [float(q) for q in np.quantile(finite, [(1 - level) / 2, (1 + level) / 2])]
        result[key] = entry
    return result


def load_per_run_traces(table_path, runs):
    """{step: R x n array} of each run's accounted Tr(I_i) from filkit's per-example CSV (its columns
    fisher_trace_run0 .. with R > 1, fisher_trace with one run), rows in example order."""
    with open(table_path) as f:
        header = f.readline().strip().split(",")
    names = [f"fisher_trace_run{r}" for r in range(runs)] if runs > 1 else ["fisher_trace"]
    missing = [name for name in names + ["step", "index"] if name not in header]
    if missing:
        raise SystemExit(f"{table_path}: no column {missing[0]} (a table of filkit dpsgd --runs {runs}?)")
    columns = [header.index("step"), header.index("index")] + [header.index(name) for name in names]
    table = np.loadtxt(table_path, delimiter=",", skiprows=1, usecols=columns, ndmin=2)
    traces = {}
    for step in np.unique(table[:, 0]):
        rows = table[table[:, 0] == step]
        rows = rows[np.argsort(rows[:, 1], kind="stable")]
        traces[int(step)] = rows[:, 2:].T.copy()
    return traces


def setting_name(setting):
    return "sigma{}_C{}_rho{}".format(number(setting["sigma"]), number(setting["clip"]), number(setting["step_size"]))


def filkit_command(args, dataset, setting, epochs, outputs):
    """The setting's `filkit dpsgd` command, writing `outputs` (flags: its summary and table, or a run's file)."""
    command = [args.binary, "dpsgd", "--model", "cnn", "--data", dataset,
               "--train-size", str(args.train_size), "--test-size", str(args.test_size),
               "--seed", str(args.seed), "--batch-size", str(args.batch_size), "--steps", str(args.steps),
               "--step-size", number(setting["step_size"]), "--momentum", number(args.momentum),
               "--clip-norm", number(setting["clip"]), "--noise-multiplier", number(setting["sigma"]),
               "--trace", "gaussian", "--probes", str(args.probes), "--spectral", "none",
               "--runs", str(args.runs), "--bootstrap-resamples", str(args.bootstrap_resamples),
               "--confidence-level", number(args.confidence_level)] + outputs + ["--quiet"]
    if epochs:
        command += ["--report-epochs", ",".join(number(e) for e in epochs)]
    if args.precision != "float64":  # only when asked: the runs made before the option keep their command
        command += ["--precision", args.precision]
    return command + ["--threads", str(args.threads)]


def write_text(path, text):
    with open(path + f".{os.getpid()}.tmp", "w") as f:  # a name of its own: ranks may write at once
        f.write(text)
    os.replace(path + f".{os.getpid()}.tmp", path)


def read_seconds(path):
    with open(path) as f:
        return float(f.read())


def run_filkit(command, log_path):
    """Runs `command` with its output in `log_path`; its wall seconds. A failure stops the script, showing the log."""
    start = time.time()
    with open(log_path, "w") as log:
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        with open(log_path) as log:
            sys.stderr.write(log.read())
        raise SystemExit(f"filkit dpsgd failed (exit {result.returncode}): {' '.join(command)}")
    return time.time() - start


def runs_dir(out_dir, setting):
    """Where the run files of a setting's runs go (--runs R > 1): <setting>.runs/run<K>.fkrun."""
    return os.path.join(out_dir, setting_name(setting) + ".runs")


def run_file(out_dir, setting, run):
    return os.path.join(runs_dir(out_dir, setting), f"run{run}.fkrun")  # filkit dpsgd --run-dir's name


def train_run(args, dataset, setting, out_dir, epochs, run):
    """The unit (setting, run K) of --runs R > 1: `filkit dpsgd --run K` writes the run's file (kept: a
    run whose file exists is not trained again, but with --force), then, if every run of the setting
    has its file, their combination the setting's outputs (setting_outputs). Returns those, or None."""
    folder = runs_dir(out_dir, setting)
    if args.force or not (setting_done(args, out_dir, setting) or os.path.exists(run_file(out_dir, setting, run))):
        os.makedirs(folder, exist_ok=True)
        command = filkit_command(args, dataset, setting, epochs, ["--run", str(run), "--run-dir", folder])
        wall = run_filkit(command, os.path.join(folder, f"run{run}.log"))
        write_text(os.path.join(folder, f"run{run}.wall_seconds"), "%.1f\n" % wall)
    return setting_outputs(args, dataset, setting, out_dir, epochs, make=True, force=args.force)


def setting_done(args, out_dir, setting):
    """Whether the setting's outputs exist: its summary, and its per-example table where the crossings'
    bootstrap over runs reads it (runs > 1). With one run the table serves only the montage, and a
    committed grid keeps the summaries (kB) without the tables (MB each)."""
    path = os.path.join(out_dir, setting_name(setting))
    return os.path.exists(path + ".json") and (args.runs == 1 or os.path.exists(path + ".csv"))


# Held while a setting's runs are combined: two of a process's --jobs finishing a setting's last runs
# together combine them once.
MAKING = threading.Lock()


def setting_outputs(args, dataset, setting, out_dir, epochs, make=True, force=False):
    """The setting's (name, command, summary, rows), after making its outputs if they are missing (or
    `force`) and `make`: with one run by `filkit dpsgd`, with R > 1 by `filkit dpsgd --run-dir` combining
    its runs' files once every one is there (train_run). None while they are missing and not made."""
    name = setting_name(setting)
    summary_path = os.path.join(out_dir, name + ".json")
    table_path = os.path.join(out_dir, name + ".csv")
    wall_path = os.path.join(out_dir, name + ".wall_seconds")
    outputs = ["--json", summary_path, "--out", table_path]
    folder = runs_dir(out_dir, setting)
    command = filkit_command(args, dataset, setting, epochs, outputs if args.runs == 1 else ["--run-dir", folder] + outputs)
    with MAKING if args.runs > 1 else contextlib.nullcontext():  # with one run, a setting is one unit
        done = setting_done(args, out_dir, setting)
        trained = args.runs == 1 or all(os.path.exists(run_file(out_dir, setting, r)) for r in range(args.runs))
        if make and (force or not done) and trained:
            wall = run_filkit(command, os.path.join(out_dir, name + ".log"))
            if args.runs > 1:  # the setting's wall time: its runs' (wherever they ran) and the combination's
                walls = [os.path.join(folder, f"run{r}.wall_seconds") for r in range(args.runs)]
                wall = (wall + sum(map(read_seconds, walls))) if all(map(os.path.exists, walls)) else None
            if wall is not None:
                write_text(wall_path, "%.1f\n" % wall)
            elif os.path.exists(wall_path):
                os.remove(wall_path)
            done = True
    if not done:
        return None
    wall = read_seconds(wall_path) if os.path.exists(wall_path) else None
    with open(summary_path) as f:
        summary = json.load(f)
    rows = []
    final_step = summary["snapshots"][-1]["step"]
    def interval(dfil, key, end):
        value = dfil.get(key)
        return value[end] if value else None

    for checkpoint in summary["snapshots"]:
        dfil, rdp = checkpoint["dfil"], checkpoint["rdp"]
        accuracies = checkpoint["test_accuracy_per_run"]
        rows.append({"dataset": dataset, "setting": name, "sigma": setting["sigma"], "clip": setting["clip"],
                     "step_size": setting["step_size"], "steps": checkpoint["step"],
                     "epoch": round(checkpoint["epoch"], 4), "final": int(checkpoint["step"] == final_step),
                     "test_accuracy": checkpoint["test_accuracy"],
                     "test_accuracy_standard_error": (float(np.std(accuracies, ddof=1) / math.sqrt(len(accuracies)))
                                                      if len(accuracies) > 1 else None),
                     "train_accuracy": checkpoint["train_accuracy"], "runs": len(accuracies),
                     "rdp_eps": rdp["eps"], "rdp_order": rdp["optimal_order"], "rdp2_eps": rdp["order2_eps"],
                     "rdp_bound": rdp["mse_bound"],
                     "max_dfil": dfil["max"], "median_dfil": dfil["median"],
                     "max_dfil_bound": dfil["mse_bound_at_max"], "median_dfil_bound": dfil["mse_bound_at_median"],
                     "max_dfil_bound_low": interval(dfil, "mse_bound_at_max_interval", 0),
                     "max_dfil_bound_high": interval(dfil, "mse_bound_at_max_interval", 1),
                     "median_dfil_bound_low": interval(dfil, "mse_bound_at_median_interval", 0),
                     "median_dfil_bound_high": interval(dfil, "mse_bound_at_median_interval", 1),
                     "times_sampled_mean": checkpoint["times_sampled_mean"],
                     "wall_seconds": wall if checkpoint["step"] == final_step else None})
    return name, command, summary, rows


def write_csv(path, rows):
    with open(path + f".{os.getpid()}.tmp", "w", newline="") as f:  # a name of its own: ranks may write at once
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(path + f".{os.getpid()}.tmp", path)


def gnuplot(script_path):
    result = subprocess.run(["gnuplot", script_path], cwd=os.path.dirname(script_path),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"gnuplot {script_path} failed:\n{result.stderr}")
    if result.stderr.strip():
        sys.stderr.write(result.stderr)


def plot_figure5(out_dir, dataset, rows, meta):
    """Figure 5: test accuracy vs MSE lower bound (log), RDP / max dFIL / median dFIL, Pareto fronts."""
    values = [r[key] for r in rows for key, _, _ in SERIES if r[key] > 0 and math.isfinite(r[key])]
    top = max(values + [PERFECT_PRIVACY]) * 5
    floor = max(min(values + [PERFECT_PRIVACY]) / 5, top * 1e-14)
    clipped = 0
    plots = []
    for key, title, colour in SERIES:
        points = sorted(rows, key=lambda r: r["test_accuracy"])
        # The dFIL bounds' bootstrap intervals over runs (none for RDP, or with one run): error bars.
        bars = all(r.get(key + "_low") is not None for r in rows)
        with open(os.path.join(out_dir, f"figure5_{key}.dat"), "w") as f:
            f.write("# test_accuracy bound(clamped to the plot floor) bound setting steps pareto low high\n")
            for r in points:
                value = r[key] if math.isfinite(r[key]) else top
                clipped += value < floor
                low, high = (r[key + "_low"], r[key + "_high"]) if bars else (value, value)
                f.write(f"{r['test_accuracy']:.6g} {max(value, floor):.6g} {r[key]:.6g} {r['setting']} "
                        f"{r['steps']} {r['pareto_' + key]} {max(min(low, top), floor):.6g} "
                        f"{max(min(high, top), floor):.6g}\n")
        with open(os.path.join(out_dir, f"figure5_{key}_front.dat"), "w") as f:
            for r in points:
                if r["pareto_" + key]:
                    f.write(f"{r['test_accuracy']:.6g} {max(r[key], floor):.6g}\n")
        if bars:
            plots.append(f"'figure5_{key}.dat' using 1:2:7:8 with yerrorbars pt 7 ps 1.1 lc rgb '{colour}' "
                         f"title '{title}, {number(100 * meta['confidence_level'])}% CI'")
        else:
            plots.append(f"'figure5_{key}.dat' using 1:2 with points pt 7 ps 1.1 lc rgb '{colour}' title '{title}'")
        plots.append(f"'figure5_{key}_front.dat' using 1:2 with lines dt 2 lw 2 lc rgb '{colour}' "
                     "title 'Pareto front'")
    plots.append(f"{PERFECT_PRIVACY} with lines dt 3 lw 2 lc rgb 'black' title 'perfect privacy (MSE = 1)'")
    accuracies = [r["test_accuracy"] for r in rows]
    low, high = min(accuracies), max(accuracies)
    pad = max(0.01, (high - low) * 0.05)
    name = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}.get(dataset, dataset)
    title = (f"{name} ConvNet DP-SGD: n = {meta['train_size']}, B = {meta['batch_size']}, "
             f"T <= {meta['steps']}, momentum {number(meta['momentum'])}, "
             f"{meta['runs']} run{'s' if meta['runs'] > 1 else ''}")
    if clipped:
        title += f"\\n({clipped} bounds below {floor:.0e} drawn at the bottom edge)"
    script = os.path.join(out_dir, "figure5.gp")
    with open(script, "w") as f:
        f.write(f"""set terminal pngcairo size 1000,700 enhanced font 'Sans,12'
set output 'figure5.png'
set title "{title}"
set xlabel 'test accuracy'
set ylabel 'MSE lower bound'
set logscale y
set format y '10^{{%L}}'
set xrange [{low - pad:.4f}:{min(1.0, high + pad):.4f}]
set yrange [{floor:.3g}:{top:.3g}]
set grid
set key outside right top
plot {', '.join(plots)}
""")
    gnuplot(script)
    return os.path.join(out_dir, "figure5.png")


def plot_montage(out_dir, dataset, rows, args):
    """The 8 highest- and 8 lowest-dFIL training images of the best-accuracy setting (final step)."""
    sys.path.insert(0, args.python_path)
    import filkit  # noqa: E402 (the build's module)
    best = max((r for r in rows if r["final"]), key=lambda r: r["test_accuracy"])
    table = os.path.join(out_dir, best["setting"] + ".csv")
    if not os.path.exists(table):  # a committed grid: its montage was drawn when the table was there
        print(f"montage: {table} is not here (per-example tables are not committed); montage.png is left as "
              f"it is (--force {best['setting']} redraws it)", file=sys.stderr)
        return os.path.join(out_dir, "montage.png"), best
    with open(table, newline="") as f:
        examples = [r for r in csv.DictReader(f) if int(float(r["step"])) == best["steps"]]
    split = filkit.load_dataset(dataset, train_size=args.train_size, test_size=args.test_size, seed=args.seed)
    X, y = np.asarray(split.train.X), np.asarray(split.train.y)
    if len(examples) != X.shape[0]:
        raise SystemExit(f"{table}: {len(examples)} examples at step {best['steps']}, the Python loader gives "
                         f"{X.shape[0]} training rows")
    mismatched = [r for r in examples if int(float(r["label"])) != int(y[int(float(r["index"]))])]
    if mismatched:
        raise SystemExit(f"{table}: {len(mismatched)} labels differ from filkit.load_dataset's rows (first: "
                         f"index {mismatched[0]['index']}); the CLI's and Python's subsets disagree")
    sampled = [r for r in examples if float(r["times_sampled"]) > 0]
    never = len(examples) - len(sampled)
    by_dfil = sorted(sampled, key=lambda r: float(r["dfil"]), reverse=True)
    chosen = [by_dfil[:8], by_dfil[-8:][::-1]]
    side, gap, label_rows = 28, 4, 16
    width = 8 * side + 7 * gap
    height = 2 * (label_rows + side) + gap
    canvas = np.ones((height, width))  # white background; digits drawn dark on white
    labels, listing = [], []
    for row, group in enumerate(chosen):
        top = row * (label_rows + side + gap) + label_rows
        for col, r in enumerate(group):
            index = int(float(r["index"]))
            left = col * (side + gap)
            canvas[top:top + side, left:left + side] = 1.0 - X[index].reshape(side, side) / 255.0
            labels.append((left + side / 2 - 0.5, top - 9, f"dFIL {float(r['dfil']):.3g}"))
            labels.append((left + side / 2 - 0.5, top - 3,
                           f"#{index} y={int(float(r['label']))} k={float(r['times_sampled']):.3g}"))
            listing.append({"row": "highest" if row == 0 else "lowest", "index": index, "label": r["label"],
                            "dfil": r["dfil"], "times_sampled": r["times_sampled"],
                            "mse_bound": r["example_mse_bound"]})
    np.savetxt(os.path.join(out_dir, "montage.dat"), canvas, fmt="%.4f")
    write_csv(os.path.join(out_dir, "montage_examples.csv"), listing)
    name = {"mnist": "MNIST", "fashion-mnist": "Fashion-MNIST"}.get(dataset, dataset)
    setting = f"sigma = {number(best['sigma'])}, C = {number(best['clip'])}, rho = {number(best['step_size'])}"
    title = (f"{name}, {setting}, T = {best['steps']} (test accuracy {best['test_accuracy']:.3f})\\n"
             f"top: the 8 highest dFIL; bottom: the 8 lowest among the {len(sampled)} examples sampled at least once "
             f"({never} never sampled: dFIL 0)\\nk = times sampled (mean over runs; dFIL sums over those steps, "
             f"{args.runs} run{'s' if args.runs > 1 else ''}); "
             "pixels shown inverted (dark = high value)")
    script = os.path.join(out_dir, "montage.gp")
    with open(script, "w") as f:
        f.write(f"""set terminal pngcairo size {width * 6},{height * 6 + 130} enhanced font 'Sans,11'
set output 'montage.png'
set title "{title}" font 'Sans,12'
unset key
unset tics
unset border
unset colorbox
set size ratio -1
set palette gray
set cbrange [0:1]
set xrange [-0.5:{width - 0.5}]
set yrange [{height - 0.5}:-0.5]
""")
        for x, yy, text in labels:
            f.write(f"set label \"{text}\" at {x:.1f},{yy:.1f} center front font 'Sans,10'\n")
        f.write("plot 'montage.dat' matrix with image\n")
    gnuplot(script)
    return os.path.join(out_dir, "montage.png"), best


def dataset_dir(args, dataset):
    precision = "" if args.precision == "float64" else "_" + args.precision  # float32's runs beside float64's
    return os.path.join(args.out_root,
                        f"{dataset}_n{args.train_size}_B{args.batch_size}_T{args.steps}_seed{args.seed}{precision}")


def run_grid(args, datasets, rank=0, ranks=1):
    """This process's share of the units (grid_ranks.py): with one run a setting each (dataset, setting),
    with --runs R > 1 each (dataset, setting, run), --jobs at a time; returns {dataset: [(name, command,
    summary, rows)]}, None for a setting whose outputs are not yet written (its runs not all done)."""
    epochs = [float(e) for e in args.epochs.split(",")] if args.epochs else []
    settings = parse_settings(args.settings)
    runs = [None] if args.runs == 1 else list(range(args.runs))
    tasks = [(dataset, k, setting, run) for dataset in datasets for k, setting in enumerate(settings) for run in runs]
    share = grid_ranks.Share(rank, ranks)
    mine = [share.takes((dataset, setting_name(setting), run)) for dataset, _, setting, run in tasks]
    if args.dry_run:  # this process's units, one a line
        print("\n".join(f"{dataset} {setting_name(setting)}" + ("" if run is None else f" run {run}")
                        for (dataset, _, setting, run), taken in zip(tasks, mine) if taken))
        return None
    for dataset in datasets:
        os.makedirs(dataset_dir(args, dataset), exist_ok=True)
    start = time.time()

    def task(item):
        dataset, k, setting, run = item
        unit = "" if run is None else f", run {run + 1}/{args.runs}"
        print(f"[{time.time() - start:5.0f} s] start {dataset} {k + 1}/{len(settings)}: sigma {number(setting['sigma'])}, "
              f"C {number(setting['clip'])}, rho {number(setting['step_size'])}{unit}", file=sys.stderr, flush=True)
        if run is None:
            result = setting_outputs(args, dataset, setting, dataset_dir(args, dataset), epochs, force=args.force)
        else:
            result = train_run(args, dataset, setting, dataset_dir(args, dataset), epochs, run)
        done = f"{setting_name(setting)}{unit}" if result is None else \
            f"{result[0]}{unit}: test acc {result[3][-1]['test_accuracy']:.4f}"
        print(f"[{time.time() - start:5.0f} s] done  {dataset} {done}", file=sys.stderr, flush=True)
        return result

    taken = [tasks[i] for i, is_mine in enumerate(mine) if is_mine]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(task, taken))
    # Every setting's outputs: read where written, made where every run's file is there (whoever trained
    # them), None where some are not yet.
    by_dataset = {dataset: [] for dataset in datasets}
    for dataset in datasets:
        for setting in settings:
            by_dataset[dataset].append(setting_outputs(args, dataset, setting, dataset_dir(args, dataset), epochs,
                                                       make=args.runs > 1))
    return by_dataset


def analyse_dataset(args, dataset, results):
    meta = {"dataset": dataset, "train_size": args.train_size, "test_size": args.test_size, "seed": args.seed,
            "batch_size": args.batch_size, "steps": args.steps, "epochs": args.epochs, "momentum": args.momentum,
            "probes": args.probes, "trace": "gaussian", "spectral": "none", "runs": args.runs, "model": "cnn",
            "threads": args.threads, "jobs": args.jobs, "confidence_level": args.confidence_level,
            "bootstrap_resamples": args.bootstrap_resamples, "crossing_bootstrap_seed": [args.seed, 1]}
    out_dir = dataset_dir(args, dataset)
    rows, runs = [], []
    for name, command, summary, setting_rows in results:
        rows += setting_rows
        runs.append({"setting": name, "command": command, "seed": summary["seed"], "run_seeds": summary["run_seeds"],
                     "filkit_version": summary["filkit_version"], "parameter_count": summary["parameter_count"],
                     "n": summary["n"], "sampling_rate": summary["sampling_rate"], "kappa": summary["kappa"],
                     "seconds": summary["seconds"], "wall_seconds": setting_rows[-1]["wall_seconds"]})
    for key, _, _ in SERIES:
        front = pareto_front(rows, key)
        for i, row in enumerate(rows):
            row["pareto_" + key] = int(i in front)
    write_csv(os.path.join(out_dir, "results.csv"), rows)
    crossings = analyse_crossings(args, out_dir, results)
    figure = plot_figure5(out_dir, dataset, rows, meta)
    montage, best = plot_montage(out_dir, dataset, rows, args)
    with open(os.path.join(out_dir, f"results.json.{os.getpid()}.tmp"), "w") as f:
        # The figures' names only: the folder moves (a committed grid is redrawn where it is checked out).
        json.dump({"meta": meta, "runs": runs, "rows": rows, "crossings": crossings,
                   "figure5": os.path.basename(figure), "montage": os.path.basename(montage),
                   "montage_setting": best["setting"], "perfect_privacy_mse": PERFECT_PRIVACY}, f, indent=1)
    os.replace(os.path.join(out_dir, f"results.json.{os.getpid()}.tmp"), os.path.join(out_dir, "results.json"))

    print(f"\n{dataset}: ConvNet, n = {args.train_size}, test {args.test_size}, B = {args.batch_size}, "
          f"momentum {number(args.momentum)}, seed {args.seed}; {out_dir}")
    intervals = args.runs > 1  # the bounds' bootstrap intervals over runs beside them
    def bound(row, key):
        if not intervals:
            return f"{row[key]:11.3g}"
        return f"{row[key]:11.3g} [{row[key + '_low']:.3g}, {row[key + '_high']:.3g}]".ljust(32)
    print(f"{'sigma':>5} {'C':>3} {'rho':>5} {'T':>4} {'test acc':>8} {'eps2':>9} {'RDP bound':>10} "
          + (f"{'1/maxdFIL^2 [CI]':>32} {'1/meddFIL^2 [CI]':>32}" if intervals else
             f"{'1/maxdFIL^2':>11} {'1/meddFIL^2':>11}") + f" {'sec':>5} front")
    for row in sorted(rows, key=lambda r: r["test_accuracy"]):
        marks = "".join(c if row["pareto_" + k] else "." for c, k in
                        (("R", "rdp_bound"), ("M", "max_dfil_bound"), ("m", "median_dfil_bound")))
        seconds = "%5.0f" % row["wall_seconds"] if row["wall_seconds"] else "    -"
        print(f"{number(row['sigma']):>5} {number(row['clip']):>3} {number(row['step_size']):>5} {row['steps']:>4} "
              f"{row['test_accuracy']:8.4f} {row['rdp2_eps']:9.3g} {row['rdp_bound']:10.3g} "
              f"{bound(row, 'max_dfil_bound')} {bound(row, 'median_dfil_bound')} {seconds} {marks}")
    print("front: R = RDP bound, M = max-dFIL bound, m = median-dFIL bound on its Pareto front; "
          "sec = wall time of the run (with --jobs runs share the cores)")
    print_crossings(crossings, args, rows)
    print(f"figures: {figure}, {montage}")


def analyse_crossings(args, out_dir, results):
    """Every point's per-run accuracies and traces, then the crossings with their bootstrap intervals."""
    points = []
    for name, _, summary, setting_rows in results:
        table = os.path.join(out_dir, name + ".csv")
        if args.runs == 1 and not os.path.exists(table):  # a committed grid: the summary's bounds stand
            points += [{"accuracy_per_run": [row["test_accuracy"]], "rdp_bound": row["rdp_bound"],
                        "max_dfil_bound": row["max_dfil_bound"], "median_dfil_bound": row["median_dfil_bound"]}
                       for row in setting_rows]
            continue
        traces = load_per_run_traces(table, args.runs)
        for snapshot, row in zip(summary["snapshots"], setting_rows):
            point = {"accuracy_per_run": snapshot["test_accuracy_per_run"], "traces": traces[snapshot["step"]],
                     "private_dims": summary["private_dims"], "rdp_bound": row["rdp_bound"]}
            # The traces read back must give filkit's own bound: a misread table would not.
            recomputed = dfil_bounds(point["traces"], point["private_dims"], np.ones((1, args.runs)))[0][0]
            if not math.isclose(recomputed, row["max_dfil_bound"], rel_tol=1e-9):
                raise SystemExit(f"{name}.csv, step {snapshot['step']}: the per-run traces give a max-dFIL bound of "
                                 f"{recomputed:.6g}, the summary {row['max_dfil_bound']:.6g}")
            points.append(point)
    return crossings_with_uncertainty(points, args.bootstrap_resamples, args.confidence_level, [args.seed, 1])


def print_crossings(crossings, args, rows):
    level = number(100 * args.confidence_level) + "%"
    print(f"crossing accuracies: the highest test accuracy whose bound is still >= {number(PERFECT_PRIVACY)}"
          + (f"; {level} bootstrap intervals over the {args.runs} runs ({args.bootstrap_resamples} resamples, "
             "paired across settings)" if args.runs > 1 else "; one run: no intervals (use --runs R > 1)"))
    labels = dict((key, title) for key, title, _ in SERIES)
    labels["gap_max_dfil_minus_rdp"] = "max dFIL minus RDP"
    for key, entry in crossings.items():
        gap = key == "gap_max_dfil_minus_rdp"
        value = "none" if entry["accuracy"] is None else ("%+.4f" if gap else "%.4f") % entry["accuracy"]
        interval = "" if entry["interval"] is None else "[%.4f, %.4f]" % tuple(entry["interval"])
        notes = [] if gap else [f"{sum(r[key] >= PERFECT_PRIVACY for r in rows)} of {len(rows)} points on or above"]
        if entry["replicates_without_crossing"]:
            notes.append(f"{entry['replicates_without_crossing']} resamples without a crossing")
        print(f"  {labels[key]:<26} {value:>8} {interval:<18} {'; '.join(notes)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="mnist,fashion-mnist", help="comma-separated: mnist, fashion-mnist")
    parser.add_argument("--settings", default=DEFAULT_SETTINGS, help=f"sigma:C:rho,... (default {DEFAULT_SETTINGS})")
    parser.add_argument("--train-size", type=int, default=10000, help="random training subset (default 10000)")
    parser.add_argument("--test-size", type=int, default=2000, help="random test subset (default 2000)")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--steps", type=int, default=500, help="T (default 500: 10 epochs of 10000 at B = 200)")
    parser.add_argument("--epochs", default="1,2,4,6,8",
                        help="also report at these epochs of every run (more T on the same plot; '' for none)")
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--probes", type=int, default=1, help="Gaussian probes of Tr(G^T G) per example and step")
    parser.add_argument("--seed", type=int, default=0, help="seed of the subsets, batches, noise and probes")
    parser.add_argument("--runs", type=int, default=1,
                        help="independent runs per setting, averaged by the accountant (the paper: 10)")
    parser.add_argument("--confidence-level", type=float, default=0.95,
                        help="level of the bootstrap intervals over runs (filkit's and the crossings')")
    parser.add_argument("--bootstrap-resamples", type=int, default=1000, help="resamples of the runs")
    parser.add_argument("--threads", type=int, default=1,
                        help="threads of each filkit run (default 1: on 2 idle cores a second thread speeds one "
                             "ConvNet run up by ~10%%, two single-threaded runs side by side do ~1.7x the work; a "
                             "2-thread run sharing the cores with another job is ~2x slower; 0 = all cores)")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time (default 2: one per core)")
    parser.add_argument("--quick", action="store_true", help="a tiny grid (600 examples, 12 steps, ~15 s): a smoke test")
    parser.add_argument("--force", action="store_true", help="rerun settings whose outputs exist")
    parser.add_argument("--binary", default=os.environ.get("FILKIT_BINARY", os.path.join(ROOT, "build", "filkit")))
    parser.add_argument("--python-path", default=os.path.join(ROOT, "build", "python"),
                        help="directory holding the filkit Python module")
    parser.add_argument("--out-root", default=os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"),
                                                           "dpsgd_networks_grid"))
    parser.add_argument("--precision", choices=["float64", "float32"], default="float64",
                        help="filkit dpsgd's --precision: float32 trains and accounts in single precision, as the "
                             "paper's PyTorch code (1.35x faster a step on the ConvNet; docs/distributed.md)")
    grid_ranks.add_arguments(parser)
    args = parser.parse_args()
    args.out_root = os.path.abspath(args.out_root)  # gnuplot runs in the output folder: a relative root would not resolve
    rank, ranks = grid_ranks.rank_of(args, parser)
    if args.quick:
        for key, value in QUICK.items():
            setattr(args, key, value)
    if shutil.which("gnuplot") is None and not args.dry_run:
        raise SystemExit("gnuplot is needed for the figures")
    start = time.time()
    datasets = [d.strip() for d in args.datasets.split(",")]
    grid = run_grid(args, datasets, rank, ranks)
    if grid is None:
        return
    missing = sum(result is None for results in grid.values() for result in results)
    if missing:  # the other processes' runs still going: the last to finish makes the tables
        print(f"rank {rank} of {ranks}: done; {missing} settings not yet written (their runs are the others'), "
              "so no tables yet", file=sys.stderr)
        return
    for dataset, results in grid.items():
        analyse_dataset(args, dataset, results)
    print(f"total {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()
