#!/usr/bin/env bash
# The default job, `filkit measure --subset all`, timed for a baseline binary and a new one:
# runs alternate (baseline, new, baseline, ...) so that both see the same machine load, and the
# median wall time and peak resident memory (/usr/bin/time -f "%e %M") of each are printed, also
# for `filkit --version` (start-up alone). Then the two per-example CSVs are compared column by
# column (largest relative difference), and the script fails if any exceeds the tolerance.
#
#   bench/default_job.sh BASELINE_FILKIT NEW_FILKIT [RUNS=5] [TOLERANCE=1e-9]
#   e.g. bench/default_job.sh /work/baseline/before/build/filkit build/filkit
set -euo pipefail

if (($# < 2)); then
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
baseline=$1
new=$2
runs=${3:-5}
tolerance=${4:-1e-9}
for binary in "$baseline" "$new"; do
  [ -x "$binary" ] || { echo "default_job.sh: '$binary' is not an executable" >&2; exit 2; }
done
[ -x /usr/bin/time ] || { echo "default_job.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Appends "seconds kilobytes" of one run of `binary args...` to $work/<label>.times.
time_run() {
  local label=$1
  shift
  /usr/bin/time -o "$work/time.out" -f "%e %M" "$@" > /dev/null 2> "$work/stderr" || {
    echo "default_job.sh: '$*' failed:" >&2
    cat "$work/stderr" >&2
    exit 1
  }
  tail -n 1 "$work/time.out" >> "$work/$label.times"
}

# "median seconds (fastest), median peak MB" of a label's runs. On a shared machine the fastest
# run is the one least disturbed by other processes.
summary() {
  awk '{ s[NR] = $1; m[NR] = $2 }
       function median(a, n,   i, j, t) {
         for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
         return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
       }
       END { ms = median(s, NR); mm = median(m, NR); printf "%5.2f s (%5.2f)  %4.0f MB", ms, s[1], mm / 1024 }' "$work/$1.times"
}

for ((run = 1; run <= runs; ++run)); do
  for side in baseline new; do
    binary=${!side}
    mkdir -p "$work/$side"
    time_run "$side.measure" "$binary" measure --subset all --out "$work/$side/pe.csv" \
      --json "$work/$side/s.json" --quiet
    time_run "$side.version" "$binary" --version
  done
done

echo "median of $runs runs: wall seconds (fastest run), peak RSS; load average now $(cut -d' ' -f1-3 /proc/loadavg)"
printf '  %-30s %-28s %s\n' "" "baseline" "new"
printf '  %-30s %-28s %s\n' "filkit measure --subset all" "$(summary baseline.measure)" "$(summary new.measure)"
printf '  %-30s %-28s %s\n' "filkit --version" "$(summary baseline.version)" "$(summary new.version)"
echo "stage seconds of the last run (from --json):"
for side in baseline new; do
  printf '  %-9s %s\n' "$side" "$(/usr/bin/python3 -c 'import json, sys
s = json.load(open(sys.argv[1]))["seconds"]
print("  ".join(f"{k} {v:.3f}" for k, v in sorted(s.items())))' "$work/$side/s.json")"
done

echo "per-example CSV, largest relative difference |new - baseline| / max(|new|, |baseline|) by column:"
/usr/bin/python3 - "$work/baseline/pe.csv" "$work/new/pe.csv" "$tolerance" << 'EOF'
import sys
import numpy as np

baseline, new, tolerance = sys.argv[1], sys.argv[2], float(sys.argv[3])
a = np.genfromtxt(baseline, delimiter=",", names=True)
b = np.genfromtxt(new, delimiter=",", names=True)
if a.dtype.names != b.dtype.names or a.shape != b.shape:
    sys.exit(f"the CSVs differ in shape or header: {a.dtype.names} {a.shape} vs {b.dtype.names} {b.shape}")
worst = 0.0
for column in a.dtype.names:
    x, y = a[column], b[column]
    both_nan = np.isnan(x) & np.isnan(y)
    scale = np.maximum(np.abs(x), np.abs(y))
    scale[scale == 0] = 1.0
    difference = np.where(both_nan, 0.0, np.abs(x - y) / scale)
    difference[np.isnan(difference)] = np.inf  # NaN on one side only
    print(f"  {column:22s} {difference.max():.3e}")
    worst = max(worst, difference.max())
print(f"  {'largest':22s} {worst:.3e} ({'within' if worst <= tolerance else 'ABOVE'} tolerance {tolerance:g})")
sys.exit(0 if worst <= tolerance else 1)
EOF
