"""The one send path's exceptional branches, with a scripted producer (pure logic).

Every strategy of :mod:`connect_runtime.task.record_sender` (records, the three
column strategies, record by record, offsets) calls ``produce`` itself and
leaves its loop only when ``produce`` raises. What is claimed here is what the
sender does then: a full queue is waited out with ``poll`` and no message is
lost, repeated or reordered; any other client error fails with the same
translated error, naming the topic and the task. What Kafka does with the
messages is claimed by the loop tests against the real broker.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from connect_runtime.api.record import RecordBatch, SourceRecord
from connect_runtime.converters import SimpleHeaderConverter, load_converter
from connect_runtime.errors import KafkaClientError
from connect_runtime.kafka.produce import produce_waiting
from connect_runtime.task.record_sender import RecordSender

OUT = "out"


class ScriptedProducer:
    """Queues what ``produce`` is given, every field spelled out; refuses the calls
    numbered in ``full`` (BufferError), and every call from ``broken_from`` on
    (librdkafka refuses a message again for the same reason)."""

    def __init__(self, full: set[int] | None = None, broken_from: int | None = None) -> None:
        self.full = full or set()
        self.broken_from = broken_from
        self.calls = 0
        self.polls = 0
        self.queued: list[tuple[Any, ...]] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = -1,
                callback: Any = None, on_delivery: Any = None, timestamp: int = 0,
                headers: Any = None) -> None:
        self.calls += 1
        if self.calls in self.full:
            raise BufferError("Local: Queue full")
        if self.broken_from is not None and self.calls >= self.broken_from:
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "too large"))
        self.queued.append((topic, value, key, partition, timestamp, headers,
                            callback or on_delivery))

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0


def sender(producer: ScriptedProducer) -> RecordSender:
    return RecordSender(
        label="conn-0", producer=producer, forbidden_topics=frozenset(),  # type: ignore[arg-type]
        key_converter=load_converter("org.apache.kafka.connect.storage.StringConverter", {},
                                     is_key=True),
        value_converter=load_converter("org.apache.kafka.connect.json.JsonConverter",
                                       {"schemas.enable": "false"}, is_key=False),
        header_converter=SimpleHeaderConverter(), create_topic=lambda topic: None)


def records(n: int, **fields: Any) -> list[SourceRecord]:
    return [SourceRecord({"p": 0}, {"seq": i}, OUT, {"seq": i}, str(i), **fields)
            for i in range(n)]


def batch(n: int, **columns: Any) -> RecordBatch:
    return RecordBatch(OUT, [{"seq": i} for i in range(n)], source_partition={"p": 0},
                       source_offset={"seq": n}, **columns)


# What each strategy is given: a run of records (with and without the fields that
# make produce take every argument), and a batch for each column strategy.
SENDS: dict[str, Callable[[RecordSender], int]] = {
    "records": lambda s: s.send_records(records(6)),
    "records-every-field": lambda s: s.send_records(
        records(6, partition=1, timestamp=1_700_000_000_000, headers=[("h", "v")])),
    "values-only": lambda s: s.send_record_batch(batch(6)),
    "keyed": lambda s: s.send_record_batch(batch(6, keys=[str(i) for i in range(6)])),
    "every-field": lambda s: s.send_record_batch(
        batch(6, keys=[str(i) for i in range(6)], partition=1,
              timestamps=[1_700_000_000_000 + i for i in range(6)],
              headers=[[("h", str(i))] for i in range(6)])),
    "one-by-one": lambda s: sum(s.send(r, None) for r in records(6, headers=[("h", "v")])),
}


@pytest.mark.parametrize("send", SENDS.values(), ids=SENDS.keys())
@pytest.mark.parametrize("full", [{1}, {3, 4}, {6}], ids=["first", "two-in-a-row", "last"])
def test_a_full_queue_is_waited_out_without_losing_or_repeating_a_message(
        send: Callable[[RecordSender], int], full: set[int]) -> None:
    unhindered = ScriptedProducer()
    assert send(sender(unhindered)) == 6
    hindered = ScriptedProducer(full=full)
    assert send(sender(hindered)) == 6
    assert hindered.queued == unhindered.queued
    assert len(hindered.queued) == 6 and hindered.polls >= 1


@pytest.mark.parametrize("send", SENDS.values(), ids=SENDS.keys())
def test_a_client_error_fails_naming_the_topic_and_the_task(
        send: Callable[[RecordSender], int]) -> None:
    producer = ScriptedProducer(broken_from=3)
    with pytest.raises(KafkaClientError) as failure:
        send(sender(producer))
    assert str(failure.value).startswith(f"produce to {OUT!r} by task conn-0: ")
    assert "MSG_SIZE_TOO_LARGE" in str(failure.value)
    assert isinstance(failure.value.__cause__, KafkaException)
    assert len(producer.queued) == 2  # in order, up to the refused one


def test_a_delivery_callback_survives_a_full_queue() -> None:
    producer = ScriptedProducer(full={1})

    def delivered(err: Any, msg: Any) -> None:
        pass

    assert sender(producer).send(records(1)[0], delivered)
    assert [m[-1] for m in producer.queued] == [delivered]


def test_offsets_wait_out_a_full_queue_and_name_the_offsets_topic_on_error() -> None:
    producer = ScriptedProducer(full={2})
    sender(producer).produce_offsets("offsets", [(b"k1", b"v1"), (b"k2", None)])
    assert [(m[0], m[2], m[1]) for m in producer.queued] == [
        ("offsets", b"k1", b"v1"), ("offsets", b"k2", None)]
    with pytest.raises(KafkaClientError, match=r"^write offsets to 'offsets' for task conn-0: "):
        sender(ScriptedProducer(broken_from=1)).produce_offsets("offsets", [(b"k", b"v")])


def test_produce_waiting_translates_what_the_callers_own_produce_raised() -> None:
    producer = ScriptedProducer()
    refused = KafkaException(KafkaError(KafkaError._FATAL, "fatal", fatal=True))
    with pytest.raises(KafkaClientError, match=r"^ctx: ") as failure:
        produce_waiting(producer, OUT, b"v", context="ctx", refused=refused)  # type: ignore[arg-type]
    assert failure.value.__cause__ is refused and failure.value.fatal
    assert producer.calls == 0  # not tried again
    produce_waiting(producer, OUT, b"v", context="ctx",  # type: ignore[arg-type]
                    refused=BufferError("Local: Queue full"))
    assert producer.polls == 1 and len(producer.queued) == 1
