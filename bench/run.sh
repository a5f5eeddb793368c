#!/usr/bin/env bash
# Runs the benchmarks: sets up, starts a broker of its own, runs every scenario
# (bench/run.py), stops the broker. Arguments go to bench/run.py (--runs, --scale,
# --only, --method window|count|both).
# Results: bench/results/latest.{md,json} and docs/benchmarks-throughput.png.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh
{ .venv/bin/python -c "import matplotlib" 2>/dev/null && [ -x .venv/bin/py-spy ]; } || \
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[bench]"

export KAFKA_DATA_DIR="$repo/.cache/bench/kafka"
export KAFKA_PORT="${BENCH_KAFKA_PORT:-39192}"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
.venv/bin/python -m bench.run --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
