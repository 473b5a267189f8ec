#!/usr/bin/env python3
"""The attribute-inference experiments of the FIL paper (Hannun, Guo, van der Maaten, section 6.4,
figures 6 and 7), reproduced on kernlab's income data, which stands in for IWPC (a regression with
a multi-level sensitive attribute) and UCI Adult (a classification with a binary one).

  sweep  Figure 6: least squares on income-regression (target: rank 1..9 of the income range;
         attribute MARITAL.STATUS, 5 levels), lambda in {1e-5, 1e-3, 1e-1, 1} x 16 noise scales
         sigma from 1e-6 to 10: mean attribute-level eta, test MSE of the released model, and the
         accuracy of the white-box and black-box attacks (and the prior) over noise draws.
  irfil  Figure 7: IRFIL for 10 iterations driven by the attribute-level eta of MARITAL.STATUS, on
         income-regression (least squares) and income-classification (logistic, income >= $50,000;
         attribute married or not), lambda 1e-3 (--l2): per decile of the *initial* eta, the eta,
         the white-box accuracy at the paper's sigma = 1e-3 and at 1e-2, and the white-box margin
         min_v ||f(D with v) - w*|| (how far the nearest wrong candidate's minimiser lies) at every
         iteration.

Every model has a public, regularised intercept (--intercept). The white-box attack's candidate
minimisers come from rank-2 updates (least squares) or chord Newton (logistic); the sweep also
times the naive refit on a sample (JSON "naive_refit").

Usage: experiments/irfil_attacks.py [sweep|irfil|all] [--trials N] [--quick] [--l2 LAMBDA]
Needs build/filkit (or $FILKIT_BINARY) and the income data (scripts/setup.sh).
Outputs go to ${FILKIT_OUT:-/tmp/filkit-experiments}/irfil_attacks/.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

LAMBDAS = ["1e-05", "0.001", "0.1", "1"]
SIGMAS = ["%.3g" % 10 ** (-6 + 7 * k / 15) for k in range(16)]
IRFIL_SIGMAS = ["0.001", "0.01"]
TASKS = {"regression": "income-regression", "classification": "income-classification"}
ITERATIONS = 10


def repository_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(binary, arguments):
    subprocess.run([binary] + arguments + ["--quiet"], check=True)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def write_csv(path, header, rows):
    with open(path + ".tmp", "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    os.replace(path + ".tmp", path)


def sweep(binary, out_dir, trials, sigmas):
    """Figure 6: one attack run per lambda over all noise scales."""
    rows = []
    for l2 in LAMBDAS:
        summary = os.path.join(out_dir, "sweep_l2_%s.json" % l2)
        if not os.path.exists(summary):
            run(binary, ["attack", "--data", "income-regression", "--intercept", "--l2", l2,
                         "--sigmas", ",".join(sigmas), "--trials", str(trials), "--seed", "0",
                         "--compare-naive", "20", "--json", summary,
                         "--out", os.path.join(out_dir, "sweep_l2_%s.csv" % l2)])
        with open(summary) as f:
            result = json.load(f)
        naive = result["naive_refit"]
        print("lambda %-6s test MSE of w* %.3f; white-box candidates %.2f s (naive refit: %.1f s for %d examples,"
              " %.0f s estimated for all %d; largest difference %.1e)" % (
                  l2, result["model"]["test_mse"], result["seconds"]["candidates"], naive["seconds"],
                  naive["examples"], naive["estimated_seconds_all_examples"], result["examples"],
                  naive["max_difference"]))
        for s in result["by_sigma"]:
            rows.append([l2, s["sigma"], s["eta_mean"], s["release_test_mse"], s["white_box"], s["white_box_std"],
                         s["black_box"], s["black_box_std"], result["prior_accuracy"]])
    header = ["lambda", "sigma", "eta_mean", "test_mse", "white_box", "white_box_std", "black_box",
              "black_box_std", "prior"]
    write_csv(os.path.join(out_dir, "sweep.csv"), header, rows)
    print("%-7s %9s %10s %9s %16s %16s %6s" % ("lambda", "sigma", "eta mean", "test MSE", "white-box", "black-box",
                                                "prior"))
    for r in rows:
        print("%-7s %9.2e %10.3e %9.3f %8.3f +- %.3f %8.3f +- %.3f %6.3f" % tuple(r))


def mean(values):
    values = list(values)
    return sum(values) / len(values)


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    rank = [0.0] * len(values)
    for position, i in enumerate(order):
        rank[i] = float(position)
    return rank


def spearman(a, b):
    """Rank correlation (ties broken by position; the values here are continuous)."""
    ra, rb = ranks(a), ranks(b)
    ma, mb = mean(ra), mean(rb)
    covariance = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return covariance / (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5


def deciles(values):
    """Decile 0..9 of every value by rank (ties by position), as filkit attack groups examples."""
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    decile = [0] * len(values)
    for rank, i in enumerate(order):
        decile[i] = rank * 10 // len(values)
    return decile


def irfil(binary, out_dir, trials, task, l2):
    """Figure 7 for one task: IRFIL weights per iteration, then the white-box attack on each."""
    data = TASKS[task]
    prefix = os.path.join(out_dir, "irfil_%s_l2_%s" % (task, l2))
    common = ["--data", data, "--intercept", "--l2", l2, "--seed", "0"]
    if not os.path.exists(prefix + ".json"):
        run(binary, ["irfil"] + common + ["--attribute", "MARITAL.STATUS", "--sigma", IRFIL_SIGMAS[0],
                                          "--iterations", str(ITERATIONS), "--out", prefix + ".csv",
                                          "--history-out", prefix + "_history.csv", "--json", prefix + ".json"])
    with open(prefix + ".json") as f:
        irfil_summary = json.load(f)
    initial = deciles([float(r["eta_before"]) for r in read_csv(prefix + ".csv")])
    rows, correlations = [], []
    for t in range(ITERATIONS + 1):
        examples = "%s_attack_%d.csv" % (prefix, t)
        if not os.path.exists(examples):
            run(binary, ["attack"] + common + ["--weights", prefix + "_history.csv", "--weights-column",
                                               "iteration_%d" % t, "--sigmas", ",".join(IRFIL_SIGMAS),
                                               "--attacks", "white-box", "--trials", str(trials),
                                               "--examples-out", examples,
                                               "--json", "%s_attack_%d.json" % (prefix, t)])
        per_example = read_csv(examples)
        first = [r for r in per_example if float(r["sigma"]) == float(IRFIL_SIGMAS[0])]
        correlations.append(spearman([float(r["eta"]) for r in first], [float(r["nearest_shift"]) for r in first]))
        for decile in range(10):
            row = [t, decile]
            for sigma in IRFIL_SIGMAS:
                chosen = [r for r in per_example
                          if initial[int(r["index"])] == decile and float(r["sigma"]) == float(sigma)]
                row += [mean(float(r["eta"]) for r in chosen), mean(float(r["white_box_accuracy"]) for r in chosen)]
            row.append(mean(float(r["nearest_shift"]) for r in first if initial[int(r["index"])] == decile))
            rows.append(row)
    header = ["iteration", "initial_decile"]
    for sigma in IRFIL_SIGMAS:
        header += ["eta_mean_sigma_" + sigma, "white_box_sigma_" + sigma]
    header.append("nearest_shift_mean")
    write_csv(prefix + "_deciles.csv", header, rows)

    print("%s (%s, lambda %s, MARITAL.STATUS): eta at sigma %s by iteration (mean +- std, max), test %s" % (
        data, "least squares" if task == "regression" else "logistic", l2, IRFIL_SIGMAS[0],
        "MSE" if task == "regression" else "accuracy"))
    for it in irfil_summary["iterations"]:
        test = it["test_mse"] if task == "regression" else it["test_accuracy"]
        print("  %2d  %8.3f +- %7.3f  max %8.3f  test %.4f" % (it["iteration"], it["eta"]["mean"], it["eta"]["std"],
                                                               it["eta"]["max"], test))
    for k, sigma in enumerate(IRFIL_SIGMAS):
        print("  white-box accuracy by initial-eta decile (lowest .. highest), sigma %s:" % sigma)
        for t in range(ITERATIONS + 1):
            accuracies = [r[3 + 2 * k] for r in rows if r[0] == t]
            print("    iteration %2d: %s  (spread %.3f)" % (t, " ".join("%.3f" % a for a in accuracies),
                                                            max(accuracies) - min(accuracies)))
    print("  white-box margin min_v ||f(D with v) - w*|| by initial-eta decile, and its rank correlation with eta:")
    for t in range(ITERATIONS + 1):
        margins = [r[-1] for r in rows if r[0] == t]
        print("    iteration %2d: %s  (Spearman %.2f)" % (t, " ".join("%.2e" % m for m in margins), correlations[t]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("experiment", nargs="?", default="all", choices=["sweep", "irfil", "all"])
    parser.add_argument("--trials", type=int, default=100, help="noise draws per sigma (the paper: 100)")
    parser.add_argument("--quick", action="store_true", help="10 trials and 6 noise scales, for a smoke test")
    parser.add_argument("--l2", default="0.001", help="lambda of the IRFIL experiment (default 0.001)")
    args = parser.parse_args()
    binary = os.environ.get("FILKIT_BINARY", os.path.join(repository_root(), "build", "filkit"))
    if not os.access(binary, os.X_OK):
        sys.exit("irfil_attacks: %s not found; build filkit first (scripts/setup.sh)" % binary)
    trials = 10 if args.quick else args.trials
    sigmas = SIGMAS[::3] if args.quick else SIGMAS
    out_dir = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "irfil_attacks",
                           "quick" if args.quick else "trials_%d" % trials)
    os.makedirs(out_dir, exist_ok=True)
    print("outputs in " + out_dir)
    if args.experiment in ("sweep", "all"):
        sweep(binary, out_dir, trials, sigmas)
    if args.experiment in ("irfil", "all"):
        for task in TASKS:
            irfil(binary, out_dir, trials, task, args.l2)


if __name__ == "__main__":
    main()
