#!/usr/bin/env bash
# The density benchmark (bench/density.py, docs/benchmarks.md#density): sets up,
# starts a broker of its own, measures N nearly idle (and busy) exactly-once tasks on
# one worker of ours and on Apache Kafka Connect 4.1.1, stops the broker. Arguments
# go to bench/density.py (--tasks-per-process, --scenarios, --sides, --scale, ...).
# Results: bench/results/density.{md,json} and docs/benchmarks-density.png.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bash bench/with_broker.sh density "${BENCH_DENSITY_KAFKA_PORT:-39492}" bench.density "$@"
