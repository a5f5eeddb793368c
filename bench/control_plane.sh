#!/usr/bin/env bash
# The control-plane benchmark (bench/control_plane.py): sets up, starts a broker
# of its own, runs one worker with thousands of simulated task slots, stops the
# broker. Arguments go to bench/control_plane.py (--slots, --connectors, --seconds,
# --profile-seconds). Results: bench/results/control_plane.{md,json}.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh

export KAFKA_DATA_DIR="$repo/.cache/bench/control-plane-kafka"
export KAFKA_PORT="${BENCH_CONTROL_PLANE_KAFKA_PORT:-39292}"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
.venv/bin/python -m bench.control_plane --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
