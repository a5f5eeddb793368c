"""The per-record work every task loop shares: check the topic, convert, produce.

Both task loops (exactly-once in :mod:`~connect_runtime.task.exactly_once_loop`,
at-least-once in :mod:`~connect_runtime.task.at_least_once_loop`) hand each
polled record to :meth:`RecordSender.send` (the exactly-once loop a whole batch
to :meth:`RecordSender.send_batch`, the same steps without delivery callbacks)
and write source offsets with :meth:`RecordSender.produce_offsets`. What
differs between them is only what happens around it: a transaction, or
per-record delivery tracking.

Contract of :meth:`RecordSender.send` and ``send_batch``, per record, in this order:

1. The topic is checked the first time it is seen: a non-empty string, not one
   of the worker's internal topics (config, status, offsets: a task writing
   there could corrupt the cluster's state), and created if missing when
   ``topic.creation.default.*`` is set (KIP-158). A bad topic raises
   :class:`DataException` before anything is produced.
2. Key and value are converted with the task's converters (a None key or value
   stays None without a call); a converter error becomes
   :class:`DataException` naming the task and topic.
3. The record is produced; a full librdkafka queue is waited out (never spun
   on), any other client error is translated once (:func:`translate_kafka_error`).

Nothing here blocks on the broker except the queue-full wait.

:attr:`RecordSender.used_topics` collects the topics records were produced to
since its owner last cleared it (KIP-558 active topics): the per-record check of
step 1 looks a topic up in it, so collecting them costs nothing per record.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from connect_runtime.api.schema import infer
from connect_runtime.converters import fast_encoder
from connect_runtime.errors import DataException, translate_kafka_error

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from connect_runtime.api.record import SourceRecord
    from connect_runtime.api.schema import Schema
    from connect_runtime.converters import Converter

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
        self._key_fast = fast_encoder(key_converter)
        self._value_fast = fast_encoder(value_converter)
        self._checked_topics: set[str] = set()
        # Topics produced to since the owner last cleared this set (it may clear
        # it any time on the loop's thread); each was checked (step 1) first.
        self.used_topics: set[str] = set()

    def send(self, record: SourceRecord, on_delivery: DeliveryCallback | None) -> None:
        """Steps 1-3 of the module doc. Raises DataException or KafkaClientError."""
        topic = record.topic
        if type(topic) is not str or topic not in self.used_topics:
            self._use_topic(topic)
        key, value = self._convert(record, topic)
        self._produce(record, topic, value, key, on_delivery)

    def send_batch(self, records: list[SourceRecord]) -> None:
        """``send(record, None)`` for each record, in order: the exactly-once loop's
        path, where one commit confirms the whole transaction.

        The same steps, written once per batch instead of once per record: the
        producer, the converters and the used topics are looked up once, a
        None key or value skips its converter (every converter maps None to None),
        a built-in converter's C encoder (:func:`fast_encoder`) is called
        directly, and ``produce`` gets positional arguments only (keyword arguments
        cost confluent-kafka about as much as the produce itself); a record with no
        Kafka partition, timestamp or headers gets ``produce(topic, value, key)``.
        Whatever the fast path cannot take goes through :meth:`_convert`, the
        converters' full contract.
        """
        produce = self.producer.produce
        key_fast, value_fast = self._key_fast, self._value_fast
        key_converter = self.key_converter.from_connect
        value_converter = self.value_converter.from_connect
        used = self.used_topics
        for record in records:
            topic = record.topic
            if type(topic) is not str or topic not in used:
                self._use_topic(topic)
            key, value = record.key, record.value
            try:
                if key is not None:
                    key = (key_fast(key) if key_fast and record.key_schema is None
                           else key_converter(topic, record.key_schema, key))
                if value is not None:
                    value = (value_fast(value) if value_fast and record.value_schema is None
                             else value_converter(topic, record.value_schema, value))
                converted = True
            except Exception:
                converted = False
            if not converted:  # outside the handler: errors do not chain to the fast path's
                key, value = self._convert(record, topic)
            partition, timestamp, headers = record.partition, record.timestamp, record.headers
            try:
                if partition is None and timestamp is None and headers is None:
                    produce(topic, value, key)
                else:  # positional, in the order _produce documents
                    produce(topic, value, key, -1 if partition is None else partition, None,
                            None, timestamp or 0, headers)
                continue
            except BufferError:
                pass  # _produce waits for room
            except Exception as e:
                raise translate_kafka_error(e, f"produce to {topic!r} by task {self.label}") from e
            self._produce(record, topic, value, key, None)

    def _produce(self, record: SourceRecord, topic: str, value: bytes | None,
                 key: bytes | None, on_delivery: DeliveryCallback | None) -> None:
        """Step 3 with every field of the record; waits out a full queue."""
        partition = record.partition if record.partition is not None else -1
        timestamp = record.timestamp or 0
        while True:
            try:
                # Positional, in confluent-kafka's order: topic, value, key, partition,
                # callback, on_delivery (an alias, read only when callback is not
                # given at all, so the callback goes first), timestamp, headers.
                self.producer.produce(topic, value, key, partition, on_delivery, None,
                                      timestamp, record.headers)
                return
            except BufferError:
                self.producer.poll(QUEUE_FULL_BACKOFF_S)
            except Exception as e:
                raise translate_kafka_error(e, f"produce to {topic!r} by task {self.label}") from e

    def _convert(self, record: SourceRecord, topic: str) -> tuple[bytes | None, bytes | None]:
        """Step 2: (key, value) as bytes; any converter error becomes DataException.

        A key or value without a schema that is a dataclass instance gets its
        derived schema and becomes a Struct first (:func:`~connect_runtime.api.schema.infer`).
        """
        try:
            key = None if record.key is None else self.key_converter.from_connect(
                topic, *_with_schema(record.key_schema, record.key))
            value = None if record.value is None else self.value_converter.from_connect(
                topic, *_with_schema(record.value_schema, record.value))
        except DataException:
            raise
        except Exception as e:
            raise DataException(f"Task {self.label} could not convert a record for topic "
                                f"{topic!r}: {e}") from e
        return key, value

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

    def _use_topic(self, topic: Any) -> None:
        """Step 1 for a topic not in ``used_topics``: check it once ever, then add it."""
        if type(topic) is not str or topic not in self._checked_topics:
            self._check_topic(topic)
        self.used_topics.add(topic)

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


def _with_schema(schema: Schema | None, value: Any) -> tuple[Schema | None, Any]:
    return (schema, value) if schema is not None else infer(value)
