#!/usr/bin/env bash
# Sets everything up, then runs the linters, the type checker and the test suite.
# Tests start their own Kafka broker and Spark sessions and stop them afterwards.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh
echo "== ruff" && .venv/bin/ruff check connect_runtime rest connectors tests bench
echo "== mypy" && bash deploy/typecheck.sh
echo "== pytest" && exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
