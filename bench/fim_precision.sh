#!/usr/bin/env bash
# fim's constant gradient model on the thesis' table 3.2 ConvNet, its objective in float64 against
# float32 (--gradient-precision), one build, interleaved in the same run: the cost of one public
# batch of 512 (CPU and wall seconds of a run with N2 batches before its private step minus one
# with N1, so pre-training, loading and the private step cancel), extrapolated to table 3.2's
# 15,840 batches, and how far the float32 run's per-example dFIL and accuracy are from float64's.
#
#   bench/fim_precision.sh BUILD_DIR [THREADS=2] [N1=2] [N2=12] [ROUNDS=1]
#   (BUILD_DIR holds filkit and libfilkit_torch.so)
set -euo pipefail

if (($# < 1)); then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
dir=$1 threads=${2:-2} n1=${3:-2} n2=${4:-12} rounds=${5:-1}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
flags="fim --quiet --runs 1 --seed 0 --threads $threads --methods fim --model cnn --classes all
       --public-fraction 0.05 --pretrain-steps 20 --freeze-fraction 0.5 --batch-size 512 --steps 1
       --noise-multiplier 2 --clip-norm 8 --gradient-batch-size 512 --gradient-unit batches --gradient-decay 0"
for round in $(seq "$rounds"); do
  for precision in float64 float32; do
    for n in "$n1" "$n2"; do
      name="$work/$precision-$n-$round"
      # shellcheck disable=SC2086  # the flags are words
      FILKIT_TORCH_PLUGIN="$dir/libfilkit_torch.so" /usr/bin/time -o "$name.time" -f "%e %U %S" \
        "$dir/filkit" $flags --gradient-steps "$n" --gradient-min-steps "$n" --gradient-precision "$precision" \
        --json "$name.json" --out "$name.csv"
    done
  done
done
/usr/bin/python3 - "$work" "$n1" "$n2" "$rounds" << 'PY'
import json, sys
import numpy as np
work, n1, n2, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
batches = 15840  # table 3.2: (200 + 150 + 100 + 50 + 107 x 20) epochs of 6 batches
for precision in ("float64", "float32"):
    for r in range(1, rounds + 1):
        t = {n: [float(v) for v in open(f"{work}/{precision}-{n}-{r}.time").read().split()] for n in (n1, n2)}
        wall = (t[n2][0] - t[n1][0]) / (n2 - n1)
        cpu = (t[n2][1] + t[n2][2] - t[n1][1] - t[n1][2]) / (n2 - n1)
        print(f"{precision} (round {r}): {wall:.3f} s wall, {cpu:.3f} s CPU a batch of 512; "
              f"table 3.2's {batches} batches: {wall * batches / 3600:.2f} h wall, {cpu * batches / 3600:.2f} h CPU")
for n in (n1, n2):
    old, new = (np.genfromtxt(f"{work}/{p}-{n}-1.csv", delimiter=",", names=True)["dfil"] for p in ("float64", "float32"))
    acc = [json.load(open(f"{work}/{p}-{n}-1.json"))["methods"][0]["test_accuracy"]["mean"] for p in ("float64", "float32")]
    print(f"{n} batches: float32 against float64: largest relative dFIL difference "
          f"{np.max(np.abs(old - new) / np.maximum(np.abs(old), 1e-300)):.1e}, test accuracy {acc[0]:.4f} / {acc[1]:.4f}")
PY
