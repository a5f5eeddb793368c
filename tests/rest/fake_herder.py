"""An in-memory :class:`Herder` for unit tests of the REST layer's HTTP shapes and codes.

It claims nothing about Kafka: connectors live in a dict, every task is RUNNING
unless told otherwise. Tests steer it with three knobs:

* ``fail["method_name"] = exc``: that method raises ``exc``;
* ``leader_url``: when ``is_leader`` is False, every leader-only method (writes,
  fencing) raises ``NotLeaderException(leader_url)``;
* ``ghosts``: names ``connectors()`` lists but every lookup says do not exist
  (a connector deleted in the middle of a listing).

``calls`` records ``(method, args)`` for every call, in order.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.cluster.herder_api import (
    ActiveTopicsInfo,
    CommittedOffset,
    ConnectorInfo,
    ConnectorStateInfo,
    ConnectorTaskId,
    ConnectorView,
    DashboardView,
    HealthInfo,
    LoggerLevel,
    PluginInfo,
    ServerInfo,
    StateInfo,
    TaskInfo,
    TaskSeries,
    TaskStateInfo,
    TaskView,
    TopicTracking,
)
from connect_runtime.cluster.loggers import LoggerLevels, parse_level
from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    NotFoundException,
    NotLeaderException,
)

WORKER_ID = "127.0.0.1:8083"
# The version every fake connector and task reports in its status (KIP-891).
PLUGIN_VERSION = "0.1.0"
SEQUENCE_CLASS = "connect_runtime.connectors.sequence.SequenceSourceConnector"


@dataclass
class FakeConfigInfos:
    """Enough of Connect's ConfigInfos for the validate endpoint."""

    name: str
    errors: dict[str, list[str]]

    @property
    def error_count(self) -> int:
        return sum(len(e) for e in self.errors.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "error_count": self.error_count,
            "groups": ["Common"],
            "configs": [
                {"definition": {"name": key}, "value": {"name": key, "errors": errs}}
                for key, errs in self.errors.items()
            ],
        }


@dataclass
class _Connector:
    config: dict[str, str]
    state: str = "RUNNING"
    task_states: dict[int, str] = field(default_factory=dict)
    # What connector_offsets reports; None: the fixed offsets every connector has.
    offsets: list[dict[str, Any]] | None = None


class FakeHerder:
    """See the module docstring."""

    def __init__(self, *, is_leader: bool = True, leader_url: str | None = None) -> None:
        self.is_leader = is_leader
        self.leader_url = leader_url
        self.fail: dict[str, BaseException] = {}
        self.ghosts: set[str] = set()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.health_info = HealthInfo("healthy", "Worker has completed startup")
        self.plugins = [
            PluginInfo(SEQUENCE_CLASS, "source", "0.1.0"),
            PluginInfo("org.apache.kafka.connect.transforms.InsertField$Value", "transformation",
                       "0.1.0"),
        ]
        self._connectors: dict[str, _Connector] = {}
        self._lock = threading.Lock()
        # Logger levels: the real rules over a private hierarchy, so tests never
        # touch the process's logging; ``now_ms`` is the clock of last_modified.
        self.now_ms = 1_700_000_000_000
        self.logging = logging.Manager(logging.RootLogger(logging.INFO))
        self.loggers = LoggerLevels(self.logging, clock=lambda: self.now_ms)
        # Active topics (KIP-558): the worker's settings, and the topics per connector.
        self.tracking = TopicTracking(enabled=True, allow_reset=True)
        self.active_topics: dict[str, set[str]] = {}
        # The dashboard: traces of tasks by (connector, task), shown in its view.
        self.task_traces: dict[tuple[str, int], str] = {}

    # -- steering ---------------------------------------------------------------

    def add(self, name: str, config: dict[str, str] | None = None) -> None:
        """Create ``name`` directly, bypassing leadership and call recording."""
        config = dict(config or {"connector.class": SEQUENCE_CLASS, "tasks.max": "2"})
        config.setdefault("name", name)
        with self._lock:
            self._connectors[name] = _Connector(config, task_states=self._tasks_for(config))

    def _enter(self, method: str, *args: Any, leader_only: bool = False) -> None:
        with self._lock:
            self.calls.append((method, args))
        if method in self.fail:
            raise self.fail[method]
        if leader_only and not self.is_leader:
            raise NotLeaderException("Only the leader may do this", self.leader_url)

    def _get(self, name: str) -> _Connector:
        connector = self._connectors.get(name)
        if connector is None:
            raise NotFoundException(f"Connector {name} not found")
        return connector

    @staticmethod
    def _tasks_for(config: dict[str, str]) -> dict[int, str]:
        return {n: "RUNNING" for n in range(int(config.get("tasks.max", "1")))}

    def _info(self, name: str) -> ConnectorInfo:
        connector = self._get(name)
        tasks = [ConnectorTaskId(name, n) for n in sorted(connector.task_states)]
        return ConnectorInfo(name, dict(connector.config), tasks)

    def _status(self, name: str) -> ConnectorStateInfo:
        connector = self._get(name)
        tasks = [TaskStateInfo(n, s, WORKER_ID, version=PLUGIN_VERSION)
                 for n, s in sorted(connector.task_states.items())]
        return ConnectorStateInfo(
            name, StateInfo(connector.state, WORKER_ID, version=PLUGIN_VERSION), tasks)

    # -- Herder -------------------------------------------------------------------

    def server_info(self) -> ServerInfo:
        self._enter("server_info")
        return ServerInfo("0.1.0", "abc123", "cluster-id-1")

    def health(self) -> HealthInfo:
        self._enter("health")
        return self.health_info

    def metrics_exposition(self) -> bytes:
        self._enter("metrics_exposition")
        return b"# HELP kafka_connect_worker_connector_count Connectors.\n"

    def connectors(self) -> list[str]:
        self._enter("connectors")
        return sorted([*self._connectors, *self.ghosts])

    def connector_info(self, name: str) -> ConnectorInfo:
        self._enter("connector_info", name)
        return self._info(name)

    def connector_config(self, name: str) -> dict[str, str]:
        self._enter("connector_config", name)
        return dict(self._get(name).config)

    def connector_status(self, name: str) -> ConnectorStateInfo:
        self._enter("connector_status", name)
        return self._status(name)

    def task_status(self, name: str, task: int) -> TaskStateInfo:
        self._enter("task_status", name, task)
        connector = self._get(name)
        if task not in connector.task_states:
            raise NotFoundException(f"Task {name}-{task} not found")
        return TaskStateInfo(task, connector.task_states[task], WORKER_ID,
                             version=PLUGIN_VERSION)

    def task_configs(self, name: str) -> list[TaskInfo]:
        self._enter("task_configs", name)
        connector = self._get(name)
        return [
            TaskInfo(ConnectorTaskId(name, n), {"task.id": str(n)})
            for n in sorted(connector.task_states)
        ]

    def create_connector(
        self, name: str, config: dict[str, str], initial_state: str | None = None,
        initial_offsets: list[tuple[dict[str, Any], dict[str, Any] | None]] | None = None,
    ) -> ConnectorInfo:
        """``initial_offsets`` become what ``connector_offsets`` reports (None offsets
        left out); a partition holding ``"refuse"`` is refused, as a connector's
        ``alter_offsets`` would, and nothing is created."""
        self._enter("create_connector", name, dict(config), initial_state, initial_offsets,
                    leader_only=True)
        if name in self._connectors:
            raise AlreadyExistsException(f"Connector {name} already exists")
        if "connector.class" not in config:
            raise BadRequestException("Connector config is missing connector.class")
        if any("refuse" in partition for partition, _ in initial_offsets or ()):
            raise BadRequestException(f"Invalid value for field 'initial_offsets': connector "
                                      f"{name} cannot take initial offsets: the connector "
                                      "refused them: no such partition")
        state = {"PAUSED": "PAUSED", "STOPPED": "STOPPED"}.get(initial_state or "", "RUNNING")
        # Like Connect: a connector created PAUSED (or STOPPED) has no tasks yet.
        tasks = self._tasks_for(config) if state == "RUNNING" else {}
        self._connectors[name] = _Connector(dict(config), state, tasks)
        if initial_offsets is not None:
            self._connectors[name].offsets = [
                {"partition": dict(p), "offset": dict(o)} for p, o in initial_offsets
                if o is not None]
        return self._info(name)

    def put_connector_config(self, name: str, config: dict[str, str]) -> tuple[bool, ConnectorInfo]:
        self._enter("put_connector_config", name, dict(config), leader_only=True)
        created = name not in self._connectors
        self._connectors[name] = _Connector(dict(config), task_states=self._tasks_for(config))
        return created, self._info(name)

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> ConnectorInfo:
        self._enter("patch_connector_config", name, dict(patch), leader_only=True)
        connector = self._get(name)
        for key, value in patch.items():
            if value is None:
                connector.config.pop(key, None)
            else:
                connector.config[key] = value
        return self._info(name)

    def delete_connector(self, name: str) -> None:
        self._enter("delete_connector", name, leader_only=True)
        self._get(name)
        del self._connectors[name]

    def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        self._enter("restart_connector", name, include_tasks, only_failed, leader_only=True)
        status = self._status(name)
        if not only_failed or status.connector.state == "FAILED":
            status.connector.state = "RESTARTING"
        if include_tasks:
            for task in status.tasks:
                if not only_failed or task.state == "FAILED":
                    task.state = "RESTARTING"
        return status

    def restart_task(self, name: str, task: int) -> None:
        self._enter("restart_task", name, task, leader_only=True)
        if task not in self._get(name).task_states:
            raise NotFoundException(f"Task {name}-{task} not found")

    def pause_connector(self, name: str) -> None:
        self._enter("pause_connector", name, leader_only=True)
        self._get(name).state = "PAUSED"

    def resume_connector(self, name: str) -> None:
        self._enter("resume_connector", name, leader_only=True)
        connector = self._get(name)
        connector.state = "RUNNING"
        connector.task_states = connector.task_states or self._tasks_for(connector.config)

    def stop_connector(self, name: str) -> None:
        self._enter("stop_connector", name, leader_only=True)
        self._get(name).state = "STOPPED"

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        self._enter("connector_offsets", name)
        offsets = self._get(name).offsets
        if offsets is not None:
            return [dict(entry) for entry in offsets]
        return [{"partition": {"task": 0}, "offset": {"seq": 41}}]

    # -- offsets alteration (KIP-875) ----------------------------------------------

    def _modify_offsets(self, method: str, name: str, *args: Any) -> None:
        self._enter(method, name, *args, leader_only=True)
        if self._get(name).state != "STOPPED":
            raise BadRequestException(f"Connector {name} is not STOPPED")

    def alter_connector_offsets(
        self, name: str, offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
    ) -> str:
        self._modify_offsets("alter_connector_offsets", name, offsets)
        return "The offsets for this connector have been altered successfully"

    def reset_connector_offsets(self, name: str) -> str:
        self._modify_offsets("reset_connector_offsets", name)
        return "The offsets for this connector have been reset successfully"

    def connector_plugins(self) -> list[PluginInfo]:
        self._enter("connector_plugins")
        return list(self.plugins)

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        self._enter("plugin_config", plugin)
        if plugin not in (SEQUENCE_CLASS, "SequenceSourceConnector", "SequenceSource"):
            raise NotFoundException(f"Unknown plugin {plugin}")
        return [{"name": "topic", "type": "STRING", "required": True, "default_value": None,
                 "importance": "HIGH", "documentation": "Output topic", "group": None,
                 "width": "NONE", "display_name": "topic", "dependents": [],
                 "order": -1}]

    def validate_connector_config(
        self, plugin: str | None, config: dict[str, str]
    ) -> FakeConfigInfos:
        self._enter("validate_connector_config", plugin, dict(config))
        errors = {} if "topic" in config else {"topic": ["Missing required configuration"]}
        return FakeConfigInfos(config.get("connector.class", plugin or ""), errors)

    def fence_zombies(self, name: str) -> None:
        self._enter("fence_zombies", name, leader_only=True)
        self._get(name)

    def declared_connectors(self) -> dict[str, Any]:
        self._enter("declared_connectors", leader_only=True)
        return {"source": None, "last_pass_ms": None, "files": []}

    # -- logger levels (KIP-495, KIP-976) -----------------------------------------

    def logger_levels(self) -> dict[str, LoggerLevel]:
        self._enter("logger_levels")
        return self.loggers.all_levels()

    def logger_level(self, name: str) -> LoggerLevel | None:
        self._enter("logger_level", name)
        return self.loggers.level(name)

    def set_worker_logger_level(self, namespace: str, level: str) -> list[str]:
        self._enter("set_worker_logger_level", namespace, level)
        return self.loggers.set_level(namespace, level)

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Checks the level, then needs the leader; applies at once (no config topic)."""
        name = parse_level(level)
        self._enter("set_cluster_logger_level", namespace, level, leader_only=True)
        self.loggers.set_level(namespace, name)

    # -- active topics (KIP-558) --------------------------------------------------

    def topic_tracking(self) -> TopicTracking:
        self._enter("topic_tracking")
        return self.tracking

    def connector_active_topics(self, name: str) -> ActiveTopicsInfo:
        """Any worker answers; an unknown connector has no topics (Connect's 200)."""
        self._enter("connector_active_topics", name)
        return ActiveTopicsInfo(name, sorted(self.active_topics.get(name, ())))

    def reset_connector_active_topics(self, name: str) -> None:
        self._enter("reset_connector_active_topics", name)
        self.active_topics.pop(name, None)

    # -- the /ui dashboard ----------------------------------------------------------

    def dashboard(self) -> DashboardView:
        """A view over the fake's connectors: no hosts, empty metrics series; task 0
        of each connector holds the offsets ``connector_offsets`` reports."""
        self._enter("dashboard")
        connectors = []
        for name, connector in sorted(self._connectors.items()):
            tasks = tuple(
                TaskView(id=n, state=state, worker_id=WORKER_ID,
                         trace=self.task_traces.get((name, n)), attempt=0,
                         series=TaskSeries(),
                         offsets=(CommittedOffset({"task": 0}, {"seq": 41}),) if n == 0 else ())
                for n, state in sorted(connector.task_states.items()))
            connectors.append(ConnectorView(
                name=name, type="source", state=connector.state, worker_id=WORKER_ID,
                connector_class=connector.config.get("connector.class", "").split(".")[-1],
                tasks=tasks))
        return DashboardView(worker_id=WORKER_ID, leader_url=self.leader_url,
                             is_leader=self.is_leader, generated_at_ms=self.now_ms, window_s=600,
                             connectors=tuple(connectors))
