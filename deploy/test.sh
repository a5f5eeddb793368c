#!/usr/bin/env bash
# Sets everything up, then runs the linters, the type checker and the test suite.
# Tests start their own Kafka broker and Spark sessions and stop them afterwards.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh
# The deployment checks (tests/deploy/) need helm, a Docker engine and a whole
# single-node Kubernetes cluster (deploy/kubernetes/cluster.sh: etcd, the
# Kubernetes binaries, CoreDNS, crictl, a pause binary, Debian's containerd,
# runc, CNI plugins, iptables and conntrack): built or installed once per
# machine, cached under ~/.cache/connect-runtime (about 20 minutes the first
# time on 2 cores, instant after). debootstrap makes the container image's
# Debian base (deploy/docker/base-image.sh).
echo "== Kubernetes and container tools"
# Toxiproxy puts latency in the partition suite's links (tests/partitions/).
for tool in helm etcd kube-apiserver kubelet coredns crictl pause containerd runc cni-plugins \
            iptables conntrack busybox dockerd debootstrap toxiproxy; do
  bash deploy/kubernetes/tools.sh "$tool" >/dev/null
done
# The Schema Registry converters' tests run a real registry: Apicurio, built once
# from Maven Central (deploy/registry.sh; about a minute the first time, cached
# under ~/.cache/connect-runtime).
echo "== Schema Registry"
bash deploy/registry.sh fetch
# The SQL source's tests start Debian's PostgreSQL server (tests/support/postgres.py).
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "== installing Debian's postgresql"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2 \
    || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2; }
fi
# The dashboard's browser test (tests/e2e/test_dashboard.py) drives Debian's
# chromium through Playwright: no browser download from Playwright's servers.
if ! command -v chromium >/dev/null 2>&1; then
  echo "== installing Debian's chromium"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2 \
    || { apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2; }
fi
echo "== ruff" && .venv/bin/ruff check connect_runtime rest connectors tests bench examples deploy/kubernetes
echo "== mypy" && bash deploy/typecheck.sh
# The slowest tests are listed at the end: the run must stay under 50 minutes warm.
echo "== pytest" && exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 "$@"
