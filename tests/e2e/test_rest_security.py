"""REST behind Kafka Connect's basic-auth extension, on real workers: ``curl -u``
works and requests are forwarded to the leader with their credentials; requests
without credentials get 401; tasks still start (their channel and the fence route
are checked by KIP-507 signature instead), and unsigned internal requests are
still refused."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from harness import WorkerProcess, free_port
from kafka_connect import KafkaConnect
from kafka_helpers import wait_for

from connect_runtime.config.rest_auth import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE

AUTH = ("alice", "s3cret")


def jaas_file(tmp_path: Path) -> Path:
    credentials = tmp_path / "credentials.properties"
    credentials.write_text("alice: s3cret\nbob: other\n")
    jaas = tmp_path / "connect_jaas.conf"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n'
                    f'  file="{credentials}";\n}};\n')
    return jaas


def curl(*args: str) -> tuple[int, str]:
    done = subprocess.run(["curl", "-s", "-o", "-", "-w", "\n%{http_code}", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    body, _, code = done.stdout.rpartition("\n")
    return int(code), body


def test_basic_auth_guards_rest_and_the_cluster_still_works(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    settings = {"rest.extension.classes": BASIC_AUTH_EXTENSION,
                "java.security.auth.login.config": str(jaas_file(tmp_path)),
                "spark.master": "local[2]", "session.timeout.ms": "6000",
                "heartbeat.interval.ms": "1500"}
    group = unique_name("secured")
    workers = [WorkerProcess(kafka_bootstrap, group, free_port(), tmp_path, settings)
               for _ in range(2)]
    try:
        for w in workers:
            w.start()  # /health answers without credentials (probes)

        def leader() -> str | None:
            answer = httpx.get(f"{workers[0].url}/internal/leader", auth=AUTH, timeout=10)
            return answer.json()["leader_url"] if answer.status_code == 200 else None

        lead_url = wait_for(leader, 60, "a leader")
        follower = next(w for w in workers if w.url != lead_url)
        name, topic = unique_name("seq"), unique_name("out")
        body = json.dumps({"name": name, "config": {
            "connector.class": "SequenceSourceConnector", "tasks.max": "1", "topic": topic,
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1"}})
        json_header = ("-H", "Content-Type: application/json")
        # No or wrong credentials: Connect's 401, nothing created.
        assert curl(f"{follower.url}/connectors", *json_header, "-d", body) == (
            401, "User cannot access the resource.")
        assert curl("-u", "alice:nope", f"{follower.url}/connectors")[0] == 401
        # curl -u at a follower: forwarded to the leader with the credentials.
        code, text = curl("-u", "alice:s3cret", f"{follower.url}/connectors", *json_header,
                          "-d", body)
        assert code == 201, text

        def running() -> bool:
            status = httpx.get(f"{follower.url}/connectors/{name}/status", auth=AUTH,
                               timeout=10)
            return status.status_code == 200 and [t["state"] for t in status.json()["tasks"]] \
                == ["RUNNING"]

        # The task's slot reached the leader over its signed channel, and fenced
        # through the exempt, signed fence route: no password needed for either.
        wait_for(running, 90, "the task to run")
        assert httpx.get(f"{lead_url}/internal/tasks", timeout=10).status_code == 401
        slots = httpx.get(f"{lead_url}/internal/tasks", auth=AUTH, timeout=10)
        assert slots.status_code == 200 and slots.json()[0]["connector"] == name
        # Exempt from the password is not exempt from the signature.
        unsigned = httpx.put(f"{lead_url}/connectors/{name}/fence", timeout=10)
        assert unsigned.status_code in (400, 403), unsigned.text
        # A third-party client from PyPI, as its users configure credentials.
        client = KafkaConnect(url=follower.url, auth="alice:s3cret")
        assert client.get_connector_status(name)["tasks"][0]["state"] == "RUNNING"
        assert name in client.list_connectors()
        with pytest.raises(Exception, match="401"):
            KafkaConnect(url=follower.url, auth="alice:wrong").list_connectors()
        assert httpx.get(f"{lead_url}/metrics", timeout=10).status_code == 401
        assert httpx.get(f"{lead_url}/metrics", auth=("bob", "other"),
                         timeout=10).status_code == 200
    finally:
        codes = [w.stop() for w in workers]
    assert codes == [0, 0], [w.tail() for w in workers]


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
