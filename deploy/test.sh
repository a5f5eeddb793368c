#!/usr/bin/env bash
# Sets everything up, then runs the linters, the type checker and the test suite.
# Tests start their own Kafka broker and Spark sessions and stop them afterwards.
#
# Every step is timed; the time table (tests/support/timetable.py) is printed at
# the end of the run, before pytest's closing line. Arguments go to pytest.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

CONNECT_TEST_STARTED="$(date +%s.%N)"
lanes="$(mktemp -d -t connect-test-lanes.XXXXXX)"  # the lanes' logs and the times
CONNECT_TEST_TIMES="$lanes/times.tsv"
export CONNECT_TEST_STARTED CONNECT_TEST_TIMES
trap 'rm -rf "$lanes"' EXIT

# step NAME COMMAND...: runs COMMAND, then appends "NAME<TAB>seconds" to the
# times file (one short write: lanes running at once do not tear each other's lines).
step() {
  local name="$1" begun status=0; shift
  begun="$(date +%s.%N)"
  "$@" || status=$?
  printf '%s\t%s\n' "$name" "$(awk -v a="$begun" -v b="$(date +%s.%N)" 'BEGIN { print b - a }')" \
    >>"$CONNECT_TEST_TIMES"
  return "$status"
}

# lane NAME COMMAND...: runs COMMAND in the background, its output in a log of
# its own (shown if it fails); wait_lanes waits for every lane.
declare -A lane_pids=()
lane() {
  local name="$1"; shift
  ( "$@" ) >"$lanes/$name.log" 2>&1 &
  lane_pids[$name]=$!
}
wait_lanes() {
  local name failed=""
  for name in "${!lane_pids[@]}"; do
    if ! wait "${lane_pids[$name]}"; then
      echo "== $name failed; its log:" >&2
      tail -n 200 "$lanes/$name.log" >&2
      failed+=" $name"
    fi
  done
  lane_pids=()
  [ -z "$failed" ] || { echo "test.sh: failed:$failed" >&2; exit 1; }
}

tools="deploy/kubernetes/tools.sh"

# The builds are independent, so they run at once: the Go builds overlap their
# downloads and links with each other and with apt and Maven, which wait on the
# network. Cold, on 2 cores, they are the long pole of a first run (Kubernetes
# alone is about 15 minutes); warm, every step is a cache lookup.
#
# The deployment checks (tests/deploy/) need helm, a Docker engine and a whole
# single-node Kubernetes cluster (deploy/kubernetes/cluster.sh: etcd, the
# Kubernetes binaries, CoreDNS, crictl, a pause binary, Debian's containerd,
# runc, CNI plugins, iptables and conntrack), built or installed once per
# machine and cached under ~/.cache/connect-runtime. debootstrap makes the
# container image's Debian base (deploy/docker/base-image.sh); Toxiproxy puts
# latency in the partition suite's links (tests/partitions/).
go_tools() {
  local tool
  for tool in helm etcd coredns crictl toxiproxy pause; do
    step "build $tool" bash "$tools" "$tool" >/dev/null
  done
}
# Debian's packages, in one apt-get call: the Kubernetes and container tools,
# PostgreSQL for the SQL source's tests (tests/support/postgres.py) and chromium
# for the dashboard's browser test (tests/e2e/test_dashboard.py, through
# Playwright: no browser download from Playwright's servers).
debian_packages() {
  local extra=()
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || extra+=(postgresql)
  command -v chromium >/dev/null 2>&1 || extra+=(chromium)
  bash "$tools" debian-packages "${extra[@]}"
}

echo "== set-up: Python, Kafka, Kubernetes and container tools, Schema Registry (in parallel)"
# The Schema Registry converters' tests run a real registry: Apicurio, built once
# from Maven Central (deploy/registry.sh; about a minute the first time). It
# follows the set-up in one lane: two Maven runs at once would share ~/.m2.
python_and_maven() {
  step "set-up (.venv, Kafka jars, JVM archive)" bash deploy/setup.sh
  step "build Schema Registry" bash deploy/registry.sh fetch
}
lane "Python and Maven" python_and_maven
lane "Kubernetes" step "build Kubernetes" bash "$tools" kube-apiserver
lane "Go tools" go_tools
lane "Debian packages" step "install Debian packages" debian_packages
step "set-up, all lanes at once" wait_lanes

# CI runs one round of the chaos suite's worker bounces (every worker, leader
# included, once per signal); CHAOS_ROUNDS=2, the suite's own default, runs two.
export CHAOS_ROUNDS="${CHAOS_ROUNDS:-1}"

echo "== ruff" && step "ruff" .venv/bin/ruff check connect_runtime rest connectors tests bench examples deploy/kubernetes
echo "== mypy" && step "mypy" bash deploy/typecheck.sh
# The slowest tests are listed at the end, above the time table; pytest's own
# line closes the output (nothing is printed after it).
echo "== pytest"
status=0
.venv/bin/python -m pytest -q -p no:cacheprovider --durations=40 "$@" || status=$?
exit "$status"
