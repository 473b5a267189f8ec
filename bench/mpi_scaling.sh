#!/usr/bin/env bash
# Strong scaling of `filkit measure` under mpirun (docs/distributed.md): the same job (logistic
# regression on raw pixels, d = 784, no PCA, lambda 1e-3) on n = 60000 k replicated MNIST examples
# (bench/replicated_mnist.py), on 1, 2 and 4 ranks (4 oversubscribes a 2-core machine), one OpenMP
# thread a rank, each configuration --repeats times, beside the single-process program with one
# and with two threads (the baseline, same run). Prints a table of wall times (median and range)
# and the per-stage times of the median run from the summaries' "seconds".
#   bash bench/mpi_scaling.sh [--copies K] [--ranks 1,2,4] [--repeats R]
#   FILKIT_BINARY (default build/filkit), FILKIT_CACHE (where the replicated data go)
set -euo pipefail
cd "$(dirname "$0")/.."
copies=1
ranks=1,2,4
repeats=3
while (($#)); do
  case "$1" in
    --copies) copies=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    *) echo "usage: $0 [--copies K] [--ranks 1,2,4] [--repeats R]" >&2; exit 2 ;;
  esac
done
filkit="${FILKIT_BINARY:-build/filkit}"
cache="${FILKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/filkit}"
data="$cache/replicated-mnist-$copies"
[ -f "$data/train-images-idx3-ubyte" ] || /usr/bin/python3 bench/replicated_mnist.py "$copies" "$data" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
job=(measure --quiet --data "mnist:$data" --pca 0 --l2 1e-3)

configurations=("serial-1-thread" "serial-2-threads")
for k in ${ranks//,/ }; do configurations+=("mpi-$k"); done
echo "n = $((60000 * copies)), d = 784, logistic, $(nproc) cores, $repeats repeats" >&2
printf '| configuration | wall s (median) | range | load | preprocess | fit | fil |\n| --- | --- | --- | --- | --- | --- | --- |\n'
for configuration in "${configurations[@]}"; do
  times=()
  for ((r = 0; r < repeats; r++)); do
    json="$out/$configuration-$r.json"
    case "$configuration" in
      serial-1-thread) command=("$filkit" "${job[@]}" --json "$json" --threads 1) ;;
      serial-2-threads) command=("$filkit" "${job[@]}" --json "$json" --threads 2) ;;
      mpi-*) command=(mpirun --oversubscribe --bind-to none -np "${configuration#mpi-}" "$filkit" "${job[@]}" --json "$json" --threads 1) ;;
    esac
    start=$(date +%s%N)
    "${command[@]}"
    elapsed_ms=$((($(date +%s%N) - start) / 1000000))
    times+=("$((elapsed_ms / 1000)).$(printf '%03d' $((elapsed_ms % 1000))) $r")
  done
  sorted=$(printf '%s\n' "${times[@]}" | sort -n)
  median=$(echo "$sorted" | sed -n "$(((repeats + 1) / 2))p")
  stages=$(/usr/bin/python3 -c '
import json, sys
seconds = json.load(open(sys.argv[1]))["seconds"]
print(" | ".join("%.2f" % seconds[stage] for stage in ["load", "preprocess", "fit", "fil"]))' "$out/$configuration-${median#* }.json")
  printf '| %s | %.2f | %.2f-%.2f | %s |\n' "$configuration" "${median% *}" "$(echo "$sorted" | head -1 | cut -d' ' -f1)" \
    "$(echo "$sorted" | tail -1 | cut -d' ' -f1)" "$stages"
done
