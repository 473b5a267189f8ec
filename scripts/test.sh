#!/usr/bin/env bash
# Sets everything up, then runs the whole test suite: the C++ tests (ctest) and, when the Python
# module is built, the Python tests (pytest under /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
build="${FILKIT_BUILD_DIR:-build}"
ctest --test-dir "$build" -j"$(nproc)" --output-on-failure --timeout 900
