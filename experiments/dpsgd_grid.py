#!/usr/bin/env python3
"""Accuracy vs reconstruction MSE lower bounds of DP-SGD logistic regression over a grid of
(T, sigma, step size, C): the GLM analogue of figure 5 of Guo et al., "Bounding training data
reconstruction in private (deep) learning" (ICML 2022).

For every setting `filkit dpsgd` trains a model (softmax regression on all 10 classes, or
logistic regression on classes 0 vs 1; labels public, pixels in [0, 1], B = 600, momentum 0.5)
and reports per-example dFIL; this script adds the RDP bound and marks the Pareto fronts
(highest bound for at least the accuracy):

  RDP bound  (Theorem 1): MSE >= 1 / (4 (e^eps2 - 1)), eps2 the (2, eps2)-RDP of the whole run;
  dFIL bound (Theorem 2): MSE >= 1 / dFIL^2, at the largest and at the median dFIL of the data.

eps2 comes from filkit's RDP accountant (the order-2 RDP of T steps of the sampled Gaussian
mechanism with noise multiplier sigma / 1.11524, since GELU clipping bounds ||g~|| by 1.11524 C).

Usage: experiments/dpsgd_grid.py [--dataset mnist|fashion-mnist] [--classes all|0,1] [--quick]
                                 [--rank R --ranks K] [--dry-run]
K processes share the settings round robin (grid_ranks.py; also under `mpirun -np K` or a Slurm
array); grid.csv is written by the one that finds every setting's summary present.
Outputs go to ${FILKIT_OUT:-/tmp/filkit-experiments}/dpsgd_grid/<dataset>_<classes>/.
"""
import argparse
import csv
import itertools
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # grid_ranks.py, also when loaded from elsewhere
import grid_ranks  # noqa: E402

GRID_DEFAULTS = {"steps": "100,300,1000", "sigma": "0.5,1,2,5,10", "step_size": "0.03,0.1", "clip": "1,4"}
QUICK_GRID = {"steps": [100, 300], "sigma": [1, 5], "step_size": [0.1], "clip": [1]}


def pareto_front(rows, key):
    """Indices of rows not dominated in (test accuracy, bound): nobody has both higher."""
    front = []
    for i, a in enumerate(rows):
        dominated = any(b["test_accuracy"] >= a["test_accuracy"] and b[key] >= a[key] and
                        (b["test_accuracy"] > a["test_accuracy"] or b[key] > a[key]) for b in rows)
        if not dominated:
            front.append(i)
    return set(front)


def setting_name(setting):
    return "T{steps}_sigma{sigma}_rho{step_size}_C{clip}".format(**setting)


def run_setting(binary, dataset, classes, setting, out_dir, runs, seed, run=True):
    """The setting's row, after running it if its summary is missing and `run`; None if it is
    missing and not `run` (another process's share)."""
    name = setting_name(setting)
    summary_path = os.path.join(out_dir, name + ".json")
    if not os.path.exists(summary_path):
        if not run:
            return None
        model = "softmax" if classes == "all" else "logistic"
        command = [binary, "dpsgd", "--data", dataset, "--classes", classes, "--model", model,
                   "--batch-size", "600", "--momentum", "0.5", "--steps", str(setting["steps"]),
                   "--noise-multiplier", str(setting["sigma"]), "--step-size", str(setting["step_size"]),
                   "--clip-norm", str(setting["clip"]), "--spectral", "none", "--runs", str(runs),
                   "--seed", str(seed), "--json", summary_path, "--quiet"]
        subprocess.run(command, check=True)
    with open(summary_path) as f:
        summary = json.load(f)
    final = summary["snapshots"][-1]
    return dict(setting, name=name, test_accuracy=final["test_accuracy"], rdp_eps=final["rdp"]["eps"],
                rdp2_eps=final["rdp"]["order2_eps"], rdp_bound=final["rdp"]["mse_bound"], max_dfil=final["dfil"]["max"],
                median_dfil=final["dfil"]["median"], max_dfil_bound=final["dfil"]["mse_bound_at_max"],
                median_dfil_bound=final["dfil"]["mse_bound_at_median"],
                seconds=summary["seconds"]["training"])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="mnist", choices=["mnist", "fashion-mnist"])
    parser.add_argument("--classes", default="all", choices=["all", "0,1"],
                        help="all: softmax regression on 10 classes; 0,1: logistic regression")
    for axis, values in GRID_DEFAULTS.items():
        parser.add_argument("--" + axis.replace("_", "-"), default=values, help=f"comma-separated (default {values})")
    parser.add_argument("--quick", action="store_true", help="a 4-setting grid (a smoke test)")
    parser.add_argument("--runs", type=int, default=2, help="runs averaged by the FIL accountant")
    parser.add_argument("--seed", type=int, default=0)
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--binary", default=os.path.join(here, "..", "build", "filkit"))
    grid_ranks.add_arguments(parser)
    args = parser.parse_args()
    rank, ranks = grid_ranks.rank_of(args, parser)

    out_dir = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "dpsgd_grid",
                           args.dataset + "_" + args.classes.replace(",", ""))
    grid = QUICK_GRID if args.quick else {
        axis: [float(v) if "." in v else int(v) for v in getattr(args, axis).split(",")] for axis in GRID_DEFAULTS}
    settings = [dict(zip(grid, values)) for values in itertools.product(*grid.values())]
    share = grid_ranks.Share(rank, ranks)
    mine = [share.takes(setting_name(setting)) for setting in settings]
    if args.dry_run:  # this process's settings, one a line
        print("\n".join(setting_name(setting) for setting, taken in zip(settings, mine) if taken))
        return
    os.makedirs(out_dir, exist_ok=True)
    rows = []
    for k, (setting, taken) in enumerate(zip(settings, mine)):
        if taken:
            print(f"[{k + 1}/{len(settings)}] {setting}", file=sys.stderr, flush=True)
        rows.append(run_setting(args.binary, args.dataset, args.classes, setting, out_dir, args.runs, args.seed,
                                run=taken))
    missing = sum(row is None for row in rows)
    if missing:  # the other processes' settings still running: the last to finish writes the table
        print(f"rank {rank} of {ranks}: done; {missing} of {len(rows)} settings not yet written by the others, "
              f"so no grid.csv yet", file=sys.stderr)
        return

    for key in ("rdp_bound", "max_dfil_bound", "median_dfil_bound"):
        front = pareto_front(rows, key)
        for i, row in enumerate(rows):
            row["pareto_" + key] = int(i in front)

    table = os.path.join(out_dir, "grid.csv")
    with open(table + f".{os.getpid()}.tmp", "w", newline="") as f:  # a name of its own: ranks may write at once
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    os.replace(table + f".{os.getpid()}.tmp", table)

    task = "10 classes, softmax" if args.classes == "all" else "0 vs 1, logistic"
    print(f"{args.dataset} {task} regression, B = 600, momentum 0.5, {args.runs} runs; {table}")
    print(f"{'setting':34} {'test acc':>8} {'eps2':>10} {'RDP bound':>10} {'1/maxdFIL^2':>12} {'1/meddFIL^2':>12}")
    for row in sorted(rows, key=lambda r: r["test_accuracy"]):
        marks = "".join(c if row["pareto_" + k] else " " for c, k in
                        (("R", "rdp_bound"), ("M", "max_dfil_bound"), ("m", "median_dfil_bound")))
        print(f"{row['name']:34} {row['test_accuracy']:8.4f} {row['rdp2_eps']:10.3g} {row['rdp_bound']:10.3g} "
              f"{row['max_dfil_bound']:12.3g} {row['median_dfil_bound']:12.3g} {marks}")
    print("Pareto fronts: R = RDP bound, M = max-dFIL bound, m = median-dFIL bound")


if __name__ == "__main__":
    main()
