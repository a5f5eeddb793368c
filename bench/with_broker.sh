#!/usr/bin/env bash
# What every benchmark script shares: sets up, starts a fresh broker of the
# benchmark's own on its own port and data folder, runs a bench module against
# it and stops the broker, however the module ends.
#
#   bash bench/with_broker.sh NAME PORT MODULE [ARGS...]
#
# NAME keys the broker's data folder (.cache/bench/NAME-kafka); PORT is its port;
# MODULE (bench.run, bench.density, ...) gets --bootstrap-server and ARGS.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
name="$1" port="$2" module="$3"
shift 3
bash deploy/setup.sh
# matplotlib draws the plots, py-spy takes the profiles: the bench extra.
{ .venv/bin/python -c "import matplotlib" 2>/dev/null && [ -x .venv/bin/py-spy ]; } || \
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[bench]"

export KAFKA_DATA_DIR="$repo/.cache/bench/$name-kafka"
export KAFKA_PORT="$port"
rm -rf "$KAFKA_DATA_DIR"
trap 'bash deploy/kafka.sh stop' EXIT INT TERM
bash deploy/kafka.sh start >/dev/null
.venv/bin/python -m "$module" --bootstrap-server "127.0.0.1:$KAFKA_PORT" "$@"
