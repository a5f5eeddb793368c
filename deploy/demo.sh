#!/usr/bin/env bash
# The main job on embedded defaults: a local Kafka broker, one worker (Spark
# local[*]), and the sequence connector writing exactly once. Prints the worker's
# view of the connector, then the records that committed transactions made
# visible (read_committed), until Ctrl-C or DEMO_SECONDS have passed.
#
# State is kept in .cache/demo: run it again and the connector resumes from its
# committed offsets. DEMO_RESET=1 starts from scratch.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
bash deploy/setup.sh

demo_dir="$repo/.cache/demo"
[ "${DEMO_RESET:-0}" = "1" ] && rm -rf "$demo_dir"
mkdir -p "$demo_dir"
export KAFKA_DATA_DIR="$demo_dir/kafka"
export KAFKA_PORT="${DEMO_KAFKA_PORT:-39092}"
rest_port="${DEMO_REST_PORT:-38083}"
rest="http://127.0.0.1:$rest_port"
worker_pid=""

cleanup() {
  trap - EXIT INT TERM
  if [ -n "$worker_pid" ] && kill -0 "$worker_pid" 2>/dev/null; then
    echo "demo: stopping the worker (graceful: tasks commit what they have)" >&2
    kill -TERM "$worker_pid" 2>/dev/null || true
    wait "$worker_pid" 2>/dev/null || true
  fi
  bash deploy/kafka.sh stop
}
trap cleanup EXIT INT TERM

bash deploy/kafka.sh start >/dev/null

echo "demo: starting a worker on $rest (log: $demo_dir/worker.log)" >&2
CONNECT_BOOTSTRAP_SERVERS="127.0.0.1:$KAFKA_PORT" \
CONNECT_LISTENERS="http://127.0.0.1:$rest_port" \
CONNECT_REST_ADVERTISED_PORT="$rest_port" \
CONNECT_SPARK_MASTER="${DEMO_SPARK_MASTER:-local[*]}" \
  .venv/bin/connect-runtime config/worker.properties > "$demo_dir/worker.log" 2>&1 &
worker_pid=$!

for _ in $(seq 1 180); do
  if curl -fsS "$rest/health" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$worker_pid" 2>/dev/null; then
    echo "demo: the worker exited; last lines of its log:" >&2; tail -n 30 "$demo_dir/worker.log" >&2; exit 1
  fi
  sleep 1
done
curl -fsS "$rest/" && echo

# PUT creates or updates, so re-running the demo is idempotent.
.venv/bin/python - "$rest" <<'EOF'
import json, sys, httpx
rest = sys.argv[1]
spec = json.load(open("config/sequence-source.json"))
r = httpx.put(f"{rest}/connectors/{spec['name']}/config", json=spec["config"], timeout=90)
print(f"demo: PUT /connectors/{spec['name']}/config -> {r.status_code}", file=sys.stderr)
r.raise_for_status()
EOF

# Wait until every task runs, then show the status as Kafka Connect would.
.venv/bin/python - "$rest" <<'EOF'
import json, sys, time, httpx
rest = sys.argv[1]
for _ in range(180):
    status = httpx.get(f"{rest}/connectors/sequence-demo/status", timeout=30).json()
    states = [t["state"] for t in status.get("tasks", [])]
    if states and all(s == "RUNNING" for s in states):
        break
    time.sleep(1)
print("demo: connector status:", file=sys.stderr)
print(json.dumps(status))
EOF

echo "demo: records visible to read_committed consumers (Ctrl-C to stop):" >&2
tail_args=(--bootstrap-server "127.0.0.1:$KAFKA_PORT" --topic sequence-demo)
if [ -n "${DEMO_SECONDS:-}" ]; then
  timeout "$DEMO_SECONDS" .venv/bin/connect-runtime tail "${tail_args[@]}" || true
else
  .venv/bin/connect-runtime tail "${tail_args[@]}" || true
fi
