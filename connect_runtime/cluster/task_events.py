"""What the leader does when a task's slot reports a new state: its status.

The slot registry calls :meth:`TaskEvents.on_task_state` on its events thread, in
the order the slots' reports arrived. This writes the task's status (with the
generation and version of the slot that spoke, the generation raised to this
leader's election: ``status_store.status_generation``) and plans automatic restarts
(:class:`AutoRestarts`; the reconcile thread carries them out when due). It reads
no reconcile state: what it needs of a task is on its slot.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from connect_runtime.cluster.auto_restart import AutoRestarts, RestartPolicy
from connect_runtime.cluster.herder_api import HERDER_LOGGER
from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException
from connect_runtime.protocol.states import State
from connect_runtime.storage.config_store import ConfigStore
from connect_runtime.storage.status_store import StatusStore, status_generation

# Its lines are the herder's lifecycle events (docs/operations.md).
log = logging.getLogger(HERDER_LOGGER)


class TaskEvents:
    """Task state changes into the status topic, on the leader only."""

    def __init__(self, config: WorkerConfig, config_store: ConfigStore,
                 status_store: StatusStore, auto_restarts: AutoRestarts,
                 is_leader: Callable[[], bool], leader_epoch: Callable[[], int],
                 stopping: threading.Event,
                 resolved: Callable[[dict[str, str]], dict[str, str]]) -> None:
        self._config = config
        self._config_store = config_store
        self._status_store = status_store
        self._auto_restarts = auto_restarts
        self._is_leader = is_leader
        self._leader_epoch = leader_epoch
        self._stopping = stopping
        self._resolved = resolved
        self.registry: SlotRegistry | None = None
        """The registry whose slots speak here; set once, before it starts."""

    def on_task_state(self, connector: str, task: int, state: State, trace: str | None) -> None:
        if not self._is_leader():
            # Only the leader hosts tasks. A worker that lost leadership (a resumed
            # zombie) still hears its old slots until they stop; what they say,
            # typically "fenced", is about instances the new leader has replaced.
            log.info("not recording %s of task %s-%d: this worker no longer leads", state.value,
                     connector, task)
            return
        assert self.registry is not None
        slot = self.registry.slot(connector, task)
        generation = 0 if slot is None else slot.generation
        version = None if slot is None else slot.version
        if state is State.FAILED and slot is not None and slot.fenced:
            # Fenced usually means a new leader took over and started the task
            # anew while this worker stalled; it learns it lost the group within
            # a session timeout. Report only if it still leads after that.
            threading.Thread(target=self._report_fenced_later,
                             args=(connector, task, generation, trace), daemon=True,
                             name=f"fenced-{connector}-{task}").start()
            return
        if state is State.FAILED:
            trace = self._plan_restart(connector, task, generation, trace,
                                       self._restart_policy(connector))
        elif state is State.RUNNING:
            self._auto_restarts.running(connector, task, generation)
        self._put(connector, task, state, trace, generation, version)

    def job_failed(self, connector: str, tasks: Sequence[int], generation: int,
                   version: str | None, trace: str) -> None:
        """The Spark job hosting ``generation`` of ``connector`` failed (Spark gave up
        on one of its slots after ``spark.task.maxFailures`` attempts, say: each
        executor lost counts one). Every task in ``tasks`` is FAILED with the job's
        trace, those already FAILED too (what they waited for, a restart sent to
        their slot, died with the job), and under ``errors.restart.policy`` each
        gets an automatic restart planned, which resubmits the job when due."""
        if not self._is_leader():
            return
        policy = self._restart_policy(connector)
        for task in tasks:
            text = self._plan_restart(
                connector, task, generation,
                f"The Spark job hosting the tasks of {connector} failed:\n{trace}", policy)
            self._put(connector, task, State.FAILED, text, generation, version)

    def _plan_restart(self, connector: str, task: int, generation: int, trace: str | None,
                      policy: RestartPolicy) -> str | None:
        """Plan the automatic restart of a task that failed; returns its status trace,
        which says what happens next, and when."""
        plan = self._auto_restarts.failed(connector, task, generation, policy)
        if plan is None:
            return trace
        event = ({"event": "task_auto_restart_gave_up"} if plan.gave_up
                 else {"event": "task_auto_restart_scheduled"})
        log.log(logging.WARNING if plan.gave_up else logging.INFO,
                "task %s-%d: %s", connector, task, plan.note, extra={
                    **event, "connector": connector, "task": task,
                    "generation": generation, "attempt": plan.attempt})
        return f"{trace or ''}\n\n{plan.note}".lstrip()

    def _restart_policy(self, connector: str) -> RestartPolicy:
        config = self._config_store.snapshot().connector_config(connector)
        try:
            return RestartPolicy.from_values(ConnectorConfig(self._resolved(config or {})).values)
        except ConfigException:  # validated when written; a deleted one has none
            return RestartPolicy()

    def _put(self, connector: str, task: int, state: State, trace: str | None,
             generation: int, version: str | None) -> None:
        self._status_store.put_task(connector, task, state.value, self._config.worker_id, trace,
                                    generation=status_generation(generation,
                                                                 self._leader_epoch()),
                                    version=version)

    def _report_fenced_later(self, connector: str, task: int, generation: int,
                             trace: str | None) -> None:
        grace_s = int(self._config["session.timeout.ms"]) / 1000 + 2.0
        if self._stopping.wait(grace_s) or not self._is_leader():
            return
        assert self.registry is not None
        slot = self.registry.slot(connector, task)
        if slot is not None and slot.generation == generation and slot.fenced \
                and slot.state is State.FAILED:
            self._put(connector, task, State.FAILED, trace, generation, slot.version)
