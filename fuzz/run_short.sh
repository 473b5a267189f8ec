#!/usr/bin/env bash
# One fuzz target's test in the suite (ctest fuzz_TARGET): every seed, then SECONDS of fuzzing from
# them. New inputs and any finding stay in WORK (the build directory), never in the committed corpus.
#   fuzz/run_short.sh FUZZER SEEDS WORK SECONDS
set -euo pipefail
fuzzer=$1 seeds=$2 work=$3 seconds=$4
source "$(dirname "$0")/flags.sh"
rm -rf "$work"
mkdir -p "$work/corpus" "$work/artifacts"
name=$(basename "$seeds")
# shellcheck disable=SC2046
exec "$fuzzer" "${FILKIT_FUZZ_FLAGS[@]}" $(filkit_fuzz_dict "$name") -max_total_time="$seconds" \
  -artifact_prefix="$work/artifacts/" "$work/corpus" "$seeds"
