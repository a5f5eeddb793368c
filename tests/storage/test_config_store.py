"""ConfigStore against the real broker: Connect's wire format, deferred task configs,
KIP-618 task-count records and leader fencing."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
from support.kafka import set_topic_config

from connect_runtime.errors import (
    NotLeaderException,
    ProducerFencedError,
    RecordTooLargeException,
)
from connect_runtime.kafka.clients import create_producer
from connect_runtime.kafka.log import read_topic_to_end
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.config_store import (
    ConfigStore,
    SessionKey,
    read_config_snapshot,
)

Records = list[tuple[bytes, bytes | None]]


@pytest.fixture
def topic(admin: AdminClient, unique_name: Callable[[str], str]) -> str:
    name = unique_name("config")
    ensure_topic(admin, name, 1)
    return name


@pytest.fixture
def group(unique_name: Callable[[str], str]) -> str:
    return unique_name("cluster")


@pytest.fixture
def stores(
    kafka_bootstrap: str, admin: AdminClient, topic: str, group: str,
) -> Iterator[Callable[..., ConfigStore]]:
    """Started ConfigStores ("workers") of one cluster, stopped at teardown."""
    made: list[ConfigStore] = []

    def make(listener: object = None) -> ConfigStore:
        store = ConfigStore(kafka_bootstrap, topic, group, admin=admin,
                            listener=listener)  # type: ignore[arg-type]
        store.start(30)
        made.append(store)
        return store

    yield make
    for store in made:
        store.stop()


@pytest.fixture
def raw_producer(kafka_bootstrap: str) -> Iterator[Producer]:
    producer = create_producer({"bootstrap.servers": kafka_bootstrap})
    yield producer
    producer.flush(5)


def raw_records(bootstrap: str, admin: AdminClient, topic: str) -> Records:
    records: Records = []

    def collect(key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        assert key is not None
        records.append((key, value))

    read_topic_to_end({"bootstrap.servers": bootstrap}, admin, topic, collect, 30)
    return records


def produce(producer: Producer, topic: str, records: Records) -> None:
    errors: list[object] = []
    for key, value in records:
        producer.produce(topic, key=key, value=value,
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(10) == 0 and errors == []


def test_records_on_the_wire_are_connects_format(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[..., ConfigStore],
) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("src", {"connector.class": "Seq", "tasks.max": "2"}, "STOPPED")
    leader.put_task_configs("src", [{"task.class": "T", "n": "0"}, {"task.class": "T", "n": "1"}])
    leader.put_task_count_record("src", 2)
    leader.put_target_state("src", "PAUSED")
    leader.put_session_key(b"\x00\x01secret", "HmacSHA256", 1700000000123)
    leader.remove_connector_config("src")

    assert raw_records(kafka_bootstrap, admin, topic) == [
        (b"target-state-src", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        (b"connector-src", b'{"properties":{"connector.class":"Seq","tasks.max":"2"}}'),
        (b"task-src-0", b'{"properties":{"task.class":"T","n":"0"}}'),
        (b"task-src-1", b'{"properties":{"task.class":"T","n":"1"}}'),
        (b"commit-src", b'{"tasks":2}'),
        (b"tasks-fencing-src", b'{"task-count":2}'),
        (b"target-state-src", b'{"state":"PAUSED","state.v2":"PAUSED"}'),
        (b"session-key",
         b'{"key":"AAFzZWNyZXQ=","algorithm":"HmacSHA256","creation-timestamp":1700000000123}'),
        (b"connector-src", None),
        (b"target-state-src", None),
    ]


def test_the_snapshot_names_the_leader_and_the_offset_of_its_election(
    stores: Callable[..., ConfigStore],
) -> None:
    """Statuses are read as of the current leader (status_store.as_seen_under_leader):
    every worker must see who it is and when it was elected, ordered against the
    task configs' generations (offsets of the same partition)."""
    first = stores()
    assert (first.snapshot().leader_worker_id, first.snapshot().leader_epoch) == (None, -1)
    first.claim_write_privileges()
    first.put_leader("http://a:8083", "a:8083")
    epoch = first.snapshot().offset - 1  # the write read itself back
    assert (first.snapshot().leader_worker_id, first.snapshot().leader_epoch) == ("a:8083", epoch)
    first.put_connector_config("c", {"k": "v"})
    first.put_task_configs("c", [{"t": "0"}])
    generation = first.snapshot().config_generation("c")
    second = stores()
    second.claim_write_privileges()  # fences the first, as a new leader does
    second.put_leader("http://b:8083", "b:8083")
    reader = stores()
    snap = reader.snapshot()
    assert (snap.leader_url, snap.leader_worker_id) == ("http://b:8083", "b:8083")
    assert epoch < generation < snap.leader_epoch == second.snapshot().leader_epoch


def test_each_write_is_visible_in_the_next_snapshot(stores: Callable[..., ConfigStore]) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("a-b", {"k": "v"}, "PAUSED")
    snap = leader.snapshot()
    assert snap.connectors() == ["a-b"]
    assert snap.connector_config("a-b") == {"k": "v"}
    assert snap.target_state("a-b") == "PAUSED"
    leader.put_task_configs("a-b", [{"t": "0"}])
    leader.put_session_key(b"key", "HmacSHA256", 5)
    snap = leader.snapshot()
    assert snap.task_configs("a-b") == [{"t": "0"}]
    assert snap.task_count("a-b") == 1
    assert snap.session_key == SessionKey(b"key", "HmacSHA256", 5)
    leader.put_target_state("a-b", "STOPPED")
    snap = leader.snapshot()
    assert snap.target_state("a-b") == "STOPPED"
    # Snapshots hand out copies: callers cannot change them.
    config, tasks = snap.connector_config("a-b"), snap.task_configs("a-b")
    assert config is not None
    config["k"] = "changed"
    tasks[0]["t"] = "changed"
    assert snap.connector_config("a-b") == {"k": "v"} and snap.task_configs("a-b") == [{"t": "0"}]

    leader.remove_connector_config("a-b")
    assert snap.connectors() == ["a-b"]  # an old snapshot does not change
    snap = leader.snapshot()
    assert snap.connectors() == [] and snap.connector_config("a-b") is None
    assert snap.task_configs("a-b") == []


def test_task_configs_apply_only_when_their_commit_arrives(
    topic: str, stores: Callable[..., ConfigStore], raw_producer: Producer,
) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("c", {"k": "v"})
    follower = stores()
    produce(raw_producer, topic, [(b"task-c-0", b'{"properties":{"n":"0"}}'),
                                  (b"task-c-1", b'{"properties":{"n":"1"}}')])
    follower.read_to_end(30)
    assert follower.snapshot().task_configs("c") == []  # buffered, not applied

    produce(raw_producer, topic, [(b"commit-c", b'{"tasks":2}')])
    follower.read_to_end(30)
    snap = follower.snapshot()
    assert snap.task_configs("c") == [{"n": "0"}, {"n": "1"}]
    assert not snap.inconsistent("c")
    generation = snap.config_generation("c")

    # An incomplete set (task 1 missing) is not applied: the old configs stay.
    produce(raw_producer, topic, [(b"task-c-0", b'{"properties":{"n":"new"}}'),
                                  (b"commit-c", b'{"tasks":2}')])
    follower.read_to_end(30)
    snap = follower.snapshot()
    assert snap.task_configs("c") == [{"n": "0"}, {"n": "1"}]
    assert snap.inconsistent("c")
    assert snap.config_generation("c") == generation

    # A complete set with stale higher task ids (left by compaction) is applied.
    produce(raw_producer, topic, [(b"task-c-0", b'{"properties":{"n":"x"}}'),
                                  (b"task-c-5", b'{"properties":{"n":"stale"}}'),
                                  (b"commit-c", b'{"tasks":1}')])
    follower.read_to_end(30)
    snap = follower.snapshot()
    assert snap.task_configs("c") == [{"n": "x"}]
    assert snap.config_generation("c") > generation
    assert not snap.inconsistent("c")


def test_commit_for_an_unknown_connector_is_ignored(
    topic: str, stores: Callable[..., ConfigStore], raw_producer: Producer,
) -> None:
    produce(raw_producer, topic, [(b"task-ghost-0", b'{"properties":{}}'),
                                  (b"commit-ghost", b'{"tasks":1}')])
    snap = stores().snapshot()
    assert snap.connectors() == [] and snap.task_configs("ghost") == []
    assert not snap.pending_fencing("ghost")


def test_pending_fencing_follows_task_count_records(stores: Callable[..., ConfigStore]) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("c", {"k": "v"})
    snap = leader.snapshot()
    assert not snap.pending_fencing("c") and snap.task_count_record("c") is None

    leader.put_task_configs("c", [{"n": "0"}, {"n": "1"}])
    snap = leader.snapshot()
    assert snap.pending_fencing("c")  # task configs, but no task-count record yet
    first_generation = snap.config_generation("c")

    leader.put_task_count_record("c", 2)
    snap = leader.snapshot()
    assert not snap.pending_fencing("c") and snap.task_count_record("c") == 2

    leader.put_task_configs("c", [{"n": "0"}])
    snap = leader.snapshot()
    assert snap.pending_fencing("c")  # new configs after the latest task-count record
    assert snap.task_count_record("c") == 2
    assert snap.config_generation("c") > first_generation

    follower = stores()  # a fresh reader reaches the same conclusions
    assert follower.snapshot().pending_fencing("c")
    assert follower.snapshot().config_generation("c") == snap.config_generation("c")
    leader.put_task_count_record("c", 1)
    follower.read_to_end(30)
    assert not follower.snapshot().pending_fencing("c")


def test_target_state_reads_v2_then_falls_back_to_state(
    topic: str, stores: Callable[..., ConfigStore], raw_producer: Producer,
) -> None:
    produce(raw_producer, topic, [
        (b"connector-old", b'{"properties":{}}'),
        (b"target-state-old", b'{"state":"PAUSED"}'),  # an older worker: no state.v2
        (b"connector-new", b'{"properties":{}}'),
        (b"target-state-new", b'{"state":"PAUSED","state.v2":"STOPPED"}'),
        (b"connector-plain", b'{"properties":{}}'),
    ])
    snap = stores().snapshot()
    assert snap.target_state("old") == "PAUSED"
    assert snap.target_state("new") == "STOPPED"
    assert snap.target_state("plain") == "STARTED"


def test_a_config_over_the_record_limit_is_refused_and_the_next_write_succeeds(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[..., ConfigStore],
) -> None:
    """Refused before the transaction begins, naming the record and the limit;
    the producer stays, so the leader goes on writing."""
    leader = stores()
    leader.claim_write_privileges()
    with pytest.raises(RecordTooLargeException) as refused:
        leader.put_connector_config("big", {"blob": "x" * 1_100_000}, "STARTED")
    assert "connector-big" in str(refused.value) and "1000000 bytes" in str(refused.value)
    assert leader.has_write_privileges
    leader.put_connector_config("small", {"v": "1"}, "STARTED")
    assert leader.snapshot().connector_config("small") == {"v": "1"}
    assert not leader.snapshot().contains("big")
    assert all(not key.endswith(b"-big") for key, _ in raw_records(kafka_bootstrap, admin, topic))


def test_a_record_the_broker_refuses_is_too_large_and_a_new_claim_writes_again(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[..., ConfigStore],
) -> None:
    """The topic takes less than the producer sends (``max.message.bytes``): the
    broker's MSG_SIZE_TOO_LARGE is the same RecordTooLargeException, the records
    written before the big one in its transaction never become visible, and the
    producer is dropped (its sequence numbers have a gap): a new claim writes."""
    set_topic_config(kafka_bootstrap, topic, "max.message.bytes", "4096")
    leader = stores()
    leader.claim_write_privileges()
    with pytest.raises(RecordTooLargeException) as refused:
        leader.put_connector_config("big", {"blob": "x" * 20_000}, "PAUSED")
    assert "broker refused" in str(refused.value), refused.value
    assert not leader.has_write_privileges
    leader.claim_write_privileges()
    leader.put_connector_config("small", {"v": "1"}, "STARTED")
    snap = leader.snapshot()
    assert snap.connector_config("small") == {"v": "1"} and not snap.contains("big")
    # The target state went first in the aborted transaction: not visible either.
    assert all(not key.endswith(b"-big") for key, _ in raw_records(kafka_bootstrap, admin, topic))


def test_a_new_leader_fences_the_old_one(
    kafka_bootstrap: str, admin: AdminClient, topic: str, stores: Callable[..., ConfigStore],
) -> None:
    old_leader, new_leader = stores(), stores()
    old_leader.claim_write_privileges()
    old_leader.put_connector_config("c", {"v": "1"})
    new_leader.claim_write_privileges()  # init_transactions bumps the epoch

    with pytest.raises(ProducerFencedError):
        old_leader.put_task_configs("c", [{"zombie": "yes"}])
    assert not old_leader.has_write_privileges
    with pytest.raises(NotLeaderException):
        old_leader.put_connector_config("c", {"v": "zombie"})

    new_leader.put_connector_config("c", {"v": "2"})
    for store in (new_leader, old_leader):
        store.read_to_end(30)
        snap = store.snapshot()
        assert snap.connector_config("c") == {"v": "2"}
        assert snap.task_configs("c") == [] and not snap.pending_fencing("c")
    assert all(b"zombie" not in (value or b"")
               for _, value in raw_records(kafka_bootstrap, admin, topic))


def test_claiming_aborts_the_open_transaction_of_a_zombie_leader(
    kafka_bootstrap: str, admin: AdminClient, topic: str, group: str,
) -> None:
    zombie = create_producer({"bootstrap.servers": kafka_bootstrap},
                             transactional_id=f"connect-cluster-{group}")
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic, key=b"connector-z", value=b'{"properties":{"zombie":"yes"}}')
    zombie.flush(10)  # on the broker, in an open transaction

    # A store could not even start now: reading to the end waits for that
    # transaction. Claiming privileges first aborts it.
    leader = ConfigStore(kafka_bootstrap, topic, group, admin=admin)
    try:
        leader.claim_write_privileges()
        leader.start(30)
        leader.put_connector_config("c", {"v": "1"})
        with pytest.raises(KafkaException):
            zombie.commit_transaction(10)
        assert leader.snapshot().connectors() == ["c"]
    finally:
        leader.stop()
        with contextlib.suppress(KafkaException):  # a fenced producer is in a fatal state
            zombie.purge()
            zombie.flush(0)
    assert [k for k, _ in raw_records(kafka_bootstrap, admin, topic)] == [b"connector-c"]


def test_writes_need_write_privileges(stores: Callable[..., ConfigStore]) -> None:
    follower = stores()
    with pytest.raises(NotLeaderException, match="only the leader"):
        follower.put_target_state("c", "PAUSED")


class Listener:
    def __init__(self, store_ref: list[ConfigStore]) -> None:
        self.events: list[tuple[str, ...]] = []
        self.store_ref = store_ref
        self.seen_in_snapshot: list[bool] = []
        self.lock = threading.Lock()

    def _record(self, *event: str) -> None:
        with self.lock:
            self.events.append(event)

    def on_connector_config_update(self, name: str) -> None:
        # The snapshot already includes the change when the listener runs.
        self.seen_in_snapshot.append(self.store_ref[0].snapshot().contains(name))
        self._record("config", name)

    def on_connector_config_remove(self, name: str) -> None:
        self._record("remove", name)

    def on_task_configs_update(self, name: str) -> None:
        self._record("tasks", name)

    def on_target_state_change(self, name: str) -> None:
        self._record("target", name)
        raise RuntimeError("listener bug")  # logged, never propagated

    def on_task_count_record(self, name: str) -> None:
        self._record("task-count", name)

    def on_session_key_update(self) -> None:
        self._record("session-key")


def test_listener_hears_changes_after_start_only(
    stores: Callable[..., ConfigStore], caplog: pytest.LogCaptureFixture,
) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("before", {})
    ref: list[ConfigStore] = []
    listener = Listener(ref)
    follower = stores(listener)
    ref.append(follower)
    assert listener.events == []  # the initial catch-up is not replayed

    leader.put_connector_config("c", {}, "STARTED")
    leader.put_target_state("c", "PAUSED")
    leader.put_target_state("c", "PAUSED")  # unchanged: no event
    leader.put_task_configs("c", [{}])
    leader.put_task_count_record("c", 1)
    leader.put_session_key(b"k", "HmacSHA256", 1)
    leader.remove_connector_config("c")
    follower.read_to_end(30)
    assert listener.events == [("config", "c"), ("target", "c"), ("tasks", "c"),
                               ("task-count", "c"), ("session-key",), ("remove", "c")]
    assert listener.seen_in_snapshot == [True]
    assert "listener failed" in caplog.text


def test_one_shot_snapshot_matches_the_store(
    kafka_bootstrap: str, topic: str, stores: Callable[..., ConfigStore],
) -> None:
    leader = stores()
    leader.claim_write_privileges()
    leader.put_connector_config("c", {"k": "v"}, "PAUSED")
    leader.put_task_configs("c", [{"n": "0"}, {"n": "1"}])
    leader.put_task_count_record("c", 2)
    one_shot = read_config_snapshot(kafka_bootstrap, topic, timeout=30)
    assert one_shot == leader.snapshot()
    assert one_shot.config_generation("c") >= 0 and not one_shot.pending_fencing("c")
