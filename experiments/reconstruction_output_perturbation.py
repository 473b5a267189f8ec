#!/usr/bin/python3
"""Reproduces the output-perturbation experiments of Guo, Karrer, Chaudhuri and van der Maaten,
"Bounding training data reconstruction in private (deep) learning" (ICML 2022), section 7.1, with
`filkit bound` and `filkit reconstruct`, on MNIST 0 vs 1 (the paper) and Fashion-MNIST 0 vs 1.

Setting (as the authors' scripts: MNIST loaded with normalize=False): raw pixels / 255 in [0,1],
no row scaling, no PCA, d = 784; L2-regularised logistic regression with a (regularised)
intercept, lambda = 1e-2; labels public.
  (a) sigma = 1e-2: test accuracy, (2, eps)-RDP eps, the RDP MSE bound, the histogram of per-example
      dFIL bounds 1/eta_bar^2 (paper: eps = 2.49, RDP bound ~0.02, every dFIL bound > 1). Also run
      without the intercept (the authors' histogram script has none) and with rows projected to the
      unit ball (where the norm assumption behind eps nearly holds).
  (b) sigma = 1e-5: the GLM attack of Balle et al. over --trials noise draws, per example its mean
      MSE against the dFIL bound (the paper's Figure 3 scatter), and the mean reconstructions of the
      8 examples with the highest and the 8 with the lowest dFIL (Figure 4); and the biased forms
      of the bounds at the attack's estimated bias and Jacobian (docs/mathematics.md, section 6.7):
      which of the examples below the unbiased dFIL bound stay below the biased one.

Outputs go to ${FILKIT_OUT:-/tmp/filkit-experiments}/reconstruction_output_perturbation/: the
per-example CSVs and JSON summaries of every run, histogram.csv and scatter.csv per dataset,
reconstructions as CSV and as a PNG picture (top: originals, bottom: reconstructions), and
summary.json / summary.md with every number beside the paper's.

Usage: experiments/reconstruction_output_perturbation.py [--trials 10000] [--datasets mnist,fashion-mnist]
                                                          [--parts a,b]
Standard library only; needs the built `filkit` (scripts/setup.sh) and the datasets it installs.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import struct
import time
import zlib

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, os.environ.get("FILKIT_BUILD_DIR", "build"), "filkit")
COMMON = ["--classes", "0,1", "--l2", "1e-2", "--tolerance", "1e-12", "--pca", "0", "--scale-pixels", "on"]
PAPER = {"test_accuracy": 0.9995, "epsilon": 2.49, "rdp_mse_bound": 0.02, "min_dfil_bound": "> 1",
         "attack_epsilon": 2.5e6}


def run(arguments, log):
    print("+ filkit " + " ".join(arguments), file=sys.stderr)
    start = time.time()
    with open(log, "w") as err:
        subprocess.run([BINARY] + arguments, check=True, stdout=err, stderr=err)
    return time.time() - start


def read_rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def number(cell):
    """A CSV cell of filkit's: empty where the value is not a finite number."""
    return float(cell) if cell else math.nan


def histogram(values, per_decade=4):
    """Counts of log10(values) in bins of 1/per_decade decade (Figure 2's histogram data)."""
    counts = {}
    for value in values:
        b = math.floor(math.log10(value) * per_decade)
        counts[b] = counts.get(b, 0) + 1
    return [(b / per_decade, (b + 1) / per_decade, counts[b]) for b in sorted(counts)]


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)


def write_png(path, rows):
    """Originals (kind 0) on the top row, mean reconstructions (kind 1, clipped to [0,1]) below,
    as an 8-bit greyscale PNG (zlib + struct: no imaging library needed)."""
    images = {0: [], 1: []}
    for row in rows:
        images[int(row["kind"])].append([number(row["x%d" % j]) for j in range(784)])
    width, height = 30 * len(images[0]), 60
    pixels = [bytearray(width) for _ in range(height)]
    for kind in (0, 1):
        for c, image in enumerate(images[kind]):
            for j, value in enumerate(image):
                value = 0.0 if math.isnan(value) else min(1.0, max(0.0, value))
                pixels[30 * kind + 1 + j // 28][30 * c + 1 + j % 28] = int(round(255 * value))

    def chunk(kind, data):
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(line) for line in pixels)  # filter type 0 on every scanline
    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def bound_run(name, dataset, out, extra):
    prefix = os.path.join(out, "%s-%s" % (dataset, name))
    seconds = run(["bound", "--data", dataset, "--sigma", "1e-2"] + COMMON + extra +
                  ["--out", prefix + ".csv", "--json", prefix + ".json"], prefix + ".log")
    with open(prefix + ".json") as f:
        summary = json.load(f)
    bounds = [number(r["dfil_bound"]) for r in read_rows(prefix + ".csv")]
    return summary, bounds, seconds


def bound_digest(summary, bounds, seconds):
    return {
        "test_accuracy": summary["test_accuracy"],
        "released_model_test_accuracy": summary["release_test_accuracy"],
        "epsilon": summary["rdp"]["epsilon"],
        "rdp_mse_bound": summary["rdp"]["mse_bound"],
        "max_design_row_norm": summary["rdp"]["norm_check"]["max_design_row_norm"],
        "epsilon_at_data_norm": summary["rdp"]["epsilon_at_data_norm"],
        "dfil_bound_min": min(bounds),
        "dfil_bound_median": summary["dfil_bound"]["median"],
        "dfil_bound_max": max(bounds),
        "share_dfil_bound_at_or_above_1": summary["dfil_bound"]["share_at_or_above_perfect_privacy"],
        "share_fil_bound_at_or_above_1": summary["fil_bound"]["share_at_or_above_perfect_privacy"],
        "seconds": round(seconds, 1),
    }


def experiment(dataset, trials, out, parts):
    result = {}
    # (a) sigma = 1e-2
    summary, bounds, seconds = bound_run("a-bound", dataset, out, [])
    result["a"] = bound_digest(summary, bounds, seconds)
    write_csv(os.path.join(out, "%s-histogram.csv" % dataset), ["log10_bound_from", "log10_bound_to", "count"],
              histogram(bounds))
    if "a" in parts:
        for name, extra in (("a-no-intercept", ["--intercept=false"]), ("a-unit-ball", ["--row-scaling", "unit-ball"])):
            result[name] = bound_digest(*bound_run(name, dataset, out, extra))
    if "b" not in parts:
        return result

    # (b) sigma = 1e-5: the dFIL order does not depend on sigma, so (a) picks Figure 4's examples.
    order = sorted(range(len(bounds)), key=lambda i: bounds[i])
    chosen = order[:8] + order[-8:]
    prefix = os.path.join(out, "%s-b-attack" % dataset)
    seconds = run(["reconstruct", "--data", dataset, "--sigma", "1e-5", "--trials", str(trials)] + COMMON +
                  ["--save-reconstructions", ",".join(map(str, chosen)), "--reconstructions-out",
                   prefix + "-reconstructions.csv", "--out", prefix + ".csv", "--json", prefix + ".json"],
                  prefix + ".log")
    with open(prefix + ".json") as f:
        summary = json.load(f)
    rows = read_rows(prefix + ".csv")
    scatter = ["index", "dfil_bound", "attack_mse", "linearised_mse", "attack_mse_standard_error", "squared_bias",
               "jacobian_trace", "biased_dfil_bound", "biased_dfil_bound_standard_error"]
    write_csv(os.path.join(out, "%s-scatter.csv" % dataset), scatter, [[r[c] for c in scatter] for r in rows])
    write_png(prefix + "-reconstructions.png", read_rows(prefix + "-reconstructions.csv"))
    mse = {int(r["index"]): number(r["attack_mse"]) for r in rows}
    attack = summary["attack"]
    biased = attack["biased_bounds"]
    result["b"] = {
        "trials": trials,
        "epsilon": summary["rdp"]["epsilon"],
        "share_attack_mse_at_or_above_dfil_bound": attack["above_dfil_bound"]["share"],
        "share_at_or_above_where_bound_below_1": attack["above_dfil_bound_where_bound_below_perfect_privacy"]["share"],
        "examples_with_bound_below_1": attack["above_dfil_bound_where_bound_below_perfect_privacy"]["examples"],
        "log10_correlation_bound_vs_mse": attack["log10_correlation_dfil_bound_vs_mse"],
        "attack_mse_median": attack["mse"]["median"],
        "guarded_trials": attack["guarded_trials"],
        "top8_dfil_attack_mse": [mse[i] for i in order[:8]],
        "bottom8_dfil_attack_mse": [mse[i] for i in order[-8:]],
        "seconds": round(seconds, 1),
        "biased": biased,
        "below_dfil_bound": biased["below_dfil_bound"]["below"],
        "of_those_below_biased_dfil_bound": biased["below_dfil_bound_and_below_biased_dfil_bound"]["below"],
        "below_biased_dfil_bound": biased["below_biased_dfil_bound"],
        "below_biased_fil_bound": biased["below_biased_fil_bound"],
        "below_biased_rdp_bound": biased["below_biased_rdp_bound"],
        "violations": violations(rows),
    }
    return result


def violations(rows):
    """The examples below their unbiased dFIL bound, with their bias and Jacobian and the biased bound,
    worst (furthest below) first."""
    below = [r for r in rows if number(r["attack_mse"]) < number(r["dfil_bound"])]
    below.sort(key=lambda r: number(r["attack_mse"]) / number(r["dfil_bound"]))
    keys = ["index", "dfil_bound", "attack_mse", "attack_mse_standard_error", "squared_bias", "jacobian_trace",
            "jacobian_trace_standard_error", "biased_dfil_bound", "biased_dfil_bound_standard_error"]
    return [{k: number(r[k]) for k in keys} for r in below]


def markdown(results, trials):
    lines = ["| dataset | run | test acc. | eps | RDP bound | min dFIL bound | median | share >= 1 |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for dataset, result in results.items():
        for run_name in ("a", "a-no-intercept", "a-unit-ball"):
            if run_name not in result:
                continue
            r = result[run_name]
            lines.append("| %s | %s | %.2f%% | %.4g | %.4g | %.3g | %.3g | %.1f%% |" % (
                dataset, run_name, 100 * r["test_accuracy"], r["epsilon"], r["rdp_mse_bound"], r["dfil_bound_min"],
                r["dfil_bound_median"], 100 * r["share_dfil_bound_at_or_above_1"]))
    lines += ["", "Attack (sigma = 1e-5, %d trials):" % trials, "",
              "| dataset | MSE >= bound | same, bound < 1 | corr. log10 | top-8 dFIL MSE (max) | bottom-8 dFIL MSE (min) |",
              "| --- | --- | --- | --- | --- | --- |"]
    for dataset, result in results.items():
        if "b" not in result:
            continue
        b = result["b"]
        lines.append("| %s | %.1f%% | %.1f%% (%d ex.) | %.2f | %.2g | %.2g |" % (
            dataset, 100 * b["share_attack_mse_at_or_above_dfil_bound"],
            100 * b["share_at_or_above_where_bound_below_1"], b["examples_with_bound_below_1"],
            b["log10_correlation_bound_vs_mse"], max(b["top8_dfil_attack_mse"]), min(b["bottom8_dfil_attack_mse"])))
    lines += ["", "Biased bounds (examples below each bound; in brackets: by more than 2 standard errors of each):", "",
              "| dataset | below dFIL bound | of those, below the biased one | below biased dFIL | below biased FIL "
              "| below biased RDP |", "| --- | --- | --- | --- | --- | --- |"]
    for dataset, result in results.items():
        if "b" not in result:
            continue
        b = result["b"]
        cell = lambda c: "%d (%d)" % (c["below"], c["below_by_two_standard_errors"])
        lines.append("| %s | %d | %d | %s | %s | %s |" % (
            dataset, b["below_dfil_bound"], b["of_those_below_biased_dfil_bound"], cell(b["below_biased_dfil_bound"]),
            cell(b["below_biased_fil_bound"]), cell(b["below_biased_rdp_bound"])))
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=10000, help="noise draws of the attack (paper: 10000)")
    parser.add_argument("--datasets", default="mnist,fashion-mnist")
    parser.add_argument("--parts", default="a,b", help="a: the bounds at sigma = 1e-2 (its first run always, for "
                        "(b)'s choice of examples); b: the attack at sigma = 1e-5")
    args = parser.parse_args()
    parts = args.parts.split(",")
    out = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "reconstruction_output_perturbation")
    os.makedirs(out, exist_ok=True)
    results = {dataset: experiment(dataset, args.trials, out, parts) for dataset in args.datasets.split(",")}
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump({"paper_mnist": PAPER, "results": results}, f, indent=2)
    table = markdown(results, args.trials)
    with open(os.path.join(out, "summary.md"), "w") as f:
        f.write(table)
    print(table)
    print("wrote " + out, file=sys.stderr)


if __name__ == "__main__":
    main()
