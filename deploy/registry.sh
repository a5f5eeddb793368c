#!/usr/bin/env bash
# Builds, starts and stops a real Confluent-compatible schema registry: Apicurio
# Registry, whose Confluent API is served under /apis/ccompat/v7 (the URL a
# Confluent client is given is http://127.0.0.1:PORT/apis/ccompat/v7).
#
#   deploy/registry.sh fetch    build the server from Maven Central once (cached, see
#                               deploy/registry/pom.xml for why and how)
#   deploy/registry.sh start    start in the background on 127.0.0.1:REGISTRY_PORT, wait
#                               until the Confluent API answers, print its URL
#   deploy/registry.sh stop     SIGTERM, then SIGKILL after REGISTRY_STOP_TIMEOUT seconds
#   deploy/registry.sh status   exit 0 if the registry of REGISTRY_DATA_DIR is running
#   deploy/registry.sh url      print the Confluent API's URL (for the settings in force)
#
# Environment (all optional):
#   REGISTRY_CACHE_DIR      where the built server is kept, outside the work tree so that
#                           every clone on the machine reuses it
#                           (default: ~/.cache/connect-runtime)
#   REGISTRY_DATA_DIR       pid file, log, and the database if REGISTRY_PERSIST=1
#                           (default: <repo>/.cache/registry-data)
#   REGISTRY_PORT           listener port on 127.0.0.1 (default: 8081)
#   REGISTRY_HEAP           JVM heap (default: 256m)
#   REGISTRY_START_TIMEOUT  seconds to wait for the API (default: 90)
#   REGISTRY_STOP_TIMEOUT   seconds before SIGKILL on stop (default: 20)
#   REGISTRY_PERSIST        1: keep schemas in an H2 file under REGISTRY_DATA_DIR across
#                           restarts; otherwise in memory, every start begins empty
#   REGISTRY_BASIC_AUTH_USERS
#                           "name:password,name:password": HTTP basic auth on every
#                           endpoint but /health (names and passwords of [A-Za-z0-9._-])
#                           (default: no authentication)
#   REGISTRY_TLS_CERT, REGISTRY_TLS_KEY
#                           PEM certificate (chain) and key files: serve HTTPS only
#   REGISTRY_TLS_KEYSTORE, REGISTRY_TLS_KEYSTORE_PASSWORD
#                           or a PKCS12 key store instead of the PEM pair
#   REGISTRY_JAVA_OPTS      extra JVM options (Quarkus/Apicurio properties as -D...), e.g.
#                           -Dregistry.ccompat.use-canonical-hash=true: a schema that differs
#                           only in whitespace or key order gets the existing id instead of
#                           a new version (as with Confluent), but then the registry returns
#                           every schema rewritten (JSON keys sorted, .proto reformatted)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
project="$here/registry"
version="$(sed -n 's:.*<apicurio.version>\(.*\)</apicurio.version>.*:\1:p' "$project/pom.xml")"
cache_root="${REGISTRY_CACHE_DIR:-$HOME/.cache/connect-runtime}"
cache_dir="$cache_root/apicurio-registry-$version"
app="$cache_dir/quarkus-app"
data_dir="${REGISTRY_DATA_DIR:-$repo/.cache/registry-data}"
host=127.0.0.1
port="${REGISTRY_PORT:-8081}"
heap="${REGISTRY_HEAP:-256m}"
start_timeout="${REGISTRY_START_TIMEOUT:-90}"
stop_timeout="${REGISTRY_STOP_TIMEOUT:-20}"
persist="${REGISTRY_PERSIST:-}"
basic_auth_users="${REGISTRY_BASIC_AUTH_USERS:-}"
tls_cert="${REGISTRY_TLS_CERT:-}"
tls_key="${REGISTRY_TLS_KEY:-}"
tls_keystore="${REGISTRY_TLS_KEYSTORE:-}"
tls_keystore_password="${REGISTRY_TLS_KEYSTORE_PASSWORD:-}"
pid_file="$data_dir/registry.pid"
log_file="$data_dir/registry.log"

log() { printf 'registry.sh: %s\n' "$*" >&2; }

# What the cached build was made from: a change to pom.xml, settings.xml or src rebuilds it.
fingerprint() {
  (cd "$project" && find pom.xml settings.xml src -type f | LC_ALL=C sort | xargs sha256sum) \
    | sha256sum | cut -c1-16
}

fetch() {
  local want; want="$(fingerprint)"
  if [ "$(cat "$cache_dir/.complete" 2>/dev/null)" = "$want" ]; then return 0; fi
  command -v mvn >/dev/null || { log "Maven (mvn) is required to build the registry"; exit 1; }
  mkdir -p "$cache_root"
  # One build at a time per cache (two test runs on a fresh machine).
  exec 9> "$cache_dir.lock"
  flock 9
  if [ "$(cat "$cache_dir/.complete" 2>/dev/null)" = "$want" ]; then exec 9>&-; return 0; fi
  log "building Apicurio Registry $version from Maven Central into $cache_dir (once, about a minute)"
  rm -rf "$cache_dir"
  mkdir -p "$cache_dir/build"
  cp -r "$project/pom.xml" "$project/settings.xml" "$project/src" "$cache_dir/build/"
  # %prod.quarkus.package.type: Apicurio's application.properties asks for the
  # legacy jar in the prod profile; the fast jar starts quicker. Only a system
  # property outranks a profile-specific value of the application's own file.
  if ! mvn -B -q -s "$cache_dir/build/settings.xml" -f "$cache_dir/build/pom.xml" package \
      '-D%prod.quarkus.package.type=fast-jar' > "$cache_dir/build.log" 2>&1; then
    tail -n 40 "$cache_dir/build.log" >&2
    log "build failed; full log in $cache_dir/build.log"
    exit 1
  fi
  mv "$cache_dir/build/target/quarkus-app" "$app"
  rm -rf "$cache_dir/build"
  [ -f "$app/quarkus-run.jar" ]
  echo "$want" > "$cache_dir/.complete"
  exec 9>&-
}

tls() { [ -n "$tls_cert" ] || [ -n "$tls_keystore" ]; }

url() {
  if tls; then echo "https://$host:$port/apis/ccompat/v7"; else echo "http://$host:$port/apis/ccompat/v7"; fi
}

running() {
  [ -f "$pid_file" ] && kill -0 "$(cat "$pid_file")" 2>/dev/null
}

check_users() {
  local pair
  while IFS= read -r pair; do
    if [[ ! "$pair" =~ ^[A-Za-z0-9._-]+:[A-Za-z0-9._-]+$ ]]; then
      log "REGISTRY_BASIC_AUTH_USERS: '${pair%%:*}' is not name:password of [A-Za-z0-9._-]"; exit 2
    fi
  done < <(tr ',' '\n' <<< "$basic_auth_users")
}

# Runtime configuration (Quarkus and Apicurio properties) into opts; system
# properties outrank Apicurio's own application.properties, %prod values included.
options() {
  opts=(
    -Dquarkus.http.host="$host"
    # A handful of H2 connections, not the 20 Apicurio opens for PostgreSQL.
    -Dquarkus.datasource.jdbc.initial-size=1
    -Dquarkus.datasource.jdbc.min-size=1
    -Dquarkus.datasource.jdbc.max-size=10
    # Sentry is off (no DSN) but says so on the first request.
    '-Dquarkus.log.category."io.sentry".level=ERROR'
  )
  if [ "$persist" = 1 ]; then
    opts+=(-Dquarkus.datasource.jdbc.url="jdbc:h2:file:$data_dir/h2/registry")
  fi
  if [ -n "$basic_auth_users" ]; then
    # deploy/registry/src/main/java/connect/registry/BasicAuthFilter.java
    opts+=(-Dconnect.registry.basic-auth.users="$basic_auth_users")
  fi
  if tls; then
    opts+=(-Dquarkus.http.ssl-port="$port" -Dquarkus.http.insecure-requests=disabled)
    if [ -n "$tls_keystore" ]; then
      opts+=(-Dquarkus.http.ssl.certificate.key-store-file="$tls_keystore"
             -Dquarkus.http.ssl.certificate.key-store-file-type=PKCS12
             -Dquarkus.http.ssl.certificate.key-store-password="$tls_keystore_password")
    else
      [ -n "$tls_key" ] || { log "REGISTRY_TLS_CERT needs REGISTRY_TLS_KEY"; exit 2; }
      opts+=(-Dquarkus.http.ssl.certificate.files="$tls_cert"
             -Dquarkus.http.ssl.certificate.key-files="$tls_key")
    fi
  else
    opts+=(-Dquarkus.http.port="$port")
  fi
}

# The Confluent API lists its subjects.
ready() {
  local args=(-s -o /dev/null -m 2 -w '%{http_code}' -k)
  if [ -n "$basic_auth_users" ]; then args+=(-u "${basic_auth_users%%,*}"); fi
  [ "$(curl "${args[@]}" "$(url)/subjects" 2>/dev/null)" = 200 ]
}

port_open() { (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; }

start() {
  fetch
  if running; then log "already running (pid $(cat "$pid_file")) at $(url)"; url; return 0; fi
  command -v curl >/dev/null || { log "curl is required to wait for the registry"; exit 1; }
  if [ -n "$basic_auth_users" ]; then check_users; fi
  if port_open; then log "$host:$port is already in use (REGISTRY_PORT)"; exit 1; fi
  mkdir -p "$data_dir"
  local opts; options
  # setsid: its own session, so a test runner's Ctrl-C does not take it down
  # half-way through a test. C2-less JIT and the serial collector: a test
  # registry wants a quick start and a small footprint, not peak throughput.
  # shellcheck disable=SC2086
  setsid java -Xms64m -Xmx"$heap" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    -XX:+ExitOnOutOfMemoryError "${opts[@]}" ${REGISTRY_JAVA_OPTS:-} \
    -jar "$app/quarkus-run.jar" > "$log_file" 2>&1 < /dev/null &
  echo $! > "$pid_file"
  local deadline=$((SECONDS + start_timeout))
  until ready; do
    if ! running; then
      log "registry exited during startup; see $log_file"; tail -n 30 "$log_file" >&2; rm -f "$pid_file"; exit 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "registry not answering after ${start_timeout}s; see $log_file"; tail -n 30 "$log_file" >&2
      stop; exit 1
    fi
    sleep 0.2
  done
  log "Apicurio Registry $version running (pid $(cat "$pid_file")) at $(url), data in $data_dir"
  url
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
  log "registry stopped"
}

case "${1:-}" in
  fetch) fetch ;;
  start) start ;;
  stop) stop ;;
  status) running ;;
  url) url ;;
  *) echo "usage: $0 fetch|start|stop|status|url" >&2; exit 2 ;;
esac
