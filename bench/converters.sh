#!/usr/bin/env bash
# The converter benchmark (bench/converters.py): sets up, starts a broker of its own
# (the script starts its registry), compares the Schema Registry converters with
# JsonConverter through the exactly-once task loop, stops the broker. Arguments go
# to bench/converters.py (--records, --runs, --batch).
# Results: bench/results/converters.{md,json}.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh
bash deploy/registry.sh fetch

export KAFKA_DATA_DIR="$repo/.cache/bench/converters-kafka"
export KAFKA_PORT="${BENCH_CONVERTERS_KAFKA_PORT:-39392}"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
.venv/bin/python -m bench.converters --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
