#!/usr/bin/env bash
# The learned attack's fim shadow models with a shared start (--shared-start, the default: the
# start and fim's first gradient-model training made once; docs/mathematics.md, section 11.6)
# against each model's own (--no-shared-start), one build, the same run, alternating: the shadow
# models' seconds and the seconds a model, at the thesis' table B.2 settings.
#
#   bench/shadow_start.sh [BUILD_DIR=build] [MODELS=8+4] [REPEATS=1]
#   (BUILD_DIR holds filkit and libfilkit_torch.so; MODELS is train + target shadow models)
set -euo pipefail

dir=${1:-build}
models=${2:-8+4}
repeats=${3:-1}
train=${models%+*}
target=${models#*+}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for ((r = 1; r <= repeats; ++r)); do
  for start in --no-shared-start --shared-start; do
    FILKIT_TORCH_PLUGIN="$dir/libfilkit_torch.so" "$dir/filkit" learned-attack --methods fim --quiet --threads 1 \
      --seed 0 --train-shadow-models "$train" --target-shadow-models "$target" "$start" \
      --json "$work/$r$start.json" --out "$work/$r$start.csv"
    /usr/bin/python3 - "$work/$r$start.json" "$start" "$((train + target))" << 'PY'
import json, sys
seconds = json.load(open(sys.argv[1]))["seconds"]["fim shadow models"]
print(f"{sys.argv[2]:18s} {seconds:7.1f} s for {sys.argv[3]} fim shadow models, {seconds / int(sys.argv[3]):.2f} s a model")
PY
  done
done
