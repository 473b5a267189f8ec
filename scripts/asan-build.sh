#!/usr/bin/env bash
# Configures and builds the sanitizer build: clang with AddressSanitizer and UndefinedBehaviorSanitizer,
# the library at -O1 and its glue (the tests, the command line, the fuzz harnesses) at -O0
# (FILKIT_GLUE_FLAGS in CMakeLists.txt: 3-4 times faster to compile; the numerics keep -O1), as a
# unity build (CMake's, eight sources to a translation unit: the Eigen, JSON and GoogleTest
# templates that neighbouring sources share are instantiated and optimised once, not eight times;
# names must therefore be unique across a folder's sources, anonymous namespaces included), with
# Eigen's assertions (no NDEBUG: sizes of every product, indices), the test suite, the filkit
# executable and the libFuzzer targets of fuzz/; without LibTorch, the Python module and the
# benchmarks, and without MPI (LeakSanitizer reports Open MPI's own allocations at exit; the
# collectives are tested in the normal build). scripts/test.sh runs its tests after the normal
# suite, scripts/fuzz.sh its fuzzers.
# UndefinedBehaviorSanitizer without three of its pointer checks (FILKIT_NO_SANITIZE), whose
# memory errors AddressSanitizer reports itself: object-size (an access beyond the object, which
# ASan's redzones catch on the heap, the stack and globals), null (a null dereference, which ASan
# reports as a SEGV with its stack) and pointer-overflow (a wrapped pointer, caught where it is
# dereferenced). What they alone would flag is pointer arithmetic that is never dereferenced and
# a null reference never read. They instrument every pointer use of Eigen's inlined kernels:
# without them the library compiles in 23 % less time (docs/development.md).
# Needs scripts/setup.sh's packages (clang, libclang-rt-dev, libomp-dev).
#   bash scripts/asan-build.sh [TARGET...]   build only these CMake targets (default: all)
#   FILKIT_ASAN_BUILD_DIR   build directory (default: build-asan)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${FILKIT_ASAN_BUILD_DIR:-build-asan}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_CXX_FLAGS_DEBUG="-O1 -gline-tables-only -D_GLIBCXX_ASSERTIONS" -DFILKIT_GLUE_FLAGS=-O0 \
  -DCMAKE_UNITY_BUILD=ON -DCMAKE_UNITY_BUILD_BATCH_SIZE=8 \
  -DFILKIT_SANITIZE=address,undefined -DFILKIT_NO_SANITIZE=null,pointer-overflow,object-size -DFILKIT_BUILD_FUZZ=ON -DFILKIT_BUILD_TESTS=ON \
  -DFILKIT_WITH_TORCH=OFF -DFILKIT_BUILD_PYTHON=OFF -DFILKIT_BUILD_BENCH=OFF -DFILKIT_WITH_MPI=OFF > /dev/null
bash scripts/cmake-build.sh "$build" asan-build.log "$@"
