"""End to end, KIP-558: a connector's active topics as tasks on Spark produce.

What Kafka Connect 4.1.1 does, and this checks: a topic appears in
``GET /connectors/<c>/topics`` once a task's records reach it, with Connect's
record in the status topic; ``PUT .../topics/reset`` empties the list in any
state; the topic reappears only when a task produces to it again; deleting the
connector tombstones its topic records.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
from support.kafka import create_topic, wait_for
from support.workers import WorkerProcess

from connect_runtime.kafka.clients import create_admin
from connect_runtime.kafka.log import read_topic_to_end

SEQ = "SequenceSourceConnector"


def active_topics(worker: WorkerProcess, name: str) -> list[str]:
    response = worker.rest("GET", f"/connectors/{name}/topics")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert list(body) == [name]
    return list(body[name]["topics"])


def status_records(worker: WorkerProcess, key: bytes) -> list[bytes | None]:
    """Every value of ``key`` in the worker's status topic, in order."""
    values: list[bytes | None] = []

    def collect(k: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if k == key:
            values.append(value)

    topic = worker.props["status.storage.topic"]
    read_topic_to_end({"bootstrap.servers": worker.bootstrap},
                      create_admin({"bootstrap.servers": worker.bootstrap}), topic, collect, 30)
    return values


def test_topics_appear_reset_and_reappear_when_tasks_produce_again(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("active"), unique_name("topics")
    create_topic(worker.bootstrap, topic)
    assert active_topics(worker, name) == []  # unknown connector: empty, as in Connect
    started_ms = time.time_ns() // 1_000_000
    r = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "tasks.max": "1", "topic": topic, "rate.per.sec": "50",
        "batch.size": "5"}})
    assert r.status_code == 201, r.text

    wait_for(lambda: active_topics(worker, name) == [topic], 90, f"{topic} to be active")
    key = f"status-topic-{topic}:connector-{name}".encode()
    [value] = status_records(worker, key)  # written once, by the leader
    assert value is not None
    record = orjson.loads(value)
    assert list(record) == ["topic"]
    assert list(record["topic"]) == ["name", "connector", "task", "discoverTimestamp"]
    assert record["topic"]["name"] == topic and record["topic"]["connector"] == name
    assert record["topic"]["task"] == 0
    assert started_ms <= record["topic"]["discoverTimestamp"] <= time.time_ns() // 1_000_000

    # Reset while running is accepted (Connect has no precondition); paused, nothing
    # is produced, so the list stays empty however long we wait.
    assert worker.rest("PUT", f"/connectors/{name}/pause").status_code == 202
    worker.wait_tasks(name, "PAUSED", 1)
    reset = worker.rest("PUT", f"/connectors/{name}/topics/reset")
    assert (reset.status_code, reset.content) == (202, b"")
    assert active_topics(worker, name) == []
    time.sleep(5)  # longer than a task's re-report interval
    assert active_topics(worker, name) == []
    assert status_records(worker, key)[-1] is None

    # Producing again records the topic again.
    assert worker.rest("PUT", f"/connectors/{name}/resume").status_code == 202
    wait_for(lambda: active_topics(worker, name) == [topic], 60, f"{topic} to be active again")

    # Deleting the connector tombstones its topic records, as Connect does.
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    wait_for(lambda: active_topics(worker, name) == [], 60, "the topics of the deleted connector")
    wait_for(lambda: status_records(worker, key)[-1] is None, 30, "a tombstone for the topic")
