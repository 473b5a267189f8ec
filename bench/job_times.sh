#!/usr/bin/env bash
# The wall time, CPU time and peak memory of the main jobs at the settings of README.md's runtime
# table ("What a job costs on 2 cores"): one run each with --threads 2 --quiet (GNU time, "%e %U %S %M"),
# after one untimed `filkit --version` so that the binary is in the page cache. Prints one
# markdown row a job (command, wall s, CPU s, peak MB) and the load average before and after, since
# a shared machine stretches wall times (CPU time much less).
#
#   bench/job_times.sh [FILKIT=build/filkit] [JOB...]     JOB: a name of JOBS below (default: all)
set -euo pipefail
filkit=${1:-build/filkit}
shift $(($# > 0 ? 1 : 0))
[ -x "$filkit" ] || { echo "job_times.sh: '$filkit' is not an executable" >&2; exit 2; }
filkit=$(realpath "$filkit")
[ -x /usr/bin/time ] || { echo "job_times.sh: needs GNU time (/usr/bin/time, Debian package time)" >&2; exit 2; }

# name|arguments (run in a scratch directory; outputs written there and discarded)
JOBS=(
  "measure|measure --subset all --out fil.csv --json fil.json"
  "measure-mnist-raw|measure --data mnist --pca 0 --model least-squares --l2 1e-3 --out fil.csv"
  "bound|bound --out bounds.csv --json bounds.json"
  "reconstruct-1000|reconstruct --trials 1000 --out rec.csv --json rec.json"
  "dpsgd-glm|dpsgd --steps 1000 --noise-multiplier 1 --report-epochs 1,5 --out dpsgd.csv"
  "dpsgd-cnn|dpsgd --model cnn --train-size 10000 --test-size 2000 --batch-size 200 --steps 250 --clip-norm 1 --noise-multiplier 1 --out cnn.csv"
  "irfil|irfil --data income-regression --intercept --l2 1e-3 --attribute MARITAL.STATUS --iterations 10 --history-out w.csv"
  "attack|attack --data income-regression --intercept --l2 1e-3 --sigmas 1e-4,1e-3,1e-2 --trials 100 --compare-naive 20"
  "accountant-pld|accountant --q 0.04 --noise-multiplier 1.5 --steps 2250 --delta 1e-5 --accountant pld"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$filkit" --version > /dev/null
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| job | command | wall s | CPU s | peak MB |"
echo "| --- | --- | --- | --- | --- |"
for entry in "${JOBS[@]}"; do
  name=${entry%%|*}
  arguments=${entry#*|}
  if (($# > 0)) && [[ " $* " != *" $name "* ]]; then continue; fi
  common="--threads 2 --quiet"
  [[ $name == accountant* ]] && common=""  # a hand-written command: one thread, no progress
  # shellcheck disable=SC2086  # the arguments are words
  (cd "$work" && /usr/bin/time -o time.out -f "%e %U %S %M" "$filkit" $arguments $common > stdout 2> stderr) || {
    echo "job_times.sh: $name failed:" >&2
    tail -5 "$work/stderr" >&2
    exit 1
  }
  tail -n 1 "$work/time.out" | awk -v name="$name" -v arguments="$arguments" \
    '{ printf "| %s | `filkit %s` | %.1f | %.1f | %.0f |\n", name, arguments, $1, $2 + $3, $4 / 1024 }' 
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
