# The sanitizers' run-time options for the sanitizer build (scripts/asan-build.sh): its tests
# (scripts/test.sh) and fuzzers (scripts/fuzz.sh). Sourced; source it too before running
# `ctest --test-dir build-asan` by hand. Every report is fatal (the build also compiles with
# -fno-sanitize-recover), with a symbolized stack.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
