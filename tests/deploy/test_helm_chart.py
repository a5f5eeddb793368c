"""The chart lints, renders and validates strictly for every value set, and says
no to bad values before anything is created.

``kubernetes-validate --strict`` checks each rendered object against the
Kubernetes 1.37 OpenAPI schemas, rejecting unknown fields (which the API server
would drop silently, so a misspelt key would simply not take effect).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from chart import CHART, VALUE_SETS, find, helm, render, values_args, worker_properties

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
    template = find(objects, "ConfigMap")["data"].get("executor-pod-template.yaml")
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
    template = yaml.safe_load(find(objects, "ConfigMap")["data"]["executor-pod-template.yaml"])
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
    assert pod["terminationGracePeriodSeconds"] == 20 + 30
    assert pod["enableServiceLinks"] is False
    assert pod["automountServiceAccountToken"] is False  # local mode: no API access
    assert pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert statefulset["spec"]["selector"]["matchLabels"].items() \
        <= statefulset["spec"]["template"]["metadata"]["labels"].items()
    assert [c["name"] for c in pod["initContainers"]] == ["plugins-my-connectors"]
    assert "plugin.path=/opt/connect-runtime/plugins,/opt/connect-runtime/plugins-from-images" \
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
    data = find(objects, "ConfigMap")["data"]
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
    template = find(objects, "ConfigMap")["data"]["executor-pod-template.yaml"]
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
    assert "health-probe.py" not in find(objects, "ConfigMap")["data"]


def test_under_required_client_certificates_the_probes_run_in_the_container() -> None:
    """The kubelet presents no client certificate; test_rendered_config.py runs
    this probe against a worker."""
    objects = render("secured-rest-values.yaml", {"connect.restPort": "8443"})
    for probe in probes(objects):
        assert "httpGet" not in probe and "tcpSocket" not in probe
        assert probe["exec"] == {"command": ["python", "/etc/connect-runtime/health-probe.py"]}
        assert probe["timeoutSeconds"] == 5
    script = find(objects, "ConfigMap")["data"]["health-probe.py"]
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
