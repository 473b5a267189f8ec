#!/usr/bin/env python3
"""Why fim's mean dFIL is not monotone in lambda (figure 3.2, experiments/README.md): each committed
run's mean dFIL set beside the two things that decide a released vector's sensitivity, read from the
run's own per-step norms (`vector_norms_per_step`, the private batch's means):

- the clip factor f(||g + c||) = 1 / (GELU(||g + c|| / C - 1) + 1) of the smooth clip
  (docs/mathematics.md, section 7.2), which scales the Jacobian of every direction across r
  (p - 1 of its p directions). ||g + c|| is the root u of u f(u) = ||r|| (the released norm) on the
  side of the clipped norm's peak (1.5489 C) where sqrt(||g||^2 + ||c||^2) lies;
- the private examples' gradient norm ||g|| (on the released coordinates), the trained model's
  part: a model that fits its private examples more sharply has smaller gradients and smaller
  Jacobians.

The proxy is the root mean square over the private steps of f * ||g||; if dFIL's changes across
lambda come from these two alone, mean dFIL / proxy is the same for every run. Nothing is run: the
inputs are the committed JSONs of figure 3.2 (fim at lambda 0, 10, 100, 10,000) and table 3.1's fim
(lambda 1000), at filkit's defaults and at the thesis' code (`-thesis-code`), whichever exist.

Usage: experiments/fim_dfil_decomposition.py [--check]
Writes experiments/results/fim/fig32/dfil-decomposition.json and .csv (together, atomically; the
.csv is the JSON's runs, 6 digits); with --check, only compares the JSON with what the committed runs
give (numbers to 1e-9) and fails on a difference.
"""
import argparse
import csv
import glob
import io
import json
import math
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(ROOT, "build", "python"))  # after PYTHONPATH: a test names its build's
from filkit.torch.functional import soft_clip_factor  # noqa: E402  (the one definition of the clip)
sys.path.insert(0, os.path.join(ROOT, "experiments"))
from reproduction import write_together  # noqa: E402

RESULTS = os.path.join(ROOT, "experiments", "results", "fim")
OUT = os.path.join(RESULTS, "fig32", "dfil-decomposition")
CLIPPED_NORM_PEAK = 1.5489  # u f(u) is largest at u = 1.5489 C (docs/mathematics.md, section 7.2)
VARIANTS = {"defaults": "", "thesis-code": "-thesis-code"}
LAMBDAS = (0.0, 10.0, 100.0, 1000.0, 10000.0)


def run_files(lam, suffix):
    """The committed runs of fim at `lam`: figure 3.2's directories, table 3.1's for lambda 1000."""
    if lam == 1000.0:
        pattern = os.path.join(RESULTS, "table31", "table31", f"seed?-fim{suffix}.json")
    else:
        pattern = os.path.join(RESULTS, "fig32", f"lambda={lam}", f"seed?-fim{suffix}.json")
    return sorted(glob.glob(pattern))


def unclipped_norm(released, guess, clip_norm):
    """The root u of u f(u) = released on the side of the peak where `guess` lies (bisection)."""
    peak = CLIPPED_NORM_PEAK * clip_norm
    rising = guess < peak
    lo, hi = (0.0, peak) if rising else (peak, 1e3 * clip_norm)
    ends = sorted(u * soft_clip_factor(u, clip_norm) for u in (lo, hi))
    if not ends[0] <= released <= ends[1]:  # beyond the peak u f(u) falls towards C, never below
        raise ValueError(f"a released norm of {released} has no unclipped norm on the side of {guess} "
                         f"(there u f(u) spans {ends[0]:.6g} to {ends[1]:.6g})")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if (mid * soft_clip_factor(mid, clip_norm) < released) == rising:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def decompose(path):
    summary = json.load(open(path))
    fim = next(m for m in summary["methods"] if m["method"] == "fim")
    clip_norm = float(summary["settings"]["clip_norm"])
    norms = fim["vector_norms_per_step"][0]  # the file's one run
    factors, products = [], []
    for base, perturbation, released in zip(norms["base"], norms["perturbation"], norms["released"]):
        u = unclipped_norm(released, math.hypot(base, perturbation), clip_norm)
        factors.append(soft_clip_factor(u, clip_norm))
        products.append(factors[-1] * base)
    rms = lambda xs: math.sqrt(statistics.fmean(x * x for x in xs))  # noqa: E731
    proxy = rms(products)
    return {"file": os.path.relpath(path, ROOT), "seed": summary["seed"],
            "mean_dfil": fim["mean_dfil"]["mean"], "median_dfil": fim["median_dfil"]["mean"],
            "test_accuracy": fim["test_accuracy"]["mean"],
            "mean_perturbation_norm": statistics.fmean(norms["perturbation"]),
            "clip_factor": statistics.fmean(factors), "gradient_norm_rms": rms(norms["base"]),
            "proxy": proxy, "mean_dfil_over_proxy": fim["mean_dfil"]["mean"] / proxy}


def build():
    rows = []
    for variant, suffix in VARIANTS.items():
        for lam in LAMBDAS:
            for path in run_files(lam, suffix):
                rows.append({"variant": variant, "lambda": lam, **decompose(path)})
    ratios = {}
    for variant in VARIANTS:
        r = [row["mean_dfil_over_proxy"] for row in rows if row["variant"] == variant]
        if r:
            mean = statistics.fmean(r)
            ratios[variant] = {"runs": len(r), "min": min(r), "max": max(r), "mean": mean,
                               "max_relative_deviation": max(abs(x / mean - 1) for x in r)}
    document = {"about": __doc__.split("\n\n")[0].replace("\n", " "), "script": "experiments/fim_dfil_decomposition.py",
                "mean_dfil_over_proxy": ratios, "runs": rows}
    text = json.dumps(document, indent=1) + "\n"
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=list(rows[0]) if rows else ["variant"], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    return text, table.getvalue()


def same(a, b):
    """Equal structure and text, numbers to 1e-9 relative (another libm may round tanh differently)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-9)
    return a == b


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the committed outputs with the runs'")
    args = parser.parse_args()
    text, table = build()
    outputs = {OUT + ".json": text, OUT + ".csv": table}
    if args.check:
        path = OUT + ".json"
        committed = json.load(open(path)) if os.path.exists(path) else None
        if committed is None or not same(committed, json.loads(text)):
            sys.exit(f"stale: {os.path.relpath(path, ROOT)} and its .csv are not what the committed runs give "
                     "(rerun experiments/fim_dfil_decomposition.py)")
        return
    write_together(outputs)
    for variant, r in json.loads(text)["mean_dfil_over_proxy"].items():
        print(f"{variant}: mean dFIL / proxy over {r['runs']} runs {r['mean']:.5f}, "
              f"{r['min']:.5f} to {r['max']:.5f} (at most {100 * r['max_relative_deviation']:.1f} % off)")


if __name__ == "__main__":
    main()
