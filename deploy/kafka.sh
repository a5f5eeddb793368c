#!/usr/bin/env bash
# Fetches, starts and stops a real single-node Apache Kafka 4.x broker (KRaft).
#
#   deploy/kafka.sh fetch            resolve the broker jars from Maven Central once (cached)
#   deploy/kafka.sh start            format storage if needed, start in the background, wait until ready
#   deploy/kafka.sh stop             SIGTERM, then SIGKILL after KAFKA_STOP_TIMEOUT seconds
#   deploy/kafka.sh status           exit 0 if the broker of KAFKA_DATA_DIR is running
#
# Environment (all optional):
#   KAFKA_CACHE_DIR       where jars are cached          (default: <repo>/.cache)
#   KAFKA_DATA_DIR        log dirs, pid file, broker log (default: <repo>/.cache/kafka-data)
#   KAFKA_PORT            client listener on 127.0.0.1   (default: 9092)
#   KAFKA_CONTROLLER_PORT KRaft controller listener      (default: KAFKA_PORT + 1)
#   KAFKA_HEAP            JVM heap                        (default: 768m)
#   KAFKA_STOP_TIMEOUT    seconds before SIGKILL on stop  (default: 20)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka/pom.xml")"
cache_dir="${KAFKA_CACHE_DIR:-$repo/.cache}"
libs="$cache_dir/kafka-$kafka_version/libs"
data_dir="${KAFKA_DATA_DIR:-$repo/.cache/kafka-data}"
port="${KAFKA_PORT:-9092}"
controller_port="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
heap="${KAFKA_HEAP:-768m}"
stop_timeout="${KAFKA_STOP_TIMEOUT:-20}"
pid_file="$data_dir/broker.pid"

log() { printf 'kafka.sh: %s\n' "$*" >&2; }

fetch() {
  if [ -f "$libs/.complete" ]; then return 0; fi
  command -v mvn >/dev/null || { log "Maven (mvn) is required to fetch the broker jars"; exit 1; }
  log "fetching Apache Kafka $kafka_version jars from Maven Central into $libs"
  rm -rf "$libs"
  mkdir -p "$libs"
  mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
    -DoutputDirectory="$libs" -DincludeScope=runtime
  # The broker must be able to find its main class, or the cache is not usable.
  ls "$libs"/kafka_2.13-"$kafka_version".jar >/dev/null
  touch "$libs/.complete"
}

java_cp() { printf '%s/*' "$libs"; }

write_properties() {
  mkdir -p "$data_dir/logs"
  cat > "$data_dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$data_dir/logs
num.partitions=1
default.replication.factor=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
# Fewer internal partitions: a single dev broker loads its coordinators faster.
offsets.topic.num.partitions=5
transaction.state.log.num.partitions=5
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
EOF
}

running() {
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; }

start() {
  fetch
  if running; then log "already running (pid $(cat "$pid_file")) on 127.0.0.1:$port"; return 0; fi
  write_properties
  if [ ! -f "$data_dir/logs/meta.properties" ]; then
    local cluster_id
    cluster_id="$(java -cp "$(java_cp)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
    java -cp "$(java_cp)" -Dlog4j2.configurationFile="$here/kafka/log4j2.yaml" \
      kafka.tools.StorageTool format -t "$cluster_id" -c "$data_dir/server.properties" >/dev/null 2>&1
  fi
  # setsid: the broker gets its own session, so a test runner's Ctrl-C or a
  # killed parent shell does not take it down half-way through a test.
  setsid java -Xms256m -Xmx"$heap" -XX:+UseG1GC \
    -Dlog4j2.configurationFile="$here/kafka/log4j2.yaml" \
    -cp "$(java_cp)" kafka.Kafka "$data_dir/server.properties" \
    > "$data_dir/broker.log" 2>&1 < /dev/null &
  echo $! > "$pid_file"
  local deadline=$((SECONDS + 60))
  until port_open; do
    if ! running; then log "broker exited during startup; see $data_dir/broker.log"; tail -n 30 "$data_dir/broker.log" >&2; exit 1; fi
    if [ $SECONDS -ge $deadline ]; then log "broker not listening after 60s"; exit 1; fi
    sleep 0.2
  done
  log "broker $kafka_version running (pid $(cat "$pid_file")) on 127.0.0.1:$port, data in $data_dir"
  echo "127.0.0.1:$port"
}

stop() {
  if ! running; then rm -f "$pid_file"; return 0; fi
  local pid; pid="$(cat "$pid_file")"
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + stop_timeout))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then kill -KILL "$pid" 2>/dev/null || true; break; fi
    sleep 0.2
  done
  rm -f "$pid_file"
  log "broker stopped"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) running ;;
  *) echo "usage: $0 fetch|start|stop|status" >&2; exit 2 ;;
esac
