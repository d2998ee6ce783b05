#!/bin/sh
# Priority vs NORMAL and Lite Mode vs plain POP for two checkouts, alternated in one run on a shared machine:
#   scripts/bench_lite_ab.sh BASE_TREE [PAIRS] [extra bench_lite.py options]
# BASE_TREE: another checkout with its Cython extensions built (e.g. `git worktree add --detach /tmp/base main`).
# Each pair runs the base tree's server, then this tree's (the order swaps every pair); the same driver
# (this tree's scripts/bench_lite.py) measures both. Results go to stdout, one block per run.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
base=$1
pairs=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
opts="--phases priority,litecost,e2e --rounds 2 --priority-messages 6000 --cost-messages 6000 \
--e2e-topics 2000 --e2e-consumers 40 --seconds 10"
i=0
while [ "$i" -lt "$pairs" ]; do
    if [ $((i % 2)) -eq 0 ]; then order="$base $here"; else order="$here $base"; fi
    for tree in $order; do
        echo "=== pair $i: $tree"
        # shellcheck disable=SC2086
        python3 "$here/scripts/bench_lite.py" $opts --server-repo "$tree" "$@"
    done
    i=$((i + 1))
done
