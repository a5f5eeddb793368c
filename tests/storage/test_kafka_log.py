"""KafkaBasedLog, topic creation and client defaults, against the real broker."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import ConfigException, ConnectError, KafkaTimeoutError
from connect_runtime.kafka.clients import (
    producer_config,
    read_end_offsets,
)
from connect_runtime.kafka.log import KafkaBasedLog, RecordCallback, read_topic_to_end
from connect_runtime.kafka.topics import (
    InternalTopicSettings,
    ensure_internal_topics,
    ensure_topic,
)

Record = tuple[bytes | None, bytes | None, int, int]


class Collector:
    """A thread-safe record callback."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self._lock = threading.Lock()

    def __call__(self, key: bytes | None, value: bytes | None, partition: int,
                 offset: int) -> None:
        with self._lock:
            self.records.append((key, value, partition, offset))

    def values(self) -> list[bytes | None]:
        with self._lock:
            return [r[1] for r in self.records]


@pytest.fixture
def logs(kafka_bootstrap: str, admin: AdminClient) -> Iterator[Callable[..., KafkaBasedLog]]:
    made: list[KafkaBasedLog] = []

    def make(topic: str, callback: RecordCallback, **kwargs: str) -> KafkaBasedLog:
        log = KafkaBasedLog(topic, {"bootstrap.servers": kafka_bootstrap}, admin, callback,
                            **kwargs)
        made.append(log)
        return log

    yield make
    for log in made:
        log.stop()


def test_start_reads_existing_records_in_order_per_partition(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 3)
    producer = producers()
    for i in range(30):
        producer.produce(topic, key=f"k{i % 7}".encode(), value=str(i).encode(), partition=i % 3)
    producer.flush(10)

    collector = Collector()
    log = logs(topic, collector)
    log.start(30)

    assert len(collector.records) == 30
    assert log.partitions == [0, 1, 2]
    for p in range(3):
        offsets = [r[3] for r in collector.records if r[2] == p]
        assert offsets == sorted(offsets) == list(range(10))
        assert [int(r[1] or b"") for r in collector.records if r[2] == p] == list(range(p, 30, 3))


def test_read_to_end_waits_for_an_open_transaction(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 2)
    collector = Collector()
    log = logs(topic, collector)
    log.start(30)

    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    txn.produce(topic, key=b"a", value=b"in-txn", partition=0)
    txn.flush(10)  # the record is on the broker, its transaction still open

    with pytest.raises(KafkaTimeoutError, match="open transaction"):
        log.read_to_end(1.0)
    assert collector.values() == []

    txn.commit_transaction(30)
    log.read_to_end(30)
    assert collector.values() == [b"in-txn"]


def test_a_start_not_waiting_for_the_end_returns_despite_an_open_transaction(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    """The worker starts its offsets log this way: a dead task's open transaction
    must not hold its startup (only the task's next instance, which needs a
    leader, ends it); reads to the end still wait for it."""
    topic = unique_name("log")
    ensure_topic(admin, topic, 2)
    plain = producers()
    plain.produce(topic, key=b"a", value=b"committed", partition=1)
    plain.flush(10)
    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    txn.produce(topic, key=b"b", value=b"in-txn", partition=0)
    txn.flush(10)

    collector = Collector()
    log = logs(topic, collector)
    log.start(1.0, wait_for_end=False)  # no KafkaTimeoutError after 1 s
    with pytest.raises(KafkaTimeoutError, match="open transaction"):
        log.read_to_end(1.0)
    txn.abort_transaction(30)
    log.read_to_end(30)
    assert collector.values() == [b"committed"]


def test_read_to_end_started_before_commit_returns_only_after_it(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 1)
    collector = Collector()
    log = logs(topic, collector)
    log.start(30)
    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    txn.produce(topic, key=b"a", value=b"late", partition=0)
    txn.flush(10)

    seen_at_return: list[list[bytes | None]] = []

    def read() -> None:
        log.read_to_end(30)
        seen_at_return.append(collector.values())

    reader = threading.Thread(target=read)
    reader.start()
    reader.join(1.5)
    assert reader.is_alive(), "read_to_end returned while a transaction was open"
    txn.commit_transaction(30)
    reader.join(30)
    assert seen_at_return == [[b"late"]]


def test_aborted_records_never_reach_the_callback(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 2)
    collector = Collector()
    log = logs(topic, collector)
    log.start(30)

    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    for p in (0, 1):
        txn.produce(topic, key=b"k", value=b"aborted", partition=p)
    txn.flush(10)
    txn.abort_transaction(30)
    txn.begin_transaction()
    txn.produce(topic, key=b"k", value=b"committed", partition=1)
    txn.commit_transaction(30)

    log.read_to_end(30)
    assert collector.values() == [b"committed"]
    # The abort markers and aborted records are behind the positions: a new
    # read_to_end returns at once instead of waiting for them.
    log.read_to_end(5)


def test_read_uncommitted_log_sees_open_transactions(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 1)
    collector = Collector()
    log = logs(topic, collector, isolation_level="read_uncommitted")
    log.start(30)
    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    txn.produce(topic, key=b"a", value=b"dirty", partition=0)
    txn.flush(10)
    log.read_to_end(10)
    assert collector.values() == [b"dirty"]
    txn.abort_transaction(30)


def test_callback_errors_are_logged_and_skipped(
    admin: AdminClient, producers: Callable[..., Producer], logs: Callable[..., KafkaBasedLog],
    unique_name: Callable[[str], str], caplog: pytest.LogCaptureFixture,
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 1)
    producer = producers()
    for value in (b"1", b"boom", b"3"):
        producer.produce(topic, key=b"k", value=value)
    producer.flush(10)
    good: list[bytes | None] = []

    def callback(key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if value == b"boom":
            raise RuntimeError("bad record")
        good.append(value)

    logs(topic, callback).start(30)
    assert good == [b"1", b"3"]
    assert "Callback failed" in caplog.text


def test_stopped_log_refuses_reads_and_stop_is_idempotent(
    admin: AdminClient, logs: Callable[..., KafkaBasedLog], unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 1)
    log = logs(topic, Collector())
    log.start(30)
    log.stop()
    log.stop()
    with pytest.raises(ConnectError, match="not running"):
        log.read_to_end(1)


def test_start_fails_clearly_for_a_missing_topic(
    logs: Callable[..., KafkaBasedLog], unique_name: Callable[[str], str],
) -> None:
    with pytest.raises(ConnectError, match=r"does not exist|Could not find partitions"):
        logs(unique_name("missing"), Collector()).start(1.0)


def test_one_shot_read_waits_for_open_transaction(
    kafka_bootstrap: str, admin: AdminClient, producers: Callable[..., Producer],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("log")
    ensure_topic(admin, topic, 3)
    txn = producers(unique_name("txn"))
    txn.begin_transaction()
    txn.produce(topic, key=b"a", value=b"v", partition=2)
    txn.flush(10)
    conf = {"bootstrap.servers": kafka_bootstrap}
    with pytest.raises(KafkaTimeoutError, match="partition 2"):
        read_topic_to_end(conf, admin, topic, Collector(), 1.0)
    txn.commit_transaction(30)
    collector = Collector()
    read_topic_to_end(conf, admin, topic, collector, 30)
    assert collector.values() == [b"v"]


# ----------------------------------------------------------------- topics and clients


def test_ensure_topic_creates_a_usable_compacted_topic_once(
    admin: AdminClient, unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("topic")
    assert ensure_topic(admin, topic, 4, replication_factor=-1) == 4
    # Usable at once: every partition answers end-offset requests.
    assert read_end_offsets(admin, topic, timeout=5) == {0: 0, 1: 0, 2: 0, 3: 0}
    # Existing topics are used as they are, whatever partition count is asked for.
    assert ensure_topic(admin, topic, 8) == 4


def test_existing_topic_without_compaction_is_refused(
    admin: AdminClient, unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("topic")
    ensure_topic(admin, topic, 1, compacted=False)
    with pytest.raises(ConfigException, match=r"cleanup.policy=compact.*cleanup.policy=delete"):
        ensure_topic(admin, topic, 1, config_key="offset.storage.topic")


def test_internal_topics_are_created_with_connect_shapes(
    admin: AdminClient, unique_name: Callable[[str], str],
) -> None:
    settings = InternalTopicSettings(unique_name("config"), unique_name("offsets"),
                                     unique_name("status"), offsets_partitions=3,
                                     status_partitions=2)
    ensure_internal_topics(admin, settings, timeout=30)
    ensure_internal_topics(admin, settings, timeout=30)  # idempotent
    counts = {name: len(admin.list_topics(name, timeout=10).topics[name].partitions)
              for name in (settings.config_topic, settings.offsets_topic, settings.status_topic)}
    assert counts == {settings.config_topic: 1, settings.offsets_topic: 3,
                      settings.status_topic: 2}


def test_config_topic_with_several_partitions_is_refused(
    admin: AdminClient, unique_name: Callable[[str], str],
) -> None:
    settings = InternalTopicSettings(unique_name("config"), unique_name("offsets"),
                                     unique_name("status"))
    ensure_topic(admin, settings.config_topic, 2)
    with pytest.raises(ConfigException, match=r"single partition.*2 partitions"):
        ensure_internal_topics(admin, settings, timeout=30)


def java_murmur2_partition(key: bytes, partitions: int) -> int:
    """Kafka's Java DefaultPartitioner for a keyed record: toPositive(murmur2(key)) % n."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    h = (0x9747B28C ^ len(key)) & mask
    full = len(key) - len(key) % 4
    for i in range(0, full, 4):
        k = int.from_bytes(key[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    tail = key[full:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return (h & 0x7FFFFFFF) % partitions


def test_producers_place_keys_where_the_java_client_would(
    admin: AdminClient, producers: Callable[..., Producer], unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("partitioner")
    ensure_topic(admin, topic, 25)
    producer = producers()
    keys = [f'["conn-{i}",{{"file":"f{i}.txt"}}]'.encode() for i in range(40)]
    landed: dict[bytes | None, int | None] = {}
    for key in keys:
        producer.produce(topic, key=key, value=b"x",
                         on_delivery=lambda err, msg: landed.__setitem__(msg.key(),
                                                                         msg.partition()))
    producer.flush(10)
    assert landed == {key: java_murmur2_partition(key, 25) for key in keys}


def test_partitioner_cannot_be_overridden() -> None:
    conf = producer_config({"bootstrap.servers": "x:1"}, {"partitioner": "consistent_random"})
    assert conf["partitioner"] == "murmur2_random"
    assert conf["enable.idempotence"] is True
