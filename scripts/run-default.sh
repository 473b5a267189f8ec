#!/usr/bin/env bash
# Sets everything up, then runs the default job (Fashion-MNIST 0 vs 1, global-max scaling, PCA 20,
# logistic regression, lambda 8e-4, sigma 1). Outputs go to ${FILKIT_OUT:-out}/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh filkit_cli _filkit   # only what the job needs: not the tests
out="${FILKIT_OUT:-out}"
mkdir -p "$out"
"${FILKIT_BUILD_DIR:-build}/filkit" measure --subset all --out "$out/default-per-example.csv" \
  --json "$out/default-summary.json" "$@"
echo "wrote $out/default-per-example.csv and $out/default-summary.json" >&2
