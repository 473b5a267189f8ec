#!/usr/bin/env bash
# Builds CMake targets of a configured build directory on every core, the compiler's output in a
# log file inside it; on failure prints the errors and the log's path. For setup.sh and asan-build.sh.
#   bash scripts/cmake-build.sh BUILD_DIR LOG_NAME [TARGET...]   (default target: all)
set -euo pipefail
build=$1 log="$1/$2"
shift 2
targets=("$@")
((${#targets[@]})) || targets=(all)
if ! cmake --build "$build" -j"$(nproc)" --target "${targets[@]}" > "$log" 2>&1; then
  grep -E -A3 "error|Error" "$log" | head -60 >&2
  echo "the build of ${targets[*]} in $build failed (full log: $log)" >&2
  exit 1
fi
