#!/usr/bin/env bash
# FIL paper, Table 1, MNIST 0 vs 1 rows: per-example eta (sigma = 1) of linear and logistic
# regression on PCA-20 features (pixels /255, global-max scaling), before and after 10 IRFIL
# iterations. Outputs under ${FILKIT_OUT:-/tmp/filkit-experiments}/fil_table1.
set -euo pipefail
cd "$(dirname "$0")/.."
filkit=${FILKIT_BINARY:-build/filkit}
out="${FILKIT_OUT:-/tmp/filkit-experiments}/fil_table1"
mkdir -p "$out"
for model in "least-squares 0" "logistic 8e-4"; do
  set -- $model
  "$filkit" irfil --data mnist --classes 0,1 --row-scaling global-max --pca 20 --model "$1" --l2 "$2" \
    --iterations 10 --quiet --json "$out/$1.json" --out "$out/$1.csv"
  /usr/bin/python3 - "$out/$1.json" "$1" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
first, last = summary["iterations"][0], summary["iterations"][-1]
for name, it in (("", first), ("+IRFIL", last)):
    print(f"{sys.argv[2]:14s}{name:7s} eta {it['eta']['mean']:.4f} +- {it['eta']['std']:.4f}  "
          f"test accuracy {100 * it['test_accuracy']:.2f}  (train {100 * it['train_accuracy']:.2f})")
PY
done
