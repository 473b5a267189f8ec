#!/usr/bin/env bash
# Two filkit jobs at once on the same cores, each with --threads equal to the cores, with OpenMP's
# default wait policy (threads spin at a barrier before they sleep) against OMP_WAIT_POLICY=passive:
# the wall time of one job alone and of the pair, both ways, for fim's constant gradient model on
# table 3.1's softmax regression (2 private steps after 4 epochs of the public half) and a learned
# attack's fim shadow models (binary MNIST, 24 shadow models). Run it on an otherwise idle machine.
#
#   bench/concurrent_jobs.sh [FILKIT=build/filkit] [THREADS=$(nproc)]
set -euo pipefail

filkit=${1:-build/filkit}
threads=${2:-$(nproc)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fim="$filkit public-training --quiet --runs 1 --seed 0 --threads $threads --methods fim --classes all
     --public-fraction 0.5 --pretrain-steps 20 --steps 2 --gradient-steps 4 --gradient-decay 0
     --gradient-min-steps 4 --sampling shuffle"
attack="$filkit learned-attack --quiet --threads $threads --methods fim --train-shadow-models 20
        --target-shadow-models 4 --attacker-epochs 1"

seconds() {  # the wall seconds of the command in "$@", which runs with the environment given before it
  local start end
  start=$(date +%s.%N)
  "$@" > /dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc
}

for job in fim attack; do
  for policy in default passive; do
    env=()
    [ "$policy" = passive ] && env=(OMP_WAIT_POLICY=passive)
    # shellcheck disable=SC2086  # the flags are words
    alone=$(seconds env "${env[@]}" ${!job} --json "$work/alone.json")
    start=$(date +%s.%N)
    # shellcheck disable=SC2086
    env "${env[@]}" ${!job} --json "$work/a.json" > /dev/null &
    # shellcheck disable=SC2086
    env "${env[@]}" ${!job} --json "$work/b.json" > /dev/null
    wait
    pair=$(echo "$(date +%s.%N) - $start" | bc)
    printf '%-7s %-8s alone %6.1f s   two at once %6.1f s (%.2f x alone)\n' "$job" "$policy" "$alone" "$pair" \
      "$(echo "$pair / $alone" | bc -l)"
  done
done
