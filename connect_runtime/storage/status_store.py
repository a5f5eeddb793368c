"""Connector and task statuses on the status topic, in Kafka Connect's format.

Keys and values::

    status-connector-<connector>
    status-task-<connector>-<task>
        {"state":"RUNNING","trace":null,"worker_id":"host:8083","generation":3,
         "version":"0.1.0"}
        or null (a tombstone): the status is deleted

* ``version`` (Connect 4.x, KIP-891) is the connector's or task's ``version()``;
  null or absent (records of older workers) when unknown.
* ``generation`` orders assignments, as Connect's (its group generation): here
  the later of two config-topic offsets, the commit of the task configs and the
  writing leader's election (:func:`status_generation`). A reconfiguration and
  a new leader both make it grow, so a new leader's UNASSIGNED replaces the
  RUNNING of the instance its predecessor ran (next rule), and a zombie
  leader's late UNASSIGNED does not replace its successor's RUNNING.

* A connector name may contain '-', so a task key is split at its *last* '-'.
* A tombstone for a connector's key removes that connector's task statuses too
  (what Connect's reader does), and writing state DESTROYED writes a tombstone.
* An UNASSIGNED task status from the same or an older generation does not
  replace a RUNNING one: during rebalances a worker may report a task it gave
  up after another worker already reported it running (Connect's rule).
* A status that says what its writer does with an instance (RUNNING, PAUSED,
  RESTARTING, UNASSIGNED), written by another worker before the current
  leader's election, is not true any more: that worker lost the cluster and
  its instances. The herder's reads show it as UNASSIGNED on the current
  leader (:func:`as_seen_under_leader`) until the leader writes its own.
* Writes read their own writes: ``put_*`` updates the local view at once, and
  records of the same key older than our write are then ignored when the
  background reader reaches them, so the view never goes back in time.
* Malformed records are skipped with a warning.

Active topics (KIP-558), one record per topic a connector's tasks produced to::

    status-topic-<topic>:connector-<connector>
        {"topic":{"name":"orders","connector":"c","task":0,"discoverTimestamp":1700000000000}}
        or null: the topic is no longer recorded as active (a reset, or the
        connector was deleted)

* A topic name cannot contain ':' (Kafka allows ``[a-zA-Z0-9._-]``), so a key
  splits at its first ':'; the connector is what follows ``:connector-``.
* Topic records are independent of status records: a connector's status
  tombstone leaves them (Connect writes a tombstone per topic on deletion).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
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
TOPIC_STATUS_SEPARATOR = ":connector-"


@dataclass(frozen=True)
class StatusRecord:
    """One connector or task status as stored in the status topic."""

    state: str
    worker_id: str
    trace: str | None = None
    generation: int = 0
    version: str | None = None


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
    """Connect's value: state, trace (null if none), worker_id, generation, version (null
    if unknown), in that order."""
    return orjson.dumps({"state": record.state, "trace": record.trace,
                         "worker_id": record.worker_id, "generation": record.generation,
                         "version": record.version})


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
    version = data.get("version")
    if version is not None and not isinstance(version, str):
        raise DataException(f"status version is not a string: {value[:200]!r}")
    return StatusRecord(state, worker, trace, generation, version)


# States that describe what the writing worker does with an instance; FAILED (why
# the last instance ended) and STOPPED (a target state) stay true whoever wrote them.
_HELD_STATES = frozenset({"RUNNING", "PAUSED", "RESTARTING", "UNASSIGNED"})


def status_generation(config_generation: int, leader_epoch: int) -> int:
    """The ``generation`` a leader writes in a status: the later of the task configs'
    commit (``config_generation``) and its own election (``leader_epoch``, its
    ``leader`` record's offset). Both are offsets of the config topic's one
    partition, so the larger is the later event."""
    return max(config_generation, leader_epoch)


def as_seen_under_leader(record: StatusRecord, leader_worker_id: str | None,
                         leader_epoch: int) -> StatusRecord:
    """What a status means now that ``leader_worker_id`` leads since ``leader_epoch``.

    Only the leader runs connector instances and tasks. A status in which another
    worker says what it does with an instance (RUNNING, PAUSED, RESTARTING,
    UNASSIGNED), written before this leader's election (a smaller generation),
    describes an instance that is gone with that worker's leadership: it reads
    as UNASSIGNED on the leader, which holds the task until its new instance
    reports. Anything else is returned as is: the leader's own statuses, FAILED
    and STOPPED, and every status while no leader is known.
    """
    if (leader_worker_id is None or record.worker_id == leader_worker_id
            or record.state not in _HELD_STATES or record.generation >= leader_epoch):
        return record
    return StatusRecord("UNASSIGNED", leader_worker_id, None, record.generation)


def _state_name(state: object) -> str:
    name = state.value if isinstance(state, Enum) else state
    if name not in STATES:
        raise ValueError(f"unknown status state {state!r}; expected one of {sorted(STATES)}")
    return str(name)


# ----- active topics (KIP-558)

@dataclass(frozen=True)
class TopicStatus:
    """A topic a connector's task produced to, and when (ms since the epoch) it was
    first recorded as active."""

    topic: str
    connector: str
    task: int
    discover_timestamp: int


def topic_key(topic: str, connector: str) -> str:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}"


def parse_topic_key(key: str) -> tuple[str, str] | None:
    """``(topic, connector)`` from ``status-topic-<topic>:connector-<connector>``, or None."""
    topic, sep, rest = key[len(TOPIC_STATUS_PREFIX):].partition(":")
    connector_prefix = TOPIC_STATUS_SEPARATOR[1:]
    if not sep or not topic or not rest.startswith(connector_prefix):
        return None
    connector = rest[len(connector_prefix):]
    return (topic, connector) if connector else None


def serialize_topic_status(status: TopicStatus) -> bytes:
    """Connect's value: ``{"topic": {name, connector, task, discoverTimestamp}}``."""
    return orjson.dumps({"topic": {"name": status.topic, "connector": status.connector,
                                   "task": status.task,
                                   "discoverTimestamp": status.discover_timestamp}})


def parse_topic_status(value: bytes) -> TopicStatus:
    """A TopicStatus from a value; DataException if it is not Connect's format."""
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError as e:
        raise DataException(f"topic status value is not JSON: {value[:200]!r}") from e
    inner = data.get("topic") if isinstance(data, dict) else None
    if not isinstance(inner, dict):
        raise DataException(f"topic status value has no 'topic' object: {value[:200]!r}")
    name, connector = inner.get("name"), inner.get("connector")
    task, discovered = inner.get("task"), inner.get("discoverTimestamp")
    if not isinstance(name, str) or not isinstance(connector, str):
        raise DataException(f"topic status value has no name/connector: {value[:200]!r}")
    # bool is an int in Python; a JSON true is not a task number.
    if not isinstance(task, int) or not isinstance(discovered, int) \
            or isinstance(task, bool) or isinstance(discovered, bool):
        raise DataException(
            f"topic status value has no integer task/discoverTimestamp: {value[:200]!r}")
    return TopicStatus(name, connector, task, discovered)


class StatusStore:
    """Reads and writes the status topic; a local view answers the REST API.

    Lifecycle: :meth:`start` (reads to the end once), then reads and writes,
    then :meth:`stop`. ``put_*``/``delete_*`` block until the write is
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
        self._topics: dict[str, dict[str, TopicStatus]] = {}  # connector -> topic -> status
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
                      generation: int = 0, version: str | None = None) -> None:
        self._put(connector_key(name), StatusRecord(state, worker_id, trace, generation, version))

    def put_task(self, connector: str, task: int, state: str, worker_id: str,
                 trace: str | None = None, generation: int = 0,
                 version: str | None = None) -> None:
        self._put(task_key(connector, task),
                  StatusRecord(state, worker_id, trace, generation, version))

    def delete_connector(self, name: str, task_count: int) -> None:
        """Tombstone the connector's status and the statuses of tasks 0..task_count-1."""
        keys = [connector_key(name)] + [task_key(name, t) for t in range(task_count)]
        self._write([(k, None) for k in keys])

    def _put(self, key: str, record: StatusRecord) -> None:
        name = _state_name(record.state)
        value = None if name == DESTROYED else serialize_status(replace(record, state=name))
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

    # ----- active topics (KIP-558)

    def active_topics(self, connector: str) -> dict[str, TopicStatus]:
        """The topics recorded as active for ``connector``, by name (empty if none)."""
        with self._lock:
            return dict(self._topics.get(connector, {}))

    def is_active_topic(self, connector: str, topic: str) -> bool:
        """Whether ``topic`` is recorded as active for ``connector``: a dict lookup,
        cheap enough to call for every topic a task reports."""
        with self._lock:
            return topic in self._topics.get(connector, {})

    def topic_connectors(self) -> set[str]:
        """Connectors with at least one active topic recorded."""
        with self._lock:
            return set(self._topics)

    def put_topic(self, status: TopicStatus) -> None:
        """Record ``status.topic`` as active for ``status.connector``."""
        self._write([(topic_key(status.topic, status.connector),
                      serialize_topic_status(status))])

    def delete_topics(self, connector: str) -> list[str]:
        """Tombstone every active topic of ``connector`` in the view; returns their names."""
        topics = sorted(self.active_topics(connector))
        if topics:
            self._write([(topic_key(t, connector), None) for t in topics])
        return topics

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
        elif key.startswith(TOPIC_STATUS_PREFIX):
            self._apply_topic(key, value)
        else:
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

    def _apply_topic(self, key: str, value: bytes | None) -> None:
        names = parse_topic_key(key)
        if names is None:
            log.warning("Skipping topic status record with malformed key %r", key)
            return
        topic, connector = names
        if value is None:
            topics = self._topics.get(connector)
            if topics is not None:
                topics.pop(topic, None)
                if not topics:
                    del self._topics[connector]
            return
        try:
            status = parse_topic_status(value)
        except DataException as e:
            log.warning("Skipping topic status record %s: %s", key, e)
            return
        self._topics.setdefault(connector, {})[topic] = status

    @staticmethod
    def _parse(what: str, value: bytes) -> StatusRecord | None:
        try:
            return parse_status(value)
        except DataException as e:
            log.warning("Skipping status record for %s: %s", what, e)
            return None

