#!/usr/bin/env python3
"""Why fim's accuracy at small lambda rises above sgd's (figure 3.2, experiments/README.md): fim and
prune of the same seed (the same pre-trained model, private batches and noise), their final models
written by `filkit public-training --models-out`, compared on the test set and on the private and
public parts, accuracy and cross-entropy; and the difference of the two models, delta = w_fim - w_prune,
split into its part along w_prune (a rescaling of the logits, which changes no prediction) and the
rest. Table 3.1's settings (fim_tables.py) with --lambda, --seed, and the private phase's --optimizer
and --step-size.

Usage: experiments/fim_accuracy_drift.py [--lambda 10] [--seed 2] [--optimizer adam|sgd] [--step-size 0.01]
       [--threads 2]
The runs go to ${FILKIT_OUT:-/tmp/filkit-experiments}/fim-accuracy-drift/<setting>/ (the models are a few
hundred kB, not kept in the repository); fim saves its state there every step, so a rerun resumes it,
and a run whose outputs exist is not repeated. The script prints the comparison and writes it as
summary.json beside the runs.
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "experiments"))
from fim_tables import FILKIT, TABLE31, THESIS_CODE  # noqa: E402  (the one definition of the settings)

sys.path.insert(0, os.path.join(ROOT, "build", "python"))
import filkit  # noqa: E402

OUT = os.path.join(os.environ.get("FILKIT_OUT", "/tmp/filkit-experiments"), "fim-accuracy-drift")
METHOD_CODES = {"prune": 2, "fim": 3}


def run(method, args, directory):
    """One `filkit public-training` run of `method` (prune: also its per-example table, whose index
    column names the private rows); skipped when its outputs exist."""
    models = os.path.join(directory, f"{method}-models.csv")
    summary = os.path.join(directory, f"{method}.json")
    table = os.path.join(directory, "private-rows.csv") if method == "prune" else None
    if os.path.exists(models) and os.path.exists(summary) and (table is None or os.path.exists(table)):
        return models, summary, table
    settings = {**TABLE31, **THESIS_CODE, "lambda": args.lam, "optimizer": args.optimizer, "step-size": args.step_size}
    flags = [FILKIT, "public-training", "--runs", "1", "--seed", str(args.seed), "--threads", str(args.threads),
             "--methods", method, "--json", summary, "--models-out", models, "--quiet"]
    for key, value in settings.items():
        flags += ["--" + key, str(value)]
    if table:
        flags += ["--out", table]
    if method == "fim":
        flags += ["--checkpoint", os.path.join(directory, "fim.state"), "--checkpoint-every", "1"]
    print(" ".join(flags), flush=True)
    subprocess.run(flags, check=True)
    return models, summary, table


def final_model(path, method):
    rows = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return rows[rows[:, 0] == METHOD_CODES[method]][0, 2:]


def accuracy_and_loss(w, X, y, classes):
    """Softmax regression without intercept (kModelParameterLayout: class k's weights at k d)."""
    logits = X @ w.reshape(classes, -1).T
    logits -= logits.max(axis=1, keepdims=True)
    log_p = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return float(np.mean(logits.argmax(axis=1) == y)), float(-log_p[np.arange(len(y)), y].mean())


def mean_gradient(w, X, y, classes):
    """The mean cross-entropy gradient of softmax regression at w, in w's layout."""
    logits = X @ w.reshape(classes, -1).T
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    return (p.T @ X / len(y)).reshape(-1)


def cosine(a, b):
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lambda", dest="lam", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--optimizer", choices=["adam", "sgd"], default="adam")
    parser.add_argument("--step-size", dest="step_size", type=float, default=0.01)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    directory = os.path.join(OUT, f"lambda={args.lam:g},seed={args.seed},{args.optimizer},step={args.step_size:g}")
    os.makedirs(directory, exist_ok=True)
    prune_models, prune_summary, table = run("prune", args, directory)
    fim_models, fim_summary, _ = run("fim", args, directory)

    # The job's data: MNIST's training file (the per-example table's index is a row of it) and its
    # test file, pixels / 255 (the summary's preprocessing).
    split, _ = filkit.preprocess(filkit.load_dataset("mnist"), scale_pixels=True, quiet=True)
    assert json.load(open(prune_summary))["preprocessing"]["order"] == ["scale_pixels"]
    X, y = split.train.X, split.train.y.astype(int)
    private = np.zeros(len(y), dtype=bool)
    private[np.loadtxt(table, delimiter=",", skiprows=1, usecols=1).astype(int)] = True
    parts = {"test": (split.test.X, split.test.y.astype(int)), "private": (X[private], y[private]),
             "public": (X[~private], y[~private])}
    w_prune, w_fim = final_model(prune_models, "prune"), final_model(fim_models, "fim")
    delta = w_fim - w_prune
    along = (delta @ w_prune) / (w_prune @ w_prune) * w_prune
    models = {"prune": w_prune, "fim": w_fim, "prune + delta/2": w_prune + 0.5 * delta,
              "prune + delta's part along w_prune": w_prune + along, "prune + the rest of delta": w_prune + delta - along}
    descent = -mean_gradient(w_prune, *parts["public"], 10)  # the public loss' steepest descent at w_prune
    moved = delta != 0  # the released coordinates (prune's and fim's frozen ones never move)
    result = {"settings": vars(args), "delta_norm": float(np.linalg.norm(delta)),
              "prune_norm": float(np.linalg.norm(w_prune)), "cosine_delta_prune": cosine(delta, w_prune),
              "rescaling_along_prune": float(1.0 + (delta @ w_prune) / (w_prune @ w_prune)),
              "cosine_delta_public_descent": cosine(delta[moved], descent[moved]),
              "cosine_rest_public_descent": cosine((delta - along)[moved], descent[moved]), "models": {}}
    print(f"||delta|| {result['delta_norm']:.2f} against ||w_prune|| {result['prune_norm']:.2f}; cosine "
          f"{result['cosine_delta_prune']:.2f}; its part along w_prune rescales w_prune by "
          f"{result['rescaling_along_prune']:.3f}; cosine with the public loss' descent at w_prune (the moved "
          f"coordinates): delta {result['cosine_delta_public_descent']:.3f}, the rest of delta "
          f"{result['cosine_rest_public_descent']:.3f}")
    print(f"{'model':36s}" + "".join(f"{name + ' accuracy, loss':>26s}" for name in parts))
    for name, w in models.items():
        numbers = {part: accuracy_and_loss(w, *data, 10) for part, data in parts.items()}
        result["models"][name] = {part: {"accuracy": a, "cross_entropy": l} for part, (a, l) in numbers.items()}
        print(f"{name:36s}" + "".join(f"{a:>17.4f}, {l:.4f}" for a, l in numbers.values()))
    with open(os.path.join(directory, "summary.json.tmp"), "w") as f:
        json.dump(result, f, indent=2)
    os.replace(os.path.join(directory, "summary.json.tmp"), os.path.join(directory, "summary.json"))


if __name__ == "__main__":
    main()
