#!/usr/bin/env bash
# Runs one fuzz target of fuzz/ (built by scripts/asan-build.sh) for RUNS executions, starting from
# its committed seeds (fuzz/corpus/TARGET) and the inputs earlier runs kept (build-asan/fuzz/corpus/
# TARGET, not committed). It goes on past findings (libFuzzer's fork mode, one worker): each is
# saved as fuzz/findings/TARGET/{crash,leak,timeout,oom}-<sha1>, to be described in fuzz/README.md.
# Ends with one line: executions, seconds, findings.
#   bash scripts/fuzz.sh TARGET [RUNS] [libFuzzer flags...]   RUNS defaults to 1000000
#   bash scripts/fuzz.sh list                                  the targets
#   bash scripts/fuzz.sh TARGET 0 fuzz/findings/TARGET/crash-...   reproduce one finding (its stack)
#   bash scripts/fuzz.sh TARGET triage   each finding's error and its innermost frames in filkit's code
# Reproducing and triage run the recorded findings the targets otherwise skip (FILKIT_FUZZ_ALL=1).
#   FILKIT_FUZZ_SKIP_BUILD=1   use the fuzzer as built (e.g. while another build runs in build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-list}" = list ]; then
  for source in fuzz/*_fuzz.cpp; do basename "$source" _fuzz.cpp; done
  exit 0
fi
target=$1
runs=${2:-1000000}
shift $(($# < 2 ? $# : 2))
[ -f "fuzz/${target}_fuzz.cpp" ] || { echo "fuzz.sh: no target '$target' (bash scripts/fuzz.sh list)" >&2; exit 2; }
build="${FILKIT_ASAN_BUILD_DIR:-build-asan}"
[ "${FILKIT_FUZZ_SKIP_BUILD:-0}" = 1 ] || bash scripts/asan-build.sh "${target}_fuzz"
source scripts/sanitizer-env.sh
source fuzz/flags.sh
fuzzer="$build/fuzz/${target}_fuzz"

# Reproducing: the given inputs only, with the full report.
if [ "$runs" = 0 ]; then
  FILKIT_FUZZ_ALL=1 exec "$fuzzer" "${FILKIT_FUZZ_FLAGS[@]}" "$@"
fi
if [ "$runs" = triage ]; then
  for finding in fuzz/findings/"$target"/*; do
    [ -f "$finding" ] || continue
    echo "== $finding"
    { FILKIT_FUZZ_ALL=1 "$fuzzer" "${FILKIT_FUZZ_FLAGS[@]}" "$finding" 2>&1 || true; } |
      grep -E "ERROR|runtime error|invariant failed|uncaught|#[0-9]+ .* in .*/(src|cli|fuzz)/[^ ]+\.(cpp|hpp):" | head -6 |
      sed -E 's/ \(BuildId: [0-9a-f]+\)//; s/0x[0-9a-f]+ in //; s#/[^ ]*/(src|cli|fuzz)/#\1/#'
  done
  exit 0
fi

corpus="$build/fuzz/corpus/$target" findings="fuzz/findings/$target"
mkdir -p "$corpus" "$findings"
log="$build/fuzz/$target.log"
start=$SECONDS
# shellcheck disable=SC2046
"$fuzzer" "${FILKIT_FUZZ_FLAGS[@]}" $(filkit_fuzz_dict "$target") -runs="$runs" \
  -fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1 \
  -artifact_prefix="$findings/" "$@" "$corpus" "fuzz/corpus/$target" > "$log" 2>&1 || true
seconds=$((SECONDS - start))
executions=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
count=$(find "$findings" -type f | wc -l)
rmdir "$findings" 2> /dev/null || true
echo "fuzz.sh: $target: ${executions:-0} executions in ${seconds} s, $count finding(s) in $findings (log: $log)"
