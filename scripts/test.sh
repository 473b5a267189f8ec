#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: the C++ tests (ctest) and, when the Python
# module is built, the Python tests (pytest under /usr/bin/python3); then the same C++ tests in the
# sanitizer build (scripts/asan-build.sh: AddressSanitizer and UndefinedBehaviorSanitizer, no
# LibTorch, no Python), with a short run of every fuzz target of fuzz/ (ctest label "fuzz").
# Prints the time of each phase.
#   FILKIT_SKIP_ASAN=1   leave out the sanitizer build and its tests (a quick local run)
set -euo pipefail
cd "$(dirname "$0")/.."
phases=()
phase() {  # phase NAME COMMAND...: runs it and records its wall time
  local name=$1 start=$SECONDS
  shift
  "$@"
  phases+=("$name $((SECONDS - start)) s")
}
report() { printf 'test.sh: %s\n' "${phases[@]}" >&2; }
trap report EXIT

phase setup bash scripts/setup.sh
build="${FILKIT_BUILD_DIR:-build}"
phase tests ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 900
if [ "${FILKIT_SKIP_ASAN:-0}" != 1 ]; then
  phase asan-build bash scripts/asan-build.sh
  source scripts/sanitizer-env.sh
  phase asan-tests ctest --test-dir "${FILKIT_ASAN_BUILD_DIR:-build-asan}" -j"$(nproc)" --output-on-failure --timeout 900
fi
