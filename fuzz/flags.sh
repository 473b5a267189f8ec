# libFuzzer's flags for every run of a fuzz target (scripts/fuzz.sh, and the short runs in the test
# suite, fuzz/run_short.sh). Sourced. A finding is a crash, an uncaught exception, a sanitizer
# report, a leak, one input running over 10 s (-timeout), the process over 2 GB resident
# (-rss_limit_mb), or one allocation over 512 MB (-malloc_limit_mb): no reader needs that much for
# an input of a few KB, so such an allocation is one a tiny corrupt file can trigger.
FILKIT_FUZZ_FLAGS=(-rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1)

# The targets write every input to a file for the readers: in memory (tmpfs) it is 8 times faster.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi

# The target's dictionary of keywords, if it has one: -dict=fuzz/dict/TARGET.dict.
filkit_fuzz_dict() {
  local dict
  dict="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/dict/$1.dict"
  if [ -f "$dict" ]; then echo "-dict=$dict"; fi
}
