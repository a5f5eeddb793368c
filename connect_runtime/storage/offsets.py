"""Source offsets in Kafka, in Kafka Connect's format, and KIP-618's views of them.

Format (Connect's internal JSON converter, schemas disabled)::

    key   = ["<connector>", {<source partition>}]     e.g. ["src",{"file":"a.txt"}]
    value = {<source offset>}  or null (a tombstone: the partition has no offset)

Invariants:

* Source partitions and offsets are flat ``dict[str, str | int | float | bool |
  None]``; anything else is rejected with :class:`InvalidOffsetException`
  before it is written (ints must fit in 64 bits, floats must be finite: JSON
  and Java cannot carry anything else faithfully).
* The serialized key is the identity of a source partition: it decides the
  Kafka partition (murmur2) and what compaction keeps. :func:`serialize_key`
  is canonical (map keys sorted), and keys read back are re-serialized
  canonically, so a partition written with its fields in another order (by
  the Java runtime, say) is still the same partition here.
* A reader never fails on garbage: records whose key or value is not in the
  format above are skipped with a warning.
* Reads follow KIP-618 "Offset reads" (see :mod:`connect_runtime.kafka.log`): an
  open transaction on the offsets topic makes a read wait, never return early.

Combined view (KIP-618 "Smooth migration"): with a per-connector offsets topic,
a partition's offset comes from the connector's topic if that topic has one,
else from the worker's global topic. As in Kafka Connect, a tombstone removes a
partition from the view of the topic it is written to; it does not hide the
global topic's offset. That is why Connect writes a tombstone to the global
topic *before* committing it to the connector's topic (KAFKA-15018): a task loop
that commits tombstones should ``submit`` them to the :class:`GlobalOffsetMirror`
and ``flush`` it first.
"""

from __future__ import annotations

import heapq
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import (
    DataException,
    InvalidOffsetException,
)
from connect_runtime.kafka.clients import ClientSettings, create_admin, create_producer
from connect_runtime.kafka.log import KafkaBasedLog, read_topic_to_end

if TYPE_CHECKING:
    from connect_runtime.api.record import SourcePartition
    from connect_runtime.config.worker_config import WorkerConfig

log = logging.getLogger(__name__)

Primitive = str | int | float | bool | None
OffsetMap = dict[str, Primitive]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_READ_POLL_TIMEOUT = 0.05


# --------------------------------------------------------------------------- formats


def validate_partition_or_offset(value: object, what: str) -> None:
    """Raise InvalidOffsetException unless ``value`` is a flat ``dict[str, primitive]``.

    ``what`` is "partition" or "offset" and leads the message, which names the
    offending key and its Python type so a connector author can find it.
    """
    if not isinstance(value, Mapping):
        raise InvalidOffsetException(
            f"Source {what} must be a dict of str to str/int/float/bool/None, "
            f"but got a {type(value).__name__}: {value!r}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidOffsetException(
                f"Source {what} keys must be str, but key {key!r} is a {type(key).__name__}")
        _check_primitive(what, key, item)


def _check_primitive(what: str, key: str, item: object) -> None:
    if item is None or isinstance(item, str | bool):
        return
    if isinstance(item, int):
        if not _INT64_MIN <= item <= _INT64_MAX:
            raise InvalidOffsetException(
                f"Source {what} key {key!r} holds the int {item}, outside the 64-bit range "
                f"that JSON readers (and Kafka Connect) support")
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidOffsetException(
                f"Source {what} key {key!r} holds the float {item}, which JSON cannot represent")
        return
    raise InvalidOffsetException(
        f"Source {what} key {key!r} holds a {type(item).__name__} ({item!r}); source "
        f"{what}s may only hold str, int, float, bool or None values")


def serialize_key(connector: str, partition: Mapping[str, Primitive]) -> bytes:
    """``["<connector>", {partition}]`` as canonical JSON (map keys sorted)."""
    validate_partition_or_offset(partition, "partition")
    return orjson.dumps([connector, dict(partition)], option=orjson.OPT_SORT_KEYS)


def serialize_value(offset: Mapping[str, Primitive] | None) -> bytes | None:
    """``{offset}`` as JSON, or None (a tombstone) for None."""
    if offset is None:
        return None
    validate_partition_or_offset(offset, "offset")
    return orjson.dumps(dict(offset))


def deserialize_key(data: bytes | None) -> tuple[str, OffsetMap]:
    """``(connector, partition)`` from a key; DataException if it is not Connect's format."""
    if data is None:
        raise DataException("Offset key is null")
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DataException(f"Offset key is not JSON: {data[:200]!r}") from e
    if not (isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[0], str)):
        raise DataException(f"Offset key is not [connector, partition]: {data[:200]!r}")
    connector, partition = decoded
    try:
        validate_partition_or_offset(partition, "partition")
    except InvalidOffsetException as e:
        raise DataException(f"Offset key {data[:200]!r} has an invalid partition: {e}") from e
    return connector, partition


def deserialize_value(data: bytes | None) -> OffsetMap | None:
    """The offset dict, or None for a tombstone; DataException for anything else."""
    if data is None:
        return None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DataException(f"Offset value is not JSON: {data[:200]!r}") from e
    try:
        validate_partition_or_offset(decoded, "offset")
    except InvalidOffsetException as e:
        raise DataException(f"Offset value {data[:200]!r} is invalid: {e}") from e
    return dict(decoded)


# --------------------------------------------------------------------------- views


@dataclass(frozen=True)
class OffsetEntry:
    """The committed offset of one source partition of one connector."""

    connector: str
    partition: OffsetMap
    offset: OffsetMap


OffsetView = dict[bytes, OffsetEntry]
"""Live offsets keyed by the canonical serialized key, ``serialize_key(connector, partition)``.
Tombstoned partitions are absent."""


class OffsetViewBuilder:
    """Applies offsets-topic records in order: later records win, tombstones remove."""

    def __init__(self, connector: str | None = None) -> None:
        self._connector = connector
        self.by_connector: dict[str, OffsetView] = {}

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        """Apply one record; garbage is skipped with a warning (never raises DataException)."""
        try:
            connector, source_partition = deserialize_key(key)
            if self._connector is not None and connector != self._connector:
                return
            source_offset = deserialize_value(value)
        except DataException as e:
            log.warning("Skipping offsets record at partition %d offset %d: %s",
                        partition, offset, e)
            return
        view = self.by_connector.setdefault(connector, {})
        canonical = orjson.dumps([connector, source_partition], option=orjson.OPT_SORT_KEYS)
        if source_offset is None:
            view.pop(canonical, None)
        else:
            view[canonical] = OffsetEntry(connector, source_partition, source_offset)

    def view(self, connector: str | None = None) -> OffsetView:
        """A copy of the view of ``connector`` (default: the builder's), or of all connectors."""
        name = connector if connector is not None else self._connector
        if name is not None:
            return dict(self.by_connector.get(name, {}))
        return {k: e for view in self.by_connector.values() for k, e in view.items()}


def combine_offsets(global_view: Mapping[bytes, OffsetEntry],
                    connector_view: Mapping[bytes, OffsetEntry]) -> OffsetView:
    """KIP-618's combined view: the connector topic's offset wins per partition.

    Both views have tombstones applied already, so a partition tombstoned in the
    connector's topic falls back to the global topic, as in Connect's
    ``ConnectorOffsetBackingStore.get`` (see the module doc).
    """
    combined = dict(global_view)
    combined.update(connector_view)
    return combined


def to_rest_offsets(view: Mapping[bytes, OffsetEntry]) -> list[dict[str, Any]]:
    """``[{"partition": {...}, "offset": {...}}, ...]`` (Connect's REST shape), in key order."""
    return [{"partition": dict(e.partition), "offset": dict(e.offset)}
            for _, e in sorted(view.items())]


# --------------------------------------------------------------------------- reads


def read_offsets(
    consumer_conf: Mapping[str, Any],
    admin: AdminClient,
    topic: str,
    connector: str | None,
    timeout: float,
) -> OffsetView:
    """Read ``topic`` to its end and return the live offsets (of ``connector``, or all).

    End offsets are listed READ_UNCOMMITTED, then a fresh assign-only consumer
    reads with read_committed until its position reaches them on every
    partition: an open transaction makes this wait (KafkaTimeoutError after
    ``timeout``) rather than return a view that misses a commit in flight.
    ConnectError if the topic does not exist.
    """
    builder = OffsetViewBuilder(connector)
    read_topic_to_end(consumer_conf, admin, topic, builder.apply, timeout,
                      client_id=f"connect-runtime-offsets-reader-{topic}")
    return builder.view()


@dataclass(frozen=True)
class OffsetSource:
    """An offsets topic and how to read it: consumer config and admin client of its cluster."""

    consumer_config: Mapping[str, Any]
    admin: AdminClient
    topic: str

    @classmethod
    def of(cls, bootstrap_servers: str, topic: str,
           consumer_overrides: Mapping[str, Any] | None = None,
           admin_overrides: Mapping[str, Any] | None = None) -> OffsetSource:
        clients = ClientSettings.of(bootstrap_servers, None, consumer_overrides, admin_overrides)
        return cls(clients.consumer_config(), create_admin(clients.admin_config()), topic)

    def read(self, connector: str | None, timeout: float) -> OffsetView:
        return read_offsets(self.consumer_config, self.admin, self.topic, connector, timeout)


def read_combined_offsets(
    connector: str,
    global_source: OffsetSource | None,
    connector_source: OffsetSource | None,
    timeout: float,
) -> OffsetView:
    """The KIP-618 combined view of ``connector``: global topic, overridden by its own topic."""
    if global_source is None and connector_source is None:
        raise ValueError("at least one offsets topic is required")
    deadline = time.monotonic() + timeout
    global_view = global_source.read(connector, timeout) if global_source else {}
    connector_view = (connector_source.read(connector, max(0.0, deadline - time.monotonic()))
                      if connector_source else {})
    return combine_offsets(global_view, connector_view)


class TaskOffsetStorageReader:
    """A task's :class:`~connect_runtime.api.task.OffsetStorageReader` over a snapshot.

    Constructing it reads the combined view once (the worker's global offsets
    topic, plus ``connector_topic`` if the connector has its own, on
    ``connector_bootstrap_servers`` or else the same cluster); that is when a
    task starts. Later commits are not seen. Returned dicts are copies.
    """

    def __init__(
        self,
        connector: str,
        bootstrap_servers: str,
        global_topic: str | None,
        connector_topic: str | None = None,
        *,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        connector_bootstrap_servers: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        admins: dict[str, AdminClient] = {}  # one per cluster

        def source(servers: str, topic: str | None) -> OffsetSource | None:
            if not topic:
                return None
            clients = ClientSettings.of(servers, None, consumer_overrides, admin_overrides)
            if servers not in admins:
                admins[servers] = create_admin(clients.admin_config())
            return OffsetSource(clients.consumer_config(), admins[servers], topic)

        global_source = source(bootstrap_servers, global_topic)
        own = source(connector_bootstrap_servers or bootstrap_servers, connector_topic)
        self._init(connector, read_combined_offsets(connector, global_source, own, timeout))

    def _init(self, connector: str, view: Mapping[bytes, OffsetEntry]) -> None:
        self.connector = connector
        self._view = dict(view)

    @classmethod
    def from_view(
        cls, connector: str, view: Mapping[bytes, OffsetEntry]
    ) -> TaskOffsetStorageReader:
        """A reader over an already-read view (no Kafka access)."""
        reader = cls.__new__(cls)
        reader._init(connector, view)
        return reader

    def offset(self, partition: SourcePartition) -> dict[str, object] | None:
        """The committed offset of ``partition`` or None; InvalidOffsetException if the
        partition is not a flat dict of primitives."""
        entry = self._view.get(serialize_key(self.connector, partition))
        return dict(entry.offset) if entry is not None else None

    def offsets(
        self, partitions: Iterable[SourcePartition]
    ) -> list[tuple[SourcePartition, dict[str, object] | None]]:
        return [(p, self.offset(p)) for p in partitions]


# --------------------------------------------------------------------------- mirroring


class GlobalOffsetMirror:
    """Copies committed per-connector offsets to the worker's global offsets topic.

    KIP-618: after a task commits offsets to its connector's own offsets topic,
    they are also written to the global topic with a non-transactional producer,
    so a downgrade or a switch back to the global topic loses nothing.

    Contract:

    * :meth:`submit` never blocks and never raises because of Kafka: records are
      queued and written by a background thread with an idempotent producer.
    * Failed writes are retried indefinitely with exponential backoff. Only the
      newest value of a key is ever retried, so a retry cannot overwrite a newer
      offset with an older one.
    * :meth:`flush` waits until every submitted key's newest value is written.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        producer_overrides: Mapping[str, Any] | None = None,
        *,
        max_backoff: float = 10.0,
    ) -> None:
        self.topic = topic
        self._producer_config = ClientSettings.of(bootstrap_servers,
                                                  producer_overrides).producer_config()
        self._client_id = f"connect-runtime-offset-mirror-{topic}"
        self._producer = self._new_producer()
        self._max_backoff = max_backoff
        self._cond = threading.Condition()
        self._latest: dict[bytes, tuple[int, bytes | None]] = {}  # unconfirmed newest values
        self._ready: deque[bytes] = deque()
        self._queued: set[bytes] = set()
        self._retries: list[tuple[float, bytes]] = []  # heap of (due time, key)
        self._seq = 0
        self._failures = 0
        self._reset_producer = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"offset-mirror-{topic}",
                                        daemon=True)
        self._thread.start()

    def _new_producer(self) -> Producer:
        return create_producer(self._producer_config, client_id=self._client_id)

    def submit(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Queue ``(serialized key, serialized value or None)`` pairs for the global topic."""
        with self._cond:
            for key, value in records:
                self._seq += 1
                self._latest[key] = (self._seq, value)
                self._enqueue(key)
            self._cond.notify_all()

    def _enqueue(self, key: bytes) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)

    def pending(self) -> int:
        """Keys whose newest value is not yet confirmed written."""
        with self._cond:
            return len(self._latest)

    def flush(self, timeout: float) -> bool:
        """True once everything submitted so far is written; False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._latest, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Flush for up to ``timeout``, then stop. Unwritten offsets are logged and dropped."""
        deadline = time.monotonic() + timeout
        flushed = self.flush(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(max(0.1, deadline - time.monotonic()))
        if not flushed:
            log.warning("Closing offset mirror to %s with %d offsets not written",
                        self.topic, self.pending())
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._producer.flush(0)
        except (KafkaException, RuntimeError) as e:
            log.debug("Closing mirror producer: %s", e)

    # ----- the mirror thread

    def _run(self) -> None:
        while True:
            batch = self._take(0.05 if len(self._producer) else 0.5)
            if batch is None:
                return
            for key, seq, value in batch:
                self._send(key, seq, value)
            self._producer.poll(0.05 if len(self._producer) else 0)
            if self._reset_producer:
                self._replace_producer()

    def _take(self, wait: float) -> list[tuple[bytes, int, bytes | None]] | None:
        """Keys due for (re)sending with their newest values; None when stopping."""
        with self._cond:
            if self._stopping:
                return None
            if not self._ready and not self._due_retries():
                if self._retries:
                    wait = min(wait, max(0.0, self._retries[0][0] - time.monotonic()))
                self._cond.wait(wait)
                self._due_retries()
            batch = []
            while self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                if key in self._latest:
                    seq, value = self._latest[key]
                    batch.append((key, seq, value))
            return batch

    def _due_retries(self) -> bool:
        now = time.monotonic()
        moved = False
        while self._retries and self._retries[0][0] <= now:
            _, key = heapq.heappop(self._retries)
            if key in self._latest:
                self._enqueue(key)
                moved = True
        return moved

    def _send(self, key: bytes, seq: int, value: bytes | None) -> None:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            self._on_delivery(key, seq, err)

        while True:
            try:
                self._producer.produce(self.topic, key=key, value=value, on_delivery=on_delivery)
                return
            except BufferError:
                # librdkafka's local queue is full: serve deliveries to make room.
                self._producer.poll(0.1)
            except KafkaException as e:
                self._on_delivery(key, seq, e.args[0] if e.args else e)
                return

    def _on_delivery(self, key: bytes, seq: int, err: object | None) -> None:
        """Delivery report for (key, seq); ``err`` None means written."""
        with self._cond:
            newest = self._latest.get(key)
            if err is None:
                self._failures = 0
                if newest is not None and newest[0] == seq:
                    del self._latest[key]
                    self._cond.notify_all()
                return
            self._failures += 1
            backoff = min(self._max_backoff, 0.1 * 2 ** min(self._failures, 10))
            log.warning("Failed to mirror an offset to %s (retrying in %.1fs): %s",
                        self.topic, backoff, err)
            if isinstance(err, KafkaError) and err.fatal():
                self._reset_producer = True
            if newest is not None and newest[0] == seq:
                heapq.heappush(self._retries, (time.monotonic() + backoff, key))

    def _replace_producer(self) -> None:
        """An idempotent producer that hit a fatal error is unusable: start a new one."""
        self._reset_producer = False
        old, self._producer = self._producer, self._new_producer()
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.flush(0)
        except (KafkaException, RuntimeError) as e:
            log.debug("Discarding failed mirror producer: %s", e)
        with self._cond:
            for key in self._latest:
                self._enqueue(key)


# --------------------------------------------------------------------------- worker side


class OffsetStore:
    """The worker's view of source offsets, for REST ``GET /connectors/{name}/offsets``.

    Keeps a :class:`KafkaBasedLog` on the global offsets topic; a per-connector
    topic is read on demand. Every query first reads to the end (read_committed,
    KIP-618 rules), then returns the combined view with tombstoned partitions
    omitted.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        admin: AdminClient | None = None,
    ) -> None:
        clients = ClientSettings.of(bootstrap_servers, None, consumer_overrides, admin_overrides)
        self.topic = topic
        self._consumer_config = clients.consumer_config()
        self._admin = admin or create_admin(clients.admin_config())
        self._lock = threading.Lock()
        self._builder = OffsetViewBuilder()
        self._log = KafkaBasedLog(topic, self._consumer_config, self._admin, self._apply,
                                  client_id=f"connect-runtime-offsets-{topic}")

    @classmethod
    def from_worker_config(cls, config: WorkerConfig,
                           admin: AdminClient | None = None) -> OffsetStore:
        clients = ClientSettings.from_worker_config(config)
        return cls(clients.bootstrap_servers, str(config.values["offset.storage.topic"]),
                   consumer_overrides=clients.consumer_overrides,
                   admin_overrides=clients.admin_overrides, admin=admin)

    def _apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        with self._lock:
            self._builder.apply(key, value, partition, offset)

    def start(self, timeout: float = 60.0) -> None:
        self._log.start(timeout)

    def stop(self) -> None:
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def global_view(self, connector: str) -> OffsetView:
        """The connector's offsets in the global topic as last read (no read to end)."""
        with self._lock:
            return self._builder.view(connector)

    def connector_offsets(
        self,
        connector: str,
        connector_topic: str | OffsetSource | None = None,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """Connect's REST offsets list for ``connector`` from the combined view.

        ``connector_topic``: the connector's own offsets topic, on the worker's
        cluster (a name) or elsewhere (an :class:`OffsetSource`); None if it
        uses the global topic only.
        """
        deadline = time.monotonic() + timeout
        self.read_to_end(timeout)
        view = self.global_view(connector)
        source: OffsetSource | None
        if not isinstance(connector_topic, str):
            source = connector_topic
        elif connector_topic == self.topic:
            source = None  # same cluster, same name: it *is* the global topic
        else:
            source = OffsetSource(self._consumer_config, self._admin, connector_topic)
        if source is not None:
            remaining = max(0.0, deadline - time.monotonic())
            view = combine_offsets(view, source.read(connector, remaining))
        return to_rest_offsets(view)
