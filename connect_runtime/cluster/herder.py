"""The leader's control plane: :class:`DistributedHerder`, the :class:`Herder` behind
the REST API, and the facade over the parts that do the work.

Desired state lives in the config topic; the herder makes the running state follow
it, in four parts, each with its own module:

* :class:`~.herder_reads.HerderReads`: queries over the config snapshot and the
  status store, and the ``/metrics`` and ``/ui`` views; writes nothing.
* :class:`~.config_writer.ConfigWriter`: validated, leader-checked, fencing-aware
  writes to the config topic (REST's writes, session keys, cluster logger levels).
* :class:`~.reconciler.Reconciler`: the one thread that *acts* (starts connector
  instances, writes task configs, submits and stops Spark jobs) and alone owns
  the reconcile state; REST restarts, Spark's job failures and step-downs reach
  it as messages. The config store's listener wakes it, so a write reaches the
  running state the same way whoever made it.
* :class:`~.task_events.TaskEvents`: task states the slots report, into the status
  topic (connector states are the reconciler's).

This class holds leadership (:meth:`become_leader`, :meth:`step_down`), health,
and wires the rest; it also delegates to :class:`SessionKeys` (KIP-507),
:class:`ZombieFencer` (KIP-618 zombie fencing) and :class:`OffsetAlteration` (KIP-875).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

from connect_runtime.api.record import SourcePartition
from connect_runtime.cluster import fencing
from connect_runtime.cluster.active_topics import ActiveTopicRecorder
from connect_runtime.cluster.auto_restart import AutoRestarts
from connect_runtime.cluster.config_writer import ConfigWriter
from connect_runtime.cluster.dashboard_view import DashboardView
from connect_runtime.cluster.declared_connectors import (
    DeclaredConnectors,
    DeclaredWrites,
    files_source,
)
from connect_runtime.cluster.herder_api import (
    ActiveTopicsInfo,
    ConnectorInfo,
    ConnectorStateInfo,
    HealthInfo,
    LoggerLevel,
    PluginInfo,
    ServerInfo,
    TaskInfo,
    TaskStateInfo,
    TopicTracking,
)
from connect_runtime.cluster.herder_reads import HerderReads
from connect_runtime.cluster.leadership import Leadership, LeadershipActions
from connect_runtime.cluster.loggers import LoggerLevels
from connect_runtime.cluster.metrics import WorkerMetrics
from connect_runtime.cluster.offset_alteration import OffsetAlteration, OffsetTopics
from connect_runtime.cluster.reconciler import Reconciler, ReconcilerParts
from connect_runtime.cluster.session_keys import SessionKeys
from connect_runtime.cluster.slot_registry import SessionKeyAnswer, SlotRegistry
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.cluster.task_events import TaskEvents
from connect_runtime.cluster.task_specs import TaskSpecBuilder
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.config.validation import ConfigInfos
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import NotFoundException
from connect_runtime.kafka.clients import create_admin
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.plugins import resolve_connector_class
from connect_runtime.protocol.states import State, TargetState
from connect_runtime.storage.config_store import ClusterConfigState, ConfigStore
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.status_store import StatusStore

log = logging.getLogger(__name__)

class DistributedHerder:
    """Implements :class:`connect_runtime.cluster.herder_api.Herder` for the leader."""

    def __init__(self, config: WorkerConfig, config_store: ConfigStore, status_store: StatusStore,
                 offset_store: OffsetStore, runner: SparkTaskRunner,
                 kafka_cluster_id: str, connector_files: Sequence[str] = ()) -> None:
        """``connector_files``: standalone mode's connector files (see
        :mod:`~.declared_connectors`); without any, ``declared.connectors.dir``'s."""
        self.config = config
        self.config_store = config_store
        self.status_store = status_store
        self.offset_store = offset_store
        self.runner = runner
        self.worker_id = config.worker_id
        self.worker_url = config.advertised_url()
        self.started = threading.Event()
        self._stopping = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = False
        self._leader_seen = False
        self.is_member_leader: Callable[[], bool] = lambda: self._leadership.leader
        # Why this worker's group membership ended on its own (None: it runs);
        # set by the worker, like is_member_leader.
        self.membership_failure: Callable[[], str | None] = lambda: None
        # The parts call each other through late-bound lambdas: each is built once,
        # in an order that cannot satisfy every reference at construction.
        self.metrics = WorkerMetrics(self.worker_id, lambda: self.reads.cluster_view())
        actions = LeadershipActions(rotate_session_key=lambda: self.writer.rotate_session_key(),
                                    release=lambda: self._reconciler.release(), wake=self.wake,
                                    is_member_leader=lambda: self.is_member_leader())
        self._leadership = Leadership(config_store, runner, self.metrics.counters, self.worker_id,
                                      self.worker_url, self.started, self._stopping, actions)
        is_leader = self._leadership.is_leader
        auto_restarts = AutoRestarts()
        self._task_events = TaskEvents(config, config_store, status_store, auto_restarts,
                                       is_leader, self._leadership.leader_epoch, self._stopping,
                                       lambda c: self.reads.resolved(c))
        # This worker's loggers; the levels set here reach its slots' processes too.
        self._loggers = LoggerLevels()
        self.registry = SlotRegistry(self._task_events.on_task_state,
                                     session_key=self.session_key_for_slots,
                                     log_levels=self._loggers.settings,
                                     on_topics=self._on_task_topics,
                                     on_metrics=self.metrics.tasks.record)
        self._task_events.registry = self.registry
        self.reads = HerderReads(config, config_store, status_store, offset_store, self.registry,
                                 self.metrics, auto_restarts, kafka_cluster_id, is_leader,
                                 self.leader_url, lambda: self._reconciler.hosted_count)
        self._keys = SessionKeys.for_worker(config, lambda: config_store.snapshot().session_key)
        self.writer = ConfigWriter(config_store, self.reads, self._keys, is_leader,
                                   lambda: self.is_member_leader(), self.wake)
        self._tracking = TopicTracking(bool(config["topic.tracking.enable"]),
                                       bool(config["topic.tracking.allow.reset"]))
        self._active_topics = ActiveTopicRecorder(
            status_store, accepts=lambda c: c in config_store.snapshot().connectors())
        self._reconciler = Reconciler(ReconcilerParts(
            config=config, config_store=config_store, status_store=status_store, runner=runner,
            registry=self.registry, specs=TaskSpecBuilder(config, self.worker_url, self.worker_id),
            auto_restarts=auto_restarts, write=self.writer.write, resolved=self.reads.resolved,
            connector_started=lambda failed: self.metrics.counters.connector_started(
                failed=failed),
            rotate_session_key=self.writer.rotate_session_key,
            reset_active_topics_of_deleted=self._reset_active_topics_of_deleted,
            leader_epoch=self._leadership.leader_epoch,
            job_failed=self._task_events.job_failed),
            is_leader, self._leadership.lock)
        self._fencer = _zombie_fencer(config, config_store, self.reads, self.writer)
        self._offsets = _offset_alteration(config, self.reads, offset_store, self._fencer)
        self._declared = self._declared_connectors(connector_files, is_leader)

    def _declared_connectors(self, paths: Sequence[str],
                             is_leader: Callable[[], bool]) -> DeclaredConnectors | None:
        source = files_source(self.config.get("declared.connectors.dir"), paths)
        if source is None:
            return None
        writes = DeclaredWrites(
            snapshot=lambda: self.reads.snapshot(refresh=True),
            validate=lambda config: self.reads.validate_connector_config(None, config),
            put=self.writer.put_declared,
            set_target=lambda name, target: self.writer.set_target(name, target, declared=True),
            delete=self.writer.delete_declared, is_leader=is_leader)
        interval = int(self.config["declared.connectors.poll.interval.ms"]) / 1000
        return DeclaredConnectors(source, writes, interval, self._stopping)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._reconciler.start()
        self.registry.start()
        self._active_topics.start()
        if self._declared is not None:
            self._declared.start()

    def stop(self) -> None:
        """Stop every task gracefully (final commits), then every connector instance.

        Idempotent: the signal handler and the process's final cleanup both call it.
        """
        with self._stop_lock:
            if self._stopped:
                return
            self._stopped = True
        self._leadership.resign(self.config.get("group.instance.id"))
        self._stopping.set()
        self._reconciler.stop()
        self.registry.stop()
        self._active_topics.stop()

    def wake(self) -> None:
        self._reconciler.wake()

    # ----------------------------------------------------------- leadership

    @property
    def is_leader(self) -> bool:
        return self._leadership.leader

    def become_leader(self) -> None:
        """Membership's callback: see :meth:`Leadership.take_over`."""
        self._leadership.take_over()
        if self._declared is not None:
            self._declared.wake()

    def step_down(self) -> None:
        """Membership's callback: see :meth:`Leadership.step_down`."""
        self._leadership.step_down()

    def leader_url(self) -> str | None:
        return self._leadership.leader_url()

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
        if not self._reconciler.alive:
            return HealthInfo("unhealthy", "The worker's herder thread has stopped.")
        if self.is_leader and (why := self.writer.cannot_write) is not None:
            return HealthInfo("unhealthy", f"The leader cannot write the config topic: {why}")
        if (failure := self.membership_failure()) is not None:
            # Out of the group for good: it can never lead or take over again.
            return HealthInfo("unhealthy", f"The worker left its group: {failure}")
        return HealthInfo("healthy", "Worker has completed startup and is ready to handle "
                                     "requests.")

    # ------------------------------------------------------- session keys

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

    # ------------------------------------------------ reads (HerderReads)

    def server_info(self) -> ServerInfo:
        return self.reads.server_info()

    def connectors(self) -> list[str]:
        return self.reads.connectors()

    def connector_config(self, name: str) -> dict[str, str]:
        return self.reads.connector_config(name)

    def connector_info(self, name: str) -> ConnectorInfo:
        return self.reads.connector_info(name)

    def task_configs(self, name: str) -> list[TaskInfo]:
        return self.reads.task_configs(name)

    def connector_status(self, name: str) -> ConnectorStateInfo:
        return self.reads.connector_status(name)

    def task_status(self, name: str, task: int) -> TaskStateInfo:
        return self.reads.task_status(name, task)

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        return self.reads.connector_offsets(name)

    def connector_plugins(self) -> list[PluginInfo]:
        return self.reads.connector_plugins()

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return self.reads.plugin_config(plugin)

    def validate_connector_config(self, plugin: str | None,
                                  config: dict[str, str]) -> ConfigInfos:
        return self.reads.validate_connector_config(plugin, config)

    def metrics_exposition(self) -> bytes:
        return self.reads.metrics_exposition()

    def dashboard(self) -> DashboardView:
        return self.reads.dashboard()

    # ---------------------------------------------- writes (ConfigWriter)

    def create_connector(self, name: str, config: dict[str, str],
                         initial_state: str | None = None,
                         initial_offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
                         | None = None) -> ConnectorInfo:
        """With ``initial_offsets``, :meth:`OffsetAlteration.initialize` writes them
        once the config is valid and before it is written (KIP-995)."""
        if not initial_offsets:
            return self.writer.create_connector(name, config, initial_state)
        offsets = list(initial_offsets)
        return self.writer.create_connector(
            name, config, initial_state,
            before_write=lambda valid: self._write_initial_offsets(name, valid, offsets))

    def _write_initial_offsets(self, name: str, config: dict[str, str],
                               offsets: list[tuple[dict[str, Any], dict[str, Any] | None]],
                               ) -> None:
        self.writer.require_leader(f"write the initial offsets of connector {name}")
        self._offsets.initialize(name, config, offsets)

    def put_connector_config(self, name: str,
                             config: dict[str, str]) -> tuple[bool, ConnectorInfo]:
        return self.writer.put_connector_config(name, config)

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> ConnectorInfo:
        return self.writer.patch_connector_config(name, patch)

    def delete_connector(self, name: str) -> None:
        self.writer.delete_connector(name)

    def pause_connector(self, name: str) -> None:
        self.writer.set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self.writer.set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        self.writer.set_target(name, TargetState.STOPPED)

    # ------------------------------------------------ restarts (Reconciler)

    def restart_connector(self, name: str, include_tasks: bool,
                          only_failed: bool) -> ConnectorStateInfo:
        self.writer.require_leader(f"restart connector {name}")
        self.reads.require(self.reads.snapshot(), name, "Unknown connector: {}")
        status = self.connector_status(name)
        instance = not only_failed or status.connector.state == State.FAILED.value
        tasks = [task for task in status.tasks if include_tasks
                 and (not only_failed or task.state == State.FAILED.value)]
        self._reconciler.restart_connector(name, instance, tuple(task.id for task in tasks))
        if instance:
            status.connector.state = State.RESTARTING.value
        for task in tasks:
            task.state = State.RESTARTING.value
        return status

    def restart_task(self, name: str, task: int) -> None:
        self.writer.require_leader(f"restart task {name}-{task}")
        # KIP-618: read to the end first, so a stale view cannot restart a task
        # whose source partitions now belong to another task.
        snap = self.reads.snapshot(refresh=True)
        self.reads.require(snap, name, "Unknown connector: {}")
        if not 0 <= task < snap.task_count(name):
            raise NotFoundException(f"Unknown task: {name}-{task}")
        self._reconciler.restart_task(name, task, snap.config_generation(name))

    def on_job_failed(self, connector: str, generation: int, trace: str) -> None:
        """The whole Spark job died (e.g. a slot exhausted its attempts)."""
        self._reconciler.job_failed(connector, generation, trace)

    # -------------------------------------------------------- zombie fencing

    def fence_zombies(self, name: str) -> None:
        """KIP-618 "Zombie fencing by the leader", steps 3-9: see :class:`ZombieFencer`."""
        self.writer.require_leader(f"fence zombie tasks of {name}")
        self._fencer.fence(name)

    # ------------------------------------------------- declared connectors

    def declared_connectors(self) -> dict[str, Any]:
        """Leader only: the last pass's report (see :mod:`~.declared_connectors`)."""
        self.writer.require_leader("report on the declared connectors")
        if self._declared is None:
            return {"source": None, "last_pass_ms": None, "files": []}
        return self._declared.report().to_dict()

    # ------------------------------------------- offsets alteration (KIP-875)

    def alter_connector_offsets(self, name: str,
                                offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
                                ) -> str:
        """Leader only: see :class:`OffsetAlteration`."""
        self.writer.require_leader(f"alter the offsets of connector {name}")
        return self._offsets.alter(name, offsets)

    def reset_connector_offsets(self, name: str) -> str:
        """Leader only: see :class:`OffsetAlteration`."""
        self.writer.require_leader(f"reset the offsets of connector {name}")
        return self._offsets.reset(name)

    # ------------------------------------------------------ active topics (KIP-558)
    # Tasks report the topics they produce to; the leader records them (see
    # connect_runtime.cluster.active_topics). Reads and resets go through the status
    # topic, so any worker serves them without the leader, as in Connect.

    def topic_tracking(self) -> TopicTracking:
        return self._tracking

    def connector_active_topics(self, name: str) -> ActiveTopicsInfo:
        return self.reads.connector_active_topics(name)

    def reset_connector_active_topics(self, name: str) -> None:
        self._active_topics.reset(name)

    def _on_task_topics(self, connector: str, task: int, topics: frozenset[str]) -> None:
        """Registry listener (REST event loop): never blocks on Kafka."""
        if self._leadership.leader and self._tracking.enabled:
            self._active_topics.offer(connector, task, topics)

    def _reset_active_topics_of_deleted(self, snap: ClusterConfigState,
                                        running: frozenset[str]) -> None:
        if self._tracking.enabled:
            self._active_topics.reset_deleted(set(snap.connectors()), running)

    # ------------------------------------------ logger levels (KIP-495, KIP-976)
    # This worker's Python loggers; the rules are in connect_runtime.cluster.loggers.
    # A setting also goes to the processes of the tasks this worker runs (all of
    # them, on the leader): they apply it as this worker did (decision 59).

    def logger_levels(self) -> dict[str, LoggerLevel]:
        return self._loggers.all_levels()

    def logger_level(self, name: str) -> LoggerLevel | None:
        return self._loggers.level(name)

    def set_worker_logger_level(self, namespace: str, level: str) -> list[str]:
        changed = self._loggers.set_level(namespace, level)
        self.registry.push_all()
        return changed

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Leader only: see :meth:`ConfigWriter.set_cluster_logger_level`."""
        self.writer.set_cluster_logger_level(namespace, level)

    def apply_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Config-topic listener: a ``logger-cluster-`` record arrived (KIP-976)."""
        try:
            self._loggers.set_level(namespace, level)
        except NotFoundException:
            log.warning("Ignoring request to set invalid level '%s' for namespace %s",
                        level, namespace)
            return
        self.registry.push_all()


def _zombie_fencer(config: WorkerConfig, config_store: ConfigStore, reads: HerderReads,
                   writer: ConfigWriter) -> fencing.ZombieFencer:
    return fencing.ZombieFencer(
        config.group_id, read_config=lambda: reads.snapshot(refresh=True),
        fence=lambda ids: fencing.fence_producers(
            {**config.client_config("producer"), "enable.idempotence": True}, ids),
        write_task_count=lambda name, count: writer.write(
            f"write the task-count record of {name}",
            lambda: config_store.put_task_count_record(name, count)))


def _offset_alteration(config: WorkerConfig, reads: HerderReads, offset_store: OffsetStore,
                       fencer: fencing.ZombieFencer) -> OffsetAlteration:
    def current_partitions(name: str, connector_config: dict[str, str]) -> list[SourcePartition]:
        own = ConnectorConfig(reads.resolved(connector_config)).offsets_storage_topic
        return [entry["partition"] for entry in offset_store.connector_offsets(name, own)]

    def ensure_offsets_topic(topic: str) -> None:
        """As a task's startup does (step 3): compacted, with the worker's offsets settings."""
        admin = create_admin(config.client_config("admin"))
        ensure_topic(admin, topic, int(config["offset.storage.partitions"]),
                     int(config["offset.storage.replication.factor"]), compacted=True)

    return OffsetAlteration(
        exactly_once=config.eos_enabled, group_id=config.group_id, fencer=fencer,
        read_config=lambda: reads.snapshot(refresh=True),
        current_partitions=current_partitions,
        connector=lambda cfg: resolve_connector_class(cfg["connector.class"])(),
        producer_config=lambda name, cfg: {
            **config.client_config("producer"),
            **ConnectorConfig(reads.resolved(cfg)).client_overrides("producer")},
        ensure_topic=ensure_offsets_topic,
        topics=lambda cfg: OffsetTopics(config["offset.storage.topic"],
                                        ConnectorConfig(reads.resolved(cfg)).offsets_storage_topic))
