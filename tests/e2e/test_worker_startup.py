"""A worker starts serving REST before it reaches Kafka, and waits for Kafka rather
than exit: what Kubernetes probes and an operator see (decision 54 in docs/architecture.md).

Real processes and real brokers: a port where nothing listens, a broker started
after the worker (``support.kafka.Broker``), and the session's broker.
"""

from __future__ import annotations

import re
import shutil
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from support.kafka import Broker, create_topic, free_port, free_port_pair, read_topic, wait_for
from support.workers import WorkerProcess
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

SEQ = "SequenceSourceConnector"
# The worker's line for each failed start attempt (connect_runtime.worker).
ATTEMPT_LINE = re.compile(r"WARNING cannot reach Kafka at bootstrap\.servers=(\S+): (.*); "
                          r"start attempt (\d+) failed, retrying in \d+ s")


def get(worker: WorkerProcess, path: str) -> httpx.Response | None:
    """The answer, or None while nothing answers (the process is not listening yet)."""
    try:
        return httpx.get(f"{worker.url}{path}", timeout=5)
    except httpx.HTTPError:
        return None


def health_message(worker: WorkerProcess) -> str:
    r = get(worker, "/health")
    return "" if r is None or r.status_code != 503 else str(r.json()["message"])


def cannot_reach(worker: WorkerProcess) -> str | None:
    """/health's message once it says Kafka cannot be reached (between attempts)."""
    message = health_message(worker)
    return message if "cannot reach" in message else None


def attempt_lines(worker: WorkerProcess) -> list[re.Match[str]]:
    return list(ATTEMPT_LINE.finditer(worker.log_path.read_text(errors="replace")))


def ports_apart(count: int, avoid: set[int]) -> list[int]:
    """``count`` free ports, none in ``avoid``, each unlike the others."""
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in avoid and port not in ports:
            ports.append(port)
    return ports


def test_without_kafka_the_worker_answers_503_says_why_and_waits_for_sigterm(
        tmp_path: Path) -> None:
    rest_port, dead_port = ports_apart(2, set())
    nowhere = f"127.0.0.1:{dead_port}"  # a free port: connections are refused
    worker = WorkerProcess(nowhere, f"nokafka-{uuid.uuid4().hex[:8]}", rest_port, tmp_path)
    launched = time.monotonic()
    worker.start(wait=False)
    try:
        first = wait_for(lambda: get(worker, "/health"), 30, "REST to answer")
        listening_after = time.monotonic() - launched
        # The probes' view: 503, Connect's error body, naming what it waits for.
        assert first.status_code == 503, first.text
        body = first.json()
        assert set(body) == {"error_code", "message"} and body["error_code"] == 503, body
        assert body["message"].startswith("the worker is starting: ")
        assert f"bootstrap.servers={nowhere}" in body["message"], body
        # Within seconds it says it cannot reach that address, and librdkafka's reason.
        why = wait_for(lambda: cannot_reach(worker), 15, "/health to say Kafka cannot be reached")
        assert f"cannot reach Kafka at bootstrap.servers={nowhere}" in why
        assert "Connection refused" in why and "retrying" in why, why
        # Every other route: 503, the same body shape, "starting".
        for path in ("/", "/connectors", "/connector-plugins", "/metrics"):
            other = get(worker, path)
            assert other is not None and other.status_code == 503, (path, other)
            assert set(other.json()) == {"error_code", "message"}
            assert other.json()["error_code"] == 503
            assert "the worker is starting" in other.json()["message"]
        posted = httpx.post(f"{worker.url}/connectors", json={"name": "x", "config": {}},
                            timeout=5)
        assert posted.status_code == 503 and posted.json()["error_code"] == 503
        # A slot's channel is refused the way slots retry ("unavailable", 4503).
        with pytest.raises(ConnectionClosed) as closed, \
                connect(f"ws://127.0.0.1:{rest_port}/internal/tasks/c/0/channel",
                        open_timeout=5) as ws:
            ws.recv(timeout=5)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4503
        # It keeps trying, one line per failed attempt, and does not exit.
        wait_for(lambda: len(attempt_lines(worker)) >= 3, 60, "three failed start attempts")
        assert worker.proc is not None and worker.proc.poll() is None, worker.tail()
        lines = attempt_lines(worker)
        assert [int(m.group(3)) for m in lines] == list(range(1, len(lines) + 1))
        assert all(m.group(1) == nowhere and "Connection refused" in m.group(2)
                   for m in lines), worker.tail()
    finally:
        signalled = time.monotonic()
        code = worker.stop(timeout=30)
        stopped_after = time.monotonic() - signalled
    assert listening_after < 20, f"REST answered {listening_after:.1f} s after launch"
    assert code == 0, worker.tail()
    assert stopped_after < 10, f"took {stopped_after:.1f} s to exit on SIGTERM"


def test_a_worker_started_before_its_broker_starts_once_the_broker_is_up(
        tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    broker_port = free_port_pair()
    rest_port = ports_apart(1, {broker_port, broker_port + 1})[0]
    data_dir = tmp_path / "kafka"
    broker = Broker(data_dir, broker_port)
    workdir = tmp_path / "worker"
    workdir.mkdir()
    worker = WorkerProcess(broker.bootstrap, f"late-{uuid.uuid4().hex[:8]}", rest_port, workdir)
    worker.start(wait=False)
    try:
        wait_for(lambda: cannot_reach(worker), 30, "/health to say Kafka cannot be reached")
        broker.start()
        worker.wait_healthy(timeout=240)
        health = get(worker, "/health")
        assert health is not None and health.json()["status"] == "healthy"  # the herder's
        assert attempt_lines(worker), "no failed attempt was logged before the broker started"
        # A connector runs, to the broker that came late.
        topic, name = unique_name("seq"), unique_name("late")
        create_topic(broker.bootstrap, topic)
        created = worker.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": SEQ, "topic": topic, "batch.size": "10",
            "rate.per.sec": "100"}})
        assert created.status_code == 201, created.text
        worker.wait_tasks(name, "RUNNING", 1, timeout=120)
        wait_for(lambda: len(read_topic(broker.bootstrap, topic)) >= 50, 90,
                 "50 committed records", interval=1)
    finally:
        code = worker.stop()
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    assert code == 0, worker.tail()


def test_a_config_error_found_while_starting_still_ends_the_worker_naming_the_key(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    group = f"badtopic-{uuid.uuid4().hex[:8]}"
    # The config topic must have one partition: a ConfigException, found only once
    # Kafka answers; no retry fixes it.
    create_topic(kafka_bootstrap, f"{group}-configs", partitions=2)
    worker = WorkerProcess(kafka_bootstrap, group, free_port(), tmp_path)
    worker.start(wait=False)
    try:
        assert worker.proc is not None
        code = worker.proc.wait(90)
    finally:
        worker.stop()
    log = worker.log_path.read_text(errors="replace")
    assert code == 2, log
    assert "connect-runtime: configuration error:" in log and "config.storage.topic" in log
    assert not attempt_lines(worker), log
