#!/usr/bin/env bash
# Fresh full build time (library + CLI + tests, LibTorch on, no benchmarks or Python) of two
# commits of this repository, one after the other in the same run, each in a fresh clone with
# ccache disabled, on all cores (-j$(nproc)). Usage: bench/build_time.sh BASELINE_COMMIT [NEW_COMMIT]
# With BUILD_TIME_KEEP=DIR the two builds are kept under DIR (e.g. to time their binaries after).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
baseline="${1:?baseline commit}"
new="${2:-HEAD}"
if [ -n "${BUILD_TIME_KEEP:-}" ]; then
  work="$BUILD_TIME_KEEP"
  mkdir -p "$work"
else
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
fi
for commit in "$baseline" "$new"; do
  dir="$work/$(git -C "$repo" rev-parse --short "$commit")"
  rm -rf "$dir"
  git clone -q "$repo" "$dir"
  git -C "$dir" checkout -q "$commit"
  cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DFILKIT_WITH_TORCH=ON -DFILKIT_BUILD_TESTS=ON \
    -DFILKIT_BUILD_BENCH=OFF -DFILKIT_BUILD_PYTHON=OFF -DCMAKE_CXX_COMPILER_LAUNCHER= > /dev/null
  start=$(date +%s.%N)
  CCACHE_DISABLE=1 cmake --build "$dir/build" -j"$(nproc)" > "$dir/build.log" 2>&1 || { tail "$dir/build.log"; exit 1; }
  end=$(date +%s.%N)
  printf '%s %s: fresh build %.0f s on %s cores\n' "$commit" "$(git -C "$repo" log -1 --format=%s "$commit" | cut -c1-60)" \
    "$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$(nproc)"
done
