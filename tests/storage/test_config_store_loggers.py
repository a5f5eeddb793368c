"""KIP-976 ``logger-cluster-<namespace>`` records on a real config topic: Connect's
format, who hears them, and Connect's rule that a worker ignores the ones written
before it started."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import NotLeaderException
from connect_runtime.kafka.clients import create_producer
from connect_runtime.kafka.log import read_topic_to_end
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.config_store import ConfigStore


class LevelListener:
    """Records the logger levels it hears; every other notification is ignored."""

    def __init__(self) -> None:
        self.levels: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def on_logger_level(self, namespace: str, level: str) -> None:
        with self._lock:
            self.levels.append((namespace, level))

    def on_connector_config_update(self, name: str) -> None: ...

    def on_connector_config_remove(self, name: str) -> None: ...

    def on_task_configs_update(self, name: str) -> None: ...

    def on_target_state_change(self, name: str) -> None: ...

    def on_task_count_record(self, name: str) -> None: ...

    def on_session_key_update(self) -> None: ...


@pytest.fixture
def topic(admin: AdminClient, unique_name: Callable[[str], str]) -> str:
    name = unique_name("config")
    ensure_topic(admin, name, 1)
    return name


@pytest.fixture
def stores(
    kafka_bootstrap: str, admin: AdminClient, topic: str, unique_name: Callable[[str], str],
) -> Iterator[Callable[[LevelListener], ConfigStore]]:
    """Started ConfigStores ("workers") of one cluster, stopped at teardown."""
    group = unique_name("cluster")
    made: list[ConfigStore] = []

    def make(listener: LevelListener) -> ConfigStore:
        store = ConfigStore(kafka_bootstrap, topic, group, admin=admin, listener=listener)
        store.start(30)
        made.append(store)
        return store

    yield make
    for store in made:
        store.stop()


def test_a_level_reaches_every_running_store_in_connects_format(
    kafka_bootstrap: str, admin: AdminClient, topic: str,
    stores: Callable[[LevelListener], ConfigStore],
) -> None:
    leader_heard, follower_heard = LevelListener(), LevelListener()
    leader, follower = stores(leader_heard), stores(follower_heard)
    leader.claim_write_privileges()
    leader.put_logger_level("org.example", "DEBUG")
    follower.read_to_end(30)
    assert leader_heard.levels == follower_heard.levels == [("org.example", "DEBUG")]

    raw: list[tuple[bytes | None, bytes | None]] = []
    read_topic_to_end({"bootstrap.servers": kafka_bootstrap}, admin, topic,
                      lambda key, value, _p, _o: raw.append((key, value)), 30)
    assert raw == [(b"logger-cluster-org.example", b'{"level":"DEBUG"}')]


def test_records_written_before_a_store_started_are_not_applied(
    stores: Callable[[LevelListener], ConfigStore],
) -> None:
    leader = stores(LevelListener())
    leader.claim_write_privileges()
    leader.put_logger_level("old", "TRACE")
    late = LevelListener()
    newcomer = stores(late)
    assert late.levels == []
    leader.put_logger_level("new", "WARN")
    newcomer.read_to_end(30)
    assert late.levels == [("new", "WARN")]


def test_connects_own_non_transactional_records_are_heard_and_bad_ones_ignored(
    kafka_bootstrap: str, topic: str, stores: Callable[[LevelListener], ConfigStore],
) -> None:
    heard = LevelListener()
    store = stores(heard)
    # Kafka Connect writes these from any worker, without a transaction.
    producer: Producer = create_producer({"bootstrap.servers": kafka_bootstrap})
    for value in (None, b"not json", b'["DEBUG"]', b'{"level": 5}', b'{"level":"debug"}'):
        producer.produce(topic, key=b"logger-cluster-a.b", value=value)
    assert producer.flush(10) == 0
    store.read_to_end(30)
    # Unchecked here: the herder refuses levels that are not Connect's.
    assert heard.levels == [("a.b", "debug")]


def test_only_the_leader_writes(stores: Callable[[LevelListener], ConfigStore]) -> None:
    follower = stores(LevelListener())
    with pytest.raises(NotLeaderException, match="only the leader"):
        follower.put_logger_level("x", "DEBUG")
