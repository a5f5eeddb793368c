#!/usr/bin/env bash
# The control-plane benchmark (bench/control_plane.py): sets up, starts a broker
# of its own, runs one worker with thousands of simulated task slots, stops the
# broker. Arguments go to bench/control_plane.py (--slots, --connectors, --seconds,
# --profile-seconds). Results: bench/results/control_plane.{md,json}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bash bench/with_broker.sh control-plane "${BENCH_CONTROL_PLANE_KAFKA_PORT:-39292}" bench.control_plane "$@"
