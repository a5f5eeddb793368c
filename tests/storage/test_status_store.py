"""StatusStore against the real broker: Connect's format, read-your-writes, deletes,
and KIP-558 active-topic records."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from enum import Enum

import pytest
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import DataException
from connect_runtime.kafka.clients import create_producer
from connect_runtime.kafka.log import read_topic_to_end
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.status_store import (
    StatusRecord,
    StatusStore,
    TopicStatus,
    as_seen_under_leader,
    parse_status,
    parse_task_key,
    parse_topic_key,
    parse_topic_status,
    serialize_topic_status,
    status_generation,
    task_key,
    topic_key,
)


class State(str, Enum):  # noqa: UP042 - the worker's State is exactly this shape
    """Like the worker's state enum: a str Enum whose value is what goes on the wire."""

    FAILED = "FAILED"


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
    store.put_task("my-conn", 0, State.FAILED, "host-a:8083", trace="Traceback ...", generation=3,
                   version="1.2")

    # Read-your-writes: no read_to_end needed.
    assert store.connector_status("my-conn") == StatusRecord("RUNNING", "host-a:8083", None, 3)
    assert store.task_status("my-conn", 0) == StatusRecord("FAILED", "host-a:8083",
                                                           "Traceback ...", 3, "1.2")
    # Connect 4.1's value (KIP-891 added "version", null when unknown).
    assert raw_records(kafka_bootstrap, admin, topic) == {
        b"status-connector-my-conn":
            b'{"state":"RUNNING","trace":null,"worker_id":"host-a:8083","generation":3,'
            b'"version":null}',
        b"status-task-my-conn-0":
            b'{"state":"FAILED","trace":"Traceback ...","worker_id":"host-a:8083",'
            b'"generation":3,"version":"1.2"}',
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


def test_a_new_leaders_unassigned_replaces_its_predecessors_running_and_a_zombies_does_not(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    """Leader w1 (elected at offset 3) ran task configs committed at offset 10; w2 is
    elected at offset 20 and takes the task over without a reconfiguration."""
    w1, w2 = stores(topic), stores(topic)
    w1.put_task("c", 0, "RUNNING", "w1", generation=status_generation(10, 3))
    w2.read_to_end(30)
    w2.put_task("c", 0, "UNASSIGNED", "w2", generation=status_generation(10, 20))
    w1.read_to_end(30)
    for view in (w1, w2, stores(topic)):
        assert view.task_status("c", 0) == StatusRecord("UNASSIGNED", "w2", None, 20)
    w2.put_task("c", 0, "RUNNING", "w2", generation=status_generation(10, 20))
    # w1, a zombie that still thinks it leads, gives the task up late: stale.
    w1.put_task("c", 0, "UNASSIGNED", "w1", generation=status_generation(10, 3))
    for view in (w2, stores(topic)):
        view.read_to_end(30)
        assert view.task_status("c", 0) == StatusRecord("RUNNING", "w2", None, 20)
    # A reconfiguration under w2 (commit at offset 25) starts the next generation.
    w2.put_task("c", 0, "UNASSIGNED", "w2", generation=status_generation(25, 20))
    assert w2.task_status("c", 0) == StatusRecord("UNASSIGNED", "w2", None, 25)


@pytest.mark.parametrize(("state", "worker", "generation", "shown"), [
    # What the previous leader w1 said of its instances, before w2's election (20).
    ("RUNNING", "w1", 10, ("UNASSIGNED", "w2")),
    ("PAUSED", "w1", 10, ("UNASSIGNED", "w2")),
    ("RESTARTING", "w1", 10, ("UNASSIGNED", "w2")),
    ("UNASSIGNED", "w1", 10, ("UNASSIGNED", "w2")),
    # Still true whoever wrote them: why the last instance ended, a target state.
    ("FAILED", "w1", 10, ("FAILED", "w1")),
    ("STOPPED", "w1", 10, ("STOPPED", "w1")),
    # The leader's own statuses, whatever their generation (an older version's).
    ("RUNNING", "w2", 10, ("RUNNING", "w2")),
    # Written at or after the election: a reader whose config view lags behind.
    ("RUNNING", "w1", 20, ("RUNNING", "w1")),
    ("RUNNING", "w3", 25, ("RUNNING", "w3")),
])
def test_statuses_are_read_as_of_the_current_leader(
    state: str, worker: str, generation: int, shown: tuple[str, str],
) -> None:
    record = StatusRecord(state, worker, "a trace", generation, "1.0")
    seen = as_seen_under_leader(record, "w2", 20)
    assert (seen.state, seen.worker_id) == shown
    if shown == (state, worker):
        assert seen == record
    else:  # the predecessor's trace and version describe an instance that is gone
        assert (seen.trace, seen.version, seen.generation) == (None, None, generation)


def test_no_known_leader_leaves_statuses_as_written() -> None:
    record = StatusRecord("RUNNING", "w1", None, 10)
    assert as_seen_under_leader(record, None, -1) == record
    assert as_seen_under_leader(record, None, 20) == record


def test_the_generation_is_the_later_of_configs_and_election() -> None:
    assert status_generation(10, 20) == 20
    assert status_generation(25, 20) == 25
    assert status_generation(-1, -1) == -1


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


def test_status_version_is_optional_text() -> None:
    # Records of workers before KIP-891 have no version: unknown, not malformed.
    assert parse_status(b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}') \
        == StatusRecord("RUNNING", "w", None, 1, None)
    assert parse_status(b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1,'
                        b'"version":"4.1.1"}').version == "4.1.1"
    with pytest.raises(DataException, match="version"):
        parse_status(b'{"state":"RUNNING","worker_id":"w","generation":1,"version":4}')


# --------------------------------------------------------------- KIP-558 active topics

# Written by Kafka Connect 4.1.1's FileStreamSourceConnector task, read back from
# its status topic (key and value bytes exactly as found there).
CONNECT_KEY = b"status-topic-kip558-probe-topic-a:connector-kip558-probe-a"
CONNECT_VALUE = (b'{"topic":{"name":"kip558-probe-topic-a","connector":"kip558-probe-a",'
                 b'"task":0,"discoverTimestamp":1795478663127}}')


def test_key_and_value_are_connects() -> None:
    status = TopicStatus("kip558-probe-topic-a", "kip558-probe-a", 0, 1795478663127)
    assert topic_key(status.topic, status.connector).encode() == CONNECT_KEY
    assert serialize_topic_status(status) == CONNECT_VALUE
    assert parse_topic_status(CONNECT_VALUE) == status


@pytest.mark.parametrize(("key", "expected"), [
    ("status-topic-orders:connector-my-conn", ("orders", "my-conn")),
    # A connector name may contain ':' and the separator itself; a topic cannot.
    ("status-topic-t.1_x:connector-a:connector-b", ("t.1_x", "a:connector-b")),
    ("status-topic-t:c", None),
    ("status-topic-:connector-c", None),
    ("status-topic-t:connector-", None),
    ("status-topic-t", None),
])
def test_parse_topic_key(key: str, expected: tuple[str, str] | None) -> None:
    assert parse_topic_key(key) == expected


@pytest.mark.parametrize("value", [
    b"not json", b"[]", b'{"topic":null}', b'{"topic":{"name":"t"}}',
    b'{"topic":{"name":"t","connector":"c","task":"0","discoverTimestamp":1}}',
    b'{"topic":{"name":"t","connector":"c","task":true,"discoverTimestamp":1}}',
])
def test_parse_topic_status_rejects_other_shapes(value: bytes) -> None:
    with pytest.raises(DataException):
        parse_topic_status(value)


def test_put_topic_is_read_back_at_once_and_by_other_workers(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[[str], StatusStore],
) -> None:
    writer = stores(topic)
    orders = TopicStatus("orders", "c", 1, 1700000000000)
    writer.put_topic(orders)
    writer.put_topic(TopicStatus("orders", "c-2", 0, 1700000000001))
    assert writer.active_topics("c") == {"orders": orders}
    assert writer.is_active_topic("c", "orders") and not writer.is_active_topic("c", "other")
    reader = stores(topic)
    assert reader.active_topics("c") == {"orders": orders}
    assert reader.topic_connectors() == {"c", "c-2"}
    assert raw_records(kafka_bootstrap, admin, topic)[
        b"status-topic-orders:connector-c"] == serialize_topic_status(orders)


def test_delete_topics_tombstones_only_that_connectors_topics(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[[str], StatusStore],
) -> None:
    writer, reader = stores(topic), stores(topic)
    for name in ("a", "b"):
        writer.put_topic(TopicStatus(name, "gone", 0, 1))
    writer.put_topic(TopicStatus("a", "kept", 0, 1))
    assert writer.delete_topics("gone") == ["a", "b"]
    assert writer.active_topics("gone") == {}
    assert writer.delete_topics("gone") == []  # nothing left: nothing written
    reader.read_to_end(30)
    assert reader.active_topics("gone") == {} and reader.topic_connectors() == {"kept"}
    raw = raw_records(kafka_bootstrap, admin, topic)
    assert raw[b"status-topic-a:connector-gone"] is None
    assert raw[b"status-topic-b:connector-gone"] is None


def test_connector_tombstone_leaves_its_topics(
    topic: str, stores: Callable[[str], StatusStore],
) -> None:
    """As in Connect: only per-topic tombstones remove topic records."""
    store = stores(topic)
    store.put_connector("c", "RUNNING", "w")
    store.put_topic(TopicStatus("t", "c", 0, 1))
    store.delete_connector("c", 0)
    assert store.connector_status("c") is None
    assert store.is_active_topic("c", "t")


def test_records_written_by_connect_are_read_and_garbage_skipped(
    kafka_bootstrap: str, topic: str, stores: Callable[[str], StatusStore],
    caplog: pytest.LogCaptureFixture,
) -> None:
    producer = create_producer({"bootstrap.servers": kafka_bootstrap})
    for key, value in [
        (CONNECT_KEY, CONNECT_VALUE),
        (b"status-topic-x:connector-c", b'{"topic":{"name":"x"}}'),
        (b"status-topic-y:c", CONNECT_VALUE),
    ]:
        producer.produce(topic, key=key, value=value)
    assert producer.flush(10) == 0
    store = stores(topic)
    assert store.active_topics("kip558-probe-a") == {
        "kip558-probe-topic-a": parse_topic_status(CONNECT_VALUE)}
    assert store.topic_connectors() == {"kip558-probe-a"}
    assert "Skipping topic status record" in caplog.text
