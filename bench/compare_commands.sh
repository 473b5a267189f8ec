#!/usr/bin/env bash
# Every command of two filkit binaries on the same small jobs: their per-example CSVs compared
# column by column and every number of their JSON summaries compared path by path (timings,
# settings and the version left out; a fit's final gradient norm compared absolutely; "checkpoints" of older binaries read as "snapshots", "thesis_accountant" as "fisher_term_accountant"). Flags
# that were renamed are given in each binary's spelling. Fails if any difference exceeds the
# tolerance or a CSV's header or shape differs.
#
#   bench/compare_commands.sh BASELINE_FILKIT NEW_FILKIT [TOLERANCE=1e-9]
#   e.g. bench/compare_commands.sh /work/buildtime/8f23d96/build/filkit build/filkit
# (dpsgd's flags are those since --noise-multiplier and --clip-norm, 2026-11.)
set -euo pipefail

if (($# < 2)); then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
baseline=$1
new=$2
tolerance=${3:-1e-9}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# name | common flags | baseline-only flags | new-only flags
jobs=(
  "measure|measure|"
  "measure-income|measure --data income-regression --model least-squares --regression --attribute MARITAL.STATUS|"
  "irfil|irfil --data income-regression --model least-squares --regression --iterations 3|"
  "attack|attack --data income-regression --model least-squares --regression --trials 5 --examples 300 --sigmas 0.001,0.01,0.1|"
  "bound|bound|"
  "reconstruct|reconstruct --trials 10|"
  "dpsgd|dpsgd --steps 60 --batch-size 200 --step-size 0.5 --runs 2 --noise-multiplier 1 --clip-norm 1|"
  "fim|fim --classes 0,1 --train-size 600 --public-fraction 0.5 --pretrain-steps 10 --batch-size 100 --steps 3 --gradient-batch-size 100 --gradient-steps 2 --gradient-decay 1 --gradient-min-steps 1 --sampling shuffle|"
  "public-mlp|public-training --model mlp --hidden 8 --classes 0,1 --train-size 300 --test-size 100 --pretrain-steps 5 --batch-size 50 --steps 2 --gradient-batch-size 50 --gradient-steps 1 --gradient-decay 1 --gradient-min-steps 1|"
  "public-conditional|public-training --methods fim --gradient-model conditional --gradient-hidden 8 --classes 0,1 --train-size 300 --test-size 100 --pretrain-steps 5 --batch-size 50 --steps 2 --gradient-batch-size 50 --gradient-steps 1 --gradient-decay 1 --gradient-min-steps 1|"
  "public-exact|public-training --methods dpsgd,prune,fim --pca 16 --gradient-model vector --gradient-trace exact --trace exact --reference-logit --classes 0,1,2 --train-size 300 --test-size 100 --pretrain-steps 5 --batch-size 50 --steps 2 --gradient-batch-size 50 --gradient-steps 1 --gradient-decay 1 --gradient-min-steps 1|"
  "public-step-probes|public-training --gradient-probe-draws step --lambda-decay 1 --lambda-min 0.5 --public-split first --pretrain-sampling shuffle --runs 2 --classes 0,1 --train-size 300 --test-size 100 --pretrain-steps 5 --batch-size 50 --steps 2 --gradient-batch-size 50 --gradient-steps 1 --gradient-decay 1 --gradient-min-steps 1|"
  "learned-attack|learned-attack --methods sgd,dpsgd --train-shadow-models 12 --target-shadow-models 3 --public-size 100 --fixed-size 99 --batch-size 100 --gradient-batch-size 100 --attacker-hidden 8 --attacker-epochs 3|"
)

failed=0
for job in "${jobs[@]}"; do
  IFS='|' read -r name common old_only new_only <<< "$job"
  for side in baseline new; do
    binary=${!side}
    extra=$old_only
    [ "$side" = new ] && extra=$new_only
    # shellcheck disable=SC2086  # the flags are words
    "$binary" $common $extra --seed 3 --out "$work/$side-$name.csv" --json "$work/$side-$name.json" --quiet \
      2> "$work/$side-$name.err" || { echo "$side $name failed:"; cat "$work/$side-$name.err"; exit 1; }
  done
  /usr/bin/python3 - "$work/baseline-$name" "$work/new-$name" "$tolerance" "$name" << 'EOF' || failed=1
import json, sys
import numpy as np
np.seterr(invalid="ignore")  # inf - inf in the tables: handled below

old, new, tolerance, name = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]

def relative(x, y, floor=0.0):
    x, y = np.asarray(x, float), np.asarray(y, float)
    scale = np.maximum(np.maximum(np.abs(x), np.abs(y)), floor)
    scale[scale == 0] = 1.0
    d = np.abs(x - y) / scale
    with np.errstate(invalid="ignore"):
        d[(x == y) | (np.isnan(x) & np.isnan(y))] = 0.0  # equal, infinities included
    d[np.isnan(d)] = np.inf
    return d

a = np.genfromtxt(old + ".csv", delimiter=",", names=True)
b = np.genfromtxt(new + ".csv", delimiter=",", names=True)
if a.dtype.names != b.dtype.names or a.shape != b.shape:
    sys.exit(f"{name}: the CSVs differ in shape or header: {a.dtype.names} {a.shape} vs {b.dtype.names} {b.shape}")
csv_worst = max(relative(a[c], b[c]).max() for c in a.dtype.names)

# Keys of older binaries read under their current names.
RENAMED = {"checkpoints": "snapshots", "thesis_accountant": "fisher_term_accountant"}

def numbers(node, path, out):
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("seconds", "settings", "filkit_version", "warning"):
                continue
            numbers(v, path + "/" + RENAMED.get(k, k), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            numbers(v, f"{path}/{i}", out)
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        out[path] = float(node)
    return out

ja = numbers(json.load(open(old + ".json")), "", {})
jb = numbers(json.load(open(new + ".json")), "", {})
common = sorted(set(ja) & set(jb))
# A converged fit's final gradient norm is rounding noise (about 1e-10): compared absolutely,
# as a difference below 1e-12.
json_difference = {p: relative([ja[p]], [jb[p]], 1e-3 if p.endswith("gradient_norm") else 0.0)[0] for p in common}
json_worst = max(json_difference.values(), default=0.0)
worst_path = max(json_difference, key=json_difference.get) if common else "-"
only_old, only_new = sorted(set(ja) - set(jb)), sorted(set(jb) - set(ja))
ok = csv_worst <= tolerance and json_worst <= tolerance
print(f"{name:15s} CSV {a.shape[0]:6d} rows x {len(a.dtype.names):2d} cols: {csv_worst:.1e}   "
      f"JSON {len(common):4d} numbers: {json_worst:.1e} (at {worst_path})   "
      f"only baseline {len(only_old)}, only new {len(only_new)}  {'ok' if ok else 'ABOVE TOLERANCE'}")
for p in only_old[:5]:
    print(f"    only in baseline: {p}")
sys.exit(0 if ok else 1)
EOF
done
echo "tolerance $tolerance: $([ $failed = 0 ] && echo 'every command within it' || echo 'SOME COMMAND ABOVE IT')"
exit $failed
