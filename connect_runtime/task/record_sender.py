"""Producing a task's records and source offsets: the one send path of both loops.

This module owns every produce a task makes. Both task loops (exactly-once in
:mod:`~connect_runtime.task.exactly_once_loop`, at-least-once in
:mod:`~connect_runtime.task.at_least_once_loop`) hand what ``poll`` returned to
:class:`RecordSender`, through one dispatch
(:func:`~connect_runtime.task.batches.dispatch`): a run of records to
:meth:`RecordSender.send_records` (no delivery callbacks: the exactly-once
path) or record by record to :meth:`RecordSender.send` (with a callback, or
where each record needs the loop's attention), each
:class:`~connect_runtime.api.record.RecordBatch` to
:meth:`RecordSender.send_record_batch`; and they write source offsets with
:meth:`RecordSender.produce_offsets`. What differs between the loops is only
what happens around it: a transaction, or per-record delivery tracking.

Contract, per record (a row of a RecordBatch is a record), in this order:

0. With transforms (``transforms=...``), the record runs through the chain; a
   dataclass key or value first becomes a Struct of its derived schema, so
   transforms see Connect data. A transform or predicate may drop the record:
   it is then not produced, and its source offset still advances (the loops
   track offsets from the polled records, not the produced ones).
1. The topic is checked the first time it is seen: a non-empty string, not one
   of the worker's internal topics (config, status, offsets: a task writing
   there could corrupt the cluster's state), created if missing when
   ``topic.creation.default.*`` is set (KIP-158), and otherwise required to
   exist: a missing topic raises :class:`DataException` naming it and the
   fixes, before anything is produced (without the check, librdkafka fails
   the whole transaction later with "_INCONSISTENT: message(s) failed delivery").
2. Key, value and headers are converted with the task's converters (a None key
   or value stays None without a call; header values that are bytes pass
   through); a converter error becomes :class:`DataException` naming the task
   and topic.
3. The record is produced, in poll order; a full librdkafka queue is waited
   out (never spun on) and any other client error is translated, naming the
   topic and the task, both by
   :func:`~connect_runtime.kafka.produce.produce_waiting`, the one place for
   either (the offsets mirror uses it too).

Steps 0 and 2 run each stage through the task's
:class:`~connect_runtime.task.error_handler.ErrorHandler` (``errors.*``): with
``errors.tolerance=all`` a record failing a stage is dropped like a filtered
one. A failure in step 1 or 3 always fails the task.

How the steps run is a strategy chosen once per run of records or per
RecordBatch, never per record, because the per-record cost is the task's
throughput:

* **processed**: with transforms or non-default ``errors.*``, record by
  record, each stage under the error handler (:meth:`RecordSender._send_processed`).
* **records**: a run of records in one loop, with the converters' C encoders
  (:func:`~connect_runtime.converters.fast_encoder`) and positional
  ``produce`` calls; a record with no Kafka partition, timestamp or headers
  gets ``produce(topic, value, key)``.
* **columns**: a RecordBatch, one encoder per column, each row encoded and
  produced in one step, by one of :func:`_values_only`, :func:`_keyed` and
  :func:`_every_field` (which columns the batch has decides).

A fast path calls ``producer.produce`` directly in its loop and leaves the
loop only on an exception (a ``try`` costs nothing until then): a record whose
``produce`` raised goes to :meth:`RecordSender._produce`, which hands it and
the exception to :func:`produce_waiting` (a full queue is waited out, anything
else translated at once); so does a row of a batch refused for a full queue,
while a row its column's encoder refused (or any other error) goes alone
through the converters' full contract. Unless that raises, the loop goes on
after it, in order. A new fast path is a new strategy here, with the same rule.

Nothing here blocks on the broker except the queue-full wait and step 1's
first-use check of a topic (one metadata request per topic per task).

:attr:`RecordSender.used_topics` collects the topics records were produced to
since its owner last cleared it (KIP-558 active topics): the per-record check of
step 1 looks a topic up in it, so collecting them costs nothing per record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from connect_runtime.api.schema import infer
from connect_runtime.converters import SimpleHeaderConverter, fast_encoder
from connect_runtime.errors import DataException, ServiceException, translate_kafka_error
from connect_runtime.kafka.produce import produce_waiting
from connect_runtime.task.batches import expand, row
from connect_runtime.task.error_handler import ErrorHandler, RecordSkipped

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from connect_runtime.api.record import RecordBatch, SourceRecord
    from connect_runtime.api.schema import Schema
    from connect_runtime.converters import Converter, HeaderConverter

DeliveryCallback = Callable[[Any, Any], None]
"""``on_delivery(err, msg)`` as confluent-kafka calls it, from ``poll``/``flush``."""

Encoder = Callable[[Any], "bytes | None"]
"""Step 2 for one column: a Connect value (never None) to its bytes."""

T = TypeVar("T")


class TransformationChain(Protocol):
    """What step 0 needs of :class:`connect_runtime.transforms.TransformationChain`."""

    def apply(self, record: SourceRecord,
              run: Callable[[str, Callable[[], T]], T] | None = None) -> SourceRecord | None:
        """The transformed record, or None if a transform dropped it; every stage
        runs as ``run(stage_label, stage)``."""
        ...

    def close(self) -> None:
        """Close every transform and predicate (once, when the task ends)."""
        ...


# How long step 1 waits for a topic's metadata; a live broker answers in milliseconds.
TOPIC_METADATA_TIMEOUT_S = 10.0


class RecordSender:
    """Sends one task's records with its producer (see the module doc for the contract).

    ``transforms`` (None: no chain), ``header_converter`` (None: header values
    must be ``str``, ``bytes`` or None, written as UTF-8 and as is; startup
    always gives one, by default Connect's SimpleHeaderConverter) and
    ``errors`` (None: Connect's defaults, every stage error fails the task)
    are optional; without them the fast paths (the module doc's strategies) run.
    """

    def __init__(
        self,
        *,
        label: str,
        producer: Producer,
        forbidden_topics: frozenset[str],
        key_converter: Converter,
        value_converter: Converter,
        create_topic: Callable[[str], None] | None = None,
        header_converter: HeaderConverter | None = None,
        transforms: TransformationChain | None = None,
        errors: ErrorHandler | None = None,
    ) -> None:
        self.label = label
        self.producer = producer
        self.forbidden_topics = forbidden_topics
        self.key_converter = key_converter
        self.value_converter = value_converter
        self.header_converter = header_converter
        # SimpleHeaderConverter (Connect's default) writes a str as its UTF-8 bytes,
        # which is what the producer does with a str: such headers skip the call.
        self._str_headers_as_is = (header_converter is None
                                   or type(header_converter) is SimpleHeaderConverter)
        self.create_topic = create_topic
        self.transforms = transforms
        self.errors = errors if errors is not None else ErrorHandler(label=label)
        # Records go one by one through steps 0-3 with the error handler when a
        # chain or a non-default errors.* setting needs it; else the fast path.
        self._processed = transforms is not None or not self.errors.passive
        # The class the error handler names for each conversion stage, found once.
        self._stage_classes = {stage: _class_name(converter) for stage, converter in (
            ("KEY_CONVERTER", key_converter), ("VALUE_CONVERTER", value_converter),
            ("HEADER_CONVERTER", header_converter))}
        self._key_fast = fast_encoder(key_converter)
        self._value_fast = fast_encoder(value_converter)
        self._checked_topics: set[str] = set()
        # Topics produced to since the owner last cleared this set (it may clear
        # it any time on the loop's thread); each was checked (step 1) first.
        self.used_topics: set[str] = set()

    def send(self, record: SourceRecord, on_delivery: DeliveryCallback | None) -> bool:
        """Steps 0-3 of the module doc. False if the record was dropped (by a
        transform, or skipped by error tolerance): then nothing was produced and
        ``on_delivery`` will not be called. Raises DataException or KafkaClientError."""
        if self._processed:
            return self._send_processed(record, on_delivery)
        topic = record.topic
        if type(topic) is not str or topic not in self.used_topics:
            self._use_topic(topic)
        key, value = self._convert_counted(record, topic)
        self._produce_record(record, topic, value, key, on_delivery)
        return True

    def send_records(self, records: Sequence[SourceRecord]) -> int:
        """``send(record, None)`` for each record, in order: the exactly-once loop's
        path, where one commit confirms the whole transaction. Returns how many
        were produced (the others were dropped).

        The records strategy (unless processed): the same steps written once per
        run instead of once per record. The producer, the converters and the
        used topics are looked up once, a None key or value skips its converter
        (every converter maps None to None), a built-in converter's C encoder
        (:func:`fast_encoder`) is called directly for schemaless data, and
        ``produce`` gets positional arguments only (keyword arguments cost
        confluent-kafka about as much as the produce itself). A key or value
        the encoder refuses goes through :meth:`_convert_counted`, the
        converters' full contract; a record ``produce`` did not queue, through
        :meth:`_produce`.
        """
        if self._processed:
            return sum(self._send_processed(record, None) for record in records)
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
                key, value = self._convert_counted(record, topic)
            partition, timestamp, headers = record.partition, record.timestamp, record.headers
            try:
                if partition is None and timestamp is None and headers is None:
                    produce(topic, value, key)
                else:  # positional, in produce_waiting's order
                    if headers is not None:
                        headers = self._convert_headers(topic, headers)
                    produce(topic, value, key, -1 if partition is None else partition, None,
                            None, timestamp or 0, headers)
                continue
            except DataException:  # a header the converter refused
                raise
            except Exception as e:
                refused = e
            # Outside the handler, as above: a full queue is waited out, any other
            # error translated.
            self._produce(topic, value, key, -1 if partition is None else partition, None,
                          timestamp or 0, headers, refused)
        return len(records)

    def send_record_batch(self, batch: RecordBatch) -> int:
        """Steps 0-3 for every row of a :class:`RecordBatch`, in order, without
        delivery callbacks (the exactly-once path). Returns how many rows were
        produced.

        ``batch`` has passed :func:`~connect_runtime.task.batches.check` (the
        loop checks it before anything of it is sent). With transforms or error
        handling its rows go through ``send`` as records; otherwise the topic
        is checked once, each column gets one encoder for all its rows
        (:meth:`_column_encoder`), and a column strategy (:data:`ColumnStrategy`)
        encodes and produces each row in one C-level step: encoding a whole
        column first would keep every encoded value alive until the last is
        produced, and fresh memory for each costs more than the encoding
        (orjson: ~250 ns a value when each is freed at once, 1.3-2.6 µs when a
        column of them is kept).
        """
        n = len(batch.values)
        if not n:
            return 0
        if self._processed:
            return sum(self._send_processed(record, None) for record in expand(batch))
        topic = batch.topic
        if type(topic) is not str or topic not in self.used_topics:
            self._use_topic(topic)
        values, keys, timestamps = batch.values, batch.keys, batch.timestamps
        headers = None if batch.headers is None else [
            None if h is None else self._convert_headers(topic, h) for h in batch.headers]
        columns: Columns = (
            topic,
            values, self._column_encoder(self.value_converter, self._value_fast, topic,
                                         batch.value_schema, values, "value"),
            keys, None if keys is None else self._column_encoder(
                self.key_converter, self._key_fast, topic, batch.key_schema, keys, "key"),
            -1 if batch.partition is None else batch.partition,
            timestamps, headers)
        # The strategy: the fewest produce arguments the batch's columns need.
        strategy: ColumnStrategy = (
            (_values_only if keys is None else _keyed)
            if batch.partition is None and timestamps is None and headers is None
            else _every_field)
        produce = self.producer.produce
        start = 0
        while True:
            start, error = strategy(produce, columns, start)
            if error is None:
                return n
            if isinstance(error, BufferError):  # the row again, once there is room
                self._produce(topic, *_row(columns, start), error)
            elif isinstance(error, DataException):
                # The full contract refused the row and counted the failure: trying
                # it again would count it twice.
                raise error
            else:
                # A value the column's fast encoder refused (or a client error): the
                # row alone by the converters' full contract.
                record = row(batch, start)
                key, value = self._convert_counted(record, topic)
                self._produce_record(record, topic, value, key, None)
            start += 1

    def _column_encoder(self, converter: Converter, fast: Any, topic: str,
                        schema: Schema | None, column: Sequence[Any],
                        what: str) -> Encoder:
        """Step 2 for one column: the built-in converter's C encoder when the column
        has no schema, no None and a first value it takes (a column is one kind
        of data as a rule); otherwise the converter's full contract, value by value."""
        if schema is None and fast is not None:
            try:
                if None not in column:
                    fast(column[0])
                    return cast("Encoder", fast)
            except Exception:  # the full contract below
                pass

        def encode(data: Any) -> bytes | None:
            return None if data is None else self._encode_counted(converter, topic, schema,
                                                                  data, what)
        return encode

    def _encode_counted(self, converter: Converter, topic: str, schema: Schema | None,
                        data: Any, what: str) -> bytes | None:
        try:
            return self._convert_one(converter, topic, schema, data, what)
        except DataException:
            self.errors.count_failure()
            raise

    def _send_processed(self, record: SourceRecord,
                        on_delivery: DeliveryCallback | None) -> bool:
        """Steps 0-3 for one record, each stage of 0 and 2 under the error handler."""
        errors = self.errors
        result = self._transform(record) if self.transforms is not None else record
        if result is None:
            return False
        transformed = result
        topic = transformed.topic
        if type(topic) is not str or topic not in self.used_topics:
            self._use_topic(topic)
        try:
            key = None if transformed.key is None else errors.execute(
                "KEY_CONVERTER", self._stage_classes["KEY_CONVERTER"], transformed,
                lambda: self._convert_one(self.key_converter, topic, transformed.key_schema,
                                          transformed.key, "key"))
            value = None if transformed.value is None else errors.execute(
                "VALUE_CONVERTER", self._stage_classes["VALUE_CONVERTER"], transformed,
                lambda: self._convert_one(self.value_converter, topic,
                                          transformed.value_schema, transformed.value, "value"))
            headers = transformed.headers
            if headers is not None:
                headers = errors.execute(
                    "HEADER_CONVERTER", self._stage_classes["HEADER_CONVERTER"], transformed,
                    lambda: self._convert_headers(topic, transformed.headers or []))
        except RecordSkipped:
            return False
        if headers is not transformed.headers:
            transformed = dataclasses.replace(transformed, headers=headers)
        self._produce_record(transformed, topic, value, key, on_delivery)
        return True

    def _transform(self, record: SourceRecord) -> SourceRecord | None:
        """Step 0: the chain, each stage under the error handler; None if dropped."""
        assert self.transforms is not None
        key_schema, key = _with_schema(record.key_schema, record.key)
        value_schema, value = _with_schema(record.value_schema, record.value)
        if key is not record.key or value is not record.value:
            record = dataclasses.replace(record, key=key, key_schema=key_schema, value=value,
                                         value_schema=value_schema)
        errors = self.errors
        try:
            return self.transforms.apply(
                record, run=lambda stage, thunk: errors.execute(
                    "TRANSFORMATION", stage, record, thunk))
        except RecordSkipped:
            return None

    def _produce_record(self, record: SourceRecord, topic: str, value: bytes | None,
                        key: bytes | None, on_delivery: DeliveryCallback | None) -> None:
        """Step 3 with every field of the record (its headers converted here unless
        the processed path converted them)."""
        partition = record.partition if record.partition is not None else -1
        timestamp = record.timestamp or 0
        headers = record.headers
        if headers is not None and not self._processed:
            headers = self._convert_headers(topic, headers)
        try:
            self.producer.produce(topic, value, key, partition, on_delivery, None,
                                  timestamp, headers)
            return
        except Exception as e:
            refused = e
        # Outside the handler, so a translated error chains to the client's alone.
        self._produce(topic, value, key, partition, on_delivery, timestamp, headers, refused)

    def _produce(self, topic: str, value: bytes | None, key: bytes | None, partition: int,
                 on_delivery: DeliveryCallback | None, timestamp: int,
                 headers: list[tuple[str, Any]] | None, refused: Exception) -> None:
        """Step 3 for a record whose ``produce`` raised ``refused``, where every path's
        refused record ends: a full queue is waited out, any other client error
        becomes a KafkaClientError naming the topic and the task
        (:func:`produce_waiting`)."""
        produce_waiting(self.producer, topic, value, key, partition, on_delivery, timestamp,
                        headers, context=f"produce to {topic!r} by task {self.label}",
                        refused=refused)

    def _convert_counted(self, record: SourceRecord,
                         topic: str) -> tuple[bytes | None, bytes | None]:
        """Step 2 for key and value by the converters' full contract, on the paths
        where a failure fails the task: bytes; any converter error becomes
        DataException, counted first, as Connect's operator counts it (task
        error metrics).

        A key or value without a schema that is a dataclass instance gets its
        derived schema and becomes a Struct first (:func:`~connect_runtime.api.schema.infer`).
        """
        try:
            key = None if record.key is None else self._convert_one(
                self.key_converter, topic, record.key_schema, record.key, "key")
            value = None if record.value is None else self._convert_one(
                self.value_converter, topic, record.value_schema, record.value, "value")
        except DataException:
            self.errors.count_failure()
            raise
        return key, value

    def _convert_one(self, converter: Converter, topic: str, schema: Schema | None,
                     data: Any, what: str) -> bytes | None:
        schema, data = _with_schema(schema, data)
        try:
            return converter.from_connect(topic, schema, data)
        except (DataException, ServiceException):  # a service's failure stays one
            raise
        except Exception as e:
            raise DataException(f"Task {self.label} could not convert a record's {what} for "
                                f"topic {topic!r}: {e}") from e

    def _convert_headers(self, topic: str, headers: Any) -> list[tuple[str, Any]]:
        """Step 2 for headers: bytes and None pass through, other values go through
        the header converter (without one, ``str`` is written as UTF-8)."""
        if not isinstance(headers, list):
            raise DataException(f"Task {self.label} returned a record for topic {topic!r} whose "
                                f"headers are a {type(headers).__name__}; headers are a list "
                                "of (key, value) pairs")
        if self._str_headers_as_is and all(
                type(pair) is tuple and len(pair) == 2 and type(pair[0]) is str
                and (pair[1] is None or type(pair[1]) in (str, bytes)) for pair in headers):
            return headers
        converter = self.header_converter
        out: list[tuple[str, Any]] = []
        for pair in headers:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise DataException(f"Task {self.label} returned a record for topic {topic!r} "
                                    f"with header {pair!r}; a header is a (str, value) pair")
            key, value = pair
            if value is None or type(value) is bytes or (
                    type(value) is str and self._str_headers_as_is):
                out.append(pair)
            elif converter is not None:
                try:
                    out.append((key, converter.from_connect_header(topic, key, None, value)))
                except DataException:
                    raise
                except Exception as e:
                    raise DataException(f"Task {self.label} could not convert header {key!r} "
                                        f"of a record for topic {topic!r}: {e}") from e
            else:
                raise DataException(f"Task {self.label} returned a record for topic {topic!r} "
                                    f"with header {key!r} of type {type(value).__name__}; "
                                    "without a header converter, header values are str or "
                                    "bytes")
        return out

    def produce_offsets(self, topic: str, records: Iterable[tuple[bytes, bytes | None]],
                        on_delivery: DeliveryCallback | None = None) -> None:
        """Produce serialized ``(key, value or None)`` offset records to ``topic``,
        in order; a failure raises KafkaClientError naming the offsets topic."""
        context = f"write offsets to {topic!r} for task {self.label}"
        for key, value in records:
            produce_waiting(self.producer, topic, value, key, -1, on_delivery, context=context)

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
        else:
            self._require_topic(topic)
        self._checked_topics.add(topic)

    def _require_topic(self, topic: str) -> None:
        """DataException naming ``topic`` and the fixes if the broker does not have it."""
        from confluent_kafka import KafkaError

        try:
            metadata = self.producer.list_topics(topic, timeout=TOPIC_METADATA_TIMEOUT_S)
        except Exception as e:
            raise translate_kafka_error(
                e, f"metadata for topic {topic!r} (task {self.label})") from e
        found = metadata.topics.get(topic)
        error = found.error if found is not None else None
        if found is None or (error is not None
                             and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
            raise DataException(
                f"Task {self.label} returned a record for topic {topic!r}, which does not "
                "exist. Create the topic, or let the connector create it by setting "
                "topic.creation.default.replication.factor and "
                "topic.creation.default.partitions (KIP-158), or enable "
                "auto.create.topics.enable on the brokers")


def _with_schema(schema: Schema | None, value: Any) -> tuple[Schema | None, Any]:
    """``(schema, value)`` as given, or, without a schema, what :func:`infer` derives
    (a dataclass instance becomes a Struct of its schema)."""
    return (schema, value) if schema is not None else infer(value)


def _class_name(obj: object) -> str:
    return "" if obj is None else f"{type(obj).__module__}.{type(obj).__qualname__}"


Columns = tuple[
    str,  # topic
    Sequence[Any], Encoder,  # values and their encoder
    Sequence[Any] | None, Encoder | None,  # keys and theirs (both None, or neither)
    int,  # Kafka partition; -1: the partitioner chooses
    Sequence[int | None] | None,  # timestamps
    list[list[tuple[str, Any]] | None] | None,  # headers, converted
]
"""A checked RecordBatch as the column strategies read it (step 2 decided once per
batch). A plain tuple: built once per batch, unpacked once per strategy call,
both a few nanoseconds (a NamedTuple built by keyword costs ~0.6 µs a batch)."""


def _row(columns: Columns, i: int) -> tuple[bytes | None, bytes | None, int, None, int,
                                            list[tuple[str, Any]] | None]:
    """Row ``i`` as the strategies produce it: value, key, partition, no callback,
    timestamp, headers (for the row a full queue refused)."""
    _, values, value_enc, keys, key_enc, part, timestamps, headers = columns
    return (value_enc(values[i]),
            None if key_enc is None or keys is None else key_enc(keys[i]),
            part, None, (timestamps[i] or 0) if timestamps is not None else 0,
            None if headers is None else headers[i])


ColumnStrategy = Callable[[Callable[..., None], Columns, int], tuple[int, Exception | None]]
"""``strategy(produce, columns, start)`` produces rows ``start`` on, in order, and
returns ``(len, None)``, or ``(i, error)`` for the first row ``i`` that raised
(nothing of row ``i`` was queued). Each loop has no attribute lookups and no
branches its columns do not need; a failure costs nothing until it happens."""


def _values_only(produce: Callable[..., None], columns: Columns,
                 start: int) -> tuple[int, Exception | None]:
    """Values alone: ``produce(topic, value)``."""
    topic, values, value_enc, _, _, _, _, _ = columns
    i = start
    try:
        for i in range(start, len(values)):
            produce(topic, value_enc(values[i]))
    except Exception as e:
        return i, e
    return len(values), None


def _keyed(produce: Callable[..., None], columns: Columns,
           start: int) -> tuple[int, Exception | None]:
    """Keys and values: ``produce(topic, value, key)``."""
    topic, values, value_enc, keys, key_enc, _, _, _ = columns
    assert keys is not None and key_enc is not None
    i = start
    try:
        for i in range(start, len(values)):
            produce(topic, value_enc(values[i]), key_enc(keys[i]))
    except Exception as e:
        return i, e
    return len(values), None


def _every_field(produce: Callable[..., None], columns: Columns,
                 start: int) -> tuple[int, Exception | None]:
    """A Kafka partition, timestamps or headers: every argument, positional, in
    :func:`produce_waiting`'s order."""
    topic, values, value_enc, keys, key_enc, part, timestamps, headers = columns
    i = start
    try:
        for i in range(start, len(values)):
            produce(topic, value_enc(values[i]),
                    None if key_enc is None or keys is None else key_enc(keys[i]),
                    part, None, None,
                    (timestamps[i] or 0) if timestamps is not None else 0,
                    None if headers is None else headers[i])
    except Exception as e:
        return i, e
    return len(values), None
