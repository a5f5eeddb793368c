#!/usr/bin/env bash
# The density benchmark (bench/density.py, issue 33): sets up, starts a broker of its
# own, measures N nearly idle (and busy) exactly-once tasks on one worker of ours and
# on Apache Kafka Connect 4.1.1, stops the broker. Arguments go to bench/density.py
# (--tasks-per-process, --scenarios, --sides, --scale, ...).
# Results: bench/results/density.{md,json} and docs/benchmarks-density.png.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh
.venv/bin/python -c "import matplotlib" 2>/dev/null || \
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[bench]"

export KAFKA_DATA_DIR="$repo/.cache/bench/density-kafka"
export KAFKA_PORT="${BENCH_DENSITY_KAFKA_PORT:-39492}"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
.venv/bin/python -m bench.density --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
