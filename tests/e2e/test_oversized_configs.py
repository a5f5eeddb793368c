"""A config too large for the config topic is refused, and the worker goes on writing.

Before, a 1.1 MB config answered 500 MSG_SIZE_TOO_LARGE and dropped the
leader's config-topic producer: from then on every create, update, stop, delete
and cluster-scope logger change answered 409 "no known leader URL" until a
restart, while ``/health`` said healthy (docs/rest.md, "Limits").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource
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
    admin = AdminClient({"bootstrap.servers": worker.bootstrap})

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        resource = ConfigResource("topic", worker.props["config.storage.topic"],
                                  incremental_configs=[ConfigEntry(
                                      "max.message.bytes", value,
                                      incremental_operation=op)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(30)

    alter(AlterConfigOpType.SET, "50000")
    try:
        yield
    finally:
        alter(AlterConfigOpType.DELETE, None)


def test_a_config_the_broker_refuses_is_400_and_the_leader_claims_its_writer_again(
        worker: WorkerProcess, small_config_topic: None,
        unique_name: Callable[[str], str]) -> None:
    name = unique_name("big")
    assert create(worker, name, unique_name("t"), padding="x" * 200_000) == 400
    assert worker.rest("GET", f"/connectors/{name}").status_code == 404
    assert_still_writes(worker, unique_name)
