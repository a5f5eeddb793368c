#!/usr/bin/env bash
# Fetches, starts and stops a real single-node Apache Kafka 4.x broker (KRaft).
#
#   deploy/kafka.sh fetch            resolve the broker jars from Maven Central once (cached)
#   deploy/kafka.sh start            format storage if needed, start in the background, wait until ready
#   deploy/kafka.sh stop             SIGTERM, then SIGKILL after KAFKA_STOP_TIMEOUT seconds
#   deploy/kafka.sh status           exit 0 if the broker of KAFKA_DATA_DIR is running
#   deploy/kafka.sh features         print the running broker's finalized features
#                                    (name=level per line: transaction.version, ...)
#
# Environment (all optional):
#   KAFKA_CACHE_DIR       where jars are cached          (default: <repo>/.cache)
#   KAFKA_DATA_DIR        log dirs, pid file, broker log (default: <repo>/.cache/kafka-data)
#   KAFKA_HOST            the client listener's address   (default: 127.0.0.1; the
#                         Kubernetes cluster's broker listens on its bridge, cluster.sh)
#   KAFKA_PORT            client listener port            (default: 9092)
#   KAFKA_CONTROLLER_PORT KRaft controller listener      (default: KAFKA_PORT + 1)
#   KAFKA_HEAP            JVM heap                        (default: 768m)
#   KAFKA_JVM_OPTS        more JVM options, split on spaces (default: none; for
#                         example -Xlog:safepoint*:file=/tmp/sp.log to see pauses)
#   KAFKA_STOP_TIMEOUT    seconds before SIGKILL on stop  (default: 20)
#   KAFKA_SASL_PORT       also listen with SASL_PLAINTEXT on 127.0.0.1:PORT, mechanisms
#                         PLAIN and SCRAM-SHA-512 (default: no SASL listener)
#   KAFKA_SASL_USERS      users of that listener, "name:password,name:password" (names
#                         and passwords of [A-Za-z0-9._-]); SCRAM credentials are created
#                         when the storage is formatted, so only a fresh KAFKA_DATA_DIR
#                         gets them                  (default: admin:admin-secret)
#   KAFKA_EXTRA_PROPERTIES broker properties appended to server.properties, one
#                         key=value per line          (default: none)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
kafka_version="$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/kafka/pom.xml")"
cache_dir="${KAFKA_CACHE_DIR:-$repo/.cache}"
libs="$cache_dir/kafka-$kafka_version/libs"
data_dir="${KAFKA_DATA_DIR:-$repo/.cache/kafka-data}"
host="${KAFKA_HOST:-127.0.0.1}"
port="${KAFKA_PORT:-9092}"
controller_port="${KAFKA_CONTROLLER_PORT:-$((port + 1))}"
heap="${KAFKA_HEAP:-768m}"
stop_timeout="${KAFKA_STOP_TIMEOUT:-20}"
pid_file="$data_dir/broker.pid"
sasl_port="${KAFKA_SASL_PORT:-}"
sasl_users="${KAFKA_SASL_USERS:-admin:admin-secret}"
extra_properties="${KAFKA_EXTRA_PROPERTIES:-}"

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

# name:password pairs of KAFKA_SASL_USERS, one per line.
sasl_user_lines() { tr ',' '\n' <<< "$sasl_users"; }

# Refuses pairs that would need quoting in a JAAS config or a properties file.
check_sasl_users() {
  local pair
  while IFS= read -r pair; do
    if [[ ! "$pair" =~ ^[A-Za-z0-9._-]+:[A-Za-z0-9._-]+$ ]]; then
      log "KAFKA_SASL_USERS: '${pair%%:*}' is not name:password of [A-Za-z0-9._-]"; exit 2
    fi
  done < <(sasl_user_lines)
}

# The SASL_PLAINTEXT listener (KAFKA_SASL_PORT): PLAIN checks the user_<name>
# entries of its JAAS config; SCRAM-SHA-512 checks credentials stored in the
# cluster metadata (see format_storage). Inter-broker traffic stays PLAINTEXT.
sasl_properties() {
  local users="" pair
  while read -r pair; do users+=" user_${pair%%:*}=\"${pair#*:}\""; done < <(sasl_user_lines)
  cat <<EOF
listener.name.sasl_plaintext.sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512
listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required$users;
listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
EOF
}

write_properties() {
  mkdir -p "$data_dir/logs"
  local listeners="PLAINTEXT://$host:$port" protocols="PLAINTEXT:PLAINTEXT"
  if [ -n "$sasl_port" ]; then
    listeners+=",SASL_PLAINTEXT://127.0.0.1:$sasl_port"
    protocols+=",SASL_PLAINTEXT:SASL_PLAINTEXT"
  fi
  cat > "$data_dir/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$controller_port
listeners=$listeners,CONTROLLER://127.0.0.1:$controller_port
advertised.listeners=$listeners
controller.listener.names=CONTROLLER
listener.security.protocol.map=$protocols,CONTROLLER:PLAINTEXT
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
  if [ -n "$sasl_port" ]; then sasl_properties >> "$data_dir/server.properties"; fi
  if [ -n "$extra_properties" ]; then printf '%s\n' "$extra_properties" >> "$data_dir/server.properties"; fi
}

format_storage() {
  local cluster_id pair scram=()
  cluster_id="$(java -cp "$(java_cp)" kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)"
  if [ -n "$sasl_port" ]; then
    while read -r pair; do
      scram+=(--add-scram "SCRAM-SHA-512=[name=${pair%%:*},password=${pair#*:}]")
    done < <(sasl_user_lines)
  fi
  java -cp "$(java_cp)" -Dlog4j2.configurationFile="$here/kafka/log4j2.yaml" \
    kafka.tools.StorageTool format -t "$cluster_id" -c "$data_dir/server.properties" \
    ${scram[@]+"${scram[@]}"} >/dev/null 2>&1
}

features() {
  fetch
  # The Admin API's describeFeatures, from a single-file program on the broker's jars;
  # the client's own logging (SLF4J without a binding) goes nowhere.
  java -cp "$(java_cp)" "$here/kafka/Features.java" "$host:$port" 2>/dev/null
}

running() {
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

port_open() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

start() {
  fetch
  if running; then log "already running (pid $(cat "$pid_file")) on $host:$port"; return 0; fi
  if [ -n "$sasl_port" ]; then check_sasl_users; fi
  write_properties
  if [ ! -f "$data_dir/logs/meta.properties" ]; then format_storage; fi
  # setsid: the broker gets its own session, so a test runner's Ctrl-C or a
  # killed parent shell does not take it down half-way through a test.
  # shellcheck disable=SC2086 # KAFKA_JVM_OPTS is a list of options
  setsid java -Xms256m -Xmx"$heap" -XX:+UseG1GC ${KAFKA_JVM_OPTS:-} \
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
  log "broker $kafka_version running (pid $(cat "$pid_file")) on $host:$port, data in $data_dir"
  echo "$host:$port"
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
  features) features ;;
  *) echo "usage: $0 fetch|start|stop|status|features" >&2; exit 2 ;;
esac
