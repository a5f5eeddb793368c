"""The contract between the REST layer and the herder (the worker's control plane).

The REST layer (``rest/``) only talks to a :class:`Herder`; it never touches
Kafka or Spark. Every method is synchronous and may block on Kafka for up to
the request timeout; REST calls it from a thread pool.

Errors are signalled with the exception tree in :mod:`connect_runtime.errors`;
the REST layer maps them to status codes:

======================================  ====
NotFoundException                       404
AlreadyExistsException                  409
ConflictException                       409
BadRequestException, ConfigException    400
NotLeaderException                      forwarded to ``leader_url`` (or 409 if unknown)
anything else                           500 with the message
======================================  ====

The dataclasses here serialize, with ``to_dict()``, to the exact JSON shapes of
Kafka Connect's REST API.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

# The dashboard's view is plain data the herder builds and REST renders (re-exported,
# so REST still sees the control plane through this module alone).
from connect_runtime.cluster.dashboard_view import CommittedOffset as CommittedOffset
from connect_runtime.cluster.dashboard_view import ConnectorView as ConnectorView
from connect_runtime.cluster.dashboard_view import DashboardView as DashboardView
from connect_runtime.cluster.dashboard_view import StallView as StallView
from connect_runtime.cluster.dashboard_view import TaskSeries as TaskSeries
from connect_runtime.cluster.dashboard_view import TaskView as TaskView
from connect_runtime.cluster.dashboard_view import TransactionSizes as TransactionSizes

# Plugins describe themselves; the herder API passes the description on (re-exported).
from connect_runtime.plugins import PluginInfo as PluginInfo

HERDER_LOGGER = "connect_runtime.cluster.herder"
"""The logger of the herder's lifecycle lines (docs/operations.md), whichever of its
parts (leadership, config writer, reconciler, task events) logs them: operators
filter on it and set its level through ``/admin/loggers``."""


@dataclass(frozen=True, slots=True)
class ConnectorTaskId:
    connector: str
    task: int

    def to_dict(self) -> dict[str, Any]:
        return {"connector": self.connector, "task": self.task}

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass(slots=True)
class ConnectorInfo:
    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: str = "source"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": dict(self.config),
            "tasks": [t.to_dict() for t in self.tasks],
            "type": self.type,
        }


@dataclass(slots=True)
class StateInfo:
    """A connector's or task's state: UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED, RESTARTING.

    ``version`` is the connector's ``version()`` (KIP-891); Connect 4.1 always
    shows the key, null when the version is unknown.
    """

    state: str
    worker_id: str
    trace: str | None = None
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        out["version"] = self.version
        return out


@dataclass(slots=True)
class TaskStateInfo:
    """A task's state; ``version`` is the task's ``version()``, null when unknown."""

    id: int
    state: str
    worker_id: str
    trace: str | None = None
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        out["version"] = self.version
        return out


@dataclass(slots=True)
class ConnectorStateInfo:
    name: str
    connector: StateInfo
    tasks: list[TaskStateInfo] = field(default_factory=list)
    type: str = "source"
    declared_by: str | None = None
    """The connector file that owns it (not a Connect key; absent when none does)."""

    def to_dict(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "connector": self.connector.to_dict(),
            "tasks": [t.to_dict() for t in self.tasks],
            "type": self.type,
        }
        if self.declared_by is not None:
            out["declared_by"] = self.declared_by
        return out


@dataclass(slots=True)
class TaskInfo:
    id: ConnectorTaskId
    config: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id.to_dict(), "config": dict(self.config)}


@dataclass(slots=True)
class ServerInfo:
    version: str
    commit: str
    kafka_cluster_id: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "commit": self.commit,
            "kafka_cluster_id": self.kafka_cluster_id,
        }


@dataclass(slots=True)
class HealthInfo:
    """``status`` is "healthy", "starting" (REST 503) or "unhealthy" (REST 500)."""

    status: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "message": self.message}


# ----------------------------------------------------------- logger levels (KIP-495)


@dataclass(frozen=True, slots=True)
class LoggerLevel:
    """A logger's level by Connect's name (WARN, not WARNING) and when ``/admin/loggers``
    last changed it, in ms since the epoch; None if it never did."""

    level: str
    last_modified: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "last_modified": self.last_modified}


# ------------------------------------------------------------ active topics (KIP-558)


@dataclass(frozen=True, slots=True)
class ActiveTopicsInfo:
    """The topics recorded as active for a connector (sorted by name)."""

    connector: str
    topics: list[str]

    def to_dict(self) -> dict[str, Any]:
        """Connect's body: ``{"<connector>": {"topics": [...]}}``."""
        return {self.connector: {"topics": list(self.topics)}}


@dataclass(frozen=True, slots=True)
class TopicTracking:
    """``topic.tracking.enable`` and ``topic.tracking.allow.reset`` of this worker."""

    enabled: bool
    allow_reset: bool


class ConfigInfosLike(Protocol):
    """Connect's ConfigInfos (validation result); see ``connect_runtime.config.validation``."""

    @property
    def error_count(self) -> int: ...

    def to_dict(self) -> dict[str, Any]: ...


class Herder(Protocol):
    """The operations the REST API needs. Names follow Kafka Connect's Herder."""

    def server_info(self) -> ServerInfo: ...

    def health(self) -> HealthInfo: ...

    def connectors(self) -> list[str]: ...

    def connector_info(self, name: str) -> ConnectorInfo: ...

    def connector_config(self, name: str) -> dict[str, str]: ...

    def connector_status(self, name: str) -> ConnectorStateInfo: ...

    def task_status(self, name: str, task: int) -> TaskStateInfo: ...

    def task_configs(self, name: str) -> list[TaskInfo]: ...

    def create_connector(
        self, name: str, config: dict[str, str], initial_state: str | None = None,
        initial_offsets: list[tuple[dict[str, Any], dict[str, Any] | None]] | None = None,
    ) -> ConnectorInfo:
        """Validate and create (leader only). Raises AlreadyExistsException,
        BadRequestException.

        ``initial_state`` is RUNNING (default), PAUSED or STOPPED. ``initial_offsets``
        (KIP-995, beyond Connect 4.1) are ``(partition, offset)`` pairs as for
        :meth:`alter_connector_offsets`: checked by the connector's ``alter_offsets``
        once the config is valid, and written before the config, so the first task
        starts from them. BadRequestException if the config is invalid or the
        connector refuses them; nothing is written then.
        """
        ...

    def put_connector_config(self, name: str, config: dict[str, str]) -> tuple[bool, ConnectorInfo]:
        """Create or replace; returns (created, info)."""
        ...

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> ConnectorInfo:
        """Merge ``patch`` into the existing config; None values remove keys."""
        ...

    def delete_connector(self, name: str) -> None: ...

    def restart_connector(
        self, name: str, include_tasks: bool, only_failed: bool
    ) -> ConnectorStateInfo:
        """Restart; the returned status marks what is restarting as RESTARTING."""
        ...

    def restart_task(self, name: str, task: int) -> None: ...

    def pause_connector(self, name: str) -> None: ...

    def resume_connector(self, name: str) -> None: ...

    def stop_connector(self, name: str) -> None: ...

    def connector_offsets(self, name: str) -> list[dict[str, Any]]:
        """``[{"partition": {...}, "offset": {...}}, ...]`` from the combined view."""
        ...

    def alter_connector_offsets(
        self, name: str, offsets: list[tuple[dict[str, Any], dict[str, Any] | None]]
    ) -> str:
        """KIP-875 (leader only): write ``(partition, offset)`` pairs for a STOPPED
        connector; returns Connect's message. BadRequestException if it is not
        stopped, the offsets are invalid or the connector refuses them."""
        ...

    def reset_connector_offsets(self, name: str) -> str:
        """KIP-875 (leader only): remove every offset of a STOPPED connector."""
        ...

    def connector_plugins(self) -> list[PluginInfo]:
        """Every plugin (connectors, converters, ...) in Connect's order of types; REST
        keeps the connectors unless ``connectorsOnly=false``."""
        ...

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        """ConfigKeyInfo dicts for the plugin's keys. NotFoundException if unknown."""
        ...

    def validate_connector_config(
        self, plugin: str | None, config: dict[str, str]
    ) -> ConfigInfosLike:
        """Validate with the framework's and the connector's ConfigDef plus KIP-618 checks."""
        ...

    def fence_zombies(self, name: str) -> None:
        """Internal (leader only): fence the previous task generation of ``name``."""
        ...

    def declared_connectors(self) -> dict[str, Any]:
        """Leader only: what the last pass over the connector files made of each
        (``connect_runtime.cluster.declared_connectors``); ``{"source": null, ...}``
        when this worker declares none."""
        ...

    # ------------------------------------------------- logger levels (KIP-495, KIP-976)
    # This worker's Python loggers; see connect_runtime.cluster.loggers for the rules.

    def logger_levels(self) -> dict[str, LoggerLevel]:
        """Every logger of this worker not at OFF, sorted by name; the root is "root"."""
        ...

    def logger_level(self, name: str) -> LoggerLevel | None:
        """The level of this worker's logger ``name``; None if no such logger exists."""
        ...

    def set_worker_logger_level(self, namespace: str, level: str) -> list[str]:
        """Set ``namespace`` and the loggers under it on this worker only, and in the
        processes of the tasks it runs (asynchronously: their slots apply it); returns
        the sorted names of this worker's loggers whose level changed. NotFoundException
        ("invalid log level '<level>'.") if ``level`` is not a Connect level name."""
        ...

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Write ``logger-cluster-<namespace>`` to the config topic (leader only): every
        worker running then applies it as :meth:`set_worker_logger_level` does, this one
        included, when it reads the record. Same NotFoundException for a bad level."""
        ...

    # ------------------------------------------------------------ active topics (KIP-558)
    # Read and written through the status topic, so any worker answers (as in Connect).

    def topic_tracking(self) -> TopicTracking:
        """This worker's topic tracking settings; REST refuses (403) what they disable."""
        ...

    def connector_active_topics(self, name: str) -> ActiveTopicsInfo:
        """The topics recorded as active for ``name``; none (not 404) for an unknown
        connector, as Connect answers."""
        ...

    def reset_connector_active_topics(self, name: str) -> None:
        """Tombstone ``name``'s active topics; tasks still producing to one record it
        again. Connect allows it in any state, and for unknown connectors (a no-op)."""
        ...

    # ------------------------------------------------------------------- metrics

    def metrics_exposition(self) -> bytes:
        """Every metric of this worker in Prometheus' text format (``GET /metrics``);
        in-memory reads only, so it answers during rebalances and broker outages."""
        ...

    # ------------------------------------------------------------ the /ui dashboard

    def dashboard(self) -> DashboardView:
        """A read-only view for the /ui dashboard; never blocks on Kafka or Spark
        (in-memory state only). What may be None, and why a follower's tasks have
        statuses but no series: :mod:`connect_runtime.cluster.dashboard_view`.
        ``connect_runtime.rest.dashboard`` renders it; ``GET /ui/view.json`` sends
        :meth:`DashboardView.to_json`."""
        ...
