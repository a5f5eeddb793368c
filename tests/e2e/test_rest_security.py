"""REST secured as Kafka Connect secures it, on real workers: HTTPS listeners with
keytool's stores, mutual TLS between workers and from the Spark executors, and the
basic-auth extension.

* A 3-worker cluster over HTTPS with ``ssl.client.auth=required``: ``curl`` with
  a client certificate and ``-u`` works at every worker, and what followers get
  is forwarded to the leader over mutual TLS with the credentials; no client
  certificate fails the handshake; no credentials get 401; tasks start (their
  channel and fence request go over TLS with the worker's certificate, checked
  by KIP-507 signature instead of a password), and unsigned internal requests
  are still refused.
* The third-party Python clients over HTTPS, trusting the workers' CA.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from kafka_connect import KafkaConnect
from kafka_connect_api.kafka_connect_api import Api, Cluster
from support.kafka import free_port, wait_for
from support.tls import PASSWORD, https_settings, make_pki, tools_missing
from support.workers import WorkerProcess, stop_all

from connect_runtime.security.rest_auth import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE

AUTH = ("alice", "s3cret")


def jaas_file(tmp_path: Path) -> Path:
    credentials = tmp_path / "credentials.properties"
    credentials.write_text("alice: s3cret\nbob: other\n")
    jaas = tmp_path / "connect_jaas.conf"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n'
                    f'  file="{credentials}";\n}};\n')
    return jaas


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if (why := tools_missing()) is not None:
        pytest.skip(why)
    return make_pki(tmp_path_factory.mktemp("e2e-pki"))


def curl(*args: str) -> tuple[int, str]:
    done = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    body, _, code = done.stdout.rpartition("\n")
    return int(code), body


def secured(tmp_path: Path, pki: Path, client_auth: str) -> dict[str, str]:
    return {"rest.extension.classes": BASIC_AUTH_EXTENSION,
            "java.security.auth.login.config": str(jaas_file(tmp_path)),
            **https_settings(pki, client_auth),
            "spark.master": "local[2]", "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1500"}


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Iterator[list[WorkerProcess]]:
    """Workers a test starts; stopped (gracefully, checked) at the end."""
    workers: list[WorkerProcess] = []
    yield workers
    codes = stop_all(workers)
    assert codes == [0] * len(workers), [w.tail() for w in workers]


def test_a_cluster_over_mutual_tls_with_basic_auth_forwards_and_runs_tasks(
        kafka_bootstrap: str, tmp_path: Path, pki: Path, cluster: list[WorkerProcess],
        unique_name: Callable[[str], str]) -> None:
    # What an operator's client holds: the CA, a client certificate, a password.
    client = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    client.load_cert_chain(str(pki / "client.crt"), str(pki / "client.key"))
    tls_args = ("--cacert", str(pki / "ca.crt"), "--cert", str(pki / "client.crt"),
                "--key", str(pki / "client.key"))
    group = unique_name("mtls")
    settings = secured(tmp_path, pki, "required")
    cluster.extend(WorkerProcess(kafka_bootstrap, group, free_port(), tmp_path, settings,
                                 scheme="https", verify=client) for _ in range(3))
    for w in cluster:
        w.start()  # /health answers without credentials (probes), over TLS

    def leader() -> str | None:
        answer = httpx.get(f"{cluster[0].url}/internal/leader", auth=AUTH, verify=client,
                           timeout=10)
        return answer.json()["leader_url"] if answer.status_code == 200 else None

    lead_url = wait_for(leader, 60, "a leader")
    assert lead_url.startswith("https://")
    followers = [w for w in cluster if w.url != lead_url]
    assert len(followers) == 2
    name, topic = unique_name("seq"), unique_name("out")
    config = {"connector.class": "SequenceSourceConnector", "tasks.max": "2", "topic": topic,
              "topic.creation.default.replication.factor": "1",
              "topic.creation.default.partitions": "1"}
    body = json.dumps({"name": name, "config": config})
    json_header = ("-H", "Content-Type: application/json")
    # No client certificate: the handshake fails (curl exits non-zero), nothing created.
    refused = subprocess.run(["curl", "-s", "--cacert", str(pki / "ca.crt"), "-u",
                              "alice:s3cret", f"{followers[0].url}/connectors"],
                             capture_output=True, timeout=60)
    assert refused.returncode != 0
    # No or wrong credentials: Connect's 401.
    assert curl(*tls_args, f"{followers[0].url}/connectors", *json_header, "-d", body) == (
        401, "User cannot access the resource.")
    assert curl(*tls_args, "-u", "alice:nope", f"{followers[0].url}/connectors")[0] == 401
    # At a follower: forwarded to the leader over mutual TLS, with the credentials.
    code, text = curl(*tls_args, "-u", "alice:s3cret", f"{followers[0].url}/connectors",
                      *json_header, "-d", body)
    assert code == 201, text

    def running() -> bool:
        status = httpx.get(f"{followers[1].url}/connectors/{name}/status", auth=AUTH,
                           verify=client, timeout=10)
        return status.status_code == 200 and [t["state"] for t in status.json()["tasks"]] \
            == ["RUNNING", "RUNNING"]

    # The slots reached the leader over wss with the worker's certificate, and
    # fenced through the exempt, signed fence route over https.
    wait_for(running, 120, "the tasks to run")
    # Every worker forwards what only the leader may do.
    for w in followers:
        code, text = curl(*tls_args, "-u", "alice:s3cret", "-X", "PUT",
                          f"{w.url}/connectors/{name}/pause")
        assert code == 202, text
        code, text = curl(*tls_args, "-u", "alice:s3cret", "-X", "PUT",
                          f"{w.url}/connectors/{name}/resume")
        assert code == 202, text
    code, text = curl(*tls_args, "-u", "alice:s3cret", "-X", "PUT", *json_header,
                      f"{followers[1].url}/connectors/{name}/config", "-d",
                      json.dumps({**config, "tasks.max": "1"}))
    assert code == 200, text

    def states() -> list[str]:
        status = httpx.get(f"{followers[0].url}/connectors/{name}/status", auth=AUTH,
                           verify=client, timeout=10)
        return [t["state"] for t in status.json()["tasks"]]

    wait_for(lambda: states() == ["RUNNING"], 120, "one task, running")
    assert httpx.get(f"{lead_url}/internal/tasks", verify=client, timeout=10).status_code == 401
    # Each worker lists the slots it hosts; together, the connector's one task.
    def hosted() -> list[str]:
        slots = [httpx.get(f"{w.url}/internal/tasks", auth=AUTH, verify=client, timeout=10)
                 for w in cluster]
        assert all(answer.status_code == 200 for answer in slots)
        return [s["connector"] for answer in slots for s in answer.json()]

    wait_for(lambda: hosted() == [name], 60, "the task's slot to be listed")
    # Exempt from the password is not exempt from the signature.
    unsigned = httpx.put(f"{lead_url}/connectors/{name}/fence", verify=client, timeout=10)
    assert unsigned.status_code in (400, 403), unsigned.text
    assert httpx.get(f"{lead_url}/metrics", verify=client, timeout=10).status_code == 401
    assert httpx.get(f"{lead_url}/metrics", auth=("bob", "other"), verify=client,
                     timeout=10).status_code == 200
    code, text = curl(*tls_args, "-u", "alice:s3cret", "-X", "DELETE",
                      f"{followers[1].url}/connectors/{name}")
    assert code == 204, text


def test_third_party_clients_over_https_with_basic_auth(
        kafka_bootstrap: str, tmp_path: Path, pki: Path, cluster: list[WorkerProcess],
        unique_name: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    worker = WorkerProcess(kafka_bootstrap, unique_name("https"), free_port(), tmp_path,
                           secured(tmp_path, pki, "none"), scheme="https",
                           verify=ssl.create_default_context(cafile=str(pki / "ca.crt")))
    cluster.append(worker)
    worker.start()
    name = unique_name("seq")
    # kafka-connect-py takes the CA bundle as ssl_verify, as requests does.
    client = KafkaConnect(url=worker.url, auth="alice:s3cret", ssl_verify=str(pki / "ca.crt"))
    client.create_connector({"name": name, "config": {
        "connector.class": "SequenceSourceConnector", "tasks.max": "1",
        "topic": unique_name("out"), "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "1"}})
    wait_for(lambda: client.get_connector_status(name)["tasks"][:1]
             and client.get_connector_status(name)["tasks"][0]["state"] == "RUNNING",
             90, "the task to run")
    assert name in client.list_connectors()
    with pytest.raises(Exception, match="401"):
        KafkaConnect(url=worker.url, auth="alice:wrong",
                     ssl_verify=str(pki / "ca.crt")).list_connectors()
    # Not trusting the workers' CA, the client refuses the worker.
    with pytest.raises(Exception, match="CERTIFICATE_VERIFY_FAILED"):
        KafkaConnect(url=worker.url, auth="alice:s3cret",
                     ssl_verify=str(pki / "rogue-ca.crt")).list_connectors()
    # kafka_connect_api verifies with requests' default bundle: point it at the CA.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki / "ca.crt"))
    api = Api(url=worker.url, username="alice", password="s3cret")
    assert name in Cluster(api).connectors
    assert PASSWORD not in worker.tail(10_000)


def test_a_missing_jaas_file_stops_the_worker_naming_the_key(tmp_path: Path) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     "offset.storage.topic=o\nstatus.storage.topic=s\n"
                     f"rest.extension.classes={BASIC_AUTH_EXTENSION}\n"
                     f"java.security.auth.login.config={tmp_path}/nope.conf\n")
    result = subprocess.run([sys.executable, "-m", "connect_runtime.cli", str(props)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "java.security.auth.login.config" in result.stderr
    assert "cannot read the JAAS file" in result.stderr


def test_a_wrong_keystore_password_stops_the_worker_naming_the_key(
        tmp_path: Path, pki: Path) -> None:
    props = tmp_path / "worker.properties"
    settings = {**https_settings(pki), "listeners.https.ssl.keystore.password": "not-it",
                "listeners": "https://127.0.0.1:0"}
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     "offset.storage.topic=o\nstatus.storage.topic=s\n"
                     + "".join(f"{k}={v}\n" for k, v in settings.items()))
    result = subprocess.run([sys.executable, "-m", "connect_runtime.cli", str(props)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "listeners.https.ssl.keystore.password" in result.stderr
    assert "wrong password" in result.stderr and "not-it" not in result.stderr
