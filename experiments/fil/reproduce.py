#!/usr/bin/python3
"""The FIL paper's (Hannun, Guo, van der Maaten 2021) Table 1 and figures 2-5, MNIST 0 vs 1, from the
built `filkit` (issue 52, "Reproductions anyone can verify").

  experiments/fil/reproduce.py run [ARTEFACT ...]    run filkit and write the committed results
  experiments/fil/reproduce.py draw [ARTEFACT ...]   redraw the PNGs from the committed results alone

ARTEFACT: table1, figure2, figure3, figure4, figure5 (default: all). `run` is resumable: an artefact
whose committed results all exist is skipped (delete them to rerun it). Each filkit run takes well
under a second (measure) or about 3 s (irfil, 16 fits) on one core; `run` also writes a copy of
MNIST 0 vs 1 (92 MB) outside the repository, under ${FILKIT_OUT:-/tmp/filkit-experiments}/fil/.

Committed, under experiments/results/fil/ (every summary with the command line that wrote it in
<file>.flags):
  table1/irfil-<model>-<scaling>.json  `filkit irfil` summaries, 15 reweighting iterations (the paper's
        scripts/run_experiments.sh); the per-example arrays (eta_before, eta_after, final_weights) are
        dropped to keep them small. <scaling>: `per-split-max` scales the test split by its own largest
        row norm, as the paper's code (dataloading.load_dataset normalises each split it loads);
        `global-max` by the training split's, as filkit's --row-scaling global-max.
  figures/measure-<model>.json        `filkit measure` summaries (linear: least squares, lambda 0;
        logistic: lambda 8e-4; the paper's scripts)
  figures/figure2_histograms.csv      per model and class, 80 bins over the class's eta range (the
        paper's code: plt.hist(..., bins=80) per class)
  figures/figure3_images.csv          per model the eight largest and smallest eta training images
        (pixels as 784 hex bytes)
  figures/figure4_sample.csv          eta, loss and gradient norm of the linear model for the paper
        code's 2,000 examples (np.random.seed(2000); np.random.permutation(n)[:2000])
  figures/figures.json                the statistics the comparison page checks the paper's claims on
Figure 5 is drawn from the table1 summaries (the sd of eta per iteration). The PNGs are written
beside this script.
"""

import csv
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from reproduction import FILKIT, ROOT, TERMINAL, command_line, gnuplot, load, rel, write_atomically  # noqa: E402

RESULTS = os.path.join(ROOT, "experiments", "results", "fil")
SCRATCH = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "fil")

MODELS = {"least-squares": "0", "logistic": "8e-4"}  # lambda of the paper's scripts/run_experiments.sh
MODEL_TITLES = {"least-squares": "Linear", "logistic": "Logistic"}
IRFIL_ITERATIONS = 15  # scripts/run_experiments.sh: reweighted.py --iters 15
SCALINGS = ("per-split-max", "global-max")
MNIST_01 = ["--classes", "0,1", "--pca", "20"]
FIGURE4_SAMPLE = 2000  # the paper's scripts/make_figures.py, correlations(): seed 2000, 2,000 examples
HISTOGRAM_BINS = 80
EXTREME_IMAGES = 8
OVERLAP_TOP = (100, 500)  # the text's 100 largest; the code's eta_overlap() takes 500
ARTEFACTS = ("table1", "figure2", "figure3", "figure4", "figure5")


# ---- runs -----------------------------------------------------------------------------------------

def filkit(args, summary, committed_summary):
    """Runs filkit writing `summary`; commits it as `committed_summary` without per-example arrays."""
    os.makedirs(SCRATCH, exist_ok=True)
    command = [FILKIT] + args + ["--threads", "1", "--quiet", "--json", summary]
    print("  " + " ".join(shlex.quote(a) for a in command), flush=True)
    subprocess.run(command, check=True)
    with open(summary, encoding="utf-8") as f:
        doc = json.load(f)
    n = doc["n"]
    small = {k: v for k, v in doc.items() if not (isinstance(v, list) and len(v) == n)}
    write_atomically(committed_summary, json.dumps(small, indent=1, sort_keys=True) + "\n")
    flags = [a.replace(SCRATCH, "${FILKIT_OUT}/fil") if a.startswith(SCRATCH) else shlex.quote(a) for a in args]
    write_atomically(committed_summary + ".flags", " ".join(flags) + "\n")
    return doc


def mnist_files(summary):
    """The MNIST idx files filkit read, from a summary's `source` ("mnist train (<path>)")."""
    m = re.search(r"\((.*train-images-idx3-ubyte)\)", summary["source"])
    if not m:
        raise SystemExit(f"reproduce.py: cannot find the MNIST files in the summary's source {summary['source']!r}")
    folder = os.path.dirname(m.group(1))
    return {split: (os.path.join(folder, f"{prefix}-images-idx3-ubyte"), os.path.join(folder, f"{prefix}-labels-idx1-ubyte"))
            for split, prefix in (("train", "train"), ("test", "t10k"))}


def read_idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(raw[3])]
    return np.frombuffer(raw, np.uint8, offset=4 + 4 * len(dims)).reshape(dims)


def mnist01(files, split):
    images, labels = (read_idx(p) for p in files[split])
    keep = labels < 2
    return images[keep], labels[keep].astype(np.int64)


def per_split_npz(files):
    """MNIST 0 vs 1 with pixels /255 and each split divided by its own largest row norm (the paper's code)."""
    path = os.path.join(SCRATCH, "mnist01-per-split-max.npz")
    if not os.path.exists(path):
        arrays = {}
        for split, suffix in (("train", ""), ("test", "_test")):
            images, labels = mnist01(files, split)
            x = images.reshape(len(images), -1).astype(np.float64) / 255.0
            arrays["X" + suffix] = x / np.linalg.norm(x, axis=1).max()
            arrays["y" + suffix] = labels
        os.makedirs(SCRATCH, exist_ok=True)
        tmp = path + ".tmp.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    return path


def measure(model):
    """`filkit measure` of one model: its committed summary and the per-example CSV (outside the repository)."""
    summary = os.path.join(RESULTS, "figures", f"measure-{model}.json")
    out = os.path.join(SCRATCH, f"measure-{model}.csv")
    if not (os.path.exists(summary) and os.path.exists(out)):
        filkit(["measure", "--data", "mnist"] + MNIST_01 + ["--row-scaling", "global-max", "--model", model,
               "--l2", MODELS[model], "--out", out], os.path.join(SCRATCH, f"measure-{model}.json"), summary)
    with open(summary, encoding="utf-8") as f:
        doc = json.load(f)
    with open(out, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = {k: np.array([float(r[k]) for r in rows]) for k in ("index", "label", "eta", "loss", "gradient_norm")}
    return doc, columns


def run_table1():
    files = None
    for model in MODELS:
        for scaling in SCALINGS:
            summary = os.path.join(RESULTS, "table1", f"irfil-{model}-{scaling}.json")
            if os.path.exists(summary):
                print(f"  exists: {rel(summary)}")
                continue
            if scaling == "global-max":
                data = ["--data", "mnist", "--row-scaling", "global-max"]
            else:
                files = files or mnist_files(measure("least-squares")[0])
                data = ["--data", per_split_npz(files), "--row-scaling", "none", "--scale-pixels", "off"]
            filkit(["irfil"] + data + MNIST_01 + ["--model", model, "--l2", MODELS[model], "--iterations",
                   str(IRFIL_ITERATIONS)], os.path.join(SCRATCH, f"irfil-{model}-{scaling}.json"), summary)


def fmt(x):
    return f"{x:.6g}"


def run_figures(artefacts):
    figures = os.path.join(RESULTS, "figures")
    outputs = {"figure2": "figure2_histograms.csv", "figure3": "figure3_images.csv", "figure4": "figure4_sample.csv"}
    stats_path = os.path.join(figures, "figures.json")
    wanted = [a for a in artefacts if a in outputs]
    if all(os.path.exists(os.path.join(figures, outputs[a])) for a in wanted) and os.path.exists(stats_path):
        for a in wanted:
            print(f"  exists: {rel(os.path.join(figures, outputs[a]))}")
        return
    runs = {model: measure(model) for model in MODELS}
    stats = {"figure2": {}, "figure3": {}, "figure4": {}}
    # Figure 2: histograms of eta per class, with the class means (dashed lines) and the modes.
    lines = ["model,label,bin_low,bin_high,count"]
    for model, (_, c) in runs.items():
        stats["figure2"][model] = {}
        for label in (0, 1):
            eta = c["eta"][c["label"] == label]
            counts, edges = np.histogram(eta, bins=HISTOGRAM_BINS)
            lines += [f"{model},{label},{fmt(lo)},{fmt(hi)},{k}" for lo, hi, k in zip(edges, edges[1:], counts)]
            mode = int(np.argmax(counts))
            stats["figure2"][model][str(label)] = {"examples": int(len(eta)), "mean_eta": float(eta.mean()),
                                                   "mode_eta": float((edges[mode] + edges[mode + 1]) / 2)}
    write_atomically(os.path.join(figures, outputs["figure2"]), "\n".join(lines) + "\n")
    # Figure 3: the eight largest and smallest eta images; the overlap of the largest between the models.
    files = mnist_files(runs["least-squares"][0])
    images, labels = mnist01(files, "train")
    lines = ["model,which,rank,index,label,eta,pixels_hex"]
    for model, (_, c) in runs.items():
        order = np.argsort(-c["eta"], kind="stable")
        for which, picked in (("largest", order[:EXTREME_IMAGES]), ("smallest", order[::-1][:EXTREME_IMAGES])):
            for rank, i in enumerate(picked):
                index = int(c["index"][i])
                if labels[index] != c["label"][i]:
                    raise SystemExit(f"reproduce.py: training example {index}: filkit's label {c['label'][i]:g}, "
                                     f"MNIST's {labels[index]}: the orders differ")
                lines.append(f"{model},{which},{rank + 1},{index},{int(c['label'][i])},{fmt(c['eta'][i])},"
                             f"{images[index].tobytes().hex()}")
    largest = {m: np.argsort(-c["eta"], kind="stable") for m, (_, c) in runs.items()}
    stats["figure3"]["overlap_of_largest"] = {
        str(k): len(set(largest["least-squares"][:k]) & set(largest["logistic"][:k])) for k in OVERLAP_TOP}
    write_atomically(os.path.join(figures, outputs["figure3"]), "\n".join(lines) + "\n")
    # Figure 4: eta against the loss and the gradient norm, linear model, the paper code's 2,000 examples.
    _, c = runs["least-squares"]
    np.random.seed(FIGURE4_SAMPLE)
    sample = np.random.permutation(len(c["eta"]))[:FIGURE4_SAMPLE]
    lines = ["index,label,eta,loss,gradient_norm"]
    lines += [f"{int(c['index'][i])},{int(c['label'][i])},{fmt(c['eta'][i])},{fmt(c['loss'][i])},"
              f"{fmt(c['gradient_norm'][i])}" for i in sample]
    write_atomically(os.path.join(figures, outputs["figure4"]), "\n".join(lines) + "\n")

    def ranks(v):
        r = np.empty(len(v))
        r[np.argsort(v, kind="stable")] = np.arange(len(v))
        return r

    eta, loss, grad = c["eta"][sample], c["loss"][sample], c["gradient_norm"][sample]
    lowest_decile = np.argsort(eta, kind="stable")[:len(eta) // 10]
    stats["figure4"] = {
        "examples": int(len(sample)),
        "spearman_eta_loss": float(np.corrcoef(ranks(eta), ranks(loss))[0, 1]),
        "spearman_eta_gradient_norm": float(np.corrcoef(ranks(eta), ranks(grad))[0, 1]),
        "max_loss_of_lowest_eta_decile": float(loss[lowest_decile].max()),
        "loss_90th_percentile": float(np.percentile(loss, 90)),
        "max_loss": float(loss.max()),
    }
    write_atomically(stats_path, json.dumps(stats, indent=1, sort_keys=True) + "\n")
    for a in wanted:
        print(f"  wrote {rel(os.path.join(figures, outputs[a]))}")


# ---- figures --------------------------------------------------------------------------------------

COLOURS = {0: "#1f77b4", 1: "#ff7f0e", "least-squares": "#1f77b4", "logistic": "#d62728"}


def read_csv(name):
    with open(os.path.join(RESULTS, "figures", name), newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def draw_figure2(folder):
    rows = read_csv("figure2_histograms.csv")
    stats = load(os.path.join(RESULTS, "figures", "figures.json"))["figure2"]
    script = TERMINAL.format(w=1000, h=420) + "set multiplot layout 1,2\nset style fill transparent solid 0.5 noborder\n" \
        "set grid lc rgb '#dddddd'\nset xlabel 'per-example {/Symbol h}'\nset ylabel 'examples'\nset key top right\n"
    for panel, model in zip("ab", MODELS):
        script += f"set title '({panel}) {MODEL_TITLES[model]}, MNIST'\nunset arrow\n"
        plots = []
        for label in (0, 1):
            dat = os.path.join(folder, f"hist-{model}-{label}.dat")
            with open(dat, "w", encoding="utf-8") as f:
                for r in rows:
                    if r["model"] == model and r["label"] == str(label):
                        f.write(f"{r['bin_low']} {r['bin_high']} {r['count']}\n")
            plots.append(f"'{dat}' using (($1+$2)/2):3:($2-$1) with boxes lc rgb '{COLOURS[label]}' title 'digit {label}'")
            mean = stats[model][str(label)]["mean_eta"]
            script += (f"set arrow from {mean}, graph 0 to {mean}, graph 1 nohead dt 2 lw 2 "
                       f"lc rgb '{COLOURS[label]}'\n")
        script += "plot " + ", ".join(plots) + "\n"
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure2.png"), folder)


def draw_figure3(folder):
    rows = read_csv("figure3_images.csv")
    # white digits on black, as the paper's imshow(image, cmap='gray')
    script = TERMINAL.format(w=880, h=560) + ("unset key\nunset tics\nunset border\nunset colorbox\n"
                                               "set palette gray\nset cbrange [0:255]\nset size ratio -1\n"
                                               "set lmargin 0.5\nset rmargin 0.5\nset bmargin 0.2\nset tmargin 1.3\n"
                                               "set multiplot\n")
    cell_w, cell_h = 1.0 / EXTREME_IMAGES, 0.215
    for block, model in enumerate(MODELS):
        top = 1.0 - block * 0.5
        script += (f"set label 100 '({'ab'[block]}) {MODEL_TITLES[model]}, MNIST: the {EXTREME_IMAGES} largest (top) "
                   f"and smallest (bottom) {{/Symbol h}}' at screen 0.01, screen {top - 0.025:.3f}\n")
        for line, which in enumerate(("largest", "smallest")):
            for r in (r for r in rows if r["model"] == model and r["which"] == which):
                k = int(r["rank"]) - 1
                pixels = np.frombuffer(bytes.fromhex(r["pixels_hex"]), np.uint8).reshape(28, 28)
                dat = os.path.join(folder, f"im-{model}-{which}-{k}.dat")
                np.savetxt(dat, pixels[::-1], fmt="%d")
                y0 = top - 0.065 - (line + 1) * cell_h
                script += (f"set origin {k * cell_w:.4f},{y0:.4f}\nset size {cell_w:.4f},{cell_h:.4f}\n"
                           f"set title '{float(r['eta']):.1e}' offset 0,-0.3\n"
                           f"plot '{dat}' matrix with image\n")
                script += "unset label 100\n"
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure3.png"), folder)


def draw_figure4(folder):
    dat = os.path.join(folder, "figure4.dat")
    with open(dat, "w", encoding="utf-8") as f:
        for r in read_csv("figure4_sample.csv"):
            f.write(f"{r['eta']} {r['loss']} {r['gradient_norm']} {r['label']}\n")
    script = TERMINAL.format(w=1000, h=420) + "set multiplot layout 1,2\nset grid lc rgb '#dddddd'\nunset key\n" \
        "set ylabel 'FIL {/Symbol h}'\n"
    script += (f"set title '(a) loss, linear, MNIST, {FIGURE4_SAMPLE} examples'\nset xlabel 'loss (w^{{*T}}x - y)^2/2'\n"
               f"plot '{dat}' using 2:1 with points pt 7 ps 0.3 lc rgb '#2a6f5e'\n")
    script += (f"set title '(b) gradient norm'\nset xlabel '||{{/Symbol \\321}}_w loss||_2 at w^*'\n"
               f"plot '{dat}' using 3:1 with points pt 7 ps 0.3 lc rgb '#2a6f5e'\n")
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure4.png"), folder)


def draw_figure5(folder):
    plots = []
    for model in MODELS:
        summary = load(os.path.join(RESULTS, "table1", f"irfil-{model}-per-split-max.json"))
        dat = os.path.join(folder, f"sd-{model}.dat")
        with open(dat, "w", encoding="utf-8") as f:
            for it in summary["iterations"]:
                f.write(f"{it['iteration']} {it['eta']['std']!r}\n")
        plots.append(f"'{dat}' using 1:2 with linespoints lw 2 pt 7 lc rgb '{COLOURS[model]}' "
                     f"title '{MODEL_TITLES[model]}'")
    script = TERMINAL.format(w=520, h=440) + ("set grid lc rgb '#dddddd'\nset logscale y\nset format y '10^{%T}'\n"
                                               "set xlabel 'IRFIL iteration'\nset ylabel 'standard deviation of {/Symbol h}'\n"
                                               "set title '(a) MNIST'\nset key top right\n")
    gnuplot(script + "plot " + ", ".join(plots) + "\n", os.path.join(HERE, "figure5.png"), folder)


DRAW = {"figure2": draw_figure2, "figure3": draw_figure3, "figure4": draw_figure4, "figure5": draw_figure5}


def main():
    action, artefacts = command_line(__doc__, ARTEFACTS)
    if action == "run":
        if {"table1", "figure5"} & set(artefacts):  # figure 5 is drawn from table 1's runs
            print("table1, figure5", flush=True)
            run_table1()
        figures = [a for a in artefacts if a in ("figure2", "figure3", "figure4")]
        if figures:  # one pair of measure runs for the three
            print(", ".join(figures), flush=True)
            run_figures(figures)
        return 0
    with tempfile.TemporaryDirectory() as folder:
        for artefact in artefacts:
            if artefact == "table1":
                print("table1: no figure (experiments/compare.py writes it on experiments/fil/COMPARISON.md)")
                continue
            DRAW[artefact](folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
