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

# Plugins describe themselves; the herder API passes the description on (re-exported).
from connect_runtime.plugins import PluginInfo as PluginInfo


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
    """A connector's or task's state: UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED, RESTARTING."""

    state: str
    worker_id: str
    trace: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        return out


@dataclass(slots=True)
class TaskStateInfo:
    id: int
    state: str
    worker_id: str
    trace: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "state": self.state, "worker_id": self.worker_id}
        if self.trace is not None:
            out["trace"] = self.trace
        return out


@dataclass(slots=True)
class ConnectorStateInfo:
    name: str
    connector: StateInfo
    tasks: list[TaskStateInfo] = field(default_factory=list)
    type: str = "source"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "connector": self.connector.to_dict(),
            "tasks": [t.to_dict() for t in self.tasks],
            "type": self.type,
        }


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
        self, name: str, config: dict[str, str], initial_state: str | None = None
    ) -> ConnectorInfo:
        """Validate and create. Raises AlreadyExistsException, BadRequestException.

        ``initial_state`` is RUNNING (default), PAUSED or STOPPED.
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

    def connector_plugins(self) -> list[PluginInfo]: ...

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
