#!/usr/bin/env bash
# Entrypoint of the connect-runtime image (run under tini, which forwards
# SIGTERM to what this script execs and reaps orphaned Spark Python workers).
#
#   worker [FILE...]  (the default) a Kafka Connect worker. Its configuration is
#                     layered, each layer overriding the ones before it:
#                       1. /opt/connect-runtime/config/image-defaults.properties
#                       2. $CONNECT_WORKER_CONFIG (default
#                          /etc/connect-runtime/worker.properties, the Helm
#                          chart's ConfigMap; may be absent at the default path)
#                       3. /etc/connect-runtime/secret-config/*.properties, in
#                          name order (the chart's Secrets)
#                       4. FILE... given after "worker"
#                       5. CONNECT_* environment variables (the CLI applies them)
#   executor          a Spark executor: the driver (the leader worker, with
#                     spark.master=k8s://...) starts executor pods of this image
#                     with this argument and SPARK_* variables.
#   anything else     exec'd as given: connect-runtime verify ..., bash, ...
#
# The two paths under /etc/connect-runtime are a contract with the Helm chart
# (deploy/helm/connect-runtime); docs/container-image.md describes them.
set -euo pipefail

readonly defaults=/opt/connect-runtime/config/image-defaults.properties
readonly default_main=/etc/connect-runtime/worker.properties
readonly secret_dir=/etc/connect-runtime/secret-config

die() { echo "entrypoint: $*" >&2; exit 2; }

# An OpenShift-style arbitrary uid has no passwd entry; the JVM and Hadoop's
# login code (Spark's user name) want one. The image makes /etc/passwd writable
# by group 0, which such a uid always belongs to.
ensure_passwd_entry() {
  if ! getent passwd "$(id -u)" >/dev/null && [ -w /etc/passwd ]; then
    echo "connect:x:$(id -u):$(id -g):connect-runtime:${HOME:-/tmp}:/usr/sbin/nologin" >>/etc/passwd
  fi
}

run_worker() {
  local files=("$defaults")
  if [ -n "${CONNECT_WORKER_CONFIG:-}" ]; then
    # Named explicitly: a missing file is a mistake the CLI reports (exit 2).
    files+=("$CONNECT_WORKER_CONFIG")
  elif [ -e "$default_main" ]; then
    files+=("$default_main")
  fi
  # Not a worker key: the CLI would read CONNECT_WORKER_CONFIG as "worker.config".
  unset CONNECT_WORKER_CONFIG

  local secret
  # C collation: the order must not depend on the container's locale.
  while IFS= read -r -d '' secret; do
    files+=("$secret")
  done < <(find "$secret_dir" -maxdepth 1 -name '*.properties' \( -type f -o -type l \) \
             -print0 2>/dev/null | LC_ALL=C sort -z)

  exec connect-runtime worker "${files[@]}" "$@"
}

# The contract of Spark's executor pods (KubernetesExecutorBackend's arguments
# and the SPARK_* variables BasicExecutorFeatureStep sets on the pod).
run_executor() {
  local var
  for var in SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_APPLICATION_ID \
             SPARK_EXECUTOR_MEMORY SPARK_EXECUTOR_POD_IP; do
    [ -n "${!var:-}" ] || die "executor: $var is not set (Spark's driver sets it on executor pods)"
  done

  # The driver passes spark.executor.extraJavaOptions (and the JVM module
  # options Spark needs on Java 17) as SPARK_JAVA_OPT_0, _1, ...: one option per
  # variable, in index order. Indirect expansion keeps a value intact whatever
  # it holds (spaces, '=', newlines).
  local java_opts=() name
  while IFS= read -r name; do
    java_opts+=("${!name}")
  done < <(compgen -v SPARK_JAVA_OPT_ | awk -F_ '$4 ~ /^[0-9]+$/ { print $4, $0 }' \
             | sort -n | cut -d' ' -f2)

  # Configuration directory first, then the user's classpath, then Spark's jars
  # (the pyspark package's, the same Spark the driver runs).
  local classpath="${SPARK_CONF_DIR:-$SPARK_HOME/conf}"
  [ -z "${SPARK_CLASSPATH:-}" ] || classpath+=":$SPARK_CLASSPATH"
  [ -z "${SPARK_EXTRA_CLASSPATH:-}" ] || classpath+=":$SPARK_EXTRA_CLASSPATH"
  classpath+=":$SPARK_HOME/jars/*"
  [ -z "${SPARK_DIST_CLASSPATH:-}" ] || classpath+=":$SPARK_DIST_CLASSPATH"

  local args=(
    --driver-url "$SPARK_DRIVER_URL"
    --executor-id "$SPARK_EXECUTOR_ID"
    --cores "$SPARK_EXECUTOR_CORES"
    --app-id "$SPARK_APPLICATION_ID"
    --hostname "$SPARK_EXECUTOR_POD_IP"
    --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}"
  )
  [ -z "${SPARK_EXECUTOR_POD_NAME:-}" ] || args+=(--podName "$SPARK_EXECUTOR_POD_NAME")

  # The PySpark daemon the executor forks runs this interpreter unless the
  # driver's spark.pyspark.python says otherwise (the worker sets it to its own,
  # the same path in this image).
  export PYSPARK_PYTHON="${PYSPARK_PYTHON:-/opt/connect-runtime/venv/bin/python}"
  exec "$JAVA_HOME/bin/java" "${java_opts[@]}" \
    "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY" \
    -cp "$classpath" org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
    "${args[@]}"
}

ensure_passwd_entry
case "${1:-worker}" in
  worker) shift || true; run_worker "$@" ;;
  executor) shift; run_executor "$@" ;;
  *) exec "$@" ;;
esac
