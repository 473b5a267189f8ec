#!/usr/bin/env bash
# Configures filkit's Release build: the library at -O3, its glue (the command line, the tests,
# the Python bindings) at -O1 as a unity build (FILKIT_GLUE_FLAGS, FILKIT_GLUE_UNITY in
# CMakeLists.txt: the glue was two thirds of the build's time and does no numerics of its own),
# with the Python module for PYTHON and the LibTorch plugin. The one configuration of setup.sh and
# of the Python package's build (setup.py, which adds -DFILKIT_BUILD_TESTS=OFF for a build of its own).
#   bash scripts/configure.sh BUILD_DIR PYTHON [CMAKE_ARGUMENT...]
#   FILKIT_BUILD_BENCH=1  the benchmarks too
set -euo pipefail
build=$1 python=$2
shift 2
cd "$(dirname "$0")/.."
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DFILKIT_BUILD_PYTHON=ON -DFILKIT_WITH_TORCH=ON \
  -DFILKIT_GLUE_FLAGS=-O1 -DFILKIT_GLUE_UNITY=ON \
  -DFILKIT_BUILD_BENCH="${FILKIT_BUILD_BENCH:-OFF}" \
  -DPython_EXECUTABLE="$python" "$@" > /dev/null
