#!/usr/bin/env bash
# A real single-node Kubernetes cluster on this machine (as root), for trying
# the chart: see the docstring of cluster.py beside this file, and
# docs/kubernetes.md, "A cluster on one machine".
#
#   bash deploy/kubernetes/cluster.sh up                 # then: eval "$(bash deploy/kubernetes/cluster.sh env)"
#   DOCKER_HOST=... bash deploy/kubernetes/cluster.sh load-image connect-runtime:0.1.0
#   bash deploy/kubernetes/cluster.sh down
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$here/../../.venv/bin/python"
[ -x "$python" ] || python=python3
exec "$python" "$here/cluster.py" "$@"
