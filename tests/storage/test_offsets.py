"""Source offsets: format, validation, KIP-618 reads, combined view and mirroring."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import DataException, InvalidOffsetException, KafkaTimeoutError
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.offsets.format import (
    deserialize_key,
    deserialize_value,
    serialize_key,
    serialize_value,
    validate_partition_or_offset,
)
from connect_runtime.storage.offsets.mirror import GlobalOffsetMirror
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.offsets.views import (
    OffsetEntry,
    OffsetView,
    combine_offsets,
    read_offsets,
    to_rest_offsets,
)

CONNECTOR = "reddit-source"

# KIP-618 "Smooth migration", verbatim.
KIP_GLOBAL = [({"subreddit": "apachekafka"}, {"timestamp": "4761"}),
              ({"subreddit": "CatsStandingUp"}, {"timestamp": "2112"})]
KIP_CONNECTOR = [({"subreddit": "CatsStandingUp"}, {"timestamp": "2169"}),
                 ({"subreddit": "grilledcheese"}, {"timestamp": "489"})]
KIP_PRESENTED = [
    {"partition": {"subreddit": "apachekafka"}, "offset": {"timestamp": "4761"}},
    {"partition": {"subreddit": "CatsStandingUp"}, "offset": {"timestamp": "2169"}},
    {"partition": {"subreddit": "grilledcheese"}, "offset": {"timestamp": "489"}},
]


def by_partition(offsets: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {orjson.dumps(o["partition"], option=orjson.OPT_SORT_KEYS).decode(): o["offset"]
            for o in offsets}


@pytest.fixture
def conf(kafka_bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": kafka_bootstrap}


def write_offsets(producer: Producer, topic: str, connector: str,
                  entries: Sequence[tuple[dict[str, Any], dict[str, Any] | None]]) -> None:
    errors: list[object] = []
    for partition, offset in entries:
        producer.produce(topic, key=serialize_key(connector, partition),
                         value=serialize_value(offset),
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(10) == 0 and errors == []


# ------------------------------------------------------------------- format


def test_key_and_value_round_trip_in_connect_format() -> None:
    key = serialize_key("my-conn", {"file": "a.txt", "line": 3, "ok": True, "x": None})
    assert key == b'["my-conn",{"file":"a.txt","line":3,"ok":true,"x":null}]'
    assert deserialize_key(key) == ("my-conn",
                                    {"file": "a.txt", "line": 3, "ok": True, "x": None})
    value = serialize_value({"position": 42, "ts": 1.5})
    assert value == b'{"position":42,"ts":1.5}'
    assert deserialize_value(value) == {"position": 42, "ts": 1.5}
    assert serialize_value(None) is None
    assert deserialize_value(None) is None


def test_key_is_canonical_whatever_the_field_order() -> None:
    assert serialize_key("c", {"b": 1, "a": 2}) == serialize_key("c", {"a": 2, "b": 1})
    assert serialize_key("c", {"b": 1, "a": 2}) == b'["c",{"a":2,"b":1}]'


@pytest.mark.parametrize(
    ("value", "what", "fragment"),
    [
        ({"file": ["a", "b"]}, "partition", "key 'file' holds a list"),
        ({"pos": {"nested": 1}}, "offset", "key 'pos' holds a dict"),
        ({"pos": b"bytes"}, "offset", "key 'pos' holds a bytes"),
        ({"pos": (1, 2)}, "offset", "key 'pos' holds a tuple"),
        ({1: "x"}, "partition", "key 1 is a int"),
        ({"pos": float("nan")}, "offset", "key 'pos' holds the float nan"),
        ({"pos": 2**64}, "offset", "outside the 64-bit range"),
        (["not", "a", "dict"], "partition", "must be a dict.*got a list"),
        ("str", "offset", "must be a dict.*got a str"),
    ],
)
def test_invalid_partitions_and_offsets_are_rejected_clearly(
    value: Any, what: str, fragment: str,
) -> None:
    with pytest.raises(InvalidOffsetException, match=f"Source {what} .*{fragment}"):
        validate_partition_or_offset(value, what)


def test_serializers_validate() -> None:
    with pytest.raises(InvalidOffsetException, match="key 'f' holds a set"):
        serialize_key("c", {"f": {1}})  # type: ignore[dict-item]
    with pytest.raises(InvalidOffsetException, match="key 'o' holds a list"):
        serialize_value({"o": [1]})  # type: ignore[dict-item]


@pytest.mark.parametrize("garbage", [None, b"not json", b'{"a":1}', b'["c"]', b'[1,{}]',
                                     b'["c",{"x":[1]}]', b'["c",null]'])
def test_garbage_keys_raise_data_exception(garbage: bytes | None) -> None:
    with pytest.raises(DataException):
        deserialize_key(garbage)


# ------------------------------------------------------------------- reads


def test_read_offsets_applies_later_records_and_tombstones_and_skips_garbage(
    conf: dict[str, str], admin: AdminClient, producers: Callable[..., Producer],
    unique_name: Callable[[str], str], caplog: pytest.LogCaptureFixture,
) -> None:
    topic = unique_name("offsets")
    ensure_topic(admin, topic, 5)
    producer = producers()
    write_offsets(producer, topic, CONNECTOR, [({"f": "a"}, {"pos": 1}), ({"f": "b"}, {"pos": 1}),
                                               ({"f": "a"}, {"pos": 2}), ({"f": "b"}, None)])
    write_offsets(producer, topic, "other", [({"f": "a"}, {"pos": 99})])
    # (A compacted topic rejects null keys outright, so no garbage of that kind.)
    for key, value in [(b"garbage", b"{}"), (serialize_key(CONNECTOR, {"f": "c"}), b"not json")]:
        producer.produce(topic, key=key, value=value)
    # Written by a client that orders fields differently: still the same partition.
    producer.produce(topic, key=b'["reddit-source",{"y":1,"x":2}]', value=b'{"pos":7}')
    producer.flush(10)

    view = read_offsets(conf, admin, topic, CONNECTOR, timeout=30)
    reader = TaskOffsetStorageReader.from_view(CONNECTOR, view)
    assert reader.offset({"f": "a"}) == {"pos": 2}
    assert reader.offset({"f": "b"}) is None  # tombstoned
    assert reader.offset({"f": "c"}) is None  # garbage value skipped
    assert reader.offset({"x": 2, "y": 1}) == {"pos": 7}
    assert "Skipping offsets record" in caplog.text
    everything = read_offsets(conf, admin, topic, None, timeout=30)
    assert {e.connector for e in everything.values()} == {CONNECTOR, "other"}


def test_read_offsets_waits_for_an_open_transaction(
    conf: dict[str, str], admin: AdminClient, producers: Callable[..., Producer],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("offsets")
    ensure_topic(admin, topic, 5)
    write_offsets(producers(), topic, CONNECTOR, [({"f": "a"}, {"pos": 1})])
    txn = producers(unique_name("task"))
    txn.begin_transaction()
    write_offsets(txn, topic, CONNECTOR, [({"f": "a"}, {"pos": 2})])  # flushed, not committed

    with pytest.raises(KafkaTimeoutError, match="open transaction"):
        read_offsets(conf, admin, topic, CONNECTOR, timeout=1.0)

    results: list[OffsetView] = []
    reader = threading.Thread(
        target=lambda: results.append(read_offsets(conf, admin, topic, CONNECTOR, timeout=30)))
    reader.start()
    reader.join(1.5)
    assert reader.is_alive(), "read_offsets returned early, before the transaction ended"
    txn.commit_transaction(30)
    reader.join(30)
    assert [e.offset for e in results[0].values()] == [{"pos": 2}]


def test_aborted_offsets_are_never_read(
    conf: dict[str, str], admin: AdminClient, producers: Callable[..., Producer],
    unique_name: Callable[[str], str],
) -> None:
    topic = unique_name("offsets")
    ensure_topic(admin, topic, 5)
    txn = producers(unique_name("task"))
    txn.begin_transaction()
    write_offsets(txn, topic, CONNECTOR, [({"f": "a"}, {"pos": 1})])
    txn.commit_transaction(30)
    txn.begin_transaction()
    write_offsets(txn, topic, CONNECTOR, [({"f": "a"}, {"pos": 2}), ({"f": "b"}, {"pos": 5})])
    txn.abort_transaction(30)
    view = read_offsets(conf, admin, topic, CONNECTOR, timeout=30)
    assert sorted((e.partition["f"], e.offset["pos"]) for e in view.values()) == [("a", 1)]


# ------------------------------------------------------------------- combined view


def test_kip618_smooth_migration_example(
    kafka_bootstrap: str, conf: dict[str, str], admin: AdminClient,
    producers: Callable[..., Producer], unique_name: Callable[[str], str],
) -> None:
    global_topic, own_topic = unique_name("global"), unique_name("own")
    ensure_topic(admin, global_topic, 25)
    ensure_topic(admin, own_topic, 25)
    write_offsets(producers(), global_topic, CONNECTOR, KIP_GLOBAL)
    write_offsets(producers(), own_topic, CONNECTOR, KIP_CONNECTOR)

    reader = TaskOffsetStorageReader(CONNECTOR, kafka_bootstrap, global_topic, own_topic,
                                     timeout=30)
    presented = [{"partition": p, "offset": reader.offset(p)}
                 for p in ({"subreddit": "apachekafka"}, {"subreddit": "CatsStandingUp"},
                           {"subreddit": "grilledcheese"})]
    assert presented == KIP_PRESENTED
    assert reader.offsets([{"subreddit": "nope"}, {"subreddit": "grilledcheese"}]) == [
        ({"subreddit": "nope"}, None),
        ({"subreddit": "grilledcheese"}, {"timestamp": "489"})]

    store = OffsetStore(kafka_bootstrap, global_topic, admin=admin)
    store.start(30)
    try:
        rest = store.connector_offsets(CONNECTOR, own_topic, timeout=30)
        assert by_partition(rest) == by_partition(KIP_PRESENTED)
        assert len(rest) == 3
        only_global = store.connector_offsets(CONNECTOR, None, timeout=30)
        assert by_partition(only_global) == by_partition(
            [{"partition": p, "offset": o} for p, o in KIP_GLOBAL])
        # An own topic its tasks have not created yet holds nothing: the global view.
        not_yet = store.connector_offsets(CONNECTOR, unique_name("not-created"), timeout=30)
        assert by_partition(not_yet) == by_partition(only_global)
    finally:
        store.stop()


def entry(partition: dict[str, Any], offset: dict[str, Any]) -> tuple[bytes, OffsetEntry]:
    return serialize_key(CONNECTOR, partition), OffsetEntry(CONNECTOR, partition, offset)


def test_combined_view_tombstones_follow_connect() -> None:
    # ConnectorOffsetBackingStore.get: a partition absent from the connector's
    # store (never written, or tombstoned there) falls back to the global store.
    global_view = dict([entry({"p": "a"}, {"o": 1}), entry({"p": "b"}, {"o": 1})])
    connector_view = dict([entry({"p": "a"}, {"o": 2})])  # {"p": "b"} tombstoned here
    combined = combine_offsets(global_view, connector_view)
    assert to_rest_offsets(combined) == [
        {"partition": {"p": "a"}, "offset": {"o": 2}},
        {"partition": {"p": "b"}, "offset": {"o": 1}},
    ]


def test_tombstones_in_either_topic(
    kafka_bootstrap: str, admin: AdminClient, producers: Callable[..., Producer],
    unique_name: Callable[[str], str],
) -> None:
    global_topic, own_topic = unique_name("global"), unique_name("own")
    ensure_topic(admin, global_topic, 3)
    ensure_topic(admin, own_topic, 3)
    producer = producers()
    write_offsets(producer, global_topic, CONNECTOR,
                  [({"p": "gone"}, {"o": 1}), ({"p": "gone"}, None), ({"p": "kept"}, {"o": 1})])
    write_offsets(producer, own_topic, CONNECTOR,
                  [({"p": "kept"}, {"o": 2}), ({"p": "kept"}, None)])
    reader = TaskOffsetStorageReader(CONNECTOR, kafka_bootstrap, global_topic, own_topic,
                                     timeout=30)
    assert reader.offset({"p": "gone"}) is None
    assert reader.offset({"p": "kept"}) == {"o": 1}


def test_reader_returns_copies_and_validates_requests() -> None:
    reader = TaskOffsetStorageReader.from_view(CONNECTOR, dict([entry({"p": "a"}, {"o": 1})]))
    first = reader.offset({"p": "a"})
    assert first == {"o": 1}
    first["o"] = 99
    assert reader.offset({"p": "a"}) == {"o": 1}
    with pytest.raises(InvalidOffsetException, match="key 'p' holds a list"):
        reader.offset({"p": ["a"]})  # type: ignore[dict-item]


# ------------------------------------------------------------------- mirroring


def test_mirror_copies_committed_offsets_to_the_global_topic(
    kafka_bootstrap: str, conf: dict[str, str], admin: AdminClient,
    unique_name: Callable[[str], str],
) -> None:
    global_topic = unique_name("global")
    ensure_topic(admin, global_topic, 5)
    mirror = GlobalOffsetMirror(kafka_bootstrap, global_topic)
    try:
        mirror.submit([(serialize_key(CONNECTOR, {"p": "a"}), serialize_value({"o": 1})),
                       (serialize_key(CONNECTOR, {"p": "b"}), serialize_value({"o": 1}))])
        mirror.submit([(serialize_key(CONNECTOR, {"p": "a"}), serialize_value({"o": 2})),
                       (serialize_key(CONNECTOR, {"p": "b"}), None)])
        assert mirror.flush(30)
        assert mirror.pending() == 0
    finally:
        mirror.close(10)
    view = read_offsets(conf, admin, global_topic, CONNECTOR, timeout=30)
    assert to_rest_offsets(view) == [{"partition": {"p": "a"}, "offset": {"o": 2}}]


def test_mirror_never_blocks_and_keeps_retrying_until_it_can_write(
    kafka_bootstrap: str, conf: dict[str, str], admin: AdminClient,
    unique_name: Callable[[str], str], caplog: pytest.LogCaptureFixture,
) -> None:
    global_topic = unique_name("global")  # does not exist yet; auto-creation is off
    mirror = GlobalOffsetMirror(kafka_bootstrap, global_topic, {"message.timeout.ms": 1000},
                                max_backoff=0.5)
    try:
        mirror.submit([(serialize_key(CONNECTOR, {"p": "a"}), serialize_value({"o": 1}))])
        assert not mirror.flush(2.5)
        assert mirror.pending() == 1
        assert "Failed to mirror an offset" in caplog.text  # failed, and retried below
        ensure_topic(admin, global_topic, 2)
        assert mirror.flush(60)
    finally:
        mirror.close(10)
    view = read_offsets(conf, admin, global_topic, CONNECTOR, timeout=30)
    assert to_rest_offsets(view) == [{"partition": {"p": "a"}, "offset": {"o": 1}}]
