#!/usr/bin/python3
"""The thesis' (Edmunds 2024) figure 3.3: target images and their reconstructions by the learned
attack, per method, from the built `filkit` (issue 52, "Reproductions anyone can verify"). The
tables of the thesis are fim_tables.py's and `filkit learned-attack`'s (experiments/README.md).

  experiments/thesis/reproduce.py run [figure33]    run filkit and write the committed results
  experiments/thesis/reproduce.py draw [figure33]   redraw the PNG from the committed results alone

figure33: the table 3.5 attacks of sgd, dpsgd and prune (500 + 100 shadow models, seed 0, table B.3's
attacker weight decay: 0.01 for sgd and dpsgd, 0.1 for prune; the runs whose per-target CSVs are
committed as experiments/results/learned-attack/table35-<method>-500+100-decay<d>.csv), each asked
for its summary, which holds the first 8 targets' reconstructions. `run` is resumable: it is skipped
when the committed CSV exists, and a scratch summary that exists is not recomputed. Times on one
shared core: 21 s (sgd), 56 s (dpsgd), 42 s (prune). Scratch outputs go under
${FILKIT_OUT:-/tmp/filkit-experiments}/thesis/.

Committed: experiments/results/learned-attack/figure33-reconstructions.csv, a row per (target, image):
the target, the class-mean baseline and each method's reconstruction, with the MSE against the target
and the pixels clipped to [0, 1] as 784 hex bytes. The PNG is written beside this script.
"""
import csv
import io
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from reproduction import FILKIT, ROOT, TERMINAL, command_line, gnuplot, load, rel, write_atomically  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(ROOT, "experiments", "results", "learned-attack")
SCRATCH = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "thesis")
FIGURE33 = os.path.join(RESULTS, "figure33-reconstructions.csv")
# (method, table B.3's attacker weight decay): the committed table 3.5 runs.
METHODS = [("sgd", "0.01"), ("dpsgd", "0.01"), ("prune", "0.1")]
ARTEFACTS = ["figure33"]


def attack_summary(method, decay):
    """The summary of a committed table 3.5 run, recomputed into the scratch folder (resumable)."""
    name = f"table35-{method}-500+100-decay{decay}"
    summary = os.path.join(SCRATCH, name + ".json")
    if not os.path.exists(summary):
        os.makedirs(SCRATCH, exist_ok=True)
        command = [FILKIT, "learned-attack", "--methods", method, "--train-shadow-models", "500",
                   "--target-shadow-models", "100", "--threads", "1", "--seed", "0", "--attacker-weight-decay", decay,
                   "--shadow-models", os.path.join(SCRATCH, "shadow"), "--json", summary,
                   "--out", os.path.join(SCRATCH, name + ".csv"), "--quiet"]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=True)
    return load(summary)


def run_figure33():
    if os.path.exists(FIGURE33):
        print(f"figure33: {rel(FIGURE33)} exists (delete it to rerun)")
        return
    images = {}  # (target, kind) -> (label, pixels)
    for method, decay in METHODS:
        reconstructions = attack_summary(method, decay)["reconstructions"]
        for row in reconstructions["rows"]:
            kind = {-2: "target", -1: "class-mean"}.get(int(row["method"]), method)
            images[(int(row["target"]), kind)] = (int(row["label"]), np.asarray(row["pixels"], dtype=float))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["target", "label", "image", "mse", "pixels_hex"])
    for target in sorted({t for t, _ in images}):
        label, original = images[(target, "target")]
        for kind in ["target", "class-mean"] + [m for m, _ in METHODS]:
            _, pixels = images[(target, kind)]
            mse = float(np.mean((pixels - original) ** 2))
            hex_pixels = np.round(np.clip(pixels, 0.0, 1.0) * 255).astype(np.uint8).tobytes().hex()
            writer.writerow([target, label, kind, f"{mse:.4g}", hex_pixels])
    write_atomically(FIGURE33, out.getvalue())
    print(f"  wrote {rel(FIGURE33)}")


def draw_figure33(folder):
    with open(FIGURE33, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    kinds = list(dict.fromkeys(r["image"] for r in rows))
    targets = list(dict.fromkeys(r["target"] for r in rows))
    cell_w, cell_h = 0.9 / len(targets), 0.9 / len(kinds)
    script = TERMINAL.format(w=110 * len(targets) + 110, h=115 * len(kinds) + 40) + (
        "unset key\nunset tics\nunset border\nunset colorbox\nset palette gray\nset cbrange [0:255]\n"
        "set size ratio -1\nset lmargin 0.3\nset rmargin 0.3\nset bmargin 0.2\nset tmargin 1.1\nset multiplot\n")
    for line, kind in enumerate(kinds):
        y = 0.93 - (line + 1) * cell_h
        script += f"set label {line + 1} '{kind}' at screen 0.005, screen {y + cell_h / 2:.4f} font ',10'\n"
    for k, r in enumerate(rows):
        column, line = targets.index(r["target"]), kinds.index(r["image"])
        pixels = np.frombuffer(bytes.fromhex(r["pixels_hex"]), np.uint8).reshape(28, 28)
        dat = os.path.join(folder, f"im-{k}.dat")
        np.savetxt(dat, pixels[::-1], fmt="%d")
        title = f"#{r['target']} (label {r['label']})" if r["image"] == "target" else f"MSE {float(r['mse']):.3f}"
        script += (f"set origin {0.1 + column * cell_w:.4f},{0.93 - (line + 1) * cell_h:.4f}\n"
                   f"set size {cell_w:.4f},{cell_h:.4f}\nset title '{title}' offset 0,-0.7 font ',8'\n"
                   f"plot '{dat}' matrix with image\n")
        if k == 0:
            script += "unset label\n"
    gnuplot(script + "unset multiplot\n", os.path.join(HERE, "figure33.png"), folder)


def main():
    action, artefacts = command_line(__doc__, ARTEFACTS)
    if action == "run":
        run_figure33()
        return 0
    with tempfile.TemporaryDirectory() as folder:
        draw_figure33(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
