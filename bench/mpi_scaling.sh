#!/usr/bin/env bash
# Strong scaling under mpirun (docs/distributed.md) of one of two jobs, on 1, 2 and 4 ranks (4
# oversubscribes a 2-core machine), one OpenMP thread a rank, each configuration --repeats times,
# beside the single-process program with one and with two threads (the baseline, same run):
#   --job measure    filkit measure: logistic regression on raw pixels (d = 784, no PCA, lambda
#                    1e-3) on n = 60000 k replicated MNIST examples (bench/replicated_mnist.py)
#   --job dpsgd-cnn  filkit dpsgd: the paper's ConvNet by private SGD on those examples (all ten
#                    classes), B = 512, --steps steps, the trace by one Gaussian probe a step
# Prints a table of wall times (median and range) and the per-stage times of the median run from
# the summaries' "seconds".
#   bash bench/mpi_scaling.sh [--job measure|dpsgd-cnn] [--copies K] [--ranks 1,2,4] [--repeats R] [--steps T]
#   FILKIT_BINARY (default build/filkit), FILKIT_CACHE (where the replicated data go)
set -euo pipefail
cd "$(dirname "$0")/.."
job_name=measure
copies=1
ranks=1,2,4
repeats=3
steps=40
usage="usage: $0 [--job measure|dpsgd-cnn] [--copies K] [--ranks 1,2,4] [--repeats R] [--steps T]"
while (($#)); do
  case "$1" in
    --job) job_name=$2; shift 2 ;;
    --copies) copies=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    *) echo "$usage" >&2; exit 2 ;;
  esac
done
filkit="${FILKIT_BINARY:-build/filkit}"
cache="${FILKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/filkit}"
data="$cache/replicated-mnist-$copies"
[ -f "$data/train-images-idx3-ubyte" ] || /usr/bin/python3 bench/replicated_mnist.py "$copies" "$data" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
case "$job_name" in
  measure)
    job=(measure --quiet --data "mnist:$data" --pca 0 --l2 1e-3)
    stage_names="load preprocess fit fil"
    what="logistic" ;;
  dpsgd-cnn)
    job=(dpsgd --quiet --data "mnist:$data" --model cnn --batch-size 512 --steps "$steps" --step-size 0.1 --clip-norm 1
         --noise-multiplier 1)
    stage_names="load preprocess training evaluation"
    what="ConvNet private SGD, B = 512, T = $steps" ;;
  *) echo "$usage" >&2; exit 2 ;;
esac

configurations=("serial-1-thread" "serial-2-threads")
for k in ${ranks//,/ }; do configurations+=("mpi-$k"); done
echo "n = $((60000 * copies)), d = 784, $what, $(nproc) cores, $repeats repeats" >&2
printf '| configuration | wall s (median) | range |'
for stage in $stage_names; do printf ' %s |' "$stage"; done
printf '\n| --- | --- | --- |'
for stage in $stage_names; do printf ' --- |'; done
printf '\n'
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
print(" | ".join("%.2f" % seconds[stage] for stage in sys.argv[2].split()))' "$out/$configuration-${median#* }.json" "$stage_names")
  printf '| %s | %.2f | %.2f-%.2f | %s |\n' "$configuration" "${median% *}" "$(echo "$sorted" | head -1 | cut -d' ' -f1)" \
    "$(echo "$sorted" | tail -1 | cut -d' ' -f1)" "$stages"
done
