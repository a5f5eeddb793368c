"""Connector and task statuses on the status topic, in Kafka Connect's format.

Keys and values::

    status-connector-<connector>
    status-task-<connector>-<task>
        {"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":3}
        or null (a tombstone): the status is deleted

* A connector name may contain '-', so a task key is split at its *last* '-'.
* A tombstone for a connector's key removes that connector's task statuses too
  (what Connect's reader does), and writing state DESTROYED writes a tombstone.
* An UNASSIGNED task status from the same or an older generation does not
  replace a RUNNING one: during rebalances a worker may report a task it gave
  up after another worker already reported it running (Connect's rule).
* Writes read their own writes: ``put_*`` updates the local view at once, and
  records of the same key older than our write are then ignored when the
  background reader reaches them, so the view never goes back in time.
* Records this runtime does not model (Connect's ``status-topic-*`` topic
  tracking) are ignored; malformed records are skipped with a warning.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import orjson
from confluent_kafka import KafkaError, KafkaException, Message
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import DataException, KafkaTimeoutError, translate_kafka_error
from connect_runtime.kafka.clients import ClientSettings, create_admin, create_producer
from connect_runtime.kafka.log import KafkaBasedLog

if TYPE_CHECKING:
    from connect_runtime.config.worker_config import WorkerConfig

log = logging.getLogger(__name__)

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
STATES = frozenset(
    {"UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING", "DESTROYED"})
DESTROYED = "DESTROYED"


@dataclass(frozen=True)
class StatusRecord:
    """One connector or task status as stored in the status topic."""

    state: str
    worker_id: str
    trace: str | None = None
    generation: int = 0


def connector_key(connector: str) -> str:
    return CONNECTOR_STATUS_PREFIX + connector


def task_key(connector: str, task: int) -> str:
    return f"{TASK_STATUS_PREFIX}{connector}-{task}"


def parse_task_key(key: str) -> tuple[str, int] | None:
    """``(connector, task)`` from ``status-task-<connector>-<task>``, or None if malformed."""
    connector, sep, task = key[len(TASK_STATUS_PREFIX):].rpartition("-")
    if not sep or not connector or not task.isdigit():
        return None
    return connector, int(task)


def serialize_status(record: StatusRecord) -> bytes:
    """Connect's value: state, trace (null if none), worker_id, generation, in that order."""
    return orjson.dumps({"state": record.state, "trace": record.trace,
                         "worker_id": record.worker_id, "generation": record.generation})


def parse_status(value: bytes) -> StatusRecord:
    """A StatusRecord from a value; DataException if it is not Connect's format."""
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as e:
        raise DataException(f"status value is not JSON: {value[:200]!r}") from e
    if not isinstance(data, dict):
        raise DataException(f"status value is not a JSON object: {value[:200]!r}")
    state, worker, trace, generation = (data.get("state"), data.get("worker_id"),
                                        data.get("trace"), data.get("generation"))
    if state not in STATES or not isinstance(worker, str):
        raise DataException(f"status value has no valid state/worker_id: {value[:200]!r}")
    if not isinstance(generation, int) or isinstance(generation, bool):
        raise DataException(f"status value has no integer generation: {value[:200]!r}")
    if trace is not None and not isinstance(trace, str):
        raise DataException(f"status trace is not a string: {value[:200]!r}")
    return StatusRecord(state, worker, trace, generation)


def _state_name(state: object) -> str:
    name = state.value if isinstance(state, Enum) else state
    if name not in STATES:
        raise ValueError(f"unknown status state {state!r}; expected one of {sorted(STATES)}")
    return str(name)


class StatusStore:
    """Reads and writes the status topic; a local view answers the REST API.

    Lifecycle: :meth:`start` (reads to the end once), then reads and writes,
    then :meth:`stop`. ``put_*``/``delete_connector`` block until the write is
    acknowledged (at most ``write_timeout``) and raise a translated
    :class:`~connect_runtime.errors.KafkaClientError` if it fails.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        producer_overrides: Mapping[str, Any] | None = None,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        admin: AdminClient | None = None,
        write_timeout: float = 30.0,
    ) -> None:
        clients = ClientSettings.of(bootstrap_servers, producer_overrides, consumer_overrides,
                                    admin_overrides)
        self.topic = topic
        self._write_timeout = write_timeout
        self._admin = admin or create_admin(clients.admin_config())
        self._producer = create_producer(clients.producer_config(),
                                         client_id=f"connect-runtime-status-{topic}")
        self._lock = threading.Lock()
        self._connectors: dict[str, StatusRecord] = {}
        self._tasks: dict[str, dict[int, StatusRecord]] = {}
        # key -> offset of our latest write of it, until the reader gets there.
        self._own_writes: dict[str, int] = {}
        self._log = KafkaBasedLog(topic, clients.consumer_config(), self._admin, self._on_record,
                                  client_id=f"connect-runtime-status-{topic}")

    @classmethod
    def from_worker_config(cls, config: WorkerConfig,
                           admin: AdminClient | None = None) -> StatusStore:
        clients = ClientSettings.from_worker_config(config)
        return cls(clients.bootstrap_servers, str(config.values["status.storage.topic"]),
                   producer_overrides=clients.producer_overrides,
                   consumer_overrides=clients.consumer_overrides,
                   admin_overrides=clients.admin_overrides, admin=admin)

    def start(self, timeout: float = 60.0) -> None:
        self._log.start(timeout)

    def stop(self) -> None:
        self._log.stop()
        remaining = self._producer.flush(min(self._write_timeout, 5.0))
        if remaining:
            log.warning("Stopping status store with %d status writes not acknowledged", remaining)

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    # ----- reads (local view)

    def connector_status(self, name: str) -> StatusRecord | None:
        with self._lock:
            return self._connectors.get(name)

    def task_status(self, connector: str, task: int) -> StatusRecord | None:
        with self._lock:
            return self._tasks.get(connector, {}).get(task)

    def task_statuses(self, connector: str) -> dict[int, StatusRecord]:
        with self._lock:
            return dict(sorted(self._tasks.get(connector, {}).items()))

    def connectors(self) -> set[str]:
        """Connectors with a connector status."""
        with self._lock:
            return set(self._connectors)

    # ----- writes

    def put_connector(self, name: str, state: str, worker_id: str, trace: str | None = None,
                      generation: int = 0) -> None:
        self._put(connector_key(name), state, worker_id, trace, generation)

    def put_task(self, connector: str, task: int, state: str, worker_id: str,
                 trace: str | None = None, generation: int = 0) -> None:
        self._put(task_key(connector, task), state, worker_id, trace, generation)

    def delete_connector(self, name: str, task_count: int) -> None:
        """Tombstone the connector's status and the statuses of tasks 0..task_count-1."""
        keys = [connector_key(name)] + [task_key(name, t) for t in range(task_count)]
        self._write([(k, None) for k in keys])

    def _put(self, key: str, state: str, worker_id: str, trace: str | None,
             generation: int) -> None:
        name = _state_name(state)
        value = (None if name == DESTROYED
                 else serialize_status(StatusRecord(name, worker_id, trace, generation)))
        self._write([(key, value)])

    def _write(self, records: list[tuple[str, bytes | None]]) -> None:
        """Produce, wait for acknowledgement, then apply locally (read-your-writes)."""
        reports: list[tuple[KafkaError | None, Message]] = []

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            reports.append((err, msg))

        context = f"write status {', '.join(k for k, _ in records)} to {self.topic}"
        try:
            for key, value in records:
                self._producer.produce(self.topic, key=key.encode(), value=value,
                                       on_delivery=on_delivery)
            self._producer.flush(self._write_timeout)
        except KafkaException as e:
            raise translate_kafka_error(e, context) from e
        if len(reports) < len(records):
            raise KafkaTimeoutError(f"{context}: not acknowledged within {self._write_timeout}s")
        for err, _ in reports:
            if err is not None:
                raise translate_kafka_error(KafkaException(err), context)
        with self._lock:
            for _, msg in reports:
                key = (msg.key() or b"").decode()
                self._own_writes[key] = msg.offset() or 0
                self._apply(key, msg.value())

    # ----- the reader

    def _on_record(self, key: bytes | None, value: bytes | None, partition: int,
                   offset: int) -> None:
        if key is None:
            log.warning("Skipping status record without key at %s-%d@%d", self.topic,
                        partition, offset)
            return
        name = key.decode("utf-8", errors="replace")
        with self._lock:
            own = self._own_writes.get(name)
            if own is not None:
                if offset < own:
                    return  # older than a write we already applied locally
                del self._own_writes[name]
            self._apply(name, value)

    def _apply(self, key: str, value: bytes | None) -> None:
        """Apply one record to the view; caller holds the lock."""
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            self._apply_connector(key[len(CONNECTOR_STATUS_PREFIX):], value)
        elif key.startswith(TASK_STATUS_PREFIX):
            self._apply_task(key, value)
        elif not key.startswith(TOPIC_STATUS_PREFIX):
            log.warning("Skipping status record with unknown key %r", key)

    def _apply_connector(self, connector: str, value: bytes | None) -> None:
        if not connector:
            log.warning("Skipping connector status record with an empty connector name")
            return
        if value is None:
            self._connectors.pop(connector, None)
            self._tasks.pop(connector, None)
            return
        record = self._parse(connector, value)
        if record is not None:
            self._connectors[connector] = record

    def _apply_task(self, key: str, value: bytes | None) -> None:
        task_id = parse_task_key(key)
        if task_id is None:
            log.warning("Skipping task status record with malformed key %r", key)
            return
        connector, task = task_id
        tasks = self._tasks.setdefault(connector, {})
        if value is None:
            tasks.pop(task, None)
            return
        record = self._parse(key, value)
        if record is None:
            return
        current = tasks.get(task)
        if (record.state == "UNASSIGNED" and current is not None
                and current.state == "RUNNING" and current.generation >= record.generation):
            log.debug("Ignoring stale UNASSIGNED status of %s in favour of %s", key, current)
            return
        tasks[task] = record

    @staticmethod
    def _parse(what: str, value: bytes) -> StatusRecord | None:
        try:
            return parse_status(value)
        except DataException as e:
            log.warning("Skipping status record for %s: %s", what, e)
            return None

