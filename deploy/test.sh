#!/usr/bin/env bash
# Sets everything up, then runs the linters, the type checker and the test suite.
# Tests start their own Kafka broker and Spark sessions and stop them afterwards.
#
# Every step is timed; the time table (tests/support/lanes.py) is printed at
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
# background_lane NAME COMMAND...: a lane beside the tests, waited for by
# wait_background_lanes. Its processes are SCHED_IDLE (they run only on a core
# no other process wants; at nice 19 alone the end-to-end tests beside a cold
# Kubernetes build took 16% longer) and in the lowest best-effort I/O class.
declare -A background_pids=()
background_lane() {
  local name="$1"; shift
  ( chrt --idle -p 0 "$BASHPID" 2>/dev/null || renice -n 19 -p "$BASHPID" >/dev/null
    ionice -c 2 -n 7 -p "$BASHPID" 2>/dev/null || true
    "$@" ) >"$lanes/$name.log" 2>&1 &
  background_pids[$name]=$!
}
# wait_for NAME...: waits for each lane named in the array NAME; exits non-zero,
# showing the failed lanes' logs, if any failed.
wait_for() {
  local -n pids="$1"
  local name failed=""
  for name in "${!pids[@]}"; do
    if ! wait "${pids[$name]}"; then
      echo "== $name failed; its log:" >&2
      tail -n 200 "$lanes/$name.log" >&2
      failed+=" $name"
    fi
  done
  pids=()
  [ -z "$failed" ] || { echo "test.sh: failed:$failed" >&2; return 1; }
}
wait_lanes() { wait_for lane_pids; }
wait_background_lanes() { wait_for background_pids; }

tools="deploy/kubernetes/tools.sh"

# The deployment checks (tests/deploy/) need helm, a Docker engine, the image
# and a whole single-node Kubernetes cluster (deploy/kubernetes/cluster.sh:
# etcd, the Kubernetes binaries, CoreDNS, crictl, a pause binary, Debian's
# containerd, runc, CNI plugins, iptables and conntrack), built or installed
# once per machine and cached under ~/.cache/connect-runtime. debootstrap makes
# the container image's Debian base (deploy/docker/base-image.sh); Toxiproxy
# puts latency in the partition suite's links (tests/partitions/).
#
# On a machine that has built nothing, the Go builds take about 15 minutes of
# both cores and the image's inputs several more: longer than anything else in
# the set-up. So they do not hold the tests up: they run in background lanes at
# the lowest CPU and I/O priority, taking what the tests leave idle, and the
# tests that need them run last (tests/support/lanes.py orders them), each waiting
# on its tool's cache lock (tools.sh, build.sh) if the build is still going.
# The partition suite needs Toxiproxy earlier, so it is built first. Warm,
# every build is a cache lookup of a second or less.
go_tools() {
  local tool
  for tool in toxiproxy helm etcd coredns crictl pause; do
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

echo "== set-up: Python, Kafka, Debian's packages, Schema Registry; tool builds in the background"
# The Schema Registry converters' tests run a real registry: Apicurio, built once
# from Maven Central (deploy/registry.sh; about a minute the first time). It
# follows the set-up in one lane: two Maven runs at once would share ~/.m2.
python_and_maven() {
  step "set-up (.venv, Kafka jars, JVM archive)" bash deploy/setup.sh
  step "build Schema Registry" bash deploy/registry.sh fetch
}
background_lane "Kubernetes" step "build Kubernetes" bash "$tools" kube-apiserver
background_lane "Go tools" go_tools
lane "Python and Maven" python_and_maven
lane "Debian packages" step "install Debian packages" debian_packages
step "set-up before the tests" wait_lanes
# The image's inputs need .venv (its wheels are pinned to it) and debootstrap.
background_lane "image inputs" step "build the image's inputs (base, wheels)" \
  bash deploy/docker/build.sh inputs

# CI runs one round of the chaos suite's worker bounces (every worker, leader
# included, once per signal); CHAOS_ROUNDS=2, the suite's own default, runs two.
export CHAOS_ROUNDS="${CHAOS_ROUNDS:-1}"

status=0
echo "== ruff" && step "ruff" .venv/bin/ruff check connect_runtime rest connectors tests bench examples deploy/kubernetes \
  || status=$?
echo "== mypy" && step "mypy" bash deploy/typecheck.sh || status=$?
# The slowest tests are listed at the end, above the time table; pytest's own
# line closes the output (nothing is printed after it, unless a background
# build failed after the tests that needed it had run).
pytest=(.venv/bin/python -m pytest -q -p no:cacheprovider)
if [ "$status" -eq 0 ] && [ "$#" -gt 0 ]; then
  echo "== pytest $*"
  "${pytest[@]}" --durations=40 "$@" || status=$?
elif [ "$status" -eq 0 ]; then
  # The whole suite, in two runs (tests/support/lanes.py says why). First the
  # unit tests and the tests with a broker or database, in two processes
  # (pytest-xdist, a module to a process at a time); then the end-to-end
  # tests, the Spark clusters, the fault suites and Kubernetes, one at a time.
  echo "== pytest: unit tests and tests with a broker or database, in 2 processes"
  step "pytest, parallel lanes (2 processes)" \
    "${pytest[@]}" -n 2 --dist loadscope --lane=parallel --durations=10 || status=$?
  echo "== pytest: end-to-end, Spark clusters, fault suites, Kubernetes, one at a time"
  "${pytest[@]}" --durations=30 --lane=serial || status=$?
fi
wait_background_lanes || status=1
exit "$status"
