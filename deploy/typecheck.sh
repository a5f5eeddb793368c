#!/usr/bin/env bash
# Type-checks connect_runtime as it is installed, the example connector and
# bench/. rest/ and connectors/ are the subpackages connect_runtime.rest and
# connect_runtime.connectors (setuptools' package-dir), a mapping mypy cannot
# follow through the editable install, so mypy reads a view of symlinks laid
# out like the installed package.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
view="$repo/.venv/typecheck"
rm -rf "$view"
mkdir -p "$view/connect_runtime"
for entry in "$repo"/connect_runtime/*; do
  [ "$(basename "$entry")" = __pycache__ ] || ln -s "$entry" "$view/connect_runtime/"
done
ln -s "$repo/rest" "$view/connect_runtime/rest"
ln -s "$repo/connectors" "$view/connect_runtime/connectors"
ln -s "$repo/bench" "$view/bench"
cd "$view"
# The example connector of docs/writing-a-connector.md is checked with it, and
# so are the benchmarks, which import the tests' support package (bench/common.py
# puts tests/ on sys.path the same way).
export MYPYPATH="$repo/examples/http_source:$repo/tests"
"$repo/.venv/bin/mypy" --config-file "$repo/pyproject.toml" -p connect_runtime -p http_source \
  -p bench "$@"
# The single-node Kubernetes cluster's script (stdlib only).
exec "$repo/.venv/bin/mypy" --config-file "$repo/pyproject.toml" "$repo/deploy/kubernetes/cluster.py"
