#!/usr/bin/env bash
# The converter benchmark (bench/converters.py): sets up, starts a broker of its own
# (the script starts its registry), compares the Schema Registry converters with
# JsonConverter through the exactly-once task loop, stops the broker. Arguments go
# to bench/converters.py (--records, --runs, --batch).
# Results: bench/results/converters.{md,json}.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash deploy/registry.sh fetch
exec bash bench/with_broker.sh converters "${BENCH_CONVERTERS_KAFKA_PORT:-39392}" bench.converters "$@"
