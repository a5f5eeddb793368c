#!/usr/bin/env bash
# Runs the benchmarks: sets up, starts a broker of its own, runs every scenario
# (bench/run.py), stops the broker. Arguments go to bench/run.py (--runs, --scale,
# --only, --method window|count|both).
# Results: bench/results/latest.{md,json} and docs/benchmarks-throughput.png.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bash bench/with_broker.sh bench "${BENCH_KAFKA_PORT:-39192}" bench.run "$@"
