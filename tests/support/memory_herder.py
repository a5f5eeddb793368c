"""In-memory stand-ins for the herder's Kafka stores and Spark runner, for tests of
the herder's own logic (threads, ordering, secrets handling). Nothing built on
them claims anything about Kafka or Spark.

* :class:`MemoryConfigStore`: the config topic as one immutable snapshot; writes
  apply at once and bump the offset, task configs get a new generation.
* :class:`MemoryStatusStore`: the status topic as dicts.
* :class:`RecordingRunner`: Spark as a record of submissions; each submission is a
  job whose ``done`` event is set when it is stopped.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.storage.config_store import ClusterConfigState, SessionKey
from connect_runtime.storage.status_store import StatusRecord


class MemoryConfigStore:
    """The config topic as a dict: writes apply at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards state's read-modify-write
        self.state = ClusterConfigState(offset=0)

    # The in-memory topic always accepts the leader's writes: nothing to claim.
    has_write_privileges = True

    def claim_write_privileges(self) -> None:
        pass

    def snapshot(self) -> ClusterConfigState:
        return self.state

    def read_to_end(self, timeout: float) -> None:
        pass

    def _replace(self, **changes: Any) -> None:
        self.state = dataclasses.replace(self.state, offset=self.state.offset + 1, **changes)

    def put_connector_config(self, name: str, props: Mapping[str, Any],
                             target_state: str | None = None) -> None:
        with self._lock:
            targets = dict(self.state._target_states)
            if target_state is not None:
                targets[name] = target_state
            self._replace(_connector_configs={**self.state._connector_configs,
                                              name: dict(props)},
                          _target_states=targets)

    def put_task_configs(self, name: str, configs: Sequence[Mapping[str, Any]]) -> None:
        with self._lock:
            self._replace(_task_configs={**self.state._task_configs,
                                         name: tuple(dict(c) for c in configs)},
                          _generations={**self.state._generations, name: self.state.offset})

    def put_session_key(self, key: bytes, algorithm: str, creation_ms: int) -> None:
        with self._lock:
            self._replace(session_key=SessionKey(key, algorithm, creation_ms))


class MemoryStatusStore:
    """Connector states as ``(state, trace)``; task statuses as records."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards tasks
        self.connectors: dict[str, tuple[str, str | None]] = {}
        self.tasks: dict[tuple[str, int], StatusRecord] = {}

    def connector_status(self, name: str) -> Any:
        return None

    def task_status(self, name: str, task: int) -> StatusRecord | None:
        with self._lock:
            return self.tasks.get((name, task))

    def put_connector(self, name: str, state: str, worker_id: str, trace: str | None = None,
                      **_: Any) -> None:
        self.connectors[name] = (state, trace)

    def put_task(self, connector: str, task: int, state: str, worker_id: str,
                 trace: str | None = None, generation: int = 0,
                 version: str | None = None) -> None:
        with self._lock:
            self.tasks[(connector, task)] = StatusRecord(state, worker_id, trace, generation,
                                                         version)

    def topic_connectors(self) -> set[str]:
        return set()


@dataclass
class Job:
    connector: str
    generation: int
    specs: list[TaskSpec]
    done: threading.Event = field(default_factory=threading.Event)


class RecordingRunner:
    per_leader = False
    healthy = True

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards jobs and history
        self.jobs: dict[str, Job] = {}
        self.history: list[tuple[str, int]] = []  # (connector, generation) per submission

    @property
    def submitted(self) -> dict[str, list[TaskSpec]]:
        with self._lock:
            return {name: job.specs for name, job in self.jobs.items()}

    def submit(self, connector: str, generation: int, specs: list[TaskSpec]) -> None:
        with self._lock:
            self.jobs[connector] = Job(connector, generation, specs)
            self.history.append((connector, generation))

    def job(self, connector: str) -> Job | None:
        with self._lock:
            return self.jobs.get(connector)

    def shortfall(self) -> None:
        return None

    def wait_stopped(self, connector: str, graceful_timeout_s: float) -> None:
        with self._lock:
            job = self.jobs.pop(connector, None)
        if job is not None:
            job.done.set()


def leading_herder(overrides: Mapping[str, str] | None = None) -> DistributedHerder:
    """A DistributedHerder over the in-memory stores and :class:`RecordingRunner`,
    already leader (as winning the group's election sets it); ``overrides`` are
    worker keys. Its reconcile thread is not started: tests that need it start it."""
    config = WorkerConfig({
        "group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
        "status.storage.topic": "s", "listeners": "http://127.0.0.1:8083", **(overrides or {})})
    herder = DistributedHerder(config, MemoryConfigStore(), MemoryStatusStore(),  # type: ignore[arg-type]
                               offset_store=None, runner=RecordingRunner(),  # type: ignore[arg-type]
                               kafka_cluster_id="cluster")
    herder._leadership.leader = True
    return herder
