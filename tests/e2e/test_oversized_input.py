"""Oversized input, on a real worker: it is refused, and the worker goes on serving.

* A config too large for the config topic: before, a 1.1 MB config answered
  500 MSG_SIZE_TOO_LARGE and dropped the leader's config-topic producer: from
  then on every create, update, stop, delete and cluster-scope logger change
  answered 409 "no known leader URL" until a restart, while ``/health`` said
  healthy.
* A 300 MB body on the route that needs no password: before, the worker read
  it whole (90 MB to 629 MB of memory) and only then refused it.

docs/rest.md, "Limits".
"""

from __future__ import annotations

import select
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.kafka import set_topic_config
from support.workers import WorkerProcess

SEQ = "SequenceSourceConnector"


def create(worker: WorkerProcess, name: str, topic: str, **extra: str) -> int:
    answer = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": topic, "rate.per.sec": "1", **extra}})
    return answer.status_code


def assert_still_writes(worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    """Every kind of config write works, and /health says healthy."""
    name = unique_name("after")
    assert create(worker, name, unique_name("t")) == 201
    config = worker.rest("GET", f"/connectors/{name}/config").json()
    assert worker.rest("PUT", f"/connectors/{name}/config",
                       json={**config, "rate.per.sec": "2"}).status_code == 200
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    assert worker.rest("PUT", "/admin/loggers/connect_runtime.connectors?scope=cluster",
                       json={"level": "INFO"}).status_code == 204
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    health = worker.rest("GET", "/health")
    assert health.status_code == 200, health.text


def test_a_config_over_the_producers_limit_is_400_and_writes_go_on(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("huge")
    refused = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": unique_name("t"), "padding": "x" * 1_100_000}})
    assert refused.status_code == 400, refused.text
    body = refused.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == 400
    assert f"connector-{name}" in body["message"] and "message.max.bytes" in body["message"]
    assert worker.rest("GET", f"/connectors/{name}").status_code == 404
    assert_still_writes(worker, unique_name)


@pytest.fixture
def small_config_topic(worker: WorkerProcess) -> Iterator[None]:
    """The shared worker's config topic takes records of 50,000 bytes at most, for one
    test: less than the worker's producer sends, so the broker is the one refusing."""
    topic = worker.props["config.storage.topic"]
    set_topic_config(worker.bootstrap, topic, "max.message.bytes", "50000")
    try:
        yield
    finally:
        set_topic_config(worker.bootstrap, topic, "max.message.bytes", None)


def test_a_config_the_broker_refuses_is_400_and_the_leader_claims_its_writer_again(
        worker: WorkerProcess, small_config_topic: None,
        unique_name: Callable[[str], str]) -> None:
    name = unique_name("big")
    assert create(worker, name, unique_name("t"), padding="x" * 200_000) == 400
    assert worker.rest("GET", f"/connectors/{name}").status_code == 404
    assert_still_writes(worker, unique_name)


BODY = 300 * 1024 * 1024
# What the worker may grow by while refusing it: the 5 MiB limit and change.
RSS_BOUND_MB = 50


def rss_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmRSS:"))) / 1024


def send_until_answered(worker: WorkerProcess, head: bytes, piece: bytes) -> bytes:
    """Send ``head``, then ``piece`` after ``piece`` (up to BODY bytes) until the
    worker answers or closes; what it answered."""
    host, port = worker.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as conn:
        conn.sendall(head)
        conn.setblocking(False)
        answer, pending, sent = b"", b"", 0
        while sent < BODY:
            readable, writable, _ = select.select([conn], [conn], [], 60)
            if readable:
                break
            if writable:
                pending = pending or piece
                try:
                    written = conn.send(pending)  # what was taken: framing stays whole
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:  # closed by the worker after its answer
                    break
                pending, sent = pending[written:], sent + written
        conn.setblocking(True)
        while not complete(answer):
            try:
                more = conn.recv(65536)
            except OSError:
                break
            if not more:
                break
            answer += more
    return answer


def complete(answer: bytes) -> bool:
    """Whether ``answer`` holds a whole response: its head and Content-Length bytes."""
    head, sep, body = answer.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    return len(body) >= length


def test_an_unauthenticated_300_mb_body_is_413_and_the_worker_does_not_hold_it(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    assert worker.proc is not None
    before = rss_mb(worker.proc.pid)
    host = worker.url.removeprefix("http://")
    announced = send_until_answered(worker, (
        f"PUT /connectors/x/fence HTTP/1.1\r\nHost: {host}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {BODY}\r\n\r\n").encode(),
        b"x" * 65536)
    chunked = send_until_answered(worker, (
        f"PUT /connectors/x/fence HTTP/1.1\r\nHost: {host}\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode(),
        b"10000\r\n" + b"x" * 65536 + b"\r\n")
    grown = rss_mb(worker.proc.pid) - before
    for answer in (announced, chunked):
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:300]
        assert b'"error_code":413' in answer and b"rest.request.max.bytes" in answer
    assert grown < RSS_BOUND_MB, f"the worker grew by {grown:.0f} MB"
    assert_still_writes(worker, unique_name)
