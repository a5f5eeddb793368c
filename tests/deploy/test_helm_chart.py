"""The chart lints, renders and validates strictly for every value set, and says
no to bad values before anything is created. Its pods meet the restricted Pod
Security Standard, rule by rule; an upgrade keeps a release's group.id (Helm's
lookup, answered by a stand-in API server).

``kubernetes-validate --strict`` checks each rendered object against the
Kubernetes 1.37 OpenAPI schemas, rejecting unknown fields (which the API server
would drop silently, so a misspelt key would simply not take effect).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart import (
    CHART,
    VALUE_SETS,
    config_map,
    find,
    helm,
    pod_environment,
    render,
    values_args,
    worker_properties,
)
from support import REPO

from connect_runtime.config.connector_files import scan_directory

VALIDATE = [sys.executable, "-m", "kubernetes_validate", "--strict", "--quiet",
            "--kubernetes-version", "1.37.0"]


def validate(objects: list[dict[str, Any]], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "rendered.yaml"
    path.write_text(yaml.safe_dump_all(objects))
    return subprocess.run([*VALIDATE, str(path)], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("value_set", VALUE_SETS)
def test_value_set_lints_renders_and_validates_strictly(value_set: str, tmp_path: Path) -> None:
    lint = helm("lint", "--strict", str(CHART), *values_args(value_set))
    assert "0 chart(s) failed" in lint.stdout
    objects = render(value_set)
    kinds = sorted(o["kind"] for o in objects)
    assert {"StatefulSet", "Service", "ConfigMap", "PodDisruptionBudget",
            "ServiceAccount"} <= set(kinds), kinds
    # The executor pod template is a Pod of its own (Spark merges it into the
    # executor pods it creates): it is validated as one.
    template = config_map(objects)["data"].get("executor-pod-template.yaml")
    if template is not None:
        objects = [*objects, yaml.safe_load(template)]
    done = validate(objects, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_strict_validation_rejects_an_unknown_field(tmp_path: Path) -> None:
    """The validator is strict for real: a misspelt field fails it."""
    objects = render("defaults-values.yaml")
    find(objects, "StatefulSet")["spec"]["template"]["spec"]["terminationGracePeriod"] = 30
    done = validate(objects, tmp_path)
    assert done.returncode != 0
    assert "terminationGracePeriod" in done.stdout + done.stderr


@pytest.mark.parametrize(("sets", "message"), [
    ({"replicaCount": "three"}, "at '/replicaCount': got string, want integer"),
    ({"spark.mode": "yarn"}, "at '/spark/mode': value must be one of 'local', 'kubernetes'"),
    ({"kafka.securityProtocol": "SASL"}, "at '/kafka/securityProtocol'"),
    ({"connect.exactlyOnceSourceSupport": "on"}, "at '/connect/exactlyOnceSourceSupport'"),
    ({"spark.kubernetes.executor.memory": "lots"}, "at '/spark/kubernetes/executor/memory'"),
    # helm's validator names the key but reports a wrong location for propertyNames.
    ({"spark.conf.notspark": "1"}, "invalid propertyName 'notspark'"),
    ({"connect.replicationFactor": "0"}, "at '/connect/replicationFactor'"),
    ({"connect.config.offset\\.flush\\.interval\\.ms": "a\nb"},
     "at '/connect/config/offset.flush.interval.ms'"),
    ({"podAntiAffinity": "sometimes"}, "at '/podAntiAffinity'"),
    ({"logFormat": "xml"}, "at '/logFormat': value must be one of 'text', 'json'"),
    ({"metrics.serviceMonitor.interval": "often"}, "at '/metrics/serviceMonitor/interval'"),
    ({"rest.tls.clientAuth": "maybe"},
     "at '/rest/tls/clientAuth': value must be one of 'none', 'requested', 'required'"),
    ({"rest.tls.secretName": "Rest_TLS"}, "at '/rest/tls/secretName'"),
    ({"rest.basicAuth.key": "users/file"}, "at '/rest/basicAuth/key'"),
    ({"replicas": "3"}, "additional properties 'replicas' not allowed"),
    ({"probes.readiness.timeoutSeconds": "0"}, "at '/probes/readiness/timeoutSeconds'"),
    ({"spark.kubernetes.executor.memoryOverhead": "lots"},
     "at '/spark/kubernetes/executor/memoryOverhead'"),
])
def test_a_wrong_value_fails_with_the_schema_message(sets: dict[str, str], message: str) -> None:
    done = helm("template", "r", str(CHART), *values_args("defaults-values.yaml", sets),
                check=False)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_missing_bootstrap_servers_names_the_value() -> None:
    done = helm("template", "r", str(CHART), check=False)
    assert done.returncode != 0
    assert "kafka.bootstrapServers is required" in done.stderr, done.stderr


def test_sasl_without_a_mechanism_names_the_value() -> None:
    done = helm("template", "r", str(CHART), "--set", "kafka.bootstrapServers=k:9092",
                "--set", "kafka.securityProtocol=SASL_SSL", check=False)
    assert done.returncode != 0
    assert "kafka.sasl.mechanism is required" in done.stderr, done.stderr


@pytest.mark.parametrize(("sets", "message"), [
    ({"rest.tls.clientAuth": "required"},
     "rest.tls.clientAuth=required needs rest.tls.secretName"),
    ({"rest.tls.secretName": "t", "rest.tls.keys.ca": "", "rest.tls.clientAuth": "requested"},
     "rest.tls.clientAuth=requested needs rest.tls.keys.ca"),
    ({"rest.basicAuth.secretName": "u", "metrics.serviceMonitor.enabled": "true"},
     "metrics.serviceMonitor.basicAuth.secretName is required with rest.basicAuth"),
])
def test_rest_values_that_do_not_fit_together_fail_naming_the_value(
        sets: dict[str, str], message: str) -> None:
    done = helm("template", "r", str(CHART), *values_args("defaults-values.yaml", sets),
                check=False)
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_credentials_come_from_secrets_never_from_the_config_map() -> None:
    objects = render("secured-kafka-values.yaml")
    properties = worker_properties(objects)
    assert "jaas" not in properties and "password" not in properties, properties
    assert "security.protocol=SASL_SSL" in properties
    assert "sasl.mechanism=SCRAM-SHA-512" in properties
    assert "ssl.truststore.location=/etc/connect-runtime/kafka-tls/ca/ca.crt" in properties
    container = find(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    from_secrets = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"]
                    if "secretKeyRef" in v.get("valueFrom", {})}
    assert from_secrets == {
        "CONNECT_SASL_JAAS_CONFIG": {"name": "connect-user", "key": "sasl.jaas.config"},
        "CONNECT_SSL_KEYSTORE_PASSWORD": {"name": "connect-user-tls", "key": "user.password"},
    }
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/connect-runtime/secret-config", "/etc/connect-runtime/kafka-tls/ca",
            "/etc/connect-runtime/kafka-tls/keystore"} <= mounts
    # Executors mount the same TLS files at the same paths (their Kafka clients
    # are configured by the leader with these locations).
    template = yaml.safe_load(config_map(objects)["data"]["executor-pod-template.yaml"])
    executor_mounts = {m["mountPath"] for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert executor_mounts == {"/etc/connect-runtime/kafka-tls/ca",
                               "/etc/connect-runtime/kafka-tls/keystore"}


def test_worker_pods_shape() -> None:
    objects = render("local-values.yaml")
    statefulset = find(objects, "StatefulSet")
    pod = statefulset["spec"]["template"]["spec"]
    container = pod["containers"][0]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "rest"}
    # task.shutdown.graceful.timeout.ms is 20000 in this value set.
    assert "task.shutdown.graceful.timeout.ms=20000" in worker_properties(objects)
    # ceil(20000 / 1000) + the default terminationGraceMarginSeconds.
    assert pod["terminationGracePeriodSeconds"] == 20 + 120
    assert pod["enableServiceLinks"] is False
    assert pod["automountServiceAccountToken"] is False  # local mode: no API access
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert statefulset["spec"]["selector"]["matchLabels"].items() \
        <= statefulset["spec"]["template"]["metadata"]["labels"].items()
    assert [c["name"] for c in pod["initContainers"]] == ["plugins-my-connectors"]
    assert "plugin.path=/opt/connect-runtime/plugins,/opt/connect-runtime/plugin-images/plugins" \
        in worker_properties(objects)
    headless = find(objects, "Service", "-headless")["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is True
    assert find(objects, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    assert not [o for o in objects if o["kind"] in ("Role", "RoleBinding")]


@pytest.mark.parametrize(("sets", "expected"), [({}, "text"), ({"logFormat": "json"}, "json")])
def test_the_log_format_reaches_the_workers_as_an_environment_variable(
        sets: dict[str, str], expected: str) -> None:
    objects = render("defaults-values.yaml", sets)
    container = find(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "CONNECT_LOG_FORMAT", "value": expected} in container["env"]


@pytest.mark.parametrize(("value_set", "sets", "instance", "session"), [
    ("defaults-values.yaml", {}, "r-connect-runtime-2", "45000"),
    # connect.config's session.timeout.ms wins over the chart's.
    ("local-values.yaml", {}, "r-connect-runtime-2", "15000"),
    ("defaults-values.yaml", {"connect.staticMembership.sessionTimeoutMs": "60000"},
     "r-connect-runtime-2", "60000"),
    ("defaults-values.yaml", {"connect.staticMembership.enabled": "false"}, None, None),
])
def test_static_membership_joins_each_worker_under_its_pod_name(
        value_set: str, sets: dict[str, str], instance: str | None,
        session: str | None) -> None:
    objects = render(value_set, sets)
    statefulset = find(objects, "StatefulSet")
    pod_name = f"{statefulset['metadata']['name']}-2"
    env = pod_environment(statefulset, pod_name, "default")
    assert env.get("CONNECT_GROUP_INSTANCE_ID") == instance
    sessions = re.findall(r"^\s*session\.timeout\.ms=(\d+)$", worker_properties(objects),
                          re.MULTILINE)
    assert sessions == ([session] if session else []), sessions


def test_metrics_are_scraped_from_every_pod() -> None:
    """Pod annotations by default; a ServiceMonitor on request, over the headless
    Service only (the client Service reaches the same pods: they would be scraped twice)."""
    objects = render("defaults-values.yaml")
    annotations = find(objects, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert {k: v for k, v in annotations.items() if k.startswith("prometheus.io/")} == {
        "prometheus.io/scrape": "true", "prometheus.io/port": "8083",
        "prometheus.io/path": "/metrics"}
    assert not [o for o in objects if o["kind"] == "ServiceMonitor"]
    objects = render("defaults-values.yaml", {"metrics.serviceMonitor.enabled": "true",
                                              "metrics.serviceMonitor.labels.release": "prom",
                                              "metrics.podAnnotations": "false"})
    annotations = find(objects, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert not [k for k in annotations if k.startswith("prometheus.io/")]
    monitor = find(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["endpoints"] == [{"port": "rest", "path": "/metrics",
                                             "interval": "15s"}]
    selected = [o for o in objects if o["kind"] == "Service" and
                monitor["spec"]["selector"]["matchLabels"].items()
                <= o["metadata"]["labels"].items()]
    assert [o["metadata"]["name"] for o in selected] == [
        find(objects, "Service", "-headless")["metadata"]["name"]]
    assert "rest" in [port["name"] for port in selected[0]["spec"]["ports"]]


def test_kubernetes_mode_renders_the_driver_settings_and_role() -> None:
    objects = render("kubernetes-spark-values.yaml", namespace="streaming")
    properties = worker_properties(objects)
    for line in ("spark.master=k8s://https://kubernetes.default.svc",
                 "spark.kubernetes.namespace=streaming",
                 "spark.kubernetes.container.image=connect-runtime:0.1.0",
                 "spark.executor.instances=3", "spark.executor.cores=2",
                 "spark.executor.memory=2g",
                 "spark.scheduler.maxRegisteredResourcesWaitingTime=60s"):
        assert line in properties.splitlines(), (line, properties)
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True
    assert pod["serviceAccountName"] == "r-connect-runtime"
    env = {v["name"]: v.get("value") for v in pod["containers"][0]["env"]}
    assert env["CONNECT_SPARK_DRIVER_HOST"] == \
        "$(POD_NAME).r-connect-runtime-headless.$(POD_NAMESPACE).svc.cluster.local"
    role = find(objects, "Role")
    assert {r["resources"][0] for r in role["rules"]} <= {"pods", "configmaps", "services"}
    binding = find(objects, "RoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "r-connect-runtime",
                                    "namespace": "streaming"}]


JAAS = """KafkaConnect {
  org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule required
  file="/etc/connect-runtime/rest-users/credentials.properties";
};
"""


def test_rest_tls_and_basic_auth_come_from_secrets_never_from_the_config_map() -> None:
    objects = render("secured-rest-values.yaml")
    data = config_map(objects)["data"]
    lines = data["worker.properties"].splitlines()
    for line in ("listeners=https://0.0.0.0:8083", "rest.advertised.listener=https",
                 "listeners.https.ssl.keystore.type=PEM",
                 "listeners.https.ssl.truststore.type=PEM",
                 "listeners.https.ssl.client.auth=required",
                 "rest.extension.classes=org.apache.kafka.connect.rest.basic.auth.extension."
                 "BasicAuthSecurityRestExtension",
                 "java.security.auth.login.config=/etc/connect-runtime/rest-jaas.conf"):
        assert line in lines, (line, lines)
    # The JAAS file holds only the credentials file's path.
    assert data["rest-jaas.conf"] == JAAS
    # No PEM, and none of the keys that hold one or a password.
    assert "-----BEGIN" not in "\n".join(data.values())
    keys = [line.split("=", 1)[0] for line in lines if "=" in line]
    assert not [k for k in keys if "password" in k or k.endswith((
        ".keystore.key", ".certificate.chain", ".truststore.certificates"))], keys

    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "envFrom" not in container
    from_secrets = {v["name"]: v["valueFrom"]["secretKeyRef"] for v in container["env"]
                    if "secretKeyRef" in v.get("valueFrom", {})}
    assert from_secrets == {
        "CONNECT_LISTENERS_HTTPS_SSL_KEYSTORE_CERTIFICATE_CHAIN":
            {"name": "connect-rest-tls", "key": "tls.crt"},
        "CONNECT_LISTENERS_HTTPS_SSL_KEYSTORE_KEY": {"name": "connect-rest-tls", "key": "tls.key"},
        "CONNECT_LISTENERS_HTTPS_SSL_TRUSTSTORE_CERTIFICATES":
            {"name": "connect-rest-tls", "key": "ca.crt"},
    }
    # The credentials file: only its key, mounted read-only beside the JAAS file.
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["rest-users"]["secret"] == {
        "secretName": "connect-rest-users",
        "items": [{"key": "credentials.properties", "path": "credentials.properties"}]}
    assert [v for v in pod["volumes"] if "secret" in v] == [volumes["rest-users"]]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/etc/connect-runtime/rest-users"] == {
        "name": "rest-users", "mountPath": "/etc/connect-runtime/rest-users", "readOnly": True}
    assert mounts["/etc/connect-runtime/rest-jaas.conf"] == {
        "name": "config", "mountPath": "/etc/connect-runtime/rest-jaas.conf",
        "subPath": "rest-jaas.conf", "readOnly": True}


def test_executors_get_nothing_of_the_rest_security() -> None:
    """The worker hands its tasks the trust material in their task specs."""
    objects = render("secured-rest-values.yaml", {"spark.mode": "kubernetes"})
    template = config_map(objects)["data"]["executor-pod-template.yaml"]
    assert "rest" not in template and "CONNECT_" not in template, template


def probes(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    container = find(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    return [container[p] for p in ("startupProbe", "readinessProbe", "livenessProbe")]


@pytest.mark.parametrize(("sets", "scheme"), [
    ({}, None),
    ({"rest.tls.secretName": "t"}, "HTTPS"),
    ({"rest.tls.secretName": "t", "rest.tls.clientAuth": "requested"}, "HTTPS"),
    ({"rest.basicAuth.secretName": "u"}, None),  # /health needs no password
])
def test_the_kubelet_probes_health_over_the_listeners_scheme(
        sets: dict[str, str], scheme: str | None) -> None:
    objects = render("defaults-values.yaml", sets)
    expected = {"path": "/health", "port": "rest", **({"scheme": scheme} if scheme else {})}
    assert [p["httpGet"] for p in probes(objects)] == [expected] * 3
    assert "health-probe.py" not in config_map(objects)["data"]


def test_under_required_client_certificates_the_probes_run_in_the_container() -> None:
    """The kubelet presents no client certificate; test_rendered_config.py runs
    this probe against a worker."""
    objects = render("secured-rest-values.yaml", {"connect.restPort": "8443"})
    for probe in probes(objects):
        assert "httpGet" not in probe and "tcpSocket" not in probe
        assert probe["exec"] == {"command": ["python", "/etc/connect-runtime/health-probe.py"]}
        assert probe["timeoutSeconds"] == 5
    script = config_map(objects)["data"]["health-probe.py"]
    assert "https://127.0.0.1:8443/health" in script
    container = find(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "config", "mountPath": "/etc/connect-runtime/health-probe.py",
            "subPath": "health-probe.py", "readOnly": True} in container["volumeMounts"]


def test_metrics_are_scraped_over_https_with_a_password() -> None:
    objects = render("secured-rest-values.yaml", {
        "metrics.serviceMonitor.enabled": "true",
        "metrics.serviceMonitor.basicAuth.secretName": "prometheus-connect"},
        namespace="streaming")
    annotations = find(objects, "StatefulSet")["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scheme"] == "https"
    endpoint = find(objects, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"] == {
        "serverName": "r-connect-runtime-0.r-connect-runtime-headless.streaming.svc."
                      "cluster.local",
        "ca": {"secret": {"name": "connect-rest-tls", "key": "ca.crt"}},
        # clientAuth=required: the workers' own certificate.
        "cert": {"secret": {"name": "connect-rest-tls", "key": "tls.crt"}},
        "keySecret": {"name": "connect-rest-tls", "key": "tls.key"},
    }
    assert endpoint["basicAuth"] == {
        "username": {"name": "prometheus-connect", "key": "username"},
        "password": {"name": "prometheus-connect", "key": "password"}}
    # A tlsConfig of one's own replaces the chart's.
    objects = render("secured-rest-values.yaml", {
        "metrics.serviceMonitor.enabled": "true",
        "metrics.serviceMonitor.basicAuth.secretName": "prometheus-connect",
        "metrics.serviceMonitor.tlsConfig.insecureSkipVerify": "true"})
    endpoint = find(objects, "ServiceMonitor")["spec"]["endpoints"][0]
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    # Plain HTTP: no scheme annotation.
    annotations = find(render("defaults-values.yaml"), "StatefulSet")["spec"]["template"][
        "metadata"]["annotations"]
    assert "prometheus.io/scheme" not in annotations


@pytest.mark.parametrize(("value_set", "url"), [
    ("defaults-values.yaml", "export CONNECT_URL=http://127.0.0.1:8083"),
    ("secured-rest-values.yaml", "export CONNECT_URL=https://r-connect-runtime-0."
                                 "r-connect-runtime-headless.default.svc.cluster.local:8083"),
])
def test_the_notes_url_follows_tls(value_set: str, url: str) -> None:
    out = helm("install", "r", str(CHART), "--dry-run=client", "--namespace", "default",
               *values_args(value_set)).stdout
    notes = out[out.index("NOTES:"):]
    assert url in notes, notes
    if value_set == "secured-rest-values.yaml":
        for part in ("--connect-to ::127.0.0.1:8083", "--cacert connect-ca.crt",
                     "--cert client.crt --key client.key", "-u <user>:<password>",
                     "curl -s $CURL_OPTS $CONNECT_URL/connector-plugins"):
            assert part in notes, (part, notes)
    else:
        assert "CURL_OPTS" not in notes and "https" not in notes, notes


# --------------------------------------------------------------------------
# Pod Security Standards, "restricted" profile (Kubernetes 1.37): the rules the
# PodSecurity admission plugin applies to a namespace labelled
# pod-security.kubernetes.io/enforce: restricted, read off the rendered pods.
# The restricted profile includes every baseline rule.

RESTRICTED_VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                           "persistentVolumeClaim", "projected", "secret"}
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL",
                         "MKNOD", "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID",
                         "SYS_CHROOT"}
SAFE_SYSCTLS = {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t",
                 "container_engine_t"}
PROBE_AND_HOOK_HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe")


def restricted_violations(name: str, metadata: dict[str, Any],
                          spec: dict[str, Any]) -> list[str]:
    """What keeps pod ``name`` (its ``metadata`` and ``spec``) out of a namespace
    enforcing the restricted Pod Security Standard: one line per broken rule."""
    out: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    containers = [*spec.get("initContainers", []), *spec.get("containers", []),
                  *spec.get("ephemeralContainers", [])]
    assert spec.get("containers"), f"{name}: no containers"

    def bad(where: str, rule: str) -> None:
        out.append(f"{name}: {where}: {rule}")

    # Baseline.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field):
            bad("spec", f"{field} must be unset or false")
    for key, value in (metadata.get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/") and not (
                value == "runtime/default" or value.startswith("localhost/")):
            bad(f"annotation {key}", "AppArmor must be runtime/default or localhost/*")
    for sysctl in pod_sc.get("sysctls", []):
        if sysctl["name"] not in SAFE_SYSCTLS:
            bad("spec.securityContext.sysctls", f"{sysctl['name']} is not a safe sysctl")
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= RESTRICTED_VOLUME_TYPES:
            bad(f"volume {volume['name']}", f"type {sorted(kinds)} not allowed")
    contexts = [("spec.securityContext", pod_sc)]
    contexts += [(f"container {c['name']}", c.get("securityContext") or {}) for c in containers]
    for where, sc in contexts:
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            bad(where, "windowsOptions.hostProcess must be unset or false")
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault",
                                                                 "Localhost"):
            bad(where, "appArmorProfile.type must be RuntimeDefault or Localhost")
        selinux = sc.get("seLinuxOptions") or {}
        if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") \
                or selinux.get("role"):
            bad(where, "seLinuxOptions outside the allowed types, or with a user or role")
        if sc.get("runAsUser") == 0:
            bad(where, "runAsUser must not be 0")
        if sc.get("runAsNonRoot") is False:
            bad(where, "runAsNonRoot must not be false")
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp not in (None, "RuntimeDefault", "Localhost"):
            bad(where, f"seccompProfile.type {seccomp} (RuntimeDefault or Localhost only)")
    # Restricted, per container (init containers included).
    for container in containers:
        where = f"container {container['name']}"
        sc = container.get("securityContext") or {}
        if sc.get("privileged"):
            bad(where, "privileged must be unset or false")
        if sc.get("procMount", "Default") != "Default":
            bad(where, "procMount must be Default")
        if sc.get("allowPrivilegeEscalation") is not False:
            bad(where, "allowPrivilegeEscalation must be false")
        capabilities = sc.get("capabilities") or {}
        if "ALL" not in capabilities.get("drop", []):
            bad(where, "capabilities.drop must include ALL")
        added = set(capabilities.get("add", []))
        if not added <= {"NET_BIND_SERVICE"} or not added <= BASELINE_CAPABILITIES:
            bad(where, f"capabilities.add {sorted(added)} (NET_BIND_SERVICE only)")
        if pod_sc.get("runAsNonRoot") is not True and sc.get("runAsNonRoot") is not True:
            bad(where, "runAsNonRoot must be true (on the pod or the container)")
        if (pod_sc.get("seccompProfile") or {}).get("type") not in (
                "RuntimeDefault", "Localhost") and (sc.get("seccompProfile") or {}).get(
                "type") not in ("RuntimeDefault", "Localhost"):
            bad(where, "seccompProfile.type must be RuntimeDefault or Localhost "
                       "(on the pod or the container)")
        for port in container.get("ports", []):
            if port.get("hostPort"):
                bad(where, f"hostPort {port['hostPort']} not allowed")
        handlers = [container.get(p) or {} for p in PROBE_AND_HOOK_HANDLERS]
        handlers += list((container.get("lifecycle") or {}).values())
        for handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                if (handler.get(kind) or {}).get("host"):
                    bad(where, f"{kind}.host must be unset (probes and hooks)")
    return out


def rendered_pods(objects: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any],
                                                                dict[str, Any]]]:
    """(name, metadata, spec) of every pod the chart makes: the StatefulSet's
    template, and the executor pod template if there is one."""
    template = find(objects, "StatefulSet")["spec"]["template"]
    pods = [("worker", template["metadata"], template["spec"])]
    executor = config_map(objects)["data"].get("executor-pod-template.yaml")
    if executor is not None:
        pod = yaml.safe_load(executor)
        pods.append(("executor", pod["metadata"], pod["spec"]))
    return pods


@pytest.mark.parametrize(("value_set", "sets"), [
    *[(value_set, {}) for value_set in VALUE_SETS],
    # Init containers and executor pods together, with the Kafka TLS Secrets.
    ("local-values.yaml", {"spark.mode": "kubernetes",
                           "kafka.tls.caSecret.name": "ca", "rest.tls.secretName": "t",
                           "rest.tls.clientAuth": "required",
                           "connect.secretConfig.existingSecret": "s"}),
])
def test_pods_meet_the_restricted_pod_security_standard(value_set: str,
                                                        sets: dict[str, str]) -> None:
    """Workers, their plugin init containers and executor pods: only the real
    admission check on a cluster proves it, but every rule it applies is read
    here off what the chart renders (Spark adds to executor pods only env,
    ports, a configMap and emptyDir volumes, and allowPrivilegeEscalation=false)."""
    pods = rendered_pods(render(value_set, sets))
    violations = [v for pod in pods for v in restricted_violations(*pod)]
    assert not violations, "\n".join(violations)
    # What the defaults set for it, on every pod.
    for name, _, spec in pods:
        assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
    if value_set == "local-values.yaml":
        assert [n for n, _, s in pods if s.get("initContainers")] == ["worker"]


@pytest.mark.parametrize(("flag", "rule"), [
    ("securityContext.allowPrivilegeEscalation=true", "allowPrivilegeEscalation must be false"),
    ("podSecurityContext.seccompProfile=null", "seccompProfile.type must be RuntimeDefault"),
    ("podSecurityContext.runAsNonRoot=null", "runAsNonRoot must be true"),
    ("securityContext.capabilities.drop=null", "capabilities.drop must include ALL"),
    ("podSecurityContext.runAsUser=0", "runAsUser must not be 0"),
])
def test_the_restricted_check_catches_a_violation(flag: str, rule: str) -> None:
    """The check is real: each value that breaks a rule, on the worker, its init
    container and the executor pods alike, is named."""
    out = helm("template", "r", str(CHART), *values_args("local-values.yaml"),
               "--set", "spark.mode=kubernetes", "--set", flag).stdout
    objects = [doc for doc in yaml.safe_load_all(out) if doc]
    violations = [v for pod in rendered_pods(objects) for v in restricted_violations(*pod)]
    where = ["worker: spec.securityContext", "executor: spec.securityContext"] \
        if flag.startswith("podSecurityContext.runAsUser") else \
        ["worker: container plugins-my-connectors", "worker: container worker",
         "executor: container executor"]
    for prefix in where:
        assert f"{prefix}: {rule}" in "\n".join(violations), (prefix, violations)


# --------------------------------------------------------------------------
# Probes.

def startup_read_timeout_s() -> float:
    """The worker's bound on each read of an internal topic at start."""
    source = (REPO / "connect_runtime" / "worker.py").read_text()
    match = re.search(r"^STARTUP_READ_TIMEOUT_S = ([0-9.]+)$", source, re.MULTILINE)
    assert match, "STARTUP_READ_TIMEOUT_S not found in connect_runtime/worker.py"
    return float(match.group(1))


def test_probe_timeouts_are_values_with_defaults_per_handler() -> None:
    # The kubelet's HTTP probes: 1 s unless set.
    assert [p["timeoutSeconds"] for p in probes(render("defaults-values.yaml"))] == [1, 1, 1]
    objects = render("defaults-values.yaml", {"probes.startup.timeoutSeconds": "4",
                                              "probes.readiness.timeoutSeconds": "2",
                                              "probes.liveness.timeoutSeconds": "3"})
    assert [p["timeoutSeconds"] for p in probes(objects)] == [4, 2, 3]
    # The in-container probe: 5 s unless set.
    objects = render("secured-rest-values.yaml", {"probes.liveness.timeoutSeconds": "9"})
    assert [p["timeoutSeconds"] for p in probes(objects)] == [5, 5, 9]
    assert all("exec" in p for p in probes(objects))


def test_the_startup_window_outlasts_a_slow_start() -> None:
    """/health answers 200 only after the worker has read the status and config
    topics, each allowed STARTUP_READ_TIMEOUT_S, plus first contact (30 s), the
    cluster id (30 s) and joining the group, when a leader may have to be
    elected after a departed one's session times out."""
    objects = render("defaults-values.yaml")
    startup = probes(objects)[0]
    window = startup["periodSeconds"] * startup["failureThreshold"]
    session = re.search(r"^\s*session\.timeout\.ms=(\d+)$", worker_properties(objects),
                        re.MULTILINE)
    assert window == 600 and session is not None
    assert window >= 2 * startup_read_timeout_s() + 30 + 30 + int(session[1]) / 1000, window


# --------------------------------------------------------------------------
# group.id: unique across namespaces, kept across upgrades.

def group_lines(objects: list[dict[str, Any]]) -> list[str]:
    return [line for line in worker_properties(objects).splitlines()
            if line.split("=", 1)[0] in ("group.id", "config.storage.topic",
                                         "offset.storage.topic", "status.storage.topic")]


def test_the_default_group_id_differs_between_namespaces() -> None:
    """Two releases named alike in two namespaces, one Kafka cluster: two
    Connect clusters, with their own internal topics."""
    for namespace in ("team-a", "team-b"):
        assert group_lines(render("defaults-values.yaml", namespace=namespace)) == [
            f"group.id={namespace}.r-connect-runtime",
            f"config.storage.topic={namespace}.r-connect-runtime-configs",
            f"offset.storage.topic={namespace}.r-connect-runtime-offsets",
            f"status.storage.topic={namespace}.r-connect-runtime-status"]
    out = helm("install", "r", str(CHART), "--dry-run=client", "--namespace", "team-a",
               *values_args("defaults-values.yaml")).stdout
    notes = out[out.index("NOTES:"):]
    assert "cluster group.id team-a.r-connect-runtime" in notes, notes
    assert "team-a.r-connect-runtime-configs" in notes, notes


def test_an_explicit_group_id_is_kept_in_every_namespace() -> None:
    for namespace in ("team-a", "team-b"):
        lines = group_lines(render("local-values.yaml", namespace=namespace))
        assert lines[:2] == ["group.id=orders-connect",
                             "config.storage.topic=orders-connect-configs"], lines


class FakeAPIServer:
    """Just enough of a Kubernetes API server for ``helm template
    --dry-run=server``: version, discovery, and GET of one ConfigMap (or 404),
    so the chart's ``lookup`` sees what an installed release left."""

    def __init__(self, config_map: dict[str, Any] | None) -> None:
        resources = {"v1": [("configmaps", "ConfigMap"), ("services", "Service"),
                            ("serviceaccounts", "ServiceAccount"), ("pods", "Pod"),
                            ("secrets", "Secret")],
                     "apps/v1": [("statefulsets", "StatefulSet")],
                     "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget")],
                     "rbac.authorization.k8s.io/v1": [("roles", "Role"),
                                                      ("rolebindings", "RoleBinding")]}
        self.answers: dict[str, Any] = {
            "/version": {"major": "1", "minor": "37", "gitVersion": "v1.37.2"},
            "/api": {"kind": "APIVersions", "versions": ["v1"]},
            "/apis": {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                {"name": gv.split("/")[0], "versions": [{"groupVersion": gv, "version": "v1"}],
                 "preferredVersion": {"groupVersion": gv, "version": "v1"}}
                for gv in resources if "/" in gv]},
        }
        for gv, kinds in resources.items():
            self.answers[f"/api/{gv}" if gv == "v1" else f"/apis/{gv}"] = {
                "kind": "APIResourceList", "groupVersion": gv, "resources": [
                    {"name": name, "singularName": "", "namespaced": True, "kind": kind,
                     "verbs": ["get", "list", "create", "update", "patch", "delete"]}
                    for name, kind in kinds]}
        if config_map is not None:
            meta = config_map["metadata"]
            self.answers[f"/api/v1/namespaces/{meta['namespace']}/configmaps/"
                         f"{meta['name']}"] = config_map
        self.requests: list[str] = []
        answers, requests = self.answers, self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                requests.append(path)
                body = answers.get(path)
                if body is None and path.endswith("/secrets"):  # helm's release storage
                    body = {"kind": "SecretList", "apiVersion": "v1", "items": []}
                code = 200 if body is not None else 404
                if body is None:
                    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "reason": "NotFound", "code": 404}
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def kubeconfig(self, path: Path) -> Path:
        server = f"http://127.0.0.1:{self.server.server_address[1]}"
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": server}}],
            "users": [{"name": "fake", "user": {"token": "fake"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}))
        return path


@pytest.fixture
def fake_api_server(request: pytest.FixtureRequest) -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(request.param)
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def installed_config_map(properties: str) -> dict[str, Any]:
    """The ConfigMap a release "r" in namespace "streaming" left (Helm's
    ownership marks included, or Helm would refuse to adopt it)."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "r-connect-runtime", "namespace": "streaming",
                         "labels": {"app.kubernetes.io/managed-by": "Helm"},
                         "annotations": {"meta.helm.sh/release-name": "r",
                                         "meta.helm.sh/release-namespace": "streaming"}},
            "data": {"worker.properties": properties}}


# An earlier chart's default (the full name alone), and a connect.config
# group.id line after the chart's: the chart's own line is the first.
OLD_RELEASE = installed_config_map(
    "bootstrap.servers=k:9092\ngroup.id=r-connect-runtime\n"
    "config.storage.topic=r-connect-runtime-configs\nplugin.path=/p\ngroup.id=from-config\n")


def render_against(server: FakeAPIServer, tmp_path: Path,
                   sets: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """``helm template`` with the fake cluster: what ``helm upgrade`` would apply."""
    out = helm("template", "r", str(CHART), "--namespace", "streaming", "--dry-run=server",
               "--disable-openapi-validation", *values_args("defaults-values.yaml", sets),
               kubeconfig=server.kubeconfig(tmp_path / "kubeconfig")).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


@pytest.mark.parametrize("fake_api_server", [OLD_RELEASE], indirect=True)
def test_an_installed_release_keeps_its_group_id(fake_api_server: FakeAPIServer,
                                                 tmp_path: Path) -> None:
    """A changed group.id would orphan every connector: the chart reads the
    release's ConfigMap (helm's lookup) and keeps its group.id and topics."""
    assert group_lines(render_against(fake_api_server, tmp_path)) == [
        "group.id=r-connect-runtime", "config.storage.topic=r-connect-runtime-configs",
        "offset.storage.topic=r-connect-runtime-offsets",
        "status.storage.topic=r-connect-runtime-status"]
    assert "/api/v1/namespaces/streaming/configmaps/r-connect-runtime" \
        in fake_api_server.requests
    # connect.groupId, when set, still wins.
    lines = group_lines(render_against(fake_api_server, tmp_path,
                                       {"connect.groupId": "orders"}))
    assert lines[:2] == ["group.id=orders", "config.storage.topic=orders-configs"], lines


@pytest.mark.parametrize("fake_api_server", [
    None,  # a new install
    installed_config_map("bootstrap.servers=k:9092\n"),  # no group.id line to keep
], indirect=True)
def test_without_a_group_id_to_keep_the_default_applies(fake_api_server: FakeAPIServer,
                                                        tmp_path: Path) -> None:
    lines = group_lines(render_against(fake_api_server, tmp_path))
    assert lines[0] == "group.id=streaming.r-connect-runtime", lines


# --------------------------------------------------------------------------
# Sizing, Spark's wire security, shutdown.

def test_default_resources_fit_a_small_node() -> None:
    """Three workers request 1.5 CPU together; memory is guaranteed (request = limit)."""
    container = find(render("defaults-values.yaml"), "StatefulSet")["spec"]["template"][
        "spec"]["containers"][0]
    assert container["resources"] == {"requests": {"cpu": "500m", "memory": "2Gi"},
                                      "limits": {"memory": "2Gi"}}


@pytest.mark.parametrize(("value_set", "sets", "overhead"), [
    # 384 MiB for the JVM's non-heap + 1536 MiB per core for the tasks' Python.
    ("defaults-values.yaml", {"spark.mode": "kubernetes"}, "1920m"),
    ("kubernetes-spark-values.yaml", {}, "3456m"),  # 2 cores
    ("kubernetes-spark-values.yaml", {"spark.kubernetes.executor.memoryOverhead": "1g"}, "1g"),
])
def test_executor_pods_have_room_for_the_python_tasks(value_set: str, sets: dict[str, str],
                                                      overhead: str) -> None:
    """Spark sizes an executor pod's memory as spark.executor.memory +
    spark.executor.memoryOverhead (spark.executor.pyspark.memory only counts for
    spark.kubernetes.resource.type=python, which client mode does not set)."""
    lines = worker_properties(render(value_set, sets)).splitlines()
    assert f"spark.executor.memoryOverhead={overhead}" in lines, lines
    assert not [line for line in lines if line.startswith("spark.executor.pyspark.memory")]


SPARK_WIRE_SECURITY = ["spark.authenticate=true", "spark.network.crypto.enabled=true",
                       "spark.network.crypto.authEngineVersion=2",
                       "spark.network.crypto.cipher=AES/GCM/NoPadding"]


def test_the_spark_driver_authenticates_and_encrypts_in_kubernetes_mode() -> None:
    lines = worker_properties(render("kubernetes-spark-values.yaml")).splitlines()
    for line in SPARK_WIRE_SECURITY:
        assert line in lines, (line, lines)
    # Local mode: no driver port on the network, nothing to protect.
    local = worker_properties(render("local-values.yaml"))
    assert "spark.authenticate" not in local and "spark.network.crypto" not in local
    # spark.conf comes later, so it overrides the chart's keys.
    lines = worker_properties(render("kubernetes-spark-values.yaml", {
        "spark.conf.spark\\.network\\.crypto\\.cipher": "AES/CTR/NoPadding"})).splitlines()
    assert lines.index("spark.network.crypto.cipher=AES/CTR/NoPadding") \
        > lines.index("spark.network.crypto.cipher=AES/GCM/NoPadding")


def test_the_grace_period_covers_the_workers_bounded_shutdown() -> None:
    """ceil(task.shutdown.graceful.timeout.ms / 1000) + 120: the tasks' 2 + 30 s
    past the timeout, 30 s to leave the group, 30 s to stop Spark and 15 s for
    the stores (values.yaml, terminationGraceMarginSeconds)."""
    pod = find(render("defaults-values.yaml"), "StatefulSet")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 5 + 120
    assert pod["terminationGracePeriodSeconds"] >= 5 + (2 + 30) + 30 + 30 + 15
    pod = find(render("defaults-values.yaml", {"connect.taskShutdownGracefulTimeoutMs": "7001",
                                               "terminationGraceMarginSeconds": "60"}),
               "StatefulSet")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] == 8 + 60


def test_declared_connectors_render_into_a_configmap_the_workers_read(tmp_path: Path) -> None:
    values = tmp_path / "connectors-values.yaml"
    values.write_text(yaml.safe_dump({"connectors": {
        "orders": {"config": {"connector.class": "SequenceSourceConnector", "tasks.max": 2,
                              "topic": "orders"}, "state": "PAUSED"},
        "plain": {"config": {"connector.class": "X", "flag": True}}}}))
    sets = {"kafka.bootstrapServers": "kafka:9092"}
    objects = [doc for doc in yaml.safe_load_all(helm(
        "template", "r", str(CHART), "-f", str(values), *values_args(None, sets)).stdout) if doc]
    connectors = find(objects, "ConfigMap", "-connectors")["data"]
    # What the worker reads: the files, parsed as declared.connectors.dir's.
    directory = tmp_path / "mounted"
    directory.mkdir()
    for key, text in connectors.items():
        (directory / key).write_text(text)
    scan = scan_directory(directory)
    assert scan.errors == ()
    parsed = {d.name: (d.config, d.state) for d in scan.connectors}
    assert parsed == {
        "orders": ({"connector.class": "SequenceSourceConnector", "tasks.max": "2",
                    "topic": "orders", "name": "orders"}, "PAUSED"),
        "plain": ({"connector.class": "X", "flag": "true", "name": "plain"}, None)}
    assert "declared.connectors.dir=/etc/connect-runtime/connectors" \
        in worker_properties(objects)
    pod = find(objects, "StatefulSet")["spec"]["template"]
    mount = next(m for m in pod["spec"]["containers"][0]["volumeMounts"]
                 if m["name"] == "connectors")
    # A directory mount: the kubelet refreshes it (a subPath mount never changes).
    assert mount == {"name": "connectors", "mountPath": "/etc/connect-runtime/connectors",
                     "readOnly": True}
    # Changing connectors alone restarts no worker: the pods' checksum ignores them.
    plain = render(None, sets)
    assert find(plain, "ConfigMap", "-connectors").get("data") in (None, {})
    checksum = "checksum/config"
    assert pod["metadata"]["annotations"][checksum] == \
        find(plain, "StatefulSet")["spec"]["template"]["metadata"]["annotations"][checksum]


def test_a_declared_connector_without_config_fails_naming_it() -> None:
    done = helm("template", "r", str(CHART), "--set", "kafka.bootstrapServers=k:9092",
                "--set", "connectors.orders.state=PAUSED", check=False)
    assert done.returncode != 0 and "/connectors/orders" in done.stderr \
        and "config" in done.stderr, done.stderr


def test_plugin_images_are_copied_into_a_directory_inside_their_emptydir() -> None:
    """The kubelet makes an emptyDir's root 0777, which the worker refuses in
    plugin.path: the first image's folder is copied as the plugin directory
    (cp's mode, umask 022), the others into it."""
    objects = render("local-values.yaml", {
        "plugins.images[1].name": "more", "plugins.images[1].image": "example.com/more:1",
        "plugins.images[1].path": "/opt/more/"})
    pod = find(objects, "StatefulSet")["spec"]["template"]["spec"]
    assert [c["command"] for c in pod["initContainers"]] == [
        ["cp", "-R", "/plugins", "/opt/connect-runtime/plugin-images/plugins"],
        ["cp", "-R", "/opt/more/.", "/opt/connect-runtime/plugin-images/plugins/"]]
    mounts = [m for c in [*pod["initContainers"], *pod["containers"]]
              for m in c["volumeMounts"] if m["name"] == "plugins-from-images"]
    assert {m["mountPath"] for m in mounts} == {"/opt/connect-runtime/plugin-images"}
    assert len(mounts) == 3
