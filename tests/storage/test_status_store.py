"""StatusStore against the real broker: Connect's format, read-your-writes, deletes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum

import pytest
from confluent_kafka.admin import AdminClient

from connect_runtime.kafka.clients import create_admin, create_producer
from connect_runtime.kafka.log import read_topic_to_end
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.status_store import (
    StatusRecord,
    StatusStore,
    parse_task_key,
    task_key,
)


class State(str, Enum):  # noqa: UP042 - the worker's State is exactly this shape
    """Like the worker's state enum: a str Enum whose value is what goes on the wire."""

    FAILED = "FAILED"


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    return create_admin({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def topic(admin: AdminClient, unique_name: Callable[[str], str]) -> str:
    name = unique_name("status")
    ensure_topic(admin, name, 5)
    return name


@pytest.fixture
def stores(kafka_bootstrap: str, admin: AdminClient) -> Iterator[Callable[[str], StatusStore]]:
    """Started StatusStores ("workers") on a topic, stopped at teardown."""
    made: list[StatusStore] = []

    def make(topic: str) -> StatusStore:
        store = StatusStore(kafka_bootstrap, topic, admin=admin)
        store.start(30)
        made.append(store)
        return store

    yield make
    for store in made:
        store.stop()


def raw_records(bootstrap: str, admin: AdminClient, topic: str) -> dict[bytes, bytes | None]:
    records: dict[bytes, bytes | None] = {}

    def collect(key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        assert key is not None
        records[key] = value

    read_topic_to_end({"bootstrap.servers": bootstrap}, admin, topic, collect, 30)
    return records


def test_writes_are_read_back_at_once_and_in_connects_format(
    kafka_bootstrap: str, admin: AdminClient, topic: str,
    stores: Callable[[str], StatusStore],
) -> None:
    store = stores(topic)
    store.put_connector("my-conn", "RUNNING", "host-a:8083", generation=3)
    store.put_task("my-conn", 0, State.FAILED, "host-a:8083", trace="Traceback ...", generation=3)

    # Read-your-writes: no read_to_end needed.
    assert store.connector_status("my-conn") == StatusRecord("RUNNING", "host-a:8083", None, 3)
    assert store.task_status("my-conn", 0) == StatusRecord("FAILED", "host-a:8083",
                                                           "Traceback ...", 3)
    assert raw_records(kafka_bootstrap, admin, topic) == {
        b"status-connector-my-conn":
            b'{"state":"RUNNING","trace":null,"worker_id":"host-a:8083","generation":3}',
        b"status-task-my-conn-0":
            b'{"state":"FAILED","trace":"Traceback ...","worker_id":"host-a:8083",'
            b'"generation":3}',
    }


def test_another_worker_sees_the_statuses(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    writer = stores(topic)
    writer.put_connector("c", "RUNNING", "w1")
    for task in range(3):
        writer.put_task("c", task, "RUNNING", "w1", generation=1)
    reader = stores(topic)  # reads to the end at start
    assert reader.connector_status("c") == StatusRecord("RUNNING", "w1")
    assert reader.task_statuses("c") == {t: StatusRecord("RUNNING", "w1", None, 1)
                                         for t in range(3)}
    writer.put_task("c", 1, "PAUSED", "w1", generation=1)
    reader.read_to_end(30)
    assert reader.task_status("c", 1) == StatusRecord("PAUSED", "w1", None, 1)
    assert reader.connectors() == {"c"}


def test_connector_names_with_dashes_and_digits() -> None:
    assert task_key("my-conn-1", 12) == "status-task-my-conn-1-12"
    assert parse_task_key("status-task-my-conn-1-12") == ("my-conn-1", 12)
    assert parse_task_key("status-task-noid") is None
    assert parse_task_key("status-task--3") is None
    assert parse_task_key("status-task-c-x") is None


def test_task_statuses_of_dashed_connectors_do_not_mix(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    store = stores(topic)
    store.put_task("a", 1, "RUNNING", "w")
    store.put_task("a-1", 2, "FAILED", "w")
    reader = stores(topic)
    assert reader.task_statuses("a") == {1: StatusRecord("RUNNING", "w")}
    assert reader.task_statuses("a-1") == {2: StatusRecord("FAILED", "w")}


def test_delete_connector_writes_tombstones(
    kafka_bootstrap: str, admin: AdminClient, topic: str,
    stores: Callable[[str], StatusStore],
) -> None:
    store = stores(topic)
    other = stores(topic)
    store.put_connector("gone", "RUNNING", "w")
    store.put_task("gone", 0, "RUNNING", "w")
    store.put_task("gone", 1, "RUNNING", "w")
    store.put_connector("kept", "RUNNING", "w")
    store.delete_connector("gone", 2)
    assert store.connector_status("gone") is None
    assert store.task_statuses("gone") == {}
    other.read_to_end(30)
    assert other.connector_status("gone") is None and other.task_statuses("gone") == {}
    assert other.connectors() == {"kept"}
    raw = raw_records(kafka_bootstrap, admin, topic)
    assert raw[b"status-connector-gone"] is None and raw[b"status-task-gone-1"] is None


def test_destroyed_is_written_as_a_tombstone(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    store = stores(topic)
    store.put_task("c", 0, "RUNNING", "w")
    store.put_task("c", 0, "DESTROYED", "w")
    assert store.task_status("c", 0) is None
    with pytest.raises(ValueError, match="unknown status state"):
        store.put_task("c", 0, "SLEEPING", "w")


def test_stale_unassigned_does_not_replace_running(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    store = stores(topic)
    store.put_task("c", 0, "RUNNING", "w2", generation=5)
    store.put_task("c", 0, "UNASSIGNED", "w1", generation=4)
    reader = stores(topic)
    for view in (store, reader):
        assert view.task_status("c", 0) == StatusRecord("RUNNING", "w2", None, 5)
    store.put_task("c", 0, "UNASSIGNED", "w1", generation=6)
    reader.read_to_end(30)
    assert reader.task_status("c", 0) == StatusRecord("UNASSIGNED", "w1", None, 6)


def test_garbage_and_unmodelled_records_are_skipped(
    kafka_bootstrap: str, topic: str, stores: Callable[[str], StatusStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = create_producer({"bootstrap.servers": kafka_bootstrap})
    for key, value in [
        (b"status-connector-c", b'{"state":"RUNNING","worker_id":"w","generation":1}'),
        (b"status-task-c-0", b"not json"),
        (b"status-task-c-1", b'{"state":"NOPE","worker_id":"w","generation":1}'),
        (b"status-task-c", b'{"state":"RUNNING","worker_id":"w","generation":1}'),
        (b"status-topic-t:c", b'{"topic":{"name":"t"}}'),
        (b"something-else", b"{}"),
    ]:  # (a compacted topic rejects null keys outright, so no garbage of that kind)
        producer.produce(topic, key=key, value=value)
    assert producer.flush(10) == 0
    store = stores(topic)
    assert store.connector_status("c") == StatusRecord("RUNNING", "w", None, 1)
    assert store.task_statuses("c") == {}
    assert "Skipping" in caplog.text
