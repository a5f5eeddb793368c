#!/usr/bin/env bash
# Installs everything the project needs, idempotently: a virtualenv in .venv with
# the package and its dev tools, and the Apache Kafka broker jars (via Maven).
# Java and Maven come from the machine; nothing else is assumed.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

python="${PYTHON:-python3}"
"$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "setup.sh: Python 3.11+ is required ($python is $("$python" --version 2>&1))" >&2; exit 1; }
command -v java >/dev/null || { echo "setup.sh: java is required (Kafka and Spark run on it)" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  echo "setup.sh: creating .venv" >&2
  "$python" -m venv .venv
fi
# Reinstall only when the dependency list changed.
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  echo "setup.sh: installing the package and its dependencies into .venv" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/python -m pip install -q --disable-pip-version-check -e ".[dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi
# A class-data archive of the Spark driver's JVM halves a worker's start (about
# 20 s to make, once per environment; connect_runtime/cluster/jvm_archive.py).
# Without one workers still run, only slower to start.
.venv/bin/python -m connect_runtime.cluster.jvm_archive >&2 \
  || echo "setup.sh: could not make the Spark driver's class archive (see above); workers will start without it" >&2
bash deploy/kafka.sh fetch
