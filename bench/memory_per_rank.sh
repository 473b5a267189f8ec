#!/usr/bin/env bash
# A rank holds its shard plus O(d^2), never the whole dataset (docs/distributed.md): the default
# measure job on MNIST replicated 6 times (n = 360,000 examples of 784 pixels, 2.3 GB as doubles;
# bench/replicated_mnist.py) under a virtual-memory limit of LIMIT_KB a rank (`ulimit -v`, default
# 1.5 GB), on 1 rank (which must fail: out of memory) and on 4 (which must succeed), then the
# largest resident size of each rank without the limit, on 1, 2 and 4 ranks.
#   bash bench/memory_per_rank.sh [LIMIT_KB]
#   FILKIT_BINARY (default build/filkit), FILKIT_CACHE (where the replicated data go)
set -uo pipefail
cd "$(dirname "$0")/.."
limit=${1:-1500000}
filkit="$(realpath "${FILKIT_BINARY:-build/filkit}")"
cache="${FILKIT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/filkit}"
data="$cache/replicated-mnist-6"
[ -f "$data/train-images-idx3-ubyte" ] || /usr/bin/python3 bench/replicated_mnist.py 6 "$data" > /dev/null
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
job="measure --quiet --data mnist:$data --threads 1"
for ranks in 1 4; do
  mpirun --oversubscribe --bind-to none -np "$ranks" bash -c "ulimit -v $limit; exec $filkit $job --json $out/limited-$ranks.json" \
    > "$out/limited-$ranks.log" 2>&1
  status=$?
  echo "ulimit -v $limit KB a rank, $ranks rank(s): exit $status; $(grep -m1 'error' "$out/limited-$ranks.log" || echo 'no error')"
done
for ranks in 1 2 4; do
  sizes=$(mpirun --oversubscribe --bind-to none -np "$ranks" /usr/bin/time -f "%M" $filkit $job 2>&1 | tr '\n' ' ')
  echo "no limit, $ranks rank(s): largest resident size of each rank (KB): $sizes"
done
