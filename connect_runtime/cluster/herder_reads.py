"""The herder's read side: queries over the config snapshot and the status store,
and the views ``/metrics`` and ``/ui`` show.

Any thread may call it; it writes nothing. Reads that must see the latest
config (before a write decides on it) read the config topic to its end first
(``snapshot(refresh=True)``); the views read memory only, so they answer during
rebalances and broker outages.

Every status it shows is read as of the current leader
(:func:`~connect_runtime.storage.status_store.as_seen_under_leader`): once a
new leader is elected, what the previous one said of its instances (RUNNING
with its worker id) is shown as UNASSIGNED on the new leader until the new
instances report.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from connect_runtime import __version__
from connect_runtime.build_info import build_commit
from connect_runtime.cluster.auto_restart import AutoRestarts
from connect_runtime.cluster.dashboard_view import (
    CommittedOffset,
    ConnectorView,
    DashboardView,
    StallView,
    TaskView,
    TransactionSizes,
)
from connect_runtime.cluster.herder_api import (
    ActiveTopicsInfo,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    PluginInfo,
    ServerInfo,
    StateInfo,
    TaskInfo,
    TaskStateInfo,
)
from connect_runtime.cluster.metrics import HISTORY_S, ClusterView, WorkerMetrics
from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.config.validation import ConfigInfos, validate_connector_config
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import BadRequestException, NotFoundException
from connect_runtime.plugins import list_plugins, plugin_config_keys, resolve_connector_class
from connect_runtime.protocol.states import State
from connect_runtime.storage.config_store import ClusterConfigState, ConfigStore
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.status_store import (
    StatusRecord,
    StatusStore,
    as_seen_under_leader,
)

READ_TIMEOUT_S = 60.0


def validate_for_worker(worker: WorkerConfig, plugin: str | None,
                        config: dict[str, str]) -> ConfigInfos:
    """Validate ``config`` as ``PUT .../config/validate`` and every create do, with
    ``worker``'s converters, exactly-once support and config providers. Plugins must
    be registered (``plugin.path``); needs no Kafka."""
    class_name = config.get("connector.class") or plugin
    if not class_name:
        raise BadRequestException("Connector config is missing connector.class")
    instance = resolve_connector_class(class_name)()
    converters = {key: str(worker[key])
                  for key in ("key.converter", "value.converter", "header.converter")}
    return validate_connector_config(instance, config, worker.eos_support, converters,
                                     worker.config_resolver,
                                     worker.spark_settings().task_cpus)

_Statuses = list[tuple[str, StatusRecord | None, dict[str, str], list[StatusRecord | None]]]


class HerderReads:
    """Connect's read routes, and this worker's dashboard and cluster views.

    ``leader_url`` and ``is_leader`` are the herder's; ``hosted_count`` is how many
    connector instances the reconcile thread runs (for metrics).
    """

    def __init__(self, config: WorkerConfig, config_store: ConfigStore,
                 status_store: StatusStore, offset_store: OffsetStore,
                 registry: SlotRegistry, metrics: WorkerMetrics, auto_restarts: AutoRestarts,
                 kafka_cluster_id: str, is_leader: Callable[[], bool],
                 leader_url: Callable[[], str | None], hosted_count: Callable[[], int]) -> None:
        self._config = config
        self._config_store = config_store
        self._status_store = status_store
        self._offset_store = offset_store
        self._registry = registry
        self._metrics = metrics
        self._auto_restarts = auto_restarts
        self._kafka_cluster_id = kafka_cluster_id
        self._is_leader = is_leader
        self._leader_url = leader_url
        self._hosted_count = hosted_count
        self._worker_id = config.worker_id
        self._commit = build_commit()  # found once, here: GET / never runs git

    def snapshot(self, refresh: bool = False) -> ClusterConfigState:
        if refresh:
            self._config_store.read_to_end(READ_TIMEOUT_S)
        return self._config_store.snapshot()

    @staticmethod
    def require(snap: ClusterConfigState, name: str,
                missing: str = "Connector {} not found") -> dict[str, str]:
        """The connector's config; NotFoundException with ``missing`` (Connect's
        wording differs per route, clients match on it) if there is none."""
        config = snap.connector_config(name)
        if config is None:
            raise NotFoundException(missing.format(name))
        return config

    def resolved(self, config: dict[str, str]) -> dict[str, str]:
        """``config`` (as the config topic holds it) with its config-provider variables
        resolved, for what this worker reads of it (offsets topic, restart policy,
        offsets alteration's producer), as Connect reads a connector's config through
        its transformer; ConfigException naming the key of a variable that cannot be
        resolved."""
        resolution = self._config.config_resolver.resolve(config)
        resolution.raise_for_errors()
        return resolution.values

    # ----------------------------------------------------- Connect's routes

    def server_info(self) -> ServerInfo:
        return ServerInfo(__version__, self._commit, self._kafka_cluster_id)

    def connectors(self) -> list[str]:
        return sorted(self.snapshot().connectors())

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self.require(self.snapshot(), name))

    def connector_info(self, name: str) -> ConnectorInfo:
        snap = self.snapshot()
        config = self.require(snap, name)
        tasks = [ConnectorTaskId(name, i) for i in range(snap.task_count(name))]
        return ConnectorInfo(name, dict(config), tasks)

    def task_configs(self, name: str) -> list[TaskInfo]:
        snap = self.snapshot()
        self.require(snap, name)
        return [TaskInfo(ConnectorTaskId(name, i), dict(cfg))
                for i, cfg in enumerate(snap.task_configs(name))]

    def connector_status(self, name: str) -> ConnectorStateInfo:
        snap = self.snapshot()
        self.require(snap, name, "No status found for connector {}")
        status = _seen(snap, self._status_store.connector_status(name))
        connector = (StateInfo(status.state, status.worker_id, status.trace, status.version)
                     if status else StateInfo(State.UNASSIGNED.value, self._worker_id))
        tasks = [self._task_state(snap, name, i) for i in range(snap.task_count(name))]
        owner = snap.declared_by(name)
        return ConnectorStateInfo(name, connector, tasks,
                                  declared_by=owner.file if owner is not None else None)

    def _task_state(self, snap: ClusterConfigState, name: str, task: int) -> TaskStateInfo:
        status = _seen(snap, self._status_store.task_status(name, task))
        if status is None:
            return TaskStateInfo(task, State.UNASSIGNED.value, self._worker_id)
        return TaskStateInfo(task, status.state, status.worker_id, status.trace, status.version)

    def task_status(self, name: str, task: int) -> TaskStateInfo:
        snap = self.snapshot()
        if snap.connector_config(name) is None or not 0 <= task < snap.task_count(name):
            raise NotFoundException(f"No status found for task {name}-{task}")
        return self._task_state(snap, name, task)

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        config = self.require(self.snapshot(), name)
        own = ConnectorConfig(self.resolved(config)).offsets_storage_topic
        return self._offset_store.connector_offsets(name, own)

    def connector_active_topics(self, name: str) -> ActiveTopicsInfo:
        return ActiveTopicsInfo(name, sorted(self._status_store.active_topics(name)))

    def connector_plugins(self) -> list[PluginInfo]:
        return list_plugins()

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return [key.to_info_dict() for key in plugin_config_keys(plugin)]

    def validate_connector_config(self, plugin: str | None,
                                  config: dict[str, str]) -> ConfigInfos:
        return validate_for_worker(self._config, plugin, config)

    # ------------------------------------------------------------- views

    def metrics_exposition(self) -> bytes:
        """``GET /metrics``: every metric in Prometheus' text format. In-memory
        reads only, so it answers during rebalances and broker outages."""
        self._metrics.tasks.keep_only(
            (s.connector, s.task, s.generation) for s in self._registry.slots())
        return self._metrics.exposition()

    def _statuses(self) -> _Statuses:
        """Every connector of the config snapshot, sorted: its status, config and its
        tasks' statuses, as this worker's status-store cache has them (no I/O)."""
        snap = self._config_store.snapshot()
        return [(name, _seen(snap, self._status_store.connector_status(name)),
                 snap.connector_config(name) or {},
                 [_seen(snap, self._status_store.task_status(name, task))
                  for task in range(len(snap.task_configs(name)))])
                for name in sorted(snap.connectors())]

    def dashboard(self) -> DashboardView:
        """The /ui view (:class:`DashboardView`), from memory only."""
        slots = {(s.connector, s.task): s for s in self._registry.slots()}
        stalled_s = self._registry.stalled_seconds()
        self._metrics.tasks.keep_only((s.connector, s.task, s.generation)
                                      for s in slots.values())
        histories = self._metrics.tasks.tasks()
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
                    stall=None if slot is None or slot.stall is None else StallView(
                        call=slot.stall.call, stalled_s=stalled_s.get((name, task), 0.0),
                        since_ms=slot.stall.since_ms, threshold_ms=slot.stall.threshold_ms),
                ))
            connectors.append(ConnectorView(
                name=name, type="source",
                state=status.state if status else State.UNASSIGNED.value,
                worker_id=status.worker_id if status else None,
                trace=status.trace if status else None,
                connector_class=config.get("connector.class"), tasks=tuple(tasks)))
        return DashboardView(worker_id=self._worker_id, leader_url=self._leader_url(),
                             is_leader=self._is_leader(), generated_at_ms=int(time.time() * 1000),
                             window_s=HISTORY_S, connectors=tuple(connectors))

    def cluster_view(self) -> ClusterView:
        """What ``/metrics`` says of the cluster as this worker sees it."""
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
                           hosted_connectors=self._hosted_count(),
                           hosted_tasks=len(self._registry.slots()),
                           leader_url=self._leader_url(), is_leader=self._is_leader(),
                           auto_restarts=self._auto_restarts.counts(),
                           stalled_s=self._registry.stalled_seconds())


def _seen(snap: ClusterConfigState, status: StatusRecord | None) -> StatusRecord | None:
    """``status`` as of the leader ``snap`` knows (see the module docstring)."""
    if status is None:
        return None
    return as_seen_under_leader(status, snap.leader_worker_id, snap.leader_epoch)
