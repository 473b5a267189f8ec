#!/usr/bin/env python3
"""Same answers at any scale (docs/distributed.md): `filkit measure`, `irfil`, `attack`, `bound`,
`reconstruct` and `dpsgd` on K = 2 and 3 MPI ranks (and 1 and 4 in a few settings; loopback,
oversubscribed) against the single-process program, for several settings: every per-example value of the CSV and every number of the summary
JSON must agree to 1e-12 relative (the ranks' sums are added in a different order, so the last bits
may differ). Also checks that a DP-SGD run stopped on some number of ranks resumes on any other to
the uninterrupted run's results, that a failing rank ends every rank with a clear error, and that
jobs not yet sharded refuse to run on several ranks. `learned-attack`, whose shadow models are spread
over the ranks and gathered at rank 0, must give byte-identical tables and summaries on 1, 2 and 3
ranks, and its shadow-model store grown on some number of ranks and finished on another must be
byte-identical to one grown on one process. `public-training`, whose runs are spread over the ranks
and gathered at rank 0, must likewise give byte-identical tables, models and summaries on 1, 2 and 3
ranks; one public-training run (--runs 1), which the ranks train together (fim's gradient model
splitting its public batches over them, the private phase its batches' members, each rank its shard
of the private rows), agrees with one process to 1e-12 like the sharded jobs (in float32 to 1e-5),
and such a run stopped on some number of ranks resumes on any other to the uninterrupted run's results.

Sizes are small (a few hundred rows, a few steps): each case exercises the same sharding, sums and
broadcasts as a full-size run, in seconds. ctest runs it in PARTS (one test each, --part), side by side.

Usage: compare_ranks.py --filkit BUILD/filkit [--mpirun mpirun] [--ranks K,...] [--part NAME,...]
       compare_ranks.py --list-parts   (the names of PARTS, for CMakeLists.txt)
"""
import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time

TOLERANCE = 1e-12
# Plus an absolute floor: the loss of an example fitted almost exactly (1e-6 for least squares) is
# the difference of O(1) scores and targets, whose rounding (1e-16) is then large relative to it.
ABSOLUTE_FLOOR = 1e-15

# (name, flags) of measure: the default job, softmax over three classes, a seeded subset with
# groups and an attribute, least squares with unit-ball scaling, a CSV dataset (read whole, then
# cut) and a compressed .npz (each rank inflates only up to its last row and keeps its rows); of irfil: its default job, and a class weighting driven by an attribute's FIL; of attack:
# least squares on the income data (closed-form candidates on each rank's examples) and logistic
# regression on credit-g with a subset, the naive refits and example weights (candidates taken one
# at a time by all ranks together: chord Newton steps and refits over all rows); of bound: its
# default setting on pixels (401 rows: the full default's 12,665 take minutes, through the same code) and
# MNIST at 30 principal components; of reconstruct: a few rows out of order with their
# reconstructions kept, on pixels, and every row; of dpsgd: logistic regression with two runs and a
# second snapshot, softmax with Poisson batches and estimated traces and spectral norms (probes keyed
# by global rows), and the tanh MLP and the ConvNet through LibTorch (probes keyed by batch position).
# Row counts are odd, so that the ranks' shares differ; the batches are split across ranks too.
# One run (--runs 1) of public-training at a tiny size: 200 public rows, public batches of 30 (7 an
# epoch, the last short, so that the ranks' members differ batch by batch), 3 epochs before the
# first of 6 private steps, a snapshot at step 4; the models' table as the further table.
PUBLIC_TRAINING_SPLIT_FLAGS = ["public-training", "--train-size", "400", "--test-size", "100", "--runs", "1",
                               "--steps", "6", "--batch-size", "50", "--report-epochs", "1", "--pretrain-steps", "5",
                               "--pretrain-batch-size", "50", "--gradient-steps", "3", "--gradient-decay", "1",
                               "--gradient-min-steps", "1", "--gradient-batch-size", "30", "--models-out", "{extra}"]

SETTINGS = [
    ("default", ["measure"]),
    ("softmax", ["measure", "--data", "mnist", "--classes", "0,1,2", "--train-size", "3000", "--pca", "30",
                 "--model", "softmax", "--l2", "1e-2"]),
    ("groups", ["measure", "--data", "mnist", "--train-size", "2000", "--test-size", "500", "--subset", "all",
                "--subset", "class=1", "--subset", "rows={rows}", "--attribute", "0,1,2", "--releases", "3"]),
    ("least-squares", ["measure", "--model", "least-squares", "--pca", "10", "--row-scaling", "unit-ball", "--train-size", "1001"]),
    ("credit-g", ["measure", "--data", "credit-g", "--l2", "1e-2"]),
    ("npz", ["measure", "--data", "{npz}", "--classes", "0,2", "--train-size", "600", "--l2", "1e-3"]),
    ("irfil", ["irfil", "--iterations", "4"]),
    ("irfil-class", ["irfil", "--data", "credit-g", "--l2", "1e-2", "--weighting", "hybrid", "--attribute", "age",
                     "--iterations", "3", "--history-out", "{extra}"]),
    ("attack-regression", ["attack", "--data", "income-regression", "--intercept", "--trials", "5",
                           "--examples-out", "{extra}"]),
    ("attack-logistic", ["attack", "--data", "credit-g", "--l2", "1e-2", "--trials", "5", "--examples", "120",
                         "--compare-naive", "4", "--groups", "4", "--weights", "{weights}", "--examples-out", "{extra}"]),
    ("bound", ["bound", "--train-size", "401"]),
    ("bound-mnist", ["bound", "--data", "mnist", "--pca", "30", "--train-size", "5000", "--sigma", "0.05"]),
    ("reconstruct", ["reconstruct", "--trials", "30", "--train-size", "401", "--rows", "399,5,200,17,301",
                     "--save-reconstructions", "200,5", "--reconstructions-out", "{extra}"]),
    ("reconstruct-all", ["reconstruct", "--trials", "20", "--train-size", "1001", "--pca", "30"]),
    # 2 runs of 60 steps, 10 steps an epoch: the snapshot at epoch 5 is in the middle of each run.
    ("dpsgd", ["dpsgd", "--steps", "60", "--runs", "2", "--report-epochs", "5", "--train-size", "1001",
               "--batch-size", "100"]),
    ("dpsgd-poisson", ["dpsgd", "--model", "softmax", "--classes", "0,1,2", "--train-size", "601", "--sampling",
                       "poisson", "--batch-size", "50", "--steps", "20", "--trace", "gaussian", "--spectral",
                       "power-iteration", "--probes", "3"]),
    # The networks' evaluation on the whole test split would take longer than their training.
    ("dpsgd-mlp", ["dpsgd", "--model", "mlp", "--hidden", "16", "--steps", "10", "--batch-size", "50",
                   "--train-size", "301", "--test-size", "101", "--runs", "2"]),
    ("dpsgd-cnn", ["dpsgd", "--model", "cnn", "--steps", "3", "--batch-size", "18", "--train-size", "101",
                   "--test-size", "51"]),
    # public-training with --runs 1: every rank trains the one run together, fim's gradient model
    # splitting each public batch's members over the ranks (each rank those among its shard of the
    # 200 public rows, with the whole batch's probes); every method, the closed-form objective with
    # the thesis' per-batch probes; fim with probes drawn once a step; with the exact trace (each
    # rank's members gathered); fim on a small MLP (the backend's objective from the public
    # examples' kept records, one shard's a rank). The private phase of dpsgd, prune and fim cut over
    # the ranks too: each rank releases and accounts the members among its shard of the 200 private
    # rows (their probes the whole batch's), the releases added over the ranks; in float32 (sums
    # added in another order in float: FLOAT32_TOLERANCE); fim's conditional gradient model (its
    # cosine diagnostic a mean over the members of every rank).
    ("public-training-split", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "sgd,dpsgd,prune,fim"]),
    ("public-training-split-step", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "fim", "--gradient-probe-draws", "step"]),
    ("public-training-split-exact", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "fim", "--gradient-trace", "exact"]),
    ("public-training-split-mlp", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "fim", "--model", "mlp", "--hidden", "8"]),
    ("public-training-split-float32", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "dpsgd,fim", "--precision", "float32"]),
    ("public-training-split-conditional", PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "fim", "--gradient-model",
                                                                        "conditional", "--gradient-hidden", "8"]),
]

# The rank counts of each setting: 2 and 3 (even and uneven shares of odd row counts), and in the
# settings below also one rank under mpirun and four; each run costs about a second of mpirun's
# start, whatever its size. --ranks gives every setting the same counts.
RANKS = "2,3"
ALL_RANKS = "1,2,3,4"
RANKS_OF = {"least-squares": ALL_RANKS, "npz": ALL_RANKS, "reconstruct-all": ALL_RANKS, "dpsgd": ALL_RANKS,
            "dpsgd-mlp": ALL_RANKS, "public-training-split": "1,2,3", "public-training-split-step": "2,3", "public-training-split-exact": "3",
            "public-training-split-mlp": "2,3", "public-training-split-float32": "2",
            "public-training-split-conditional": "2"}

# Float32 releases (--precision float32) are summed in float over each rank's pieces of a batch, in
# another order than one process's: their rounding (6e-8 relative) grows over the steps (2e-6 in
# the per-example traces). The models' parameters, float32 numbers, differ by the rounding of the
# largest of them (1.5e-8 of it), which is 3e-5 of a small one: they are compared relative to their
# row's largest magnitude.
FLOAT32_TOLERANCE = 1e-5
TOLERANCE_OF = {"public-training-split-float32": FLOAT32_TOLERANCE}

# One public-training run (fim) stopped and resumed on different numbers of ranks, as RESUME_CALLS:
# each stopped call must have resumed the one before (its message counts their steps).
SPLIT_RESUME_FLAGS = PUBLIC_TRAINING_SPLIT_FLAGS + ["--methods", "fim"]
SPLIT_RESUME_CALLS = [(2, 2), (None, 1), (3, 1), (2, 0)]

# A DP-SGD run stopped and resumed on different numbers of ranks (None: one process without mpirun):
# (ranks, steps this call) until done, against the uninterrupted single-process run. The stops fall
# after the first run's snapshot (step 50), then before and after the second's.
RESUME_FLAGS = dict(SETTINGS)["dpsgd"]
RESUME_CALLS = [(None, 55), (4, 10), (3, 50), (2, 0)]

# ctest's tests (one a part): every setting and check in exactly one, the networks' (LibTorch) apart.
PARTS = {
    "measure": ["default", "softmax", "groups", "least-squares", "credit-g", "npz"],
    "irfil": ["irfil", "irfil-class"],
    "attack": ["attack-regression", "attack-logistic"],
    "bound": ["bound", "bound-mnist"],
    "reconstruct": ["reconstruct", "reconstruct-all"],
    "dpsgd-glm": ["dpsgd", "dpsgd-poisson"],
    "dpsgd-networks": ["dpsgd-mlp", "dpsgd-cnn"],
    # Ranks started differently; a run resumed on other rank counts; errors on the ranks.
    "checks": ["disagreement", "resume", "errors"],
    # The learned attack on 1, 2, 3 ranks; its store grown and finished on different rank counts;
    # shadow models diverging on the ranks, and a rank killed mid-run (LibTorch: dpsgd, prune and fim release through the plugin).
    "learned-attack": ["learned-attack-ranks", "learned-attack-store", "learned-attack-errors"],
    # public-training's runs spread over 1, 2, 3 ranks; a diverging run, --checkpoint and a killed rank on the ranks.
    "public-training": ["public-training-ranks", "public-training-errors"],
    # One public-training run trained by all ranks together (--runs 1).
    "public-training-split": ["public-training-split", "public-training-split-step", "public-training-split-exact",
                              "public-training-split-mlp", "public-training-split-float32",
                              "public-training-split-conditional", "public-training-split-resume"],
}
CHECKS = ("disagreement", "resume", "errors", "learned-attack-ranks", "learned-attack-store",
          "learned-attack-errors", "public-training-ranks", "public-training-errors", "public-training-split-resume")
assert sorted(sum(PARTS.values(), [])) == sorted([name for name, _ in SETTINGS] + list(CHECKS)), "PARTS"
assert set(RANKS_OF) <= {name for name, _ in SETTINGS}, "RANKS_OF"


def run(command, env, check=True, timeout=600, cwd=None):
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if check and done.returncode != 0:
        sys.exit(f"FAILED: {' '.join(command)}\n{done.stderr}")
    return done


def write_npz(path):
    """Features of 1,500 examples in three classes (seeded, compressed), as a user's .npz."""
    import numpy
    rng = numpy.random.default_rng(3)
    y = rng.integers(0, 3, 1500)
    X = rng.normal(size=(1500, 40)) + 0.5 * y[:, None]
    numpy.savez_compressed(path, X=X, y=y)


def expect_failure(command, env, message, what):
    """Runs `command`, which must fail with `message` in its error output; prints ok or FAILED with
    `what`; returns 1 on failure, else 0."""
    done = run(command, env, check=False)
    if done.returncode == 0 or message not in done.stderr:
        print(f"FAILED: {what}: exit {done.returncode}, stderr {done.stderr[-500:]}")
        return 1
    print(f"ok: {what}")
    return 0


def write_idx_dataset(directory, seed, changed_image=None):
    """A built-in-style MNIST directory (the four uncompressed IDX files) of 300 + 60 images of 0s
    and 1s; `changed_image` alters one training image's middle pixel (the files keep their size)."""
    import numpy
    rng = numpy.random.default_rng(seed)
    os.makedirs(directory, exist_ok=True)
    for part, n in (("train", 300), ("t10k", 60)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=numpy.uint8)
        if part == "train" and changed_image is not None:
            images[changed_image, 14, 14] ^= 0xff
        labels = (numpy.arange(n) % 2).astype(numpy.uint8)
        with open(os.path.join(directory, f"{part}-images-idx3-ubyte"), "wb") as f:
            f.write(bytes([0, 0, 8, 3]) + n.to_bytes(4, "big") + (28).to_bytes(4, "big") * 2 + images.tobytes())
        with open(os.path.join(directory, f"{part}-labels-idx1-ubyte"), "wb") as f:
            f.write(bytes([0, 0, 8, 1]) + n.to_bytes(4, "big") + labels.tobytes())


def check_disagreeing_ranks(filkit, mpirun, env, tmp):
    """Ranks started with different options or data (MPMD launches, one rank each) stop at once,
    before any work, with one message naming the flag that differs; returns the failures."""
    import numpy
    for name, seed in (("a", 3), ("b", 4)):
        os.makedirs(os.path.join(tmp, name), exist_ok=True)
        # One name, the same size (stored, not compressed), other contents in each directory.
        rng = numpy.random.default_rng(seed)
        numpy.savez(os.path.join(tmp, name, "same.npz"), X=rng.normal(size=(400, 10)), y=rng.integers(0, 2, 400))
        # One name, the same size, the same first and last 64 KiB: one value in the middle differs.
        rng = numpy.random.default_rng(5)
        X = rng.normal(size=(4000, 10))
        X[2000, 3] += 1.0 if name == "b" else 0.0
        numpy.savez(os.path.join(tmp, name, "middle.npz"), X=X, y=numpy.arange(4000) % 2)
        # A built-in (--data mnist) found in each rank's FILKIT_DATA_DIR, one pixel apart.
        write_idx_dataset(os.path.join(tmp, name, "data", "mnist"), seed=6, changed_image=150 if name == "b" else None)
    a, b = os.path.join(tmp, "a", "same.npz"), os.path.join(tmp, "b", "same.npz")
    measure = [filkit, "measure", "--quiet", "--threads", "1", "--train-size", "300"]
    dpsgd = [filkit, "dpsgd", "--quiet", "--threads", "1", "--train-size", "300", "--batch-size", "50"]
    learned_attack = [filkit, "learned-attack", "--quiet", "--threads", "1", "--methods", "sgd", "--train-size", "300",
                      "--public-size", "50", "--fixed-size", "49", "--batch-size", "50", "--gradient-batch-size", "50"]
    public_training = [filkit, "public-training", "--quiet", "--threads", "1", "--methods", "sgd", "--train-size", "300",
                       "--steps", "2", "--pretrain-steps", "2"]
    cases = [  # (what, rank 0's command, rank 1's command, fragments of the message)
        ("data", measure + ["--data", a], measure + ["--data", b], ["--data is " + b + " on rank 1 but " + a]),
        ("data contents", ["--wdir", os.path.join(tmp, "a")] + measure + ["--data", "same.npz"],
         ["--wdir", os.path.join(tmp, "b")] + measure + ["--data", "same.npz"], ["--data same.npz has other contents"]),
        ("data contents in the middle", ["--wdir", os.path.join(tmp, "a")] + measure + ["--data", "middle.npz"],
         ["--wdir", os.path.join(tmp, "b")] + measure + ["--data", "middle.npz"],
         ["--data middle.npz has other contents on rank 1 but the same size on rank 0"]),
        ("built-in data", ["env", "FILKIT_DATA_DIR=" + os.path.join(tmp, "a", "data")] + measure + ["--data", "mnist"],
         ["env", "FILKIT_DATA_DIR=" + os.path.join(tmp, "b", "data")] + measure + ["--data", "mnist"],
         ["--data mnist (", "train-images-idx3-ubyte on rank 1, ", "has other contents on rank 1 but the same size"]),
        ("seed", measure + ["--seed", "1"], measure + ["--seed", "2"], ["--seed is 2 on rank 1 but 1 on rank 0"]),
        ("l2", measure + ["--l2", "0.01"], measure + ["--l2", "0.1"], ["--l2 is 0.1 on rank 1 but 0.01 on rank 0"]),
        ("steps", dpsgd + ["--steps", "10"], dpsgd + ["--steps", "20"], ["--steps is 20 on rank 1 but 10 on rank 0"]),
        ("shadow models", learned_attack + ["--train-shadow-models", "8"], learned_attack + ["--train-shadow-models", "9"],
         ["--train-shadow-models is 9 on rank 1 but 8 on rank 0"]),
        ("runs", public_training + ["--runs", "2"], public_training + ["--runs", "3"], ["--runs is 3 on rank 1 but 2 on rank 0"]),
    ]
    failures = 0
    for what, first, second, fragments in cases:
        command = mpirun + ["-np", "1"] + first + [":", "-np", "1"] + second
        try:
            done = run(command, env, check=False, timeout=120)
        except subprocess.TimeoutExpired:
            print(f"FAILED: ranks with different {what}: no end within 120 s")
            failures += 1
            continue
        missing = [f for f in fragments + ["the MPI ranks were started differently"] if f not in done.stderr]
        if done.returncode == 0 or missing or done.stderr.count("error:") != 1:
            print(f"FAILED: ranks with different {what}: exit {done.returncode}, missing {missing}, "
                  f"stderr {done.stderr[-800:]}")
            failures += 1
        else:
            print(f"ok: ranks with different {what} stop with one message naming it")
    return failures


def check_dying_rank(filkit, mpirun, env, long_run=None):
    """A rank killed mid-run (SIGKILL after 4 s, as the machine's OOM killer would) ends the whole
    job promptly, not a rank waiting forever in a collective; returns 1 on failure, else 0.
    `long_run`: the job's command without the executable (default: a DP-SGD run of 10^7 steps)."""
    long_run = [filkit] + (long_run or ["dpsgd", "--quiet", "--threads", "1", "--train-size", "301", "--batch-size", "50",
                                        "--steps", "10000000"])
    command = mpirun + ["-np", "1"] + long_run + [":", "-np", "1", "timeout", "-s", "KILL", "4"] + long_run
    start = time.monotonic()
    try:
        done = run(command, env, check=False, timeout=120)
    except subprocess.TimeoutExpired:
        print("FAILED: a killed rank did not end the job within 120 s")
        return 1
    seconds = time.monotonic() - start
    if done.returncode == 0 or seconds > 60:
        print(f"FAILED: a killed rank: exit {done.returncode} after {seconds:.1f} s, stderr {done.stderr[-500:]}")
        return 1
    print(f"ok: a rank killed after 4 s ends the {long_run[1]} job (exit {done.returncode}) after {seconds:.1f} s")
    return 0


# The learned attack at a tiny size, every method (fim's gradient model a few epochs): 17 + 4 shadow
# models, so that one process (waves of 8 models a thread), 2 ranks (waves of 16: 16 and 5) and 3
# (one wave of 21, shares of 7) cut them differently.
LEARNED_ATTACK_FLAGS = ["learned-attack", "--quiet", "--threads", "1", "--methods", "sgd,dpsgd,prune,fim",
                        "--train-size", "400", "--test-size", "100", "--public-size", "50", "--fixed-size", "49",
                        "--batch-size", "50", "--gradient-batch-size", "50", "--steps", "2", "--attacker-epochs", "2",
                        "--gradient-steps", "3", "--gradient-decay", "1", "--gradient-min-steps", "1",
                        "--target-shadow-models", "4"]
LEARNED_ATTACK_RANKS = (1, 2, 3)


def learned_attack_outputs(filkit, mpirun, env, tmp, name, ranks, shadow_models=17, store=None):
    """Runs LEARNED_ATTACK_FLAGS (one process when ranks is None) with that many training shadow
    models and the store; returns its table's and reconstructions' bytes and its summary less the
    timings, the rank count and the store's setting and count of models loaded."""
    out, extra, summary = (os.path.join(tmp, f"{name}{suffix}") for suffix in (".csv", "-images.csv", ".json"))
    command = [filkit] + LEARNED_ATTACK_FLAGS + ["--train-shadow-models", str(shadow_models), "--out", out,
                                                 "--reconstructions-out", extra, "--json", summary]
    command += ["--shadow-models", store] if store else []
    run(command if ranks is None else mpirun + ["-np", str(ranks)] + command, env)
    result = json.load(open(summary))
    ranks_recorded = result.pop("mpi_ranks")
    result.pop("seconds")
    result["settings"].pop("shadow_models")
    for method in result["methods"].values():
        method.pop("seconds")
        method.pop("shadow_models_loaded")
    return open(out, "rb").read(), open(extra, "rb").read(), result, ranks_recorded


def check_byte_identical_on_ranks(job, outputs, rank_counts):
    """`outputs(name, ranks)` (ranks None: one process) on each of `rank_counts` against one process:
    the same table, further table and summary bytes, and the rank count recorded; returns the failures."""
    reference = outputs(f"{job}-serial", None)
    failures = 0
    for ranks in rank_counts:
        table, extra, summary, recorded = outputs(f"{job}-{ranks}", ranks)
        problems = [what for what, same in (("the table", table == reference[0]), ("the further table", extra == reference[1]),
                                            ("the summary", summary == reference[2]), ("mpi_ranks", recorded == ranks))
                    if not same]
        if "the summary" in problems:
            differing = [key for key in reference[2] if summary.get(key) != reference[2][key]]
            problems[problems.index("the summary")] = "the summary (" + ", ".join(differing) + ")"
        if problems:
            print(f"FAILED: {job} on {ranks} ranks differs from one process in " + ", ".join(problems))
        else:
            print(f"ok: {job} on {ranks} ranks: the tables and summary are one process's bytes (timings aside)")
        failures += bool(problems)
    return failures


def check_learned_attack_ranks(filkit, mpirun, env, tmp):
    """learned-attack on 1, 2 and 3 ranks: the same bytes as one process; returns the failures."""
    return check_byte_identical_on_ranks(
        "learned-attack", lambda name, ranks: learned_attack_outputs(filkit, mpirun, env, tmp, name, ranks),
        LEARNED_ATTACK_RANKS)


# public-training at a tiny size, every method (fim's gradient model a few steps), 3 runs of 6 steps
# with a snapshot at step 4: on 2 and 3 ranks the 1 + 4 x 2 runs fall to the ranks differently.
PUBLIC_TRAINING_FLAGS = ["public-training", "--quiet", "--threads", "1", "--methods", "sgd,dpsgd,prune,fim",
                         "--train-size", "400", "--test-size", "100", "--runs", "3", "--steps", "6", "--batch-size", "50",
                         "--report-epochs", "1", "--pretrain-steps", "5", "--pretrain-batch-size", "50",
                         "--gradient-steps", "3", "--gradient-decay", "1", "--gradient-min-steps", "1",
                         "--gradient-batch-size", "50"]
PUBLIC_TRAINING_RANKS = (1, 2, 3)


def public_training_outputs(filkit, mpirun, env, tmp, name, ranks):
    """Runs PUBLIC_TRAINING_FLAGS (one process when ranks is None); returns its table's and models'
    bytes, its summary less the timings and the rank count, and the rank count recorded."""
    out, models, summary = (os.path.join(tmp, f"{name}{suffix}") for suffix in (".csv", "-models.csv", ".json"))
    command = [filkit] + PUBLIC_TRAINING_FLAGS + ["--out", out, "--models-out", models, "--json", summary]
    run(command if ranks is None else mpirun + ["-np", str(ranks)] + command, env)
    result = json.load(open(summary))
    ranks_recorded = result.pop("mpi_ranks")
    result.pop("seconds")
    return open(out, "rb").read(), open(models, "rb").read(), result, ranks_recorded


def check_public_training_ranks(filkit, mpirun, env, tmp):
    """public-training on 1, 2 and 3 ranks: the same bytes as one process; returns the failures."""
    return check_byte_identical_on_ranks(
        "public-training", lambda name, ranks: public_training_outputs(filkit, mpirun, env, tmp, name, ranks),
        PUBLIC_TRAINING_RANKS)


def check_public_training_errors(filkit, mpirun, env, tmp):
    """On the ranks: diverging runs end the job with the error; --checkpoint is refused with more
    than one run (each trained whole by one rank); a killed rank ends the job. Returns the failures."""
    diverging = [filkit] + PUBLIC_TRAINING_FLAGS + ["--step-size", "1e300", "--clip-norm", "1e300"]
    diverging[diverging.index("--methods") + 1] = "dpsgd"
    failures = expect_failure(mpirun + ["-np", "2"] + diverging, env, "diverged",
                              "runs diverging on the ranks end the public-training job")
    one_method = [filkit] + PUBLIC_TRAINING_FLAGS + ["--checkpoint", os.path.join(tmp, "public.state")]
    one_method[one_method.index("--methods") + 1] = "fim"  # a resume file holds one method
    failures += expect_failure(mpirun + ["-np", "2"] + one_method, env,
                               "public-training resumes on several MPI ranks only with --runs 1",
                               "public-training refuses --checkpoint on several ranks for several runs")
    # 4 runs of 10^6 sgd steps: minutes of work, stopped after 4 s.
    failures += check_dying_rank(filkit, mpirun, env, [
        "public-training", "--quiet", "--threads", "1", "--methods", "sgd", "--train-size", "400", "--runs", "4",
        "--pretrain-steps", "2", "--batch-size", "50", "--steps", "1000000"])
    return failures


def store_files(directory):
    """Each file of a shadow-model store (every method's .npy and .json) and its bytes."""
    return {name: open(os.path.join(directory, name), "rb").read() for name in sorted(os.listdir(directory))}


def check_learned_attack_store(filkit, mpirun, env, tmp):
    """A store grown (10 + 4 shadow models) on 2 ranks and finished (17 + 4) on one process, and one
    grown on one process and finished on 3 ranks, are byte for byte the store grown on one process,
    and their attacks are its; returns the failures."""
    whole = os.path.join(tmp, "store-whole")
    reference = learned_attack_outputs(filkit, mpirun, env, tmp, "store-whole", None, store=whole)
    failures = 0
    for grown, finished in ((2, None), (None, 3)):
        store = os.path.join(tmp, f"store-{grown}-{finished}")
        learned_attack_outputs(filkit, mpirun, env, tmp, f"store-grow-{grown}", grown, shadow_models=10, store=store)
        done = learned_attack_outputs(filkit, mpirun, env, tmp, f"store-finish-{finished}", finished, store=store)
        ranks = f"grown on {grown or 1} rank(s), finished on {finished or 1}"
        problems = [what for what, same in (("the store's files", store_files(store) == store_files(whole)),
                                            ("the table", done[0] == reference[0]),
                                            ("the reconstructions", done[1] == reference[1]),
                                            ("the summary", done[2] == reference[2])) if not same]
        if problems:
            print(f"FAILED: learned-attack store {ranks} differs from one grown on one process in " + ", ".join(problems))
        else:
            print(f"ok: learned-attack store {ranks}: the same files and attack as one grown on one process")
        failures += bool(problems)
    return failures


def read_csv(path):
    """The header and the rows as numbers; an empty cell (a non-finite value) reads as NaN."""
    with open(path) as f:
        rows = list(csv.reader(f))
    return rows[0], [[float(v) if v else math.nan for v in row] for row in rows[1:]]


# The GLM attack's results (attack_mse, the reconstructions, their summaries) are compared to 1e-5:
# the attack reconstructs from grad F at the released w' = w* + N(0, sigma^2), which is about
# H x noise (1e-5 at the default sigma) and includes the fit's own residual gradient at w* (about
# 1e-9, the rounding of sums that the ranks form in a different order), and it divides by
# B_i[0] = r_i - g_0, near zero for some examples. So its MSE is determined only to about 1e-9
# relative for a typical example, one process as K, and to 3e-6 for the worst (an MSE of 1.6e8,
# where the attack has failed), amplified by 1 / |B_i[0]|.
ATTACK_TOLERANCE = 1e-5


def close(a, b, tolerance=TOLERANCE, scale=0.0):
    """a and b agree to `tolerance` relative to the larger of them, or of `scale` when given."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return True
    return abs(a - b) <= tolerance * max(abs(a), abs(b), scale) + ABSOLUTE_FLOOR


def compare_tables(tables, reference_tables, command, tolerance=TOLERANCE):
    """The differing cells of a job's tables (as problems) and the largest relative difference. Above
    TOLERANCE (float32) the further table (public-training's models) relative to each row's largest."""
    problems, worst = [], 0.0
    for number, ((header, rows), (reference_header, reference_rows)) in enumerate(zip(tables, reference_tables)):
        if header != reference_header or len(rows) != len(reference_rows):
            problems.append(f"table {number} shape {len(rows)} x {header} vs {len(reference_rows)} x {reference_header}")
            continue
        # The attack's columns, and reconstruct's images, at ATTACK_TOLERANCE.
        attack_from = header.index("attack_mse") if "attack_mse" in header else len(header)
        if number == 1 and command == "reconstruct":
            attack_from = 0
        # DP-SGD's standard error over runs is a difference of the runs' traces, which may cancel to
        # the traces' rounding: it is compared relative to the trace.
        error_column = header.index("fisher_trace_standard_error") if "fisher_trace_standard_error" in header else -1
        for row, reference in zip(rows, reference_rows):
            row_scale = 0.0  # the largest parameter (columns w0, w1, ...)
            if number == 1 and tolerance > TOLERANCE:
                row_scale = max(abs(v) for name, v in zip(header, reference) if name.startswith("w") and not math.isnan(v))
            for column, (a, b) in enumerate(zip(row, reference)):
                scale = abs(reference[header.index("fisher_trace")]) if column == error_column else row_scale
                if not close(a, b, ATTACK_TOLERANCE if column >= attack_from else tolerance, scale):
                    problems.append(f"table {number} row {int(reference[0])}, {header[column]}: {a!r} vs {b!r}")
                    break
                if a != b and max(abs(a), abs(b)) > 1e-3 and column < attack_from and column != error_column:
                    worst = max(worst, abs(a - b) / max(abs(a), abs(b)))  # tiny values: ABSOLUTE_FLOOR
    return problems, worst


# Not results: the wall times, the rank count, and the fit's final gradient norm and iteration count,
# which are the rounding residue of the stopping test (about 1e-9 at the optimum, set by the order of
# the sums), not properties of the model.
# The attack's naive-refit comparison is timings and a rounding residue (its largest difference,
# about 1e-13) as well.
IGNORED = ("seconds", "mpi_ranks", "filkit_version", "fit_iterations", "json.fit", "json.naive_refit")


def compare_json(a, b, path, ignored=IGNORED, tolerance=TOLERANCE):
    """The numbers of two summaries, recursively; returns the differing paths."""
    if isinstance(a, dict) and isinstance(b, dict):
        problems = []
        for key in sorted(set(a) | set(b)):
            if key in ignored or f"{path}.{key}" in ignored:
                continue
            if key not in a or key not in b:
                problems.append(f"{path}.{key}: only in one")
            else:
                problems += compare_json(a[key], b[key], f"{path}.{key}", ignored, tolerance)
        return problems
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: lengths {len(a)} and {len(b)}"]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in compare_json(x, y, f"{path}[{i}]", ignored, tolerance)]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        tolerance = ATTACK_TOLERANCE if path.startswith("json.attack") else tolerance
        return [] if close(float(a), float(b), tolerance) else [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def outputs_of_serial_dpsgd(filkit, env, tmp, flags=RESUME_FLAGS, name="resume-reference"):
    """The uninterrupted single-process run of `flags` (a further table's {extra} under `name`): its
    tables and summary."""
    csv_path, json_path, extra = (os.path.join(tmp, name + suffix) for suffix in (".csv", ".json", "-extra.csv"))
    run([filkit, flags[0], "--quiet", "--threads", "1", "--out", csv_path, "--json", json_path] +
        [flag.replace("{extra}", extra) for flag in flags[1:]], env)
    tables = [read_csv(csv_path)] + ([read_csv(extra)] if os.path.exists(extra) else [])
    return tables, json.load(open(json_path))


def check_resume_on_other_ranks(filkit, mpirun, env, tmp, reference, flags=RESUME_FLAGS, calls=RESUME_CALLS):
    """Stops and resumes `flags` as `calls` say; returns 1 on failure, else 0."""
    checkpoint = os.path.join(tmp, f"resume-{flags[0]}.state")
    csv_path, json_path, extra = (os.path.join(tmp, f"resume-{flags[0]}{suffix}") for suffix in (".csv", ".json", "-extra.csv"))
    # public-training's summary does not say it resumed: its stopped calls' message must count the
    # steps of the calls before (dpsgd's summary says so).
    quiet = ["--quiet"] if flags[0] == "dpsgd" else []
    done, problems = 0, []
    for ranks, stop_after in calls:
        command = [filkit, flags[0]] + quiet + ["--threads", "1", "--out", csv_path, "--json", json_path,
                   "--checkpoint", checkpoint, "--stop-after", str(stop_after)] + [flag.replace("{extra}", extra) for flag in flags[1:]]
        output = run(command if ranks is None else mpirun + ["-np", str(ranks)] + command, env).stdout
        done += stop_after
        if not quiet and stop_after > 0 and f"stopped after step {done} of" not in output:
            problems.append(f"the call on {ranks or 1} rank(s) did not stop after step {done}: {output[-300:]}")
    what = " -> ".join(f"{ranks or 1} rank(s)" for ranks, _ in calls)
    tables = [read_csv(csv_path)] + ([read_csv(extra)] if os.path.exists(extra) else [])
    problems += compare_tables(tables, reference[0], flags[0])[0]
    summary = json.load(open(json_path))
    problems += compare_json(summary, reference[1], "json", IGNORED + ("resumed", "json.settings.checkpoint"))
    if quiet and not summary.get("resumed"):
        problems.append("the last call did not resume")
    if os.path.exists(checkpoint):
        problems.append("the resume file was left behind")
    if problems:
        print(f"FAILED: {flags[0]} stopped and resumed on {what}: " + "; ".join(problems[:5]))
        return 1
    print(f"ok: {flags[0]} stopped and resumed on {what} gives the uninterrupted single-process results")
    return 0


def check_split_resume_on_other_ranks(filkit, mpirun, env, tmp):
    """One public-training run (SPLIT_RESUME_FLAGS) stopped and resumed as SPLIT_RESUME_CALLS say,
    against the uninterrupted single-process run; returns 1 on failure, else 0."""
    reference = outputs_of_serial_dpsgd(filkit, env, tmp, SPLIT_RESUME_FLAGS, "split-resume-reference")
    return check_resume_on_other_ranks(filkit, mpirun, env, tmp, reference, SPLIT_RESUME_FLAGS, SPLIT_RESUME_CALLS)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--filkit", help="the filkit executable (required but with --list-parts)")
    parser.add_argument("--mpirun", default="mpirun")
    parser.add_argument("--ranks", help=f"rank counts of every setting (default: RANKS_OF's, else {RANKS})")
    parser.add_argument("--part", default=",".join(PARTS), help="comma-separated names of PARTS (default: all)")
    parser.add_argument("--list-parts", action="store_true")
    args = parser.parse_args()
    if args.list_parts:
        print(";".join(PARTS))  # a CMake list
        return
    if not args.filkit:
        parser.error("--filkit is required")
    parts = args.part.split(",")
    if any(part not in PARTS for part in parts):
        parser.error(f"--part {args.part}: the parts are {', '.join(PARTS)}")
    selected = {name for part in parts for name in PARTS[part]}
    settings = [(name, flags) for name, flags in SETTINGS if name in selected]
    checks = [check for check in CHECKS if check in selected]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = [args.mpirun, "--oversubscribe", "--bind-to", "none"]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        # Open MPI's session directory under this run's own TMPDIR: mpiruns of the tests that ctest
        # runs at once otherwise race to create the same /tmp/ompi.HOST.UID ("File exists").
        env["TMPDIR"] = tmp
        rows_file = os.path.join(tmp, "rows.txt")
        with open(rows_file, "w") as f:
            f.write("\n".join(str(i) for i in [0, 5, 17, 999, 1000, 1500, 1999]) + "\n")
        weights_file = os.path.join(tmp, "weights.csv")  # credit-g's 800 training examples, uneven
        with open(weights_file, "w") as f:
            f.write("weight\n" + "".join(f"{0.5 + (i * 7919 % 13) / 8}\n" for i in range(800)))
        if "disagreement" in checks:
            failures += check_disagreeing_ranks(args.filkit, mpirun, env, tmp)
        npz_file = os.path.join(tmp, "features.npz")
        write_npz(npz_file)
        for name, flags in settings:
            flags = [flag.replace("{rows}", rows_file).replace("{weights}", weights_file).replace("{npz}", npz_file)
                     for flag in flags]
            outputs = {}
            for ranks in ["serial"] + (args.ranks or RANKS_OF.get(name, RANKS)).split(","):
                csv_path, json_path = os.path.join(tmp, f"{name}-{ranks}.csv"), os.path.join(tmp, f"{name}-{ranks}.json")
                extra = os.path.join(tmp, f"{name}-{ranks}-extra.csv")
                command = [args.filkit, flags[0], "--quiet", "--threads", "1", "--out", csv_path, "--json", json_path]
                command += [flag.replace("{extra}", extra) for flag in flags[1:]]
                if ranks != "serial":
                    command = mpirun + ["-np", ranks] + command
                start = time.monotonic()
                run(command, env)
                seconds = time.monotonic() - start
                # The further table (irfil's weights of every iteration, reconstruct's images), if any.
                tables = [read_csv(csv_path)] + ([read_csv(extra)] if os.path.exists(extra) else [])
                outputs[ranks] = (tables, json.load(open(json_path)), seconds)
            reference_tables, reference_json, _ = outputs["serial"]
            for ranks, (tables, summary, seconds) in outputs.items():
                if ranks == "serial":
                    continue
                tolerance = TOLERANCE_OF.get(name, TOLERANCE)
                problems, worst = compare_tables(tables, reference_tables, flags[0], tolerance)
                problems += compare_json(summary, reference_json, "json", tolerance=tolerance)
                if summary.get("mpi_ranks") != int(ranks):
                    problems.append(f"json.mpi_ranks = {summary.get('mpi_ranks')}, expected {ranks}")
                examples = len(tables[0][1])
                if problems:
                    print(f"FAILED: {name} on {ranks} ranks: " + "; ".join(problems[:5]))
                else:
                    print(f"ok: {name} on {ranks} ranks: {examples} examples, largest relative difference {worst:.1e} "
                          f"(values above 1e-3, outside the attack's columns); {seconds:.1f} s, one process "
                          f"{outputs['serial'][2]:.1f} s")
                failures += bool(problems)
        if "resume" in checks:
            reference = outputs_of_serial_dpsgd(args.filkit, env, tmp)
            failures += check_resume_on_other_ranks(args.filkit, mpirun, env, tmp, reference)
        if "errors" in checks:
            # An error on the ranks ends them all, with the error named, not a hang.
            failures += expect_failure(mpirun + ["-np", "3", args.filkit, "measure", "--quiet", "--train-size", "301",
                                                 "--subset", "class=7"], env,
                                       "no training example has that class",
                                       "an error on the ranks ends the job with the message")
            failures += expect_failure(mpirun + ["-np", "2", args.filkit, "accountant", "--quiet"], env,
                                       "runs on one process", "a job that runs on one process refuses several ranks")
            failures += check_dying_rank(args.filkit, mpirun, env)
        if "learned-attack-ranks" in checks:
            failures += check_learned_attack_ranks(args.filkit, mpirun, env, tmp)
        if "learned-attack-store" in checks:
            failures += check_learned_attack_store(args.filkit, mpirun, env, tmp)
        if "public-training-ranks" in checks:
            failures += check_public_training_ranks(args.filkit, mpirun, env, tmp)
        if "public-training-errors" in checks:
            failures += check_public_training_errors(args.filkit, mpirun, env, tmp)
        if "public-training-split-resume" in checks:
            failures += check_split_resume_on_other_ranks(args.filkit, mpirun, env, tmp)
        if "learned-attack-errors" in checks:
            # Every shadow model diverges: the ranks learn it at the end of the wave and stop.
            diverging = [args.filkit] + LEARNED_ATTACK_FLAGS + ["--train-shadow-models", "17", "--step-size", "1e300",
                                                               "--clip-norm", "1e300"]
            diverging[diverging.index("--methods") + 1] = "dpsgd"
            failures += expect_failure(mpirun + ["-np", "2"] + diverging, env, "training diverged",
                                       "shadow models diverging on the ranks end the learned-attack job")
            # 10,000 sgd shadow models of 200 steps: minutes of work, stopped after 4 s.
            failures += check_dying_rank(args.filkit, mpirun, env, [
                "learned-attack", "--quiet", "--threads", "1", "--methods", "sgd", "--public-size", "50",
                "--gradient-batch-size", "50", "--fixed-size", "49", "--batch-size", "50", "--steps", "200",
                "--train-shadow-models", "10000", "--target-shadow-models", "10"])
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
