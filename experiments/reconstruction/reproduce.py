#!/usr/bin/python3
"""The reconstruction paper's (Guo, Karrer, Chaudhuri, van der Maaten 2022) section 7.1 and 7.2
output-perturbation experiments, MNIST 0 vs 1: figures 2, 3 and 4, from the built `filkit` (issue 52,
"Reproductions anyone can verify").

  experiments/reconstruction/reproduce.py run [ARTEFACT ...]    run filkit and write the committed results
  experiments/reconstruction/reproduce.py draw [ARTEFACT ...]   redraw the PNGs from the committed results alone

ARTEFACT: figure2, figure3, figure4, figure5 (default: all; figures 3 and 4 share one attack run). `run` is
resumable: an artefact whose committed results all exist is skipped (delete them to rerun it), and a
filkit run whose scratch outputs exist with the same command line is not repeated. Times on one
shared core (nice, load about 4): a `filkit bound` run 5-13 s (figure 2's 11 runs 75 s); the attack
(`filkit reconstruct`, 10,000 noise draws) about 1 minute. Scratch outputs (per-example CSVs) go under ${FILKIT_OUT:-/tmp/filkit-experiments}/reconstruction/.

The setting is the paper's released code's (github.com/facebookresearch/bounding_data_reconstruction):
MNIST 0 vs 1 loaded with normalize=False, i.e. pixels / 255 and no row scaling or PCA (d = 784),
logistic regression with L2 penalty (n lambda / 2)||w||^2, lambda = 1e-2, labels public.
  figure 2: mnist_logistic_regression.py: no intercept, sigma = 1e-2, 10 trials (each a fresh fit and
      a fresh noise draw; dFIL does not depend on the draw), histogram of log10 of 1/eta_bar^2 in 100
      bins, the RDP bound 1/(4(e^eps - 1)) with eps = 4/(n lambda sigma)^2. filkit: `bound
      --no-intercept`, seeds 0-9. Also the attack's model (with its regularised intercept) at sigma = 1e-2.
  figures 3, 4: mnist_logistic_reconstruction.py: a regularised intercept (a column of ones),
      sigma = 1e-5, the GLM attack of Balle et al. 2022 over 10,000 noise draws, per example the mean
      MSE over the draws against 1/eta_bar^2; figure 4 the mean reconstructions of the 8 examples with
      the highest and the 8 with the lowest dFIL. filkit: `reconstruct`, seed 0; the examples of
      figure 4 are chosen from the figure-2 run with the intercept (dFIL's order does not depend on sigma).

Committed, under experiments/results/reconstruction/ (every summary with its command line in <file>.flags;
the per-example arrays are dropped from the summaries):
  figure2/bound-no-intercept-seed<S>.json   `filkit bound` summaries, the code's histogram model
  figure2/bound-intercept.json              `filkit bound` summary, the attack's model at sigma = 1e-2
  figure2/histogram.csv                     per variant, the code's 100 bins of log10 dFIL bound
  figure2/figure2.json                      the statistics the comparison page checks the claims on
  attack/reconstruct.json                   `filkit reconstruct` summary (10,000 draws)
  attack/scatter.csv                        per example: index, dFIL bound and attack MSE (4 digits)
  attack/reconstructions.csv                figure 4's originals and mean reconstructions (pixels
                                            clipped to [0, 1] as the code's imshow, as 784 hex bytes)
  attack/attack.json                        the statistics the comparison page checks the claims on
  figure5-reduced/mnist_n10000_B200_T500_seed0/
                                            figure 5 (section 7.3) on a reduced grid: the MNIST ConvNet,
                                            dpsgd_networks_grid.py's 7 (sigma, C, rho) settings, 10,000
                                            training and 2,000 test images, B = 200, T = 500 (points also
                                            after epochs 1, 2, 4, 6, 8), 1 run; each setting's `filkit dpsgd` summary
                                            (its per-example table, 4 MB, is not committed), results.json
                                            (the points, Pareto fronts and crossing accuracies) and the
                                            montage; about 7 minutes on one shared core
The PNGs are written beside this script.
"""

import csv
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from reproduction import FILKIT, ROOT, TERMINAL, command_line, gnuplot, load, rel, write_atomically  # noqa: E402

RESULTS = os.path.join(ROOT, "experiments", "results", "reconstruction")
SCRATCH = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "reconstruction")

MNIST_01 = ["--data", "mnist", "--classes", "0,1", "--pca", "0", "--row-scaling", "none", "--scale-pixels", "on",
            "--model", "logistic", "--l2", "1e-2"]
BOUND_SIGMA = "1e-2"      # section 7.1
ATTACK_SIGMA = "1e-5"     # section 7.2
ATTACK_TRIALS = 10000     # section 7.2: "We repeat this process 10,000 times"
HISTOGRAM_SEEDS = range(10)  # mnist_logistic_regression.py: --num_trials 10
HISTOGRAM_BINS = 100      # mnist_logistic_regression.py: plt.hist(np.log10(fil_bound), bins=100)
EXTREME_IMAGES = 8        # figure 4: "only the top- and bottom-8 are shown"
PERFECT_PRIVACY_MSE = 1.0  # the paper's line: "MSE <= 1 can be achieved by simply guessing"
ARTEFACTS = ("figure2", "figure3", "figure4", "figure5")
# Figure 5 on the reduced grid dpsgd_networks_grid.py runs by default (its own documentation says why
# the paper's grid, 108 settings of 10 runs on 60,000 images, is a job for many machines).
FIGURE5_GRID = [os.path.join(ROOT, "experiments", "dpsgd_networks_grid.py"), "--datasets", "mnist", "--jobs", "1",
                "--threads", "1", "--out-root", os.path.join(RESULTS, "figure5-reduced")]
FIGURE5_FOLDER = os.path.join(RESULTS, "figure5-reduced", "mnist_n10000_B200_T500_seed0")


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def number(cell):
    """A CSV cell of filkit's: empty where the value is not a finite number."""
    return float(cell) if cell else math.nan


# ---- runs -----------------------------------------------------------------------------------------

def filkit(args, name, committed_summary):
    """Runs filkit with per-example CSV and summary in SCRATCH/<name>.{csv,json} (reused when they exist
    with the same command line) and commits the summary as `committed_summary` without per-example arrays."""
    os.makedirs(SCRATCH, exist_ok=True)
    scratch = os.path.join(SCRATCH, name)
    args = args + ["--threads", "1", "--quiet", "--out", scratch + ".csv", "--json", scratch + ".json"]
    flags = " ".join(a.replace(SCRATCH, "${FILKIT_OUT}/reconstruction") if a.startswith(SCRATCH) else shlex.quote(a)
                     for a in args) + "\n"
    done = os.path.join(SCRATCH, name + ".flags")
    if os.path.exists(done) and open(done, encoding="utf-8").read() == flags and os.path.exists(scratch + ".json"):
        print(f"  reusing {scratch}.json")
    else:
        print("  " + " ".join(shlex.quote(a) for a in [FILKIT] + args), flush=True)
        subprocess.run([FILKIT] + args, check=True)
        write_atomically(done, flags)
    doc = load(scratch + ".json")
    n = doc["n"]
    small = {k: v for k, v in doc.items() if not (isinstance(v, list) and len(v) == n)}
    write_atomically(committed_summary, json.dumps(small, indent=1, sort_keys=True) + "\n")
    write_atomically(committed_summary + ".flags", flags)
    return doc, read_csv(scratch + ".csv")


def bound_intercept():
    return filkit(["bound"] + MNIST_01 + ["--intercept", "--sigma", BOUND_SIGMA, "--seed", "0"], "bound-intercept",
                  os.path.join(RESULTS, "figure2", "bound-intercept.json"))


def histogram(bounds):
    counts, edges = np.histogram(np.log10(bounds), bins=HISTOGRAM_BINS)
    return [(lo, hi, k) for lo, hi, k in zip(edges, edges[1:], counts)]


def fmt(x):
    return f"{x:.6g}"


def run_figure2():
    folder = os.path.join(RESULTS, "figure2")
    outputs = [os.path.join(folder, f) for f in ("histogram.csv", "figure2.json", "bound-intercept.json")]
    outputs += [os.path.join(folder, f"bound-no-intercept-seed{s}.json") for s in HISTOGRAM_SEEDS]
    if all(os.path.exists(p) for p in outputs):
        print(f"  exists: {rel(folder)}/")
        return
    variants = {}
    for seed in HISTOGRAM_SEEDS:
        doc, rows = filkit(["bound"] + MNIST_01 + ["--no-intercept", "--sigma", BOUND_SIGMA, "--seed", str(seed)],
                           f"bound-no-intercept-seed{seed}", os.path.join(folder, f"bound-no-intercept-seed{seed}.json"))
        bounds = np.array([number(r["dfil_bound"]) for r in rows])
        if seed == HISTOGRAM_SEEDS[0]:
            variants["no-intercept"] = (doc, bounds)
        elif not np.array_equal(bounds, variants["no-intercept"][1]):  # the fit and dFIL do not depend on the seed
            raise SystemExit(f"reproduce.py: seed {seed}'s dFIL bounds differ from seed 0's")
    doc, rows = bound_intercept()
    variants["intercept"] = (doc, np.array([number(r["dfil_bound"]) for r in rows]))
    lines = ["variant,log10_bound_low,log10_bound_high,count"]
    stats = {"perfect_privacy_mse": PERFECT_PRIVACY_MSE}
    for variant, (doc, bounds) in variants.items():
        lines += [f"{variant},{fmt(lo)},{fmt(hi)},{k}" for lo, hi, k in histogram(bounds)]
        stats[variant] = {
            "examples": int(len(bounds)),
            "rdp_mse_bound": doc["rdp"]["mse_bound"],
            "min_dfil_bound": float(bounds.min()),
            "median_dfil_bound": float(np.median(bounds)),
            "max_dfil_bound": float(bounds.max()),
            "decades_spanned": float(np.log10(bounds.max() / bounds.min())),
            "examples_below_perfect_privacy": int((bounds < PERFECT_PRIVACY_MSE).sum()),
        }
    write_atomically(os.path.join(folder, "histogram.csv"), "\n".join(lines) + "\n")
    write_atomically(os.path.join(folder, "figure2.json"), json.dumps(stats, indent=1, sort_keys=True) + "\n")
    print(f"  wrote {rel(folder)}/")


def extremes(rows):
    """The examples with the highest and the lowest dFIL (the smallest and largest bounds), each in
    decreasing order of dFIL, as figure 4 sorts them."""
    order = sorted(range(len(rows)), key=lambda i: (number(rows[i]["dfil_bound"]), i))
    return [int(rows[i]["index"]) for i in order[:EXTREME_IMAGES]], [int(rows[i]["index"]) for i in order[-EXTREME_IMAGES:]]


def pearson_log10(bound, mse, where):
    return float(np.corrcoef(np.log10(bound[where]), np.log10(mse[where]))[0, 1])


def run_attack():
    folder = os.path.join(RESULTS, "attack")
    outputs = [os.path.join(folder, f) for f in ("reconstruct.json", "scatter.csv", "reconstructions.csv", "attack.json")]
    if all(os.path.exists(p) for p in outputs):
        print(f"  exists: {rel(folder)}/")
        return
    highest, lowest = extremes(bound_intercept()[1])
    saved = os.path.join(SCRATCH, "reconstruct-reconstructions.csv")
    doc, rows = filkit(["reconstruct"] + MNIST_01 + ["--intercept", "--sigma", ATTACK_SIGMA, "--trials",
                       str(ATTACK_TRIALS), "--seed", "0", "--save-reconstructions", ",".join(map(str, highest + lowest)),
                       "--reconstructions-out", saved], "reconstruct", os.path.join(folder, "reconstruct.json"))
    bound = np.array([number(r["dfil_bound"]) for r in rows])
    mse = np.array([number(r["attack_mse"]) for r in rows])
    if extremes(rows) != (highest, lowest):
        raise SystemExit("reproduce.py: the attack run's dFIL order of the extremes differs from the bound run's")
    lines = ["index,dfil_bound,attack_mse"] + [f"{r['index']},{number(r['dfil_bound']):.4g},{number(r['attack_mse']):.4g}"
                                               for r in rows]
    write_atomically(os.path.join(folder, "scatter.csv"), "\n".join(lines) + "\n")
    # Figure 4: originals and mean reconstructions, clipped to [0, 1] as the code's .clamp(0, 1), as bytes.
    images = {}
    for r in read_csv(saved):
        pixels = np.array([number(r[f"x{j}"]) for j in range(784)])
        images[(int(r["index"]), int(r["kind"]))] = np.nan_to_num(pixels, nan=0.0)
    by_index = {int(r["index"]): r for r in rows}
    lines = ["which,rank,index,label,dfil_bound,attack_mse,original_hex,reconstruction_hex"]
    for which, picked in (("highest", highest), ("lowest", lowest)):
        for rank, i in enumerate(picked):
            hexes = [np.round(255 * np.clip(images[(i, kind)], 0, 1)).astype(np.uint8).tobytes().hex() for kind in (0, 1)]
            r = by_index[i]
            lines.append(f"{which},{rank + 1},{i},{r['label']},{number(r['dfil_bound']):.6g},"
                         f"{number(r['attack_mse']):.6g},{hexes[0]},{hexes[1]}")
    write_atomically(os.path.join(folder, "reconstructions.csv"), "\n".join(lines) + "\n")
    finite = np.isfinite(mse)
    below_line = finite & (bound < PERFECT_PRIVACY_MSE)
    holds = mse > bound  # the code's colouring: blue where 1/eta_bar^2 < MSE, red otherwise
    stats = {
        "perfect_privacy_mse": PERFECT_PRIVACY_MSE,
        "examples": int(len(rows)),
        "examples_with_finite_mse": int(finite.sum()),
        "share_mse_above_dfil_bound": float(holds[finite].mean()),
        "share_mse_at_or_below_dfil_bound": float(1 - holds[finite].mean()),
        "examples_mse_at_or_below_dfil_bound": int((finite & ~holds).sum()),
        "examples_with_bound_below_perfect_privacy": int(below_line.sum()),
        "examples_mse_at_or_below_dfil_bound_where_bound_below_perfect_privacy": int((below_line & ~holds).sum()),
        "min_log10_mse_over_bound_where_bound_below_perfect_privacy":
            float(np.log10(mse[below_line] / bound[below_line]).min()),
        "min_log10_mse_over_bound": float(np.log10(mse[finite] / bound[finite]).min()),
        "pearson_log10_bound_log10_mse": pearson_log10(bound, mse, finite),
        "pearson_log10_bound_log10_mse_smallest_quarter_of_bounds":
            pearson_log10(bound, mse, finite & (bound <= np.quantile(bound[finite], 0.25))),
        "max_bound_of_a_violation": float(bound[finite & ~holds].max()) if (finite & ~holds).any() else None,
        "min_bound_of_a_violation": float(bound[finite & ~holds].min()) if (finite & ~holds).any() else None,
        "highest_dfil_max_mse": max(number(by_index[i]["attack_mse"]) for i in highest),
        "lowest_dfil_min_mse": min(number(by_index[i]["attack_mse"]) for i in lowest),
        "epsilon": doc["rdp"]["epsilon"],
        "seconds": doc["seconds"],
    }
    write_atomically(os.path.join(folder, "attack.json"), json.dumps(stats, indent=1, sort_keys=True) + "\n")
    print(f"  wrote {rel(folder)}/")


# ---- figures --------------------------------------------------------------------------------------

def draw_figure2(folder):
    rows = read_csv(os.path.join(RESULTS, "figure2", "histogram.csv"))
    stats = load(os.path.join(RESULTS, "figure2", "figure2.json"))
    script = TERMINAL.format(w=1000, h=420) + ("set multiplot layout 1,2\nset style fill solid 1.0 border rgb 'black'\n"
                                               "set grid lc rgb '#dddddd'\nset xlabel 'MSE lower bound'\n"
                                               "set ylabel 'Count'\nset key top right opaque box\nset xrange [-2:11]\n"
                                               "set xtics ('10^{-1}' -1, '10^{1}' 1, '10^{3}' 3, '10^{5}' 5, "
                                               "'10^{7}' 7, '10^{9}' 9)\n")
    titles = {"no-intercept": "(a) the code\\'s model (no intercept)", "intercept": "(b) with the attack\\'s intercept"}
    for variant in ("no-intercept", "intercept"):
        dat = os.path.join(folder, f"hist-{variant}.dat")
        with open(dat, "w", encoding="utf-8") as f:
            for r in rows:
                if r["variant"] == variant:
                    f.write(f"{r['log10_bound_low']} {r['log10_bound_high']} {r['count']}\n")
        rdp = math.log10(stats[variant]["rdp_mse_bound"])
        # the vertical lines are arrows; the two NaN curves only name them in the key
        script += (f"set title \"{titles[variant]}, MNIST 0 vs 1, {{/Symbol l}} = {{/Symbol s}} = 10^{{-2}}\"\n"
                   f"set arrow 1 from {rdp}, graph 0 to {rdp}, graph 1 nohead dt 2 lw 2\n"
                   "set arrow 2 from 0, graph 0 to 0, graph 1 nohead dt 3 lw 2\n"
                   f"plot '{dat}' using (($1+$2)/2):3:($2-$1) with boxes lc rgb '#c0c0c0' title 'dFIL bound', "
                   "NaN with lines lc rgb 'black' dt 2 lw 2 title 'RDP bound', "
                   "NaN with lines lc rgb 'black' dt 3 lw 2 title 'perfect privacy (MSE = 1)'\n")
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure2.png"), folder)


def draw_figure3(folder):
    rows = read_csv(os.path.join(RESULTS, "attack", "scatter.csv"))
    above, below = (os.path.join(folder, f"scatter-{k}.dat") for k in ("above", "below"))
    with open(above, "w", encoding="utf-8") as a, open(below, "w", encoding="utf-8") as b:
        for r in rows:
            bound, mse = float(r["dfil_bound"]), float(r["attack_mse"])
            if math.isfinite(mse):
                (a if mse > bound else b).write(f"{bound!r} {mse!r}\n")
    script = TERMINAL.format(w=640, h=440) + (
        "set logscale xy\nset format x '10^{%T}'\nset format y '10^{%T}'\nset grid lc rgb '#dddddd'\n"
        "set xlabel 'Predicted MSE (dFIL bound 1/{/Symbol h}@^{\\_}^2)'\nset ylabel 'Recons. attack MSE'\n"
        "set key bottom right\nset title 'MNIST 0 vs 1, {/Symbol l} = 10^{-2}, {/Symbol s} = 10^{-5}, 10,000 draws'\n"
        "set arrow from 1, graph 0 to 1, graph 1 nohead dt 3 lw 2\n"
        f"plot '{above}' using 1:2 with points pt 7 ps 0.25 lc rgb '#1f77b4' title 'MSE above its bound', "
        f"'{below}' using 1:2 with points pt 7 ps 0.4 lc rgb '#cd5c5c' title 'MSE at or below its bound', "
        "[1e-6:1e5] x with lines lw 2 lc rgb 'black' title 'Lower bound'\n")
    gnuplot(script, os.path.join(HERE, "figure3.png"), folder)


def draw_figure4(folder):
    rows = read_csv(os.path.join(RESULTS, "attack", "reconstructions.csv"))
    script = TERMINAL.format(w=1300, h=260) + ("unset key\nunset tics\nunset border\nunset colorbox\n"
                                               "set palette gray\nset cbrange [0:255]\nset size ratio -1\n"
                                               "set lmargin 0.5\nset rmargin 0.5\nset bmargin 0.2\nset tmargin 1.3\n"
                                               "set multiplot\n")
    cell_w, cell_h = 1.0 / (2 * EXTREME_IMAGES), 0.42
    script += ("set label 100 'the 8 highest dFIL (left) and the 8 lowest (right), in decreasing order of dFIL; "
               "top: training samples, bottom: mean GLM-attack reconstructions (attack MSE above each)' "
               "at screen 0.01, screen 0.97\n")
    for k, r in enumerate(rows):
        for line, column in enumerate(("original_hex", "reconstruction_hex")):
            pixels = np.frombuffer(bytes.fromhex(r[column]), np.uint8).reshape(28, 28)
            dat = os.path.join(folder, f"im-{k}-{line}.dat")
            np.savetxt(dat, pixels[::-1], fmt="%d")
            title = f"{float(r['attack_mse']):.1e}" if line == 1 else f"#{r['index']}"
            script += (f"set origin {k * cell_w:.4f},{0.5 - line * (cell_h + 0.02):.4f}\n"
                       f"set size {cell_w:.4f},{cell_h:.4f}\nset title '{title}' offset 0,-0.6 font ',8'\n"
                       f"plot '{dat}' matrix with image\nunset label 100\n")
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure4.png"), folder)


def run_figure5():
    """The grid's runs (resumable: a setting whose summary exists is not rerun), then its figure."""
    subprocess.run([sys.executable] + FIGURE5_GRID + ["--binary", FILKIT], check=True)


def draw_figure5(folder):
    """The grid script redraws from the committed summaries alone (every run exists, so none is rerun;
    the montage, which needs a per-example table, is left as committed), then the PNG beside this script."""
    del folder  # the grid script draws in its own folder
    subprocess.run([sys.executable] + FIGURE5_GRID + ["--binary", FILKIT], check=True)
    temporary = os.path.join(HERE, "figure5.png.tmp")
    shutil.copyfile(os.path.join(FIGURE5_FOLDER, "figure5.png"), temporary)
    os.replace(temporary, os.path.join(HERE, "figure5.png"))


DRAW = {"figure2": draw_figure2, "figure3": draw_figure3, "figure4": draw_figure4, "figure5": draw_figure5}


def main():
    action, artefacts = command_line(__doc__, ARTEFACTS)
    if action == "run":
        if "figure2" in artefacts:
            print("figure2", flush=True)
            run_figure2()
        if {"figure3", "figure4"} & set(artefacts):  # one attack run for both
            print("figure3, figure4", flush=True)
            run_attack()
        if "figure5" in artefacts:
            print("figure5", flush=True)
            run_figure5()
        return 0
    with tempfile.TemporaryDirectory() as folder:
        for artefact in artefacts:
            DRAW[artefact](folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
