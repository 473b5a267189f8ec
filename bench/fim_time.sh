#!/usr/bin/env bash
# fim's learned gradient model, two builds in the same run: wall, CPU and system seconds, peak
# memory and fim's own seconds of two small jobs, the thesis' table 3.2 ConvNet (2 private steps,
# one public batch of 512 before each) and table 3.4's binary MNIST (5 full-batch steps, 30 public
# batches of 1000), and the largest relative difference of their per-example dFIL.
#
#   bench/fim_time.sh BASELINE_BUILD_DIR NEW_BUILD_DIR [THREADS=2]
#   (each directory holds filkit and libfilkit_torch.so)
set -euo pipefail

if (($# < 2)); then
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
threads=${3:-2}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
common="fim --quiet --runs 1 --seed 0 --threads $threads --methods fim"
cnn="--model cnn --classes all --public-fraction 0.05 --pretrain-steps 20 --batch-size 512 --steps 2
     --noise-multiplier 2 --clip-norm 8 --gradient-batch-size 512 --gradient-steps 1 --gradient-decay 0
     --gradient-min-steps 1"
binary="--classes 0,1 --train-size 2000 --public-fraction 0.5 --pretrain-steps 0 --batch-size 1000 --steps 5
        --step-size 0.1 --noise-multiplier 0.05 --clip-norm 10 --gradient-batch-size 1000 --gradient-steps 10
        --gradient-decay 2 --gradient-min-steps 2"
for job in cnn binary; do
  for side in baseline new; do
    dir=$1
    [ "$side" = new ] && dir=$2
    # shellcheck disable=SC2086  # the flags are words
    FILKIT_TORCH_PLUGIN="$dir/libfilkit_torch.so" /usr/bin/time -f "$job $side: %e s wall, %U s user, %S s sys, %M kB peak" \
      "$dir/filkit" $common ${!job} --json "$work/$job-$side.json" --out "$work/$job-$side.csv"
  done
  /usr/bin/python3 - "$work/$job" << 'PY'
import json, sys
import numpy as np
base = sys.argv[1]
seconds = [json.load(open(f"{base}-{side}.json"))["seconds"]["fim"] for side in ("baseline", "new")]
old, new = (np.genfromtxt(f"{base}-{side}.csv", delimiter=",", names=True)["dfil"] for side in ("baseline", "new"))
print(f"  fim stage: {seconds[0]:.1f} s -> {seconds[1]:.1f} s ({seconds[0] / seconds[1]:.2f}x); "
      f"largest relative dFIL difference {np.max(np.abs(old - new) / np.maximum(np.abs(old), 1e-300)):.1e}")
PY
done
