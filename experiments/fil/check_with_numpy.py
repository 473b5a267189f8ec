#!/usr/bin/python3
"""Checks the committed Table 1 summaries (experiments/results/fil/table1/) against an independent numpy
replication of the FIL paper's code (facebookresearch/fisher_information_loss: dataloading.py, models.py,
reweighted.py), in float64: MNIST 0 vs 1, pixels /255, rows divided by the largest row norm, PCA 20 by
the eigenvectors of the training split's centred scatter matrix; least squares in closed form with
targets -1/+1, the logistic model by Newton's method; the paper's per-example Jacobians
(models.py, influence_jacobian) and eta = their spectral norms; IRFIL as reweighted.py (weights
renormalised to sum to n, multiplied by 1/eta after each fit).

  experiments/fil/check_with_numpy.py    about a minute on one core; exit 1 on a mismatch

It reads the MNIST files that filkit read (the `source` of the committed measure summary) and
compares, for both test scalings (`per-split-max`, the paper's code; `global-max`, filkit's) and
both models, before and after the 15 iterations: the mean and sd of eta (relative 1e-8) and the
test accuracy (exactly: the same test images misclassified).
"""

import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reproduce import IRFIL_ITERATIONS, MODELS, RESULTS, SCALINGS, mnist01, mnist_files  # noqa: E402

PCA_DIMENSIONS = 20
RELATIVE_TOLERANCE = 1e-8


def features(files, scaling):
    x, y = {}, {}
    for split in ("train", "test"):
        images, labels = mnist01(files, split)
        x[split] = images.reshape(len(images), -1).astype(np.float64) / 255.0
        y[split] = labels
    train_max = np.linalg.norm(x["train"], axis=1).max()
    for split in x:
        x[split] = x[split] / (np.linalg.norm(x[split], axis=1).max() if scaling == "per-split-max" else train_max)
    mean = x["train"].mean(axis=0, keepdims=True)
    centred = x["train"] - mean
    _, vectors = np.linalg.eigh(centred.T @ centred)
    projection = vectors[:, -PCA_DIMENSIONS:]
    return {split: (x[split] - mean) @ projection for split in x}, y


def least_squares(z, labels, weights, l2):
    n, d = z.shape
    y = np.where(labels == 0, -1.0, 1.0)
    inverse = np.linalg.inv((weights[:, None] * z).T @ z + n * l2 * np.eye(d))
    theta = inverse @ (z.T @ (weights * y))
    r = z @ theta - y
    za = z @ inverse
    jx = -(r[:, None, None] * inverse[None] + za[:, :, None] * theta[None, None, :])
    return theta, np.concatenate([weights[:, None, None] * jx, (weights[:, None] * za)[:, :, None]], axis=2)


def logistic(z, labels, weights, l2):
    n, d = z.shape
    theta = np.zeros(d)
    for _ in range(100):
        s = 1 / (1 + np.exp(-z @ theta))
        gradient = z.T @ (weights * (s - labels)) + n * l2 * theta
        hessian = (weights * s * (1 - s) * z.T) @ z + n * l2 * np.eye(d)
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.linalg.norm(step) <= 1e-14 * max(1.0, np.linalg.norm(theta)):
            break
    s = (1 / (1 + np.exp(-z @ theta)))[:, None]
    inverse = np.linalg.inv((weights[:, None] * s * (1 - s) * z).T @ z + n * l2 * np.eye(d))
    zh = z @ inverse
    jx = -(s * (1 - s) * zh)[:, :, None] * theta[None, None, :] - (s - labels[:, None])[:, :, None] * inverse[None]
    return theta, np.concatenate([weights[:, None, None] * jx, (weights[:, None] * zh)[:, :, None]], axis=2)


def replicate(z, y, model):
    fit = least_squares if model == "least-squares" else logistic
    l2 = float(MODELS[model])
    n = len(y["train"])
    out = []
    u = np.ones(n)
    for iteration in range(IRFIL_ITERATIONS + 1):
        if iteration > 0:
            u = u * n / u.sum()
        theta, jacobians = fit(z["train"], y["train"], u.copy(), l2)
        eta = np.linalg.norm(jacobians, ord=2, axis=(1, 2))
        u = 1 / eta if iteration == 0 else u / eta
        accuracy = float((((z["test"] @ theta) > 0) == (y["test"] == 1)).mean())
        out.append({"mean": float(eta.mean()), "std": float(eta.std(ddof=1)), "test_accuracy": accuracy})
    return out


def main():
    with open(os.path.join(RESULTS, "figures", "measure-least-squares.json"), encoding="utf-8") as f:
        files = mnist_files(json.load(f))
    failures = 0
    for scaling in SCALINGS:
        z, y = features(files, scaling)
        for model in MODELS:
            with open(os.path.join(RESULTS, "table1", f"irfil-{model}-{scaling}.json"), encoding="utf-8") as f:
                committed = json.load(f)["iterations"]
            ours = replicate(z, y, model)
            for iteration in (0, IRFIL_ITERATIONS):
                c, o = committed[iteration], ours[iteration]
                ok = (abs(c["eta"]["mean"] / o["mean"] - 1) <= RELATIVE_TOLERANCE
                      and abs(c["eta"]["std"] - o["std"]) <= RELATIVE_TOLERANCE * o["mean"]
                      and c["test_accuracy"] == o["test_accuracy"])
                failures += not ok
                print(f"{scaling:13s} {model:13s} iteration {iteration:2d}: eta {o['mean']:.6f} ({o['std']:.3e}), "
                      f"test accuracy {100 * o['test_accuracy']:.3f} %; filkit {c['eta']['mean']:.6f} "
                      f"({c['eta']['std']:.3e}), {100 * c['test_accuracy']:.3f} %  {'ok' if ok else 'MISMATCH'}",
                      flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
