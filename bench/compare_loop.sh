#!/usr/bin/env bash
# The exactly-once task loop alone (bench.task_loop) at an older commit and at
# the checkout, alternating on one broker, for when the machine's speed moved
# between two full runs and only a same-hour comparison says whether the code
# did (docs/benchmarks.md, "Old against new code, the same day").
#
#   bash bench/compare_loop.sh OLD_COMMIT [PAIRS]
#
# Prints one line per run, "old" or "new", scenario and result; PAIRS (default 3)
# runs of each side per scenario. The old commit is unpacked with git archive
# into a temporary folder and run with this checkout's .venv.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
old_commit="$1" pairs="${2:-3}"
old="$(mktemp -d)"
git archive "$old_commit" | tar -x -C "$old"
export KAFKA_DATA_DIR="$repo/.cache/bench/compare-kafka" KAFKA_PORT="${BENCH_KAFKA_PORT:-39592}"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop; rm -rf "$KAFKA_DATA_DIR" "$old"' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
bootstrap="127.0.0.1:$KAFKA_PORT"
.venv/bin/python -c "from bench.limit import warm_up; warm_up('$bootstrap')" 2>/dev/null
for args in "--boundary poll --size 10000" "--boundary interval --size 100" \
            "--connector file --boundary interval --size 100" \
            "--boundary interval --size 100 --records-form"; do
  for _ in $(seq "$pairs"); do
    for side in old new; do
      dir="$repo"; [ "$side" = old ] && dir="$old"
      # shellcheck disable=SC2086 # $args is a list of options
      result=$(cd "$dir" && PYTHONPATH="$dir" "$repo/.venv/bin/python" -m bench.task_loop \
        --bootstrap-server "$bootstrap" $args --runs 1 2>/dev/null | grep "run 1")
      echo "$side | $args | $result"
    done
  done
done
