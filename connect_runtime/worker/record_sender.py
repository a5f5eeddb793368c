"""The per-record work every task loop shares: check the topic, convert, produce.

Both task loops (exactly-once in :mod:`~connect_runtime.worker.task_loop`,
at-least-once in :mod:`~connect_runtime.worker.at_least_once_loop`) hand each
polled record to :meth:`RecordSender.send` and write source offsets with
:meth:`RecordSender.produce_offsets`. What differs between them is only what
happens around it: a transaction, or per-record delivery tracking.

Contract of :meth:`RecordSender.send`, per record, in this order:

1. The topic is checked the first time it is seen: a non-empty string, not one
   of the worker's internal topics (config, status, offsets: a task writing
   there could corrupt the cluster's state), and created if missing when
   ``topic.creation.default.*`` is set (KIP-158). A bad topic raises
   :class:`DataException` before anything is produced.
2. Key and value are converted with the task's converters; a converter error
   becomes :class:`DataException` naming the task and topic.
3. The record is produced; a full librdkafka queue is waited out (never spun
   on), any other client error is translated once (:func:`translate_kafka_error`).

Nothing here blocks on the broker except the queue-full wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from connect_runtime.errors import DataException, translate_kafka_error

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from connect_runtime.api.record import SourceRecord
    from connect_runtime.converters import Converter
    from connect_runtime.storage.offsets import GlobalOffsetMirror

DeliveryCallback = Callable[[Any, Any], None]
"""``on_delivery(err, msg)`` as confluent-kafka calls it, from ``poll``/``flush``."""

# librdkafka raises BufferError when its local queue is full; waiting this long
# for deliveries to drain before retrying keeps the loop from spinning.
QUEUE_FULL_BACKOFF_S = 0.05


class RecordSender:
    """Sends one task's records with its producer (see the module doc for the contract)."""

    def __init__(
        self,
        *,
        label: str,
        producer: Producer,
        forbidden_topics: frozenset[str],
        key_converter: Converter,
        value_converter: Converter,
        create_topic: Callable[[str], None] | None = None,
    ) -> None:
        self.label = label
        self.producer = producer
        self.forbidden_topics = forbidden_topics
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.create_topic = create_topic
        self._checked_topics: set[str] = set()

    def send(self, record: SourceRecord, on_delivery: DeliveryCallback | None) -> None:
        """Steps 1-3 of the module doc. Raises DataException or KafkaClientError."""
        topic = record.topic
        if topic not in self._checked_topics:
            self._check_topic(topic)
        try:
            key = self.key_converter.from_connect(topic, record.key)
            value = self.value_converter.from_connect(topic, record.value)
        except DataException:
            raise
        except Exception as e:
            raise DataException(f"Task {self.label} could not convert a record for topic "
                                f"{topic!r}: {e}") from e
        partition = record.partition if record.partition is not None else -1
        timestamp = record.timestamp or 0
        produce = self.producer.produce
        while True:
            try:
                produce(topic, value, key, partition=partition, on_delivery=on_delivery,
                        timestamp=timestamp, headers=record.headers)
                return
            except BufferError:
                self.producer.poll(QUEUE_FULL_BACKOFF_S)
            except Exception as e:
                raise translate_kafka_error(e, f"produce to {topic!r} by task {self.label}") from e

    def produce_offsets(self, topic: str, records: Iterable[tuple[bytes, bytes | None]],
                        on_delivery: DeliveryCallback | None = None) -> None:
        """Produce serialized ``(key, value or None)`` offset records to ``topic``."""
        for key, value in records:
            while True:
                try:
                    self.producer.produce(topic, value, key, on_delivery=on_delivery)
                    break
                except BufferError:
                    self.producer.poll(QUEUE_FULL_BACKOFF_S)
                except Exception as e:
                    raise translate_kafka_error(
                        e, f"write offsets to {topic!r} for task {self.label}") from e

    def _check_topic(self, topic: Any) -> None:
        if not isinstance(topic, str) or not topic:
            raise DataException(f"Task {self.label} returned a record with topic {topic!r}; "
                                "a record's topic must be a non-empty string")
        if topic in self.forbidden_topics:
            raise DataException(
                f"Task {self.label} returned a record for topic {topic!r}, which is one of the "
                "worker's internal topics (config, status or offsets); a task must never "
                "produce to its own offsets topic or to the cluster's internal topics")
        if self.create_topic is not None:
            self.create_topic(topic)  # KIP-158 topic.creation.default.*; once per topic
        self._checked_topics.add(topic)


def mirror_tombstones_first(mirror: GlobalOffsetMirror | None,
                            written: Iterable[tuple[bytes, bytes | None]],
                            deadline: float) -> bool:
    """Write the tombstones among ``written`` to the global offsets topic and wait.

    With a per-connector offsets topic, a tombstone there falls back to the global
    topic's offset in the combined view; so, as Kafka Connect does (KAFKA-15018),
    the global topic gets the tombstone *before* the connector's topic does.
    True when there was nothing to do or it was written; False if not written by
    ``deadline`` (at least 1 s is allowed). The caller decides what failing means.
    """
    if mirror is None:
        return True
    tombstones = [(k, v) for k, v in written if v is None]
    if not tombstones:
        return True
    mirror.submit(tombstones)
    return mirror.flush(max(deadline - time.monotonic(), 1.0))
