"""The chart cannot render a worker config the worker rejects.

The worker process runs from exactly what a pod would get: the ConfigMap's
files, the files it mounts from Secrets and the StatefulSet's environment (field
and Secret references and ``$(VAR)`` expansion resolved as the kubelet does).
Only the REST listener's host and the advertised host differ, because this
process is not in the pod's network, and the mounted files live under the
test's directory rather than /etc/connect-runtime (``chart.pod_files``).
"""

from __future__ import annotations

import ssl
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from chart import PodWorker, find, pod_environment, pod_files, render, run_exec_probe
from support.kafka import free_port, read_topic, sequences, wait_for
from support.tls import make_pki, tools_missing

POD = "r-connect-runtime-0"


def start_worker(tmp_path: Path, sets: dict[str, str], value_set: str = "defaults-values.yaml",
                 secrets: dict[str, dict[str, str]] | None = None,
                 verify: ssl.SSLContext | bool = True) -> tuple[PodWorker, list[dict[str, Any]]]:
    """The worker of pod ``POD`` on a free loopback port (the chart's restPort, so
    what the pod spec says about the port holds here); the rendered objects."""
    port = free_port()
    objects = render(value_set, {**sets, "connect.restPort": str(port)}, namespace="connect")
    root = pod_files(objects, tmp_path / "pod", secrets)
    properties = root / "etc" / "connect-runtime" / "worker.properties"
    scheme = "https" if "listeners=https://" in properties.read_text() else "http"
    # Outside the pod network: loopback rather than 0.0.0.0, advertised as such.
    outside = tmp_path / "outside-the-pod.properties"
    outside.write_text(f"listeners={scheme}://127.0.0.1:{port}\nspark.driver.memory=512m\n")
    env = pod_environment(find(objects, "StatefulSet"), POD, "connect", secrets)
    assert env["CONNECT_REST_ADVERTISED_HOST_NAME"] == \
        f"{POD}.r-connect-runtime-headless.connect.svc.cluster.local"
    env["CONNECT_REST_ADVERTISED_HOST_NAME"] = "127.0.0.1"
    worker = PodWorker(tmp_path, [properties, outside], env, port, scheme, verify)
    return worker, objects


def delivers_exactly_once(client: httpx.Client, url: str, bootstrap: str, topic: str) -> None:
    """A sequence connector of 300 records, created through ``client``, commits
    each exactly once; its task runs on the worker at ``url``."""
    created = client.post(f"{url}/connectors", timeout=60, json={"name": "seq", "config": {
        "connector.class": "SequenceSourceConnector", "topic": topic, "tasks.max": "1",
        "max.records": "300", "batch.size": "50", "exactly.once.support": "required",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1"}})
    assert created.status_code == 201, created.text

    def committed() -> dict[int, list[int]] | None:
        got = sequences(read_topic(bootstrap, topic))
        return got if sum(len(v) for v in got.values()) >= 300 else None
    assert wait_for(committed, 90, "300 committed records", interval=1) == {0: list(range(300))}
    # The worker advertises the host the pod's environment gave it.
    status = client.get(f"{url}/connectors/seq/status", timeout=10).json()
    assert status["tasks"][0]["worker_id"] == url.split("://", 1)[1]


def test_rendered_config_starts_a_worker_that_delivers_exactly_once(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    group = f"chart-{uuid.uuid4().hex[:8]}"
    worker, _ = start_worker(tmp_path, {
        "kafka.bootstrapServers": kafka_bootstrap, "connect.groupId": group,
        "connect.replicationFactor": "1", "spark.local.threads": "2"})
    url = worker.url
    try:
        worker.wait_healthy(120)
        root = httpx.get(f"{url}/", timeout=10).json()
        assert root["kafka_cluster_id"]
        with httpx.Client() as client:
            delivers_exactly_once(client, url, kafka_bootstrap, f"{group}-seq")
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-4000:]


@pytest.mark.skipif(tools_missing() is not None, reason=str(tools_missing()))
def test_rendered_secured_rest_serves_https_with_basic_auth_and_probes_work(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    """ci/secured-rest-values.yaml (HTTPS, clientAuth=required, Basic
    authentication) with Secrets as cert-manager and the user would make them."""
    pki = make_pki(tmp_path / "pki")
    secrets = {
        "connect-rest-tls": {name: (pki / f).read_text() for name, f in (
            ("tls.crt", "worker.crt"), ("tls.key", "worker.key"), ("ca.crt", "ca.crt"))},
        "connect-rest-users": {"credentials.properties": "admin: s3cret\nreader: r3ad\n"},
    }
    trusted = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    trusted.load_cert_chain(pki / "client.crt", pki / "client.key")  # clientAuth=required
    group = f"chart-{uuid.uuid4().hex[:8]}"
    worker, objects = start_worker(tmp_path, {
        "kafka.bootstrapServers": kafka_bootstrap, "connect.groupId": group,
        "connect.replicationFactor": "1", "spark.local.threads": "2"},
        value_set="secured-rest-values.yaml", secrets=secrets, verify=trusted)
    url = worker.url
    assert url.startswith("https://")
    container = find(objects, "StatefulSet")["spec"]["template"]["spec"]["containers"][0]
    env = pod_environment(find(objects, "StatefulSet"), POD, "connect", secrets)
    probes = [container[p] for p in ("startupProbe", "readinessProbe", "livenessProbe")]
    try:
        worker.wait_healthy(120)
        # The probes, run as the kubelet runs them in the container, pass.
        for probe in probes:
            done = run_exec_probe(probe, env, tmp_path / "pod")
            assert done.returncode == 0, done.stdout + done.stderr
        # What an httpGet probe would do (no certificate checked, none presented)
        # fails the handshake: why the chart's probes run in the container.
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{url}/health", verify=False, timeout=10)

        with httpx.Client(verify=trusted, timeout=10) as anonymous:
            assert anonymous.get(f"{url}/health").status_code == 200
            denied = anonymous.get(f"{url}/connectors")
            assert denied.status_code == 401, denied.text
        with httpx.Client(verify=trusted, timeout=10, auth=("admin", "wrong")) as wrong:
            assert wrong.get(f"{url}/connectors").status_code == 401
        with httpx.Client(verify=trusted, timeout=10, auth=("admin", "s3cret")) as admin:
            listed = admin.get(f"{url}/connectors")
            assert listed.status_code == 200 and listed.json() == [], listed.text
            # The task on Spark reaches its worker over HTTPS (mutual TLS, host
            # name checked) and delivers exactly once.
            delivers_exactly_once(admin, url, kafka_bootstrap, f"{group}-seq")
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-4000:]
    # A stopped worker fails the probe, saying why.
    done = run_exec_probe(probes[-1], env, tmp_path / "pod")
    assert done.returncode == 1 and "GET /health" in done.stderr, done.stderr
    key = "".join((pki / "worker.key").read_text().splitlines()[1:-1])
    assert key[:64] not in worker.output(), "the worker logged its private key"


def test_an_invalid_rendered_config_exits_naming_the_key(tmp_path: Path) -> None:
    # The schema lets any string through connect.config (keys belong to the
    # worker); the worker is the one that knows offset.flush.interval.ms is a number.
    worker, _ = start_worker(tmp_path, {"kafka.bootstrapServers": "127.0.0.1:1",
                                        "connect.config.offset\\.flush\\.interval\\.ms": "soon"})
    assert worker.proc.wait(60) == 2
    output = worker.output()
    assert "offset.flush.interval.ms" in output and "soon" in output, output
