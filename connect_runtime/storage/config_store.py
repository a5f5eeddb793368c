"""The config topic: connector configs, task configs and KIP-618 records, in Connect's format.

Records (one partition, compacted, read with read_committed)::

    connector-<name>      {"properties":{...}}                     null = connector deleted
    task-<name>-<n>       {"properties":{...}}                     buffered until the commit
    commit-<name>         {"tasks":N}                              applies the buffered configs
    target-state-<name>   {"state":"PAUSED","state.v2":"STOPPED"}  state.v2 wins when present
    tasks-fencing-<name>  {"task-count":N}                         KIP-618 task-count record
    session-key           {"key":<base64>,"algorithm":"HmacSHA256","creation-timestamp":<ms>}
    logger-cluster-<ns>   {"level":"DEBUG"}                        KIP-976, see on_logger_level
    leader                {"url":...,"worker_id":...}              not Connect's, see LEADER_KEY
    declared-connector-<n> {"file":...,"state":...}               not Connect's, see DECLARED_PREFIX

Semantics (Kafka Connect's ``KafkaConfigBackingStore``):

* Task configs are deferred: ``task-*`` records are buffered per connector and
  applied together when ``commit-<name>`` arrives, and only if the buffer holds
  tasks 0..N-1 (more is fine: compaction leaves stale higher ids). An
  incomplete set marks the connector inconsistent and is dropped with a warning.
  Either way the buffer is cleared, so the next commit needs a fresh full set.
* A commit record for a connector with no config (deleted, then compacted
  away) is ignored.
* ``pending_fencing``: a commit record was read after the latest task-count
  record (KIP-618 "Task count records"); a task-count record clears it.
* ``config_generation`` is the config-topic offset of the commit record that
  applied the current task configs: it only grows, and every worker and
  executor reading the topic computes the same number (a counter would differ
  once compaction removes old commit records).
* STOPPED is written as state "PAUSED" plus state.v2 "STOPPED", so workers
  that only know "state" pause the connector instead of failing.
* ``leader_epoch`` is the offset of the latest ``leader`` record: each
  election writes one, after fencing the previous leader, so it only grows and
  orders elections against each other and against ``config_generation``
  (offsets of the same partition). Task statuses use both (``status_store``).

Writes are leader-only (KIP-618 "Leader access to config topic"): a
transactional producer with ``transactional.id = connect-cluster-<group.id>``,
one transaction per write. :meth:`ConfigStore.claim_write_privileges` calls
``init_transactions()``, which fences any other (zombie) leader; a fenced
store raises ProducerFencedError and must claim privileges again. Every write
reads the topic to the end before returning, so the next :meth:`snapshot`
includes it.

Any failed write drops the producer (Connect does the same): after a
failed batch an idempotent producer's sequence numbers have a gap that only a
new epoch closes (an abort is not enough: the next transaction fails with
OUT_OF_ORDER_SEQUENCE_NUMBER), and claiming again starts one. The config
writer claims again before its next write (cluster.config_writer). A record
larger than the producer may send (``message.max.bytes``) is refused before
the transaction begins, with the producer kept (RecordTooLargeException, a
400); one the broker refuses as too large is the same error, after the drop.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import (
    NotLeaderException,
    RecordTooLargeException,
    translate_kafka_error,
)
from connect_runtime.kafka.clients import ClientSettings, create_admin, create_producer
from connect_runtime.kafka.log import KafkaBasedLog, read_topic_to_end

if TYPE_CHECKING:
    from connect_runtime.config.worker_config import WorkerConfig

log = logging.getLogger(__name__)

CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_TASKS_PREFIX = "commit-"
TARGET_STATE_PREFIX = "target-state-"
TASK_COUNT_RECORD_PREFIX = "tasks-fencing-"
SESSION_KEY_KEY = "session-key"
# Not a Kafka Connect key (Connect spreads the leader's URL through group member
# metadata, which librdkafka does not expose): the elected leader writes its REST
# URL here with its fenced transactional producer, so a zombie cannot overwrite it.
LEADER_KEY = "leader"
# Not a Kafka Connect key: which connector file (standalone's command line or
# declared.connectors.dir) owns a connector. Written in the same transaction as the
# connector's config, so a new leader knows what a removed file owned and deletes
# it; connectors without one (created by REST) are never touched by the files.
# A Java worker reading the topic logs and skips it, as it does ``leader``.
DECLARED_PREFIX = "declared-connector-"
# KIP-976: a logger level every worker applies when it reads the record.
LOGGER_CLUSTER_PREFIX = "logger-cluster-"
# Written by Kafka Connect (KIP-745 restarts); not modelled here.
_IGNORED_PREFIXES = ("restart-connector-",)

STARTED, PAUSED, STOPPED = "STARTED", "PAUSED", "STOPPED"
TARGET_STATES = frozenset({STARTED, PAUSED, STOPPED})

Config = dict[str, Any]


# --------------------------------------------------------------------------- formats


def _json(value: object) -> bytes:
    return orjson.dumps(value)


def connector_record(props: Mapping[str, Any]) -> bytes:
    return _json({"properties": dict(props)})


def commit_record(task_count: int) -> bytes:
    return _json({"tasks": task_count})


def target_state_record(state: str) -> bytes:
    """Both fields: ``state`` for workers that predate STOPPED, ``state.v2`` for the rest."""
    if state not in TARGET_STATES:
        raise ValueError(f"target state must be one of {sorted(TARGET_STATES)}, not {state!r}")
    return _json({"state": PAUSED if state == STOPPED else state, "state.v2": state})


def task_count_record(task_count: int) -> bytes:
    return _json({"task-count": task_count})


def session_key_record(key: bytes, algorithm: str, creation_ms: int) -> bytes:
    return _json({"key": base64.b64encode(key).decode("ascii"), "algorithm": algorithm,
                  "creation-timestamp": creation_ms})


def logger_level_record(level: str) -> bytes:
    return _json({"level": level})


@dataclass(frozen=True)
class SessionKey:
    """KIP-507 session key for signing internal REST requests."""

    key: bytes
    algorithm: str
    creation_ms: int


# --------------------------------------------------------------------------- snapshot


@dataclass(frozen=True, slots=True)
class DeclaredOwner:
    """The connector file that owns a connector, and the target state it declares
    (None: the file leaves the state to REST)."""

    file: str
    state: str | None = None


@dataclass(frozen=True)
class ClusterConfigState:
    """An immutable view of the config topic up to ``offset`` (the next offset to read).

    Accessors return copies; mutating them does not change the snapshot.
    """

    offset: int = -1
    session_key: SessionKey | None = None
    leader_url: str | None = None
    leader_worker_id: str | None = None
    leader_epoch: int = -1
    """Offset of the latest ``leader`` record (-1: none): see the module docstring."""
    _connector_configs: Mapping[str, Config] = field(default_factory=dict)
    _target_states: Mapping[str, str] = field(default_factory=dict)
    _task_configs: Mapping[str, tuple[Config, ...]] = field(default_factory=dict)
    _task_count_records: Mapping[str, int] = field(default_factory=dict)
    _generations: Mapping[str, int] = field(default_factory=dict)
    _pending_fencing: frozenset[str] = frozenset()
    _inconsistent: frozenset[str] = frozenset()
    _declared: Mapping[str, DeclaredOwner] = field(default_factory=dict)

    def connectors(self) -> list[str]:
        return sorted(self._connector_configs)

    def contains(self, name: str) -> bool:
        return name in self._connector_configs

    def connector_config(self, name: str) -> Config | None:
        config = self._connector_configs.get(name)
        return dict(config) if config is not None else None

    def target_state(self, name: str) -> str:
        """STARTED, PAUSED or STOPPED; STARTED when none was ever written."""
        return self._target_states.get(name, STARTED)

    def task_configs(self, name: str) -> list[Config]:
        """The committed task configs, index = task id."""
        return [dict(c) for c in self._task_configs.get(name, ())]

    def task_count(self, name: str) -> int:
        return len(self._task_configs.get(name, ()))

    def task_count_record(self, name: str) -> int | None:
        """Task count of the latest ``tasks-fencing-<name>`` record, or None."""
        return self._task_count_records.get(name)

    def pending_fencing(self, name: str) -> bool:
        """True if task configs were committed after the latest task-count record."""
        return name in self._pending_fencing

    def config_generation(self, name: str) -> int:
        """Offset of the commit record of the current task configs; -1 if none."""
        return self._generations.get(name, -1)

    def inconsistent(self, name: str) -> bool:
        """True if the latest commit record found an incomplete set of task configs."""
        return name in self._inconsistent

    def declared_by(self, name: str) -> DeclaredOwner | None:
        """The connector file that owns ``name`` (see ``DECLARED_PREFIX``), or None."""
        return self._declared.get(name) if name in self._connector_configs else None

    def declared(self) -> dict[str, DeclaredOwner]:
        """Connector name -> owning file, for every existing connector a file owns."""
        return {n: o for n, o in self._declared.items() if n in self._connector_configs}


@dataclass
class _MutableState:
    """What the reader accumulates; only touched with the store's lock held."""

    offset: int = -1
    session_key: SessionKey | None = None
    leader_url: str | None = None
    leader_worker_id: str | None = None
    leader_epoch: int = -1
    connector_configs: dict[str, Config] = field(default_factory=dict)
    target_states: dict[str, str] = field(default_factory=dict)
    task_configs: dict[str, tuple[Config, ...]] = field(default_factory=dict)
    deferred: dict[str, dict[int, Config]] = field(default_factory=dict)
    task_count_records: dict[str, int] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    pending_fencing: set[str] = field(default_factory=set)
    inconsistent: set[str] = field(default_factory=set)
    declared: dict[str, DeclaredOwner] = field(default_factory=dict)

    def freeze(self) -> ClusterConfigState:
        return ClusterConfigState(
            offset=self.offset,
            session_key=self.session_key,
            leader_url=self.leader_url,
            leader_worker_id=self.leader_worker_id,
            leader_epoch=self.leader_epoch,
            _connector_configs=dict(self.connector_configs),
            _target_states=dict(self.target_states),
            _task_configs=dict(self.task_configs),
            _task_count_records=dict(self.task_count_records),
            _generations=dict(self.generations),
            _pending_fencing=frozenset(self.pending_fencing),
            _inconsistent=frozenset(self.inconsistent),
            _declared=dict(self.declared),
        )

    def remove_connector(self, name: str) -> None:
        self.connector_configs.pop(name, None)
        self.task_configs.pop(name, None)
        self.deferred.pop(name, None)
        self.inconsistent.discard(name)
        # Whoever deleted it (a Java worker too), a later connector of that name
        # is not the file's unless a new ownership record says so.
        self.declared.pop(name, None)


# --------------------------------------------------------------------------- listener


class ConfigUpdateListener(Protocol):
    """Told about changes read from the config topic, after the snapshot includes them.

    Called on the log's thread, only for records read after :meth:`ConfigStore.start`
    has caught up once; exceptions are logged, not propagated. Keep handlers short.
    """

    def on_connector_config_update(self, name: str) -> None: ...

    def on_connector_config_remove(self, name: str) -> None: ...

    def on_task_configs_update(self, name: str) -> None:
        """A commit record for ``name`` was read (its configs applied, or found inconsistent)."""
        ...

    def on_target_state_change(self, name: str) -> None: ...

    def on_task_count_record(self, name: str) -> None: ...

    def on_session_key_update(self) -> None: ...

    def on_logger_level(self, namespace: str, level: str) -> None:
        """A ``logger-cluster-<namespace>`` record (KIP-976); ``level`` is as written,
        unchecked. Records already in the topic at start are not replayed: as in
        Connect, a worker only applies cluster levels set while it runs."""
        ...


Notification = Callable[[ConfigUpdateListener], None]


# --------------------------------------------------------------------------- record processing


def _load_dict(what: str, value: bytes) -> dict[str, Any] | None:
    try:
        data = orjson.loads(value)
    except orjson.JSONDecodeError:
        log.error("Ignoring %s: value is not JSON: %r", what, value[:200])
        return None
    if not isinstance(data, dict):
        log.error("Ignoring %s: value is a %s, not a JSON object", what, type(data).__name__)
        return None
    return data


def _properties(what: str, value: bytes) -> Config | None:
    data = _load_dict(what, value)
    if data is None:
        return None
    props = data.get("properties")
    if not isinstance(props, dict):
        log.error("Ignoring %s: 'properties' is a %s, not an object", what, type(props).__name__)
        return None
    return props


def _int_field(what: str, value: bytes | None, name: str) -> int | None:
    if value is None:
        log.error("Ignoring %s: unexpected null value", what)
        return None
    data = _load_dict(what, value)
    if data is None:
        return None
    number = data.get(name)
    if not isinstance(number, int) or isinstance(number, bool):
        log.error("Ignoring %s: '%s' is %r, not an integer", what, name, number)
        return None
    return number


class _RecordProcessor:
    """Applies config-topic records to a :class:`_MutableState` (Connect's rules).

    Each ``process`` call returns the listener notification to send, if any,
    so the caller can send it after releasing its lock.
    """

    def __init__(self, state: _MutableState) -> None:
        self.state = state

    def process(self, key: str, value: bytes | None, offset: int) -> Notification | None:
        self.state.offset = offset + 1
        if key.startswith(TARGET_STATE_PREFIX):
            return self._target_state(key[len(TARGET_STATE_PREFIX):], value)
        if key.startswith(CONNECTOR_PREFIX):
            return self._connector(key[len(CONNECTOR_PREFIX):], value)
        if key.startswith(TASK_PREFIX):
            return self._task(key, value)
        if key.startswith(COMMIT_TASKS_PREFIX):
            return self._commit(key[len(COMMIT_TASKS_PREFIX):], value, offset)
        if key.startswith(TASK_COUNT_RECORD_PREFIX):
            return self._task_count(key[len(TASK_COUNT_RECORD_PREFIX):], value)
        if key == SESSION_KEY_KEY:
            return self._session_key(value)
        if key.startswith(LOGGER_CLUSTER_PREFIX):
            return self._logger_level(key[len(LOGGER_CLUSTER_PREFIX):], value)
        if key.startswith(DECLARED_PREFIX):
            return self._declared(key[len(DECLARED_PREFIX):], value)
        if key == LEADER_KEY:
            data = _load_dict("leader record", value) if value else None
            url = data.get("url") if data else None
            worker_id = data.get("worker_id") if data else None
            self.state.leader_url = url if isinstance(url, str) else None
            self.state.leader_worker_id = worker_id if isinstance(worker_id, str) else None
            self.state.leader_epoch = offset
            return lambda listener: listener.on_session_key_update()
        if not key.startswith(_IGNORED_PREFIXES):
            log.error("Discarding config record with unknown key %r", key)
        return None

    def _connector(self, name: str, value: bytes | None) -> Notification | None:
        if value is None:
            self.state.remove_connector(name)
            # Debug: every worker reads every tombstone (at startup too); the leader
            # that wrote it logs the lifecycle line (connector_deleted).
            log.debug("Connector %s was removed", name)
            return lambda listener: listener.on_connector_config_remove(name)
        props = _properties(f"config of connector {name}", value)
        if props is None:
            return None
        self.state.connector_configs[name] = props
        # Connectors created before target states existed start STARTED.
        self.state.target_states.setdefault(name, STARTED)
        return lambda listener: listener.on_connector_config_update(name)

    def _task(self, key: str, value: bytes | None) -> Notification | None:
        name, sep, task = key[len(TASK_PREFIX):].rpartition("-")
        if not sep or not name or not task.isdigit():
            log.error("Ignoring task config with malformed key %r", key)
            return None
        if value is None:
            log.error("Ignoring task config %s: unexpected null value", key)
            return None
        props = _properties(f"task config {key}", value)
        if props is not None:
            self.state.deferred.setdefault(name, {})[int(task)] = props
        return None

    def _commit(self, name: str, value: bytes | None, offset: int) -> Notification | None:
        state = self.state
        if name not in state.connector_configs:
            # Deleted connector whose config and tombstone were compacted away.
            state.remove_connector(name)
            log.debug("Ignoring task commit for unknown connector %s", name)
            return None
        count = _int_field(f"task commit of connector {name}", value, "tasks")
        if count is None:
            return None
        deferred = state.deferred.pop(name, {})
        if all(i in deferred for i in range(count)):
            state.task_configs[name] = tuple(deferred[i] for i in range(count))
            state.generations[name] = offset
            state.inconsistent.discard(name)
        else:
            log.warning("Connector %s: commit of %d task configs found only tasks %s (compacted "
                        "or partly written); keeping the previous task configs", name, count,
                        sorted(deferred))
            state.inconsistent.add(name)
        state.pending_fencing.add(name)
        return lambda listener: listener.on_task_configs_update(name)

    def _target_state(self, name: str, value: bytes | None) -> Notification | None:
        state = self.state
        if value is None:
            # Written with the connector's tombstone; the removal notifies.
            state.target_states.pop(name, None)
            if name in state.connector_configs:
                state.target_states[name] = STARTED
            return None
        data = _load_dict(f"target state of {name}", value)
        if data is None:
            return None
        target = data.get("state.v2")
        if not isinstance(target, str):
            target = data.get("state")
        if target not in TARGET_STATES:
            log.error("Ignoring invalid target state %r for connector %s", target, name)
            return None
        previous = state.target_states.get(name)
        state.target_states[name] = target
        if previous == target or name not in state.connector_configs:
            return None
        return lambda listener: listener.on_target_state_change(name)

    def _task_count(self, name: str, value: bytes | None) -> Notification | None:
        count = _int_field(f"task-count record of {name}", value, "task-count")
        if count is None:
            return None
        self.state.task_count_records[name] = count
        self.state.pending_fencing.discard(name)
        return lambda listener: listener.on_task_count_record(name)

    def _session_key(self, value: bytes | None) -> Notification | None:
        creation = _int_field("session key", value, "creation-timestamp")
        data = _load_dict("session key", value) if creation is not None and value else None
        if data is None or creation is None:
            return None
        key, algorithm = data.get("key"), data.get("algorithm")
        if not isinstance(key, str) or not isinstance(algorithm, str):
            log.error("Ignoring session key: 'key' and 'algorithm' must be strings")
            return None
        try:
            raw = base64.b64decode(key, validate=True)
        except binascii.Error:
            log.error("Ignoring session key: 'key' is not base64")
            return None
        self.state.session_key = SessionKey(raw, algorithm, creation)
        return lambda listener: listener.on_session_key_update()

    def _declared(self, name: str, value: bytes | None) -> Notification | None:
        data = _load_dict(f"declared connector {name}", value) if value else None
        file = data.get("file") if data else None
        state = data.get("state") if data else None
        if isinstance(file, str):
            self.state.declared[name] = DeclaredOwner(
                file, state if state in ("RUNNING", "PAUSED", "STOPPED") else None)
        else:
            self.state.declared.pop(name, None)
        return None

    def _logger_level(self, namespace: str, value: bytes | None) -> Notification | None:
        # No state: a logger level is an event, applied by whoever hears it.
        if value is None:
            log.error("Ignoring logging level for namespace %s: unexpected null value", namespace)
            return None
        data = _load_dict(f"logging level for namespace {namespace}", value)
        if data is None:
            return None
        level = data.get("level")
        if not isinstance(level, str):
            log.error("Ignoring logging level for namespace %s: 'level' is %r, not a string",
                      namespace, level)
            return None
        return lambda listener: listener.on_logger_level(namespace, level)


def read_config_snapshot(
    bootstrap_servers: str,
    topic: str,
    consumer_overrides: Mapping[str, Any] | None = None,
    *,
    admin_overrides: Mapping[str, Any] | None = None,
    admin: AdminClient | None = None,
    timeout: float = 60.0,
) -> ClusterConfigState:
    """Read the whole config topic once (read_committed, to the end offsets listed now).

    For processes that need a fresh view but not a running store, e.g. a task
    checking at startup that its generation is still current and fenced.
    KafkaTimeoutError if an open transaction keeps the read from the end.
    """
    clients = ClientSettings.of(bootstrap_servers, None, consumer_overrides, admin_overrides)
    state = _MutableState()
    processor = _RecordProcessor(state)

    def apply(key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        if key is not None:
            processor.process(key.decode("utf-8", errors="replace"), value, offset)

    read_topic_to_end(clients.consumer_config(), admin or create_admin(clients.admin_config()),
                      topic, apply, timeout, client_id=f"connect-runtime-config-reader-{topic}")
    return state.freeze()


# --------------------------------------------------------------------------- the store


class ConfigStore:
    """Reads the config topic into :class:`ClusterConfigState` snapshots; the leader writes it.

    Lifecycle: :meth:`start` (reads to the end once), :meth:`snapshot` /
    :meth:`read_to_end` at will, :meth:`claim_write_privileges` on becoming
    leader, writes, :meth:`stop`. A write without privileges raises
    NotLeaderException. Every write is one transaction, then a read to the end
    (at most ``timeout`` each). A failed write drops the privileges
    (:attr:`has_write_privileges` turns false), so the caller must claim them
    again; a record over ``message.max.bytes`` is refused before, keeping them.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        group_id: str,
        *,
        producer_overrides: Mapping[str, Any] | None = None,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        admin: AdminClient | None = None,
        listener: ConfigUpdateListener | None = None,
    ) -> None:
        clients = ClientSettings.of(bootstrap_servers, producer_overrides, consumer_overrides,
                                    admin_overrides)
        self.topic = topic
        self.transactional_id = f"connect-cluster-{group_id}"
        self._clients = clients
        self._admin = admin or create_admin(clients.admin_config())
        self._listener = listener
        self._lock = threading.Lock()
        self._state = _MutableState()
        self._processor = _RecordProcessor(self._state)
        self._started = False
        self._producer: Producer | None = None
        self._write_lock = threading.Lock()
        # librdkafka refuses a record whose size on the wire exceeds this.
        self._max_record_bytes = int(clients.producer_config().get(
            "message.max.bytes", LIBRDKAFKA_MESSAGE_MAX_BYTES))
        self._log = KafkaBasedLog(topic, clients.consumer_config(), self._admin, self._on_record,
                                  isolation_level="read_committed",
                                  client_id=f"connect-runtime-config-{topic}")

    @classmethod
    def from_worker_config(
        cls, config: WorkerConfig, *, admin: AdminClient | None = None,
        listener: ConfigUpdateListener | None = None,
    ) -> ConfigStore:
        clients = ClientSettings.from_worker_config(config)
        return cls(clients.bootstrap_servers, str(config.values["config.storage.topic"]),
                   config.group_id, producer_overrides=clients.producer_overrides,
                   consumer_overrides=clients.consumer_overrides,
                   admin_overrides=clients.admin_overrides, admin=admin, listener=listener)

    def set_listener(self, listener: ConfigUpdateListener | None) -> None:
        self._listener = listener

    # ----- reading

    def start(self, timeout: float = 60.0) -> None:
        self._log.start(timeout)
        self._started = True

    def stop(self) -> None:
        self.relinquish_write_privileges()
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def snapshot(self) -> ClusterConfigState:
        with self._lock:
            return self._state.freeze()

    def _on_record(self, key: bytes | None, value: bytes | None, partition: int,
                   offset: int) -> None:
        if key is None:
            log.error("Discarding config record without key at offset %d", offset)
            return
        with self._lock:
            notify = self._processor.process(key.decode("utf-8", errors="replace"), value, offset)
        listener = self._listener
        if notify is not None and listener is not None and self._started:
            try:
                notify(listener)
            except Exception:
                log.exception("Config update listener failed on record %r", key)

    # ----- write privileges

    @property
    def has_write_privileges(self) -> bool:
        return self._producer is not None

    def claim_write_privileges(self, timeout: float = 60.0) -> None:
        """Create the transactional producer and ``init_transactions()``, fencing zombies."""
        with self._write_lock:
            if self._producer is not None:
                return
            producer = create_producer(self._clients.producer_config(),
                                       transactional_id=self.transactional_id,
                                       client_id=f"connect-runtime-config-leader-{self.topic}")
            try:
                producer.init_transactions(timeout)
            except KafkaException as e:
                _discard(producer)
                raise translate_kafka_error(
                    e, f"claim write privileges on {self.topic} as {self.transactional_id}") from e
            self._producer = producer

    def relinquish_write_privileges(self) -> None:
        with self._write_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            _discard(producer)

    # ----- writes

    def put_connector_config(self, name: str, props: Mapping[str, Any],
                             target_state: str | None = None, timeout: float = 30.0, *,
                             declared_by: DeclaredOwner | None = None) -> None:
        """Write the connector's config and, if given, its target state and the file
        that declares it, in one transaction.

        The target state and the owner go first so the connector is never seen
        without them.
        """
        records = [] if target_state is None else [
            (TARGET_STATE_PREFIX + name, target_state_record(target_state))]
        if declared_by is not None:
            records.append((DECLARED_PREFIX + name, _json(
                {"file": declared_by.file, "state": declared_by.state})))
        records.append((CONNECTOR_PREFIX + name, connector_record(props)))
        self._write(records, timeout)

    def remove_connector_config(self, name: str, timeout: float = 30.0) -> None:
        """Tombstone the connector's config and target state (and its owning file's
        record, when a file declared it)."""
        records: list[tuple[str, bytes | None]] = [
            (CONNECTOR_PREFIX + name, None), (TARGET_STATE_PREFIX + name, None)]
        if name in self.snapshot().declared():
            records.append((DECLARED_PREFIX + name, None))
        self._write(records, timeout)

    def put_task_configs(self, name: str, configs: Sequence[Mapping[str, Any]],
                         timeout: float = 30.0) -> None:
        """Write ``task-<name>-<i>`` for every config, then ``commit-<name>``: one transaction."""
        records: list[tuple[str, bytes | None]] = [
            (f"{TASK_PREFIX}{name}-{i}", connector_record(c)) for i, c in enumerate(configs)]
        records.append((COMMIT_TASKS_PREFIX + name, commit_record(len(configs))))
        self._write(records, timeout)

    def put_target_state(self, name: str, state: str, timeout: float = 30.0) -> None:
        self._write([(TARGET_STATE_PREFIX + name, target_state_record(state))], timeout)

    def put_task_count_record(self, name: str, count: int, timeout: float = 30.0) -> None:
        self._write([(TASK_COUNT_RECORD_PREFIX + name, task_count_record(count))], timeout)

    def put_leader(self, url: str, worker_id: str, timeout: float = 30.0) -> None:
        """Publish the leader's REST URL (see ``LEADER_KEY``)."""
        self._write([(LEADER_KEY, _json({"url": url, "worker_id": worker_id}))], timeout)

    def put_session_key(self, key: bytes, algorithm: str, creation_ms: int,
                        timeout: float = 30.0) -> None:
        self._write([(SESSION_KEY_KEY, session_key_record(key, algorithm, creation_ms))],
                    timeout)

    def put_logger_level(self, namespace: str, level: str, timeout: float = 30.0) -> None:
        """KIP-976: ask every worker, this one included, to set ``namespace`` to ``level``."""
        self._write([(LOGGER_CLUSTER_PREFIX + namespace, logger_level_record(level))], timeout)

    def _write(self, records: Sequence[tuple[str, bytes | None]], timeout: float) -> None:
        context = f"write {', '.join(k for k, _ in records)} to config topic {self.topic}"
        self._check_sizes(records, context)
        with self._write_lock:
            producer = self._producer
            if producer is None:
                raise NotLeaderException(f"Cannot {context}: this worker has not claimed write "
                                         f"privileges (only the leader writes the config topic)")
            try:
                producer.begin_transaction()
                for key, value in records:
                    producer.produce(self.topic, key=key.encode(), value=value)
                producer.commit_transaction(timeout)
            except KafkaException as e:
                self._producer = None
                _discard(producer)
                error = translate_kafka_error(e, context)
                if error.code in _TOO_LARGE:  # the broker's limit is below the producer's
                    raise RecordTooLargeException(
                        f"Cannot {context}: the broker refused a record as too large for "
                        f"the topic ({error}); nothing was written") from e
                raise error from e
        self.read_to_end(timeout)

    def _check_sizes(self, records: Sequence[tuple[str, bytes | None]], context: str) -> None:
        for key, value in records:
            size = len(key.encode()) + len(value or b"") + RECORD_OVERHEAD_BYTES
            if size > self._max_record_bytes:
                raise RecordTooLargeException(
                    f"Cannot {context}: record {key} would be {size} bytes, over the "
                    f"{self._max_record_bytes} bytes a config-topic record may have (the "
                    "worker's producer message.max.bytes); nothing was written")


# librdkafka's default message.max.bytes; a record's framing on the wire beyond
# its key and value (RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD is under 64 bytes).
LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000
RECORD_OVERHEAD_BYTES = 64
_TOO_LARGE = frozenset({KafkaError.MSG_SIZE_TOO_LARGE})


def _discard(producer: Producer) -> None:
    """Drop a transactional producer without waiting on a broker that may have fenced it."""
    try:
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        producer.flush(0)
    except (KafkaException, RuntimeError) as e:
        log.debug("Discarding config topic producer: %s", e)
