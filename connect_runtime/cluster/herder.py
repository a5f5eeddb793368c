"""The leader's control plane: the :class:`Herder` behind the REST API.

Desired state lives in the config topic; this class makes the running state
follow it. REST calls validate and *write* (connector configs, target states);
a single reconcile thread *acts* (starts connector instances, writes task
configs, submits and stops Spark jobs). The config store's listener wakes that
thread, so a write reaches the running state the same way whoever made it.

Status is written to the status topic: connector states by this class, task
states as the slots report them through :class:`SlotRegistry`.

Three parts are delegated: :class:`SessionKeys` (the KIP-507 key: rotation and
request verification), :class:`TaskSpecBuilder` (what a Spark job runs each
task from) and :class:`ZombieFencer` (KIP-618 zombie fencing on a task's request).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from connect_runtime import __version__
from connect_runtime.api.record import SourcePartition
from connect_runtime.cluster import fencing
from connect_runtime.cluster.active_topics import ActiveTopicRecorder
from connect_runtime.cluster.auto_restart import AutoRestarts, RestartPolicy
from connect_runtime.cluster.connector_host import HostedConnector
from connect_runtime.cluster.dashboard_view import (
    CommittedOffset,
    ConnectorView,
    DashboardView,
    TaskView,
    TransactionSizes,
)
from connect_runtime.cluster.herder_api import (
    ActiveTopicsInfo,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    HealthInfo,
    LoggerLevel,
    PluginInfo,
    ServerInfo,
    StateInfo,
    TaskInfo,
    TaskStateInfo,
    TopicTracking,
)
from connect_runtime.cluster.loggers import LoggerLevels, parse_level
from connect_runtime.cluster.metrics import HISTORY_S, ClusterView, WorkerMetrics
from connect_runtime.cluster.offset_alteration import OffsetAlteration, OffsetTopics
from connect_runtime.cluster.session_keys import SessionKeys
from connect_runtime.cluster.slot_registry import SessionKeyAnswer, SlotRegistry
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.cluster.task_specs import TaskSpecBuilder
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.config.validation import (
    ConfigInfos,
    format_validation_errors,
    validate_connector_config,
)
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConfigException,
    ConflictException,
    NotFoundException,
    NotLeaderException,
    ProducerFencedError,
)
from connect_runtime.kafka.clients import create_admin
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.logs import trace_headline
from connect_runtime.plugins import (
    connector_version,
    list_plugins,
    plugin_config_keys,
    resolve_connector_class,
)
from connect_runtime.protocol.states import State, TargetState
from connect_runtime.storage.config_store import ClusterConfigState, ConfigStore
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.status_store import StatusRecord, StatusStore

log = logging.getLogger(__name__)

READ_TIMEOUT_S = 60.0
RECONCILE_PERIOD_S = 1.0
# A task Spark has not started this long after submission, while Spark lacks
# slots, gets the reason in its (UNASSIGNED) status.
WAITING_NOTE_AFTER_S = 10.0
_INITIAL_STATES = {
    None: TargetState.STARTED, "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED,
}


def config_changes(before: dict[str, str], after: dict[str, str]) -> str:
    """Which keys a config update changed, added and removed, for the log: names
    only, since values may be secrets."""
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    parts = [f"{what} {', '.join(keys)}" for what, keys in (
        ("changed", changed), ("added", sorted(after.keys() - before.keys())),
        ("removed", sorted(before.keys() - after.keys()))) if keys]
    return "; ".join(parts) or "no key changed"


class DistributedHerder:
    """Implements :class:`connect_runtime.cluster.herder_api.Herder` for the leader."""

    def __init__(self, config: WorkerConfig, config_store: ConfigStore, status_store: StatusStore,
                 offset_store: OffsetStore, runner: SparkTaskRunner,
                 kafka_cluster_id: str) -> None:
        self.config = config
        self.config_store = config_store
        self.status_store = status_store
        self.offset_store = offset_store
        self.runner = runner
        self.kafka_cluster_id = kafka_cluster_id
        self.worker_id = config.worker_id
        self.worker_url = config.advertised_url()
        self.metrics = WorkerMetrics(self.worker_id, self._cluster_view)
        self._auto_restarts = AutoRestarts()
        self.registry = SlotRegistry(self._on_task_state, session_key=self.session_key_for_slots,
                                     on_topics=self._on_task_topics,
                                     on_metrics=self.metrics.tasks.record)
        self._tracking = TopicTracking(bool(config["topic.tracking.enable"]),
                                       bool(config["topic.tracking.allow.reset"]))
        self._active_topics = ActiveTopicRecorder(
            status_store, accepts=lambda c: c in config_store.snapshot().connectors())
        self._hosted: dict[str, HostedConnector] = {}
        self._running_generation: dict[str, int] = {}
        self._failed_jobs: set[str] = set()
        self._restart_connector: set[str] = set()
        self._leader_seen = False
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = False
        # Leadership: set by GroupMembership callbacks (become_leader / step_down).
        self._leader = False
        self._leadership_lock = threading.Lock()
        self._keys = SessionKeys.for_worker(config, lambda: config_store.snapshot().session_key)
        self._specs = TaskSpecBuilder(config, self.worker_url, self.worker_id)
        self._loggers = LoggerLevels()
        self._fencer = fencing.ZombieFencer(
            config.group_id, read_config=lambda: self._snapshot(refresh=True),
            fence=lambda ids: fencing.fence_producers(
                {**config.client_config("producer"), "enable.idempotence": True}, ids),
            write_task_count=lambda name, count: self._write(
                f"write the task-count record of {name}",
                lambda: self.config_store.put_task_count_record(name, count)))
        self._offsets = OffsetAlteration(
            exactly_once=config.eos_enabled, group_id=config.group_id, fencer=self._fencer,
            read_config=lambda: self._snapshot(refresh=True),
            current_partitions=self._current_partitions,
            connector=lambda cfg: resolve_connector_class(cfg["connector.class"])(),
            producer_config=lambda name, cfg: {
                **config.client_config("producer"),
                **ConnectorConfig(self._resolved(cfg)).client_overrides("producer")},
            ensure_topic=self._ensure_connector_offsets_topic,
            topics=lambda cfg: OffsetTopics(config["offset.storage.topic"],
                                            ConnectorConfig(
                                                self._resolved(cfg)).offsets_storage_topic))
        self.is_member_leader: Callable[[], bool] = lambda: self._leader
        # Why this worker's group membership ended on its own (None: it runs);
        # set by the worker, like is_member_leader.
        self.membership_failure: Callable[[], str | None] = lambda: None
        self._thread = threading.Thread(target=self._reconcile_loop, name="herder", daemon=True)
        self.started = threading.Event()

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._thread.start()
        self.registry.start()
        self._active_topics.start()

    # ----------------------------------------------------------- leadership

    @property
    def is_leader(self) -> bool:
        return self._leader

    def become_leader(self) -> None:
        """Called when this worker wins partition 0 of the config topic.

        ``init_transactions`` of ``connect-cluster-<group.id>`` fences the previous
        leader, then the leader publishes its URL and takes over reconciliation
        (connector instances and Spark jobs). Retries until done or demoted.
        """
        with self._leadership_lock:
            while self.is_member_leader() and not self._stopping.is_set():
                try:
                    self.config_store.claim_write_privileges()
                    self.started.wait()
                    self.config_store.read_to_end(READ_TIMEOUT_S)
                    self._leader = True
                    self.metrics.counters.leadership_changed()
                    self.config_store.put_leader(self.worker_url, self.worker_id)
                    # The leader record's offset (nothing was written after it yet):
                    # each takeover's is larger, so it orders elections across logs.
                    epoch = self.config_store.snapshot().offset - 1
                    self._ensure_session_key()
                    if self.runner.per_leader:
                        self.runner.start_in_background()  # submit() waits for it
                    log.info("elected leader of the cluster: worker %s (%s) took over, leader "
                             "epoch %d", self.worker_id, self.worker_url, epoch,
                             extra={"event": "leader_elected", "worker": self.worker_id,
                                    "epoch": epoch})
                    break
                except Exception:
                    self._leader = False
                    log.exception("could not take over as leader; retrying")
                    self.config_store.relinquish_write_privileges()
                    time.sleep(1.0)
        self.wake()

    def step_down(self) -> None:
        """Called when this worker loses leadership: stop hosting, stop writing."""
        with self._leadership_lock:
            led = self._leader
            if led:
                self.metrics.counters.leadership_changed()
            self._leader = False
            for name in list(self._running_generation):
                self._stop_tasks(name)
            for host in list(self._hosted.values()):
                host.stop()
            self._hosted.clear()
            self._failed_jobs.clear()
            if self.runner.per_leader:
                self.runner.shutdown()  # releases this application's executors
            self.config_store.relinquish_write_privileges()
        if led and not self._stopping.is_set():  # a stopping leader said so in stop()
            log.info("worker %s (%s) is no longer the leader: its tasks and connectors "
                     "stopped, config writes relinquished", self.worker_id, self.worker_url,
                     extra={"event": "leadership_lost", "worker": self.worker_id})
        else:
            log.info("stepped down: tasks and connectors stopped, config writes relinquished")

    def leader_url(self) -> str | None:
        return self.worker_url if self._leader else self.config_store.snapshot().leader_url

    # --------------------------------------------------------------- metrics

    def metrics_exposition(self) -> bytes:
        """``GET /metrics``: every metric in Prometheus' text format. In-memory
        reads only, so it answers during rebalances and broker outages."""
        self.metrics.tasks.keep_only(
            (s.connector, s.task, s.generation) for s in self.registry.slots())
        return self.metrics.exposition()

    def _statuses(self) -> list[tuple[str, StatusRecord | None, dict[str, str],
                                      list[StatusRecord | None]]]:
        """Every connector of the config snapshot, sorted: its status, config and its
        tasks' statuses, as this worker's status-store cache has them (no I/O)."""
        snap = self.config_store.snapshot()
        return [(name, self.status_store.connector_status(name),
                 snap.connector_config(name) or {},
                 [self.status_store.task_status(name, task)
                  for task in range(len(snap.task_configs(name)))])
                for name in sorted(snap.connectors())]

    def dashboard(self) -> DashboardView:
        """The /ui view (:class:`DashboardView`), from memory only."""
        slots = {(s.connector, s.task): s for s in self.registry.slots()}
        self.metrics.tasks.keep_only((s.connector, s.task, s.generation) for s in slots.values())
        histories = self.metrics.tasks.tasks()
        connectors = []
        for name, status, config, records in self._statuses():
            tasks = []
            for task, record in enumerate(records):
                slot, history = slots.get((name, task)), histories.get((name, task))
                latest = history.latest if history is not None else None
                tasks.append(TaskView(
                    id=task, state=record.state if record else State.UNASSIGNED.value,
                    worker_id=record.worker_id if record else None,
                    trace=record.trace if record else None,
                    host=slot.host if slot else None, pid=slot.pid if slot else None,
                    attempt=slot.attempt if slot else None,
                    generation=slot.generation if slot else None,
                    series=history.series() if history is not None else None,
                    transaction_size=None if latest is None or latest.txn_size_avg is None
                    else TransactionSizes(min=latest.txn_size_min, max=latest.txn_size_max,
                                          avg=latest.txn_size_avg),
                    offsets=() if latest is None else tuple(
                        CommittedOffset(o.partition, o.offset) for o in latest.offsets),
                ))
            connectors.append(ConnectorView(
                name=name, type="source",
                state=status.state if status else State.UNASSIGNED.value,
                worker_id=status.worker_id if status else None,
                trace=status.trace if status else None,
                connector_class=config.get("connector.class"), tasks=tuple(tasks)))
        return DashboardView(worker_id=self.worker_id, leader_url=self.leader_url(),
                             is_leader=self._leader, generated_at_ms=int(time.time() * 1000),
                             window_s=HISTORY_S, connectors=tuple(connectors))

    def _cluster_view(self) -> ClusterView:
        unassigned = State.UNASSIGNED.value
        connector_states: dict[str, str] = {}
        task_states: dict[tuple[str, int], str] = {}
        classes: dict[str, str] = {}
        for name, status, config, records in self._statuses():
            connector_states[name] = status.state if status else unassigned
            classes[name] = str(config.get("connector.class", ""))
            for task, record in enumerate(records):
                task_states[(name, task)] = record.state if record else unassigned
        return ClusterView(connector_states, task_states, classes,
                           hosted_connectors=len(self._hosted),
                           hosted_tasks=len(self.registry.slots()),
                           leader_url=self.leader_url(), is_leader=self._leader,
                           auto_restarts=self._auto_restarts.counts())

    def _require_leader(self, what: str) -> None:
        if not self._leader:
            url = self.config_store.snapshot().leader_url
            raise NotLeaderException(
                f"Cannot {what}: this worker is not the leader"
                + (f"; the leader is {url}" if url else " and no leader is known"), url)

    def _write(self, what: str, write: Callable[[], None]) -> None:
        """A config-topic write by the leader; a fenced write is an error, never a drop."""
        self._require_leader(what)
        with self._write_lock:
            try:
                write()
            except ProducerFencedError as e:
                # Another worker claimed connect-cluster-<group.id>: we may be a zombie.
                # If the group still says we lead, claim again for the next request.
                if self.is_member_leader():
                    threading.Thread(target=self._reclaim, daemon=True).start()
                raise ConflictException(
                    f"Cannot {what}: this worker's config-topic producer was fenced by a "
                    f"newer leader ({e}); the request was not applied. Retry it.") from e
        self.wake()

    def _reclaim(self) -> None:
        try:
            self.config_store.claim_write_privileges()
        except Exception:
            log.exception("re-claiming config-topic write privileges failed")

    def stop(self) -> None:
        """Stop every task gracefully (final commits), then every connector instance.

        Idempotent: the signal handler and the process's final cleanup both call it.
        """
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        if self._leader:
            instance = self.config.get("group.instance.id")
            after = (f"its place in the group (group.instance.id {instance}) waits "
                     f"session.timeout.ms for its restart, then another worker takes over"
                     if instance else "another worker takes over once it has left the group")
            log.info("worker %s (%s) resigns as leader: it is stopping; %s", self.worker_id,
                     self.worker_url, after,
                     extra={"event": "leadership_lost", "worker": self.worker_id})
        self._stopping.set()
        self._wake.set()
        self._thread.join(timeout=self._graceful_s() * 2 + 30)
        for name in list(self._running_generation):
            self._stop_tasks(name)
        for host in self._hosted.values():
            host.stop()
        self.registry.stop()
        self._active_topics.stop()

    def wake(self) -> None:
        self._wake.set()

    def _graceful_s(self) -> float:
        return float(self.config["task.shutdown.graceful.timeout.ms"]) / 1000

    # ------------------------------------------------------- session key

    def _ensure_session_key(self) -> None:
        if not self._leader:
            return
        key = self._keys.next_key()
        if key is not None:
            self._write("rotate the session key", lambda: self.config_store.put_session_key(
                key.key, key.algorithm, key.creation_ms))

    def note_session_key(self, current: bytes | None = None) -> None:
        """Called on every key record: see :meth:`SessionKeys.note`. Connected
        slots get the new key pushed, so they keep signing after rotations."""
        self._keys.note(current)
        self.registry.push_all()

    def session_key_for_slots(self) -> SessionKeyAnswer:
        """:meth:`SessionKeys.for_slots`: the channels are TLS when slots reach
        this worker at an https URL."""
        return self._keys.for_slots(tls=self.worker_url.startswith("https://"))

    def verify_internal_request(self, headers: dict[str, str], body: bytes) -> None:
        """KIP-507 check for internal routes; raises RequestSignatureException."""
        self._keys.verify(headers, body)

    # ------------------------------------------------------------ reading

    def _snapshot(self, refresh: bool = False) -> ClusterConfigState:
        if refresh:
            self.config_store.read_to_end(READ_TIMEOUT_S)
        return self.config_store.snapshot()

    def _require(self, snap: ClusterConfigState, name: str,
                 missing: str = "Connector {} not found") -> dict[str, str]:
        """The connector's config; NotFoundException with ``missing`` (Connect's
        wording differs per route, clients match on it) if there is none."""
        config = snap.connector_config(name)
        if config is None:
            raise NotFoundException(missing.format(name))
        return config

    def server_info(self) -> ServerInfo:
        return ServerInfo(__version__, "unknown", self.kafka_cluster_id)

    def health(self) -> HealthInfo:
        if not (self.started.is_set() and self.runner.healthy):
            return HealthInfo("starting", "Worker is still starting up.")
        if not self._leader_seen:
            # Startup ends when the cluster has a leader: before, every write would
            # be refused (409, no known leader). Later elections do not make a
            # worker unhealthy (a probe would restart healthy pods).
            if self.leader_url() is None:
                return HealthInfo("starting", "Worker is still starting up: no leader yet.")
            self._leader_seen = True
        if not self._thread.is_alive():
            return HealthInfo("unhealthy", "The worker's herder thread has stopped.")
        if (failure := self.membership_failure()) is not None:
            # Out of the group for good: it can never lead or take over again.
            return HealthInfo("unhealthy", f"The worker left its group: {failure}")
        return HealthInfo("healthy", "Worker has completed startup and is ready to handle "
                                     "requests.")

    def connectors(self) -> list[str]:
        return sorted(self._snapshot().connectors())

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._require(self._snapshot(), name))

    def connector_info(self, name: str) -> ConnectorInfo:
        snap = self._snapshot()
        config = self._require(snap, name)
        tasks = [ConnectorTaskId(name, i) for i in range(snap.task_count(name))]
        return ConnectorInfo(name, dict(config), tasks)

    def task_configs(self, name: str) -> list[TaskInfo]:
        snap = self._snapshot()
        self._require(snap, name)
        return [TaskInfo(ConnectorTaskId(name, i), dict(cfg))
                for i, cfg in enumerate(snap.task_configs(name))]

    def connector_status(self, name: str) -> ConnectorStateInfo:
        snap = self._snapshot()
        self._require(snap, name, "No status found for connector {}")
        status = self.status_store.connector_status(name)
        connector = (StateInfo(status.state, status.worker_id, status.trace, status.version)
                     if status else StateInfo(State.UNASSIGNED.value, self.worker_id))
        tasks = [self._task_state(name, i) for i in range(snap.task_count(name))]
        return ConnectorStateInfo(name, connector, tasks)

    def _task_state(self, name: str, task: int) -> TaskStateInfo:
        status = self.status_store.task_status(name, task)
        if status is None:
            return TaskStateInfo(task, State.UNASSIGNED.value, self.worker_id)
        return TaskStateInfo(task, status.state, status.worker_id, status.trace, status.version)

    def task_status(self, name: str, task: int) -> TaskStateInfo:
        snap = self._snapshot()
        if snap.connector_config(name) is None or not 0 <= task < snap.task_count(name):
            raise NotFoundException(f"No status found for task {name}-{task}")
        return self._task_state(name, task)

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        config = self._require(self._snapshot(), name)
        own = ConnectorConfig(self._resolved(config)).offsets_storage_topic
        return self.offset_store.connector_offsets(name, own)

    def connector_plugins(self) -> list[PluginInfo]:
        return list_plugins()

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return [key.to_info_dict() for key in plugin_config_keys(plugin)]

    def validate_connector_config(self, plugin: str | None,
                                  config: dict[str, str]) -> ConfigInfos:
        class_name = config.get("connector.class") or plugin
        if not class_name:
            raise BadRequestException("Connector config is missing connector.class")
        instance = resolve_connector_class(class_name)()
        converters = {key: str(self.config[key])
                      for key in ("key.converter", "value.converter", "header.converter")}
        return validate_connector_config(instance, config, self.config.eos_support, converters,
                                         self.config.config_resolver)

    def _resolved(self, config: dict[str, str]) -> dict[str, str]:
        """``config`` (as the config topic holds it) with its config-provider variables
        resolved, for what this worker reads of it (offsets topic, restart policy,
        offsets alteration's producer), as Connect reads a connector's config through
        its transformer; ConfigException naming the key of a variable that cannot be
        resolved."""
        resolution = self.config.config_resolver.resolve(config)
        resolution.raise_for_errors()
        return resolution.values

    def _validate_or_raise(self, config: dict[str, str]) -> None:
        infos = self.validate_connector_config(None, config)
        if infos.error_count:
            raise BadRequestException(format_validation_errors(infos))

    # ------------------------------------------------------------ writing

    def create_connector(self, name: str, config: dict[str, str],
                         initial_state: str | None = None) -> ConnectorInfo:
        if initial_state not in _INITIAL_STATES:
            raise BadRequestException(f"Invalid initial_state {initial_state!r}; expected "
                                      "RUNNING, PAUSED or STOPPED")
        config = {**config, "name": name}
        if name in self._snapshot(refresh=True).connectors():
            raise AlreadyExistsException(f"Connector {name} already exists")
        self._require_leader(f"create connector {name}")
        self._validate_or_raise(config)
        target = _INITIAL_STATES[initial_state].value
        self._write(f"create connector {name}",
                    lambda: self.config_store.put_connector_config(name, config, target))
        log.info("connector %s created (%s, target state %s)", name,
                 config.get("connector.class"), target,
                 extra={"event": "connector_created", "connector": name})
        return ConnectorInfo(name, config, [])

    def put_connector_config(self, name: str,
                             config: dict[str, str]) -> tuple[bool, ConnectorInfo]:
        self._require_leader(f"update the config of connector {name}")
        snap = self._snapshot(refresh=True)
        before = snap.connector_config(name)
        if before is None:
            return True, self.create_connector(name, config)
        config = {**config, "name": name}
        self._validate_or_raise(config)
        self._write(f"update the config of connector {name}",
                    lambda: self.config_store.put_connector_config(name, config, None))
        log.info("connector %s reconfigured: %s", name, config_changes(before, config),
                 extra={"event": "connector_reconfigured", "connector": name})
        return False, ConnectorInfo(name, config, [ConnectorTaskId(name, i)
                                                   for i in range(snap.task_count(name))])

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> ConnectorInfo:
        current = self._require(self._snapshot(refresh=True), name)
        merged = {k: v for k, v in {**current, **patch}.items() if v is not None}
        if merged.get("name", name) != name:
            raise BadRequestException(f"Connector name configuration ({merged['name']}) "
                                      f"doesn't match connector name in the URL ({name})")
        return self.put_connector_config(name, merged)[1]

    def delete_connector(self, name: str) -> None:
        self._require_leader(f"delete connector {name}")
        self._require(self._snapshot(refresh=True), name)
        self._write(f"delete connector {name}",
                    lambda: self.config_store.remove_connector_config(name))
        log.info("connector %s deleted", name,
                 extra={"event": "connector_deleted", "connector": name})

    def _set_target(self, name: str, target: TargetState) -> None:
        self._require_leader(f"change the target state of connector {name}")
        self._require(self._snapshot(refresh=True), name, "Unknown connector {}")
        self._write(f"set connector {name} to {target.value}",
                    lambda: self.config_store.put_target_state(name, target.value))

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STOPPED)

    def restart_connector(self, name: str, include_tasks: bool,
                          only_failed: bool) -> ConnectorStateInfo:
        self._require_leader(f"restart connector {name}")
        self._require(self._snapshot(), name, "Unknown connector: {}")
        status = self.connector_status(name)
        if not only_failed or status.connector.state == State.FAILED.value:
            self._restart_connector.add(name)
            status.connector.state = State.RESTARTING.value
        if include_tasks:
            for task in status.tasks:
                if not only_failed or task.state == State.FAILED.value:
                    self._restart_task(name, task.id)
                    task.state = State.RESTARTING.value
        self.wake()
        return status

    def restart_task(self, name: str, task: int) -> None:
        self._require_leader(f"restart task {name}-{task}")
        # KIP-618: read to the end first, so a stale view cannot restart a task
        # whose source partitions now belong to another task.
        snap = self._snapshot(refresh=True)
        self._require(snap, name, "Unknown connector: {}")
        if not 0 <= task < snap.task_count(name):
            raise NotFoundException(f"Unknown task: {name}-{task}")
        if snap.config_generation(name) != self._running_generation.get(name):
            raise ConflictException(f"Tasks of {name} are being reconfigured; retry the "
                                    "restart once the new generation is running")
        self._restart_task(name, task)
        self.wake()

    def _restart_task(self, name: str, task: int, automatic: bool = False) -> None:
        if not automatic:
            self._auto_restarts.cancel(name, task)
        self.status_store.put_task(name, task, State.RESTARTING.value, self.worker_id)
        job = self.runner.job(name)
        slot = None
        if name in self._failed_jobs or job is None or job.done.is_set():
            self._failed_jobs.discard(name)
            self._running_generation.pop(name, None)  # resubmit on the next reconcile
        elif not self.registry.restart(name, task):
            self._running_generation.pop(name, None)
        else:
            slot = self.registry.slot(name, task)
        how = ("its Spark job is resubmitted" if slot is None else
               f"restart {slot.restart_seq} sent to its slot (host {slot.host}, pid "
               f"{slot.pid}, Spark attempt {slot.attempt})")
        log.info("automatic restart of task %s-%d: %s" if automatic else
                 "restart of task %s-%d requested: %s", name, task, how,
                 extra={"event": "task_restart_requested", "connector": name, "task": task,
                        "restart": None if slot is None else slot.restart_seq,
                        "automatic": automatic})

    # -------------------------------------------------------- zombie fencing

    def fence_zombies(self, name: str) -> None:
        """KIP-618 "Zombie fencing by the leader", steps 3-9: see :class:`ZombieFencer`."""
        self._require_leader(f"fence zombie tasks of {name}")
        self._fencer.fence(name)

    # ------------------------------------------- offsets alteration (KIP-875)

    def alter_connector_offsets(self, name: str,
                                offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
                                ) -> str:
        """Leader only: see :class:`OffsetAlteration`."""
        self._require_leader(f"alter the offsets of connector {name}")
        return self._offsets.alter(name, offsets)

    def reset_connector_offsets(self, name: str) -> str:
        """Leader only: see :class:`OffsetAlteration`."""
        self._require_leader(f"reset the offsets of connector {name}")
        return self._offsets.reset(name)

    def _current_partitions(self, name: str, config: dict[str, str]) -> list[SourcePartition]:
        own = ConnectorConfig(self._resolved(config)).offsets_storage_topic
        return [entry["partition"] for entry in self.offset_store.connector_offsets(name, own)]

    def _ensure_connector_offsets_topic(self, topic: str) -> None:
        """As a task's startup does (step 3): compacted, with the worker's offsets settings."""
        admin = create_admin(self.config.client_config("admin"))
        ensure_topic(admin, topic, int(self.config["offset.storage.partitions"]),
                     int(self.config["offset.storage.replication.factor"]), compacted=True)

    # ------------------------------------------------------ reconciliation

    def _reconcile_loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait(RECONCILE_PERIOD_S)
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._reconcile_all()
            except Exception:
                log.exception("reconcile pass failed; retrying")
                time.sleep(RECONCILE_PERIOD_S)

    def _reconcile_all(self) -> None:
        # Under the leadership lock: a step-down waits for the pass to finish, so it
        # never races a pass that is starting tasks.
        with self._leadership_lock:
            if not self._leader:
                return
            self._ensure_session_key()
            snap = self._snapshot()
            for name in set(snap.connectors()) | set(self._hosted) | set(
                    self._running_generation):
                self._reconcile(name, snap)
                snap = self._snapshot()
            self._note_waiting_tasks()
            self._restart_due_tasks()
            self._reset_active_topics_of_deleted(snap)

    def _note_waiting_tasks(self) -> None:
        """Tasks Spark has not started because it lacks slots: say so in their
        status, not only in the worker's log."""
        message = self.runner.shortfall()
        if message is not None:
            self.registry.note_waiting(WAITING_NOTE_AFTER_S, message)

    def _reconcile(self, name: str, snap: ClusterConfigState) -> None:
        config = snap.connector_config(name)
        if config is None:
            self._teardown(name, snap)
            return
        target = TargetState(snap.target_state(name))
        if target is TargetState.STOPPED:
            self._stop_connector(name, snap)
            return
        host = self._host(name, config)
        if host.state is State.FAILED:
            self._put_connector_status(name, host, snap)
            return
        # Task configs are generated only while STARTED, as in Connect: a connector
        # created PAUSED has no tasks until resumed; one paused later keeps its tasks
        # (PAUSED) and is asked again on resume.
        if host.reconfiguration_requested and target is TargetState.STARTED:
            configs = host.task_configs()
            if configs is None:
                self._put_connector_status(name, host, snap)
                return
            if configs != snap.task_configs(name) or (not snap.task_count(name) and configs):
                new_configs = configs
                self._write(f"write task configs of {name}",
                            lambda: self.config_store.put_task_configs(name, new_configs))
                generation = self._snapshot().config_generation(name)  # the write read it
                log.info("connector %s: wrote task configs for %d task(s), generation %d "
                         "(was %d task(s))", name, len(configs), generation,
                         snap.task_count(name),
                         extra={"event": "task_configs_written", "connector": name,
                                "generation": generation, "tasks": len(configs)})
                return  # the listener wakes us with the new generation
        self._ensure_tasks(name, snap, paused=target is TargetState.PAUSED)
        host.state = State.PAUSED if target is TargetState.PAUSED else State.RUNNING
        self._put_connector_status(name, host, snap)

    def _host(self, name: str, config: dict[str, str]) -> HostedConnector:
        host = self._hosted.get(name)
        restart = name in self._restart_connector
        if host is not None and host.config == config and not restart:
            return host
        self._restart_connector.discard(name)
        if host is not None:
            host.stop()
        host = HostedConnector(name, config, self.wake,
                               lambda: self._offset_reader(name, config),
                               self.config.config_resolver)
        host.start()
        self.metrics.counters.connector_started(failed=host.state is State.FAILED)
        self._hosted[name] = host
        return host

    def _offset_reader(self, name: str, config: dict[str, str]) -> TaskOffsetStorageReader:
        own = ConnectorConfig(self._resolved(config)).offsets_storage_topic
        return TaskOffsetStorageReader(
            connector=name, bootstrap_servers=self.config.bootstrap_servers,
            global_topic=self.config["offset.storage.topic"],
            connector_topic=own if own != self.config["offset.storage.topic"] else None,
            consumer_overrides=self._specs.client_overrides("consumer"),
            admin_overrides=self._specs.client_overrides("admin"))

    def _ensure_tasks(self, name: str, snap: ClusterConfigState, paused: bool) -> None:
        generation = snap.config_generation(name)
        if self._running_generation.get(name) == generation:
            self.registry.set_paused(name, paused)
            return
        if name in self._running_generation:
            self._stop_tasks(name)
        if name in self._failed_jobs:
            return
        configs = snap.task_configs(name)
        if not configs:
            return
        connector_config = snap.connector_config(name) or {}
        host = self._hosted.get(name)
        hidden = host.password_keys if host is not None else frozenset()
        specs = [self._specs.build(name, i, generation, cfg, connector_config, snap.session_key,
                                   password_keys=hidden)
                 for i, cfg in enumerate(configs)]
        for i in range(len(specs)):
            self.status_store.put_task(name, i, State.UNASSIGNED.value, self.worker_id,
                                       generation=generation)
        self.registry.open(name, generation, len(specs), paused)
        self.runner.submit(name, generation, specs)
        self._running_generation[name] = generation

    def _stop_tasks(self, name: str) -> None:
        self.registry.close(name)
        self.runner.wait_stopped(name, self._graceful_s())
        self._running_generation.pop(name, None)

    def _stop_connector(self, name: str, snap: ClusterConfigState) -> None:
        if name in self._running_generation:
            self._stop_tasks(name)
        host = self._hosted.pop(name, None)
        if host is not None:
            host.stop()
        if snap.task_count(name):  # Connect (KIP-875) empties the task configs of a stopped one
            self._write(f"clear task configs of stopped {name}",
                        lambda: self.config_store.put_task_configs(name, []))
        current = self.status_store.connector_status(name)
        if current is None or current.state != State.STOPPED.value:
            # Connect shows the version of a stopped connector too, never started or not.
            version = (host.version if host is not None
                       else connector_version(self._require(snap, name).get("connector.class", "")))
            self.status_store.put_connector(name, State.STOPPED.value, self.worker_id,
                                            version=version)

    def _teardown(self, name: str, snap: ClusterConfigState) -> None:
        self._auto_restarts.forget(name)
        if name in self._running_generation:
            self._stop_tasks(name)
        host = self._hosted.pop(name, None)
        if host is not None:
            host.stop()
            task_count = max(len(self.status_store.task_statuses(name)), 0)
            self.status_store.delete_connector(name, task_count)
        self._failed_jobs.discard(name)

    def _put_connector_status(self, name: str, host: HostedConnector,
                              snap: ClusterConfigState) -> None:
        current = self.status_store.connector_status(name)
        if current is None or (current.state, current.trace, current.worker_id,
                               current.version) != (
                host.state.value, host.trace, self.worker_id, host.version):
            self.status_store.put_connector(name, host.state.value, self.worker_id, host.trace,
                                            generation=snap.config_generation(name),
                                            version=host.version)

    # --------------------------------------------------------- task events

    def _on_task_state(self, connector: str, task: int, state: State, trace: str | None) -> None:
        if not self._leader:
            # Only the leader hosts tasks. A worker that lost leadership (a resumed
            # zombie) still hears its old slots until they stop; what they say,
            # typically "fenced", is about instances the new leader has replaced.
            log.info("not recording %s of task %s-%d: this worker no longer leads", state.value,
                     connector, task)
            return
        slot = self.registry.slot(connector, task)
        if state is State.FAILED and slot is not None and slot.fenced:
            # Fenced usually means a new leader took over and started the task
            # anew while this worker stalled; it learns it lost the group within
            # a session timeout. Report only if it still leads after that.
            threading.Thread(target=self._report_fenced_later,
                             args=(connector, task, slot.generation, trace), daemon=True,
                             name=f"fenced-{connector}-{task}").start()
            return
        generation = self._running_generation.get(connector, 0)
        if state is State.FAILED:
            plan = self._auto_restarts.failed(connector, task, generation,
                                              self._restart_policy(connector))
            if plan is not None:  # the status says what happens next, and when
                trace = f"{trace or ''}\n\n{plan.note}".lstrip()
                event = ({"event": "task_auto_restart_gave_up"} if plan.gave_up
                         else {"event": "task_auto_restart_scheduled"})
                log.log(logging.WARNING if plan.gave_up else logging.INFO,
                        "task %s-%d: %s", connector, task, plan.note, extra={
                            **event, "connector": connector, "task": task,
                            "generation": generation, "attempt": plan.attempt})
        elif state is State.RUNNING:
            self._auto_restarts.running(connector, task, generation)
        self._put_task_state(connector, task, state, trace)

    def _restart_policy(self, connector: str) -> RestartPolicy:
        config = self.config_store.snapshot().connector_config(connector)
        try:
            return RestartPolicy.from_values(ConnectorConfig(self._resolved(config or {})).values)
        except ConfigException:  # validated when written; a deleted one has none
            return RestartPolicy()

    def _restart_due_tasks(self) -> None:
        """Automatic restarts whose delay is over (:mod:`.auto_restart`); only a task
        still FAILED in the same generation: a REST restart or a new generation
        took care of the others."""
        for connector, task, generation in self._auto_restarts.due():
            slot = self.registry.slot(connector, task)
            if (slot is None or slot.state is not State.FAILED
                    or self._running_generation.get(connector) != generation):
                continue
            self._restart_task(connector, task, automatic=True)

    def _put_task_state(self, connector: str, task: int, state: State,
                        trace: str | None) -> None:
        generation = self._running_generation.get(connector, 0)
        self.status_store.put_task(connector, task, state.value, self.worker_id, trace,
                                   generation=generation, version=self._task_version(connector))

    def _task_version(self, connector: str) -> str | None:
        """The version the tasks of ``connector`` report in their status (KIP-891)."""
        host = self._hosted.get(connector)
        return None if host is None else host.task_version

    def _report_fenced_later(self, connector: str, task: int, generation: int,
                             trace: str | None) -> None:
        grace_s = int(self.config["session.timeout.ms"]) / 1000 + 2.0
        if self._stopping.wait(grace_s) or not self._leader:
            return
        slot = self.registry.slot(connector, task)
        if slot is not None and slot.generation == generation and slot.fenced \
                and slot.state is State.FAILED:
            self._put_task_state(connector, task, State.FAILED, trace)

    def on_job_failed(self, connector: str, generation: int, trace: str) -> None:
        """The whole Spark job died (e.g. a slot exhausted its attempts)."""
        if self._running_generation.get(connector) != generation:
            return
        self._failed_jobs.add(connector)
        for slot in self.registry.slots():
            if slot.connector == connector and slot.state is not State.FAILED:
                self.status_store.put_task(
                    connector, slot.task, State.FAILED.value, self.worker_id,
                    f"The Spark job hosting the tasks of {connector} failed:\n{trace}",
                    generation=generation, version=self._task_version(connector))
                log.error("task %s-%d failed (generation %d): its Spark job failed: %s",
                          connector, slot.task, generation, trace_headline(trace),
                          extra={"event": "task_failed", "connector": connector,
                                 "task": slot.task, "generation": generation})
        self.registry.close(connector)

    # ------------------------------------------------------ active topics (KIP-558)
    # Tasks report the topics they produce to; the leader records them (see
    # connect_runtime.cluster.active_topics). Reads and resets go through the status
    # topic, so any worker serves them without the leader, as in Connect.

    def topic_tracking(self) -> TopicTracking:
        return self._tracking

    def connector_active_topics(self, name: str) -> ActiveTopicsInfo:
        return ActiveTopicsInfo(name, sorted(self.status_store.active_topics(name)))

    def reset_connector_active_topics(self, name: str) -> None:
        self._active_topics.reset(name)

    def _on_task_topics(self, connector: str, task: int, topics: frozenset[str]) -> None:
        """Registry listener (REST event loop): never blocks on Kafka."""
        if self._leader and self._tracking.enabled:
            self._active_topics.offer(connector, task, topics)

    def _reset_active_topics_of_deleted(self, snap: ClusterConfigState) -> None:
        """Tombstone the active topics of deleted connectors, after their tasks were
        stopped (Connect does it when a deleted connector's tasks are revoked). Also
        catches a deletion a previous leader did not get to."""
        if not self._tracking.enabled:
            return
        for name in self.status_store.topic_connectors() - set(snap.connectors()):
            if name not in self._running_generation:
                log.info("resetting the active topics of deleted connector %s", name)
                self._active_topics.reset(name)

    # ------------------------------------------ logger levels (KIP-495, KIP-976)
    # This worker's Python loggers; the rules are in connect_runtime.cluster.loggers.

    def logger_levels(self) -> dict[str, LoggerLevel]:
        return self._loggers.all_levels()

    def logger_level(self, name: str) -> LoggerLevel | None:
        return self._loggers.level(name)

    def set_worker_logger_level(self, namespace: str, level: str) -> list[str]:
        return self._loggers.set_level(namespace, level)

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Leader only, like every config-topic write here (followers forward it).

        Connect lets any worker write this record; one writer keeps the rule that
        only the leader's fenced producer writes the config topic, and a client
        sees the same 204 either way. The level is checked first, so a bad one
        answers 404 on the worker that received it, without a hop.
        """
        name = parse_level(level)
        self._write(f"set the level of logging namespace {namespace}",
                    lambda: self.config_store.put_logger_level(namespace, name))

    def apply_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Config-topic listener: a ``logger-cluster-`` record arrived (KIP-976)."""
        try:
            self._loggers.set_level(namespace, level)
        except NotFoundException:
            log.warning("Ignoring request to set invalid level '%s' for namespace %s",
                        level, namespace)
