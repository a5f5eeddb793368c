"""The reconcile thread: makes the running state follow the config topic.

One thread owns the *reconcile state* (:class:`ReconcileState`): the connector
instances this leader hosts, the task generation each connector runs on Spark,
the connectors whose Spark job failed, the connector instances a REST restart
asked for. Every other thread talks to it through messages on its queue, as
Kafka Connect's herder does with its tick thread and request queue:

* a config-topic change or a write wakes it (:meth:`Reconciler.wake`);
* REST restarts (:meth:`Reconciler.restart_task`, :meth:`Reconciler.restart_connector`)
  and a step-down (:meth:`Reconciler.release`) wait for its answer;
* Spark's job-failure callback (:meth:`Reconciler.job_failed`) does not wait.

So a check and the act that follows it (a restart checks the running generation
before it drops it) never interleave with another thread's act.

The rule is enforced at run time: :attr:`Reconciler._state` raises
:class:`OwnershipError` on any thread but the reconciler's, so a new code path that
touches the state from a REST or Spark thread fails the first time it runs.
``tests/cluster/test_reconciler.py`` races restarts, job failures and
reconfigurations against it.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

from connect_runtime.cluster.auto_restart import AutoRestarts
from connect_runtime.cluster.connector_host import HostedConnector
from connect_runtime.cluster.herder_api import HERDER_LOGGER
from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.cluster.task_specs import TaskSpecBuilder
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConflictException, OwnershipError
from connect_runtime.logs import trace_headline
from connect_runtime.plugins import connector_version
from connect_runtime.protocol.states import State, TargetState
from connect_runtime.storage.config_store import ClusterConfigState, ConfigStore
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.storage.status_store import StatusStore, status_generation

# Its lines are the herder's lifecycle events (docs/operations.md).
log = logging.getLogger(HERDER_LOGGER)

RECONCILE_PERIOD_S = 1.0
# A task Spark has not started this long after submission, while Spark lacks
# slots, gets the reason in its (UNASSIGNED) status.
WAITING_NOTE_AFTER_S = 10.0
# How long a REST restart waits for the reconcile thread to take it; as long as
# Kafka Connect's REST request timeout (its herder queues requests the same way).
REQUEST_TIMEOUT_S = 90.0


@dataclass
class ReconcileState:
    """What only the reconcile thread reads and writes (see the module docstring)."""

    hosted: dict[str, HostedConnector] = field(default_factory=dict)
    """Connector instances this leader runs, by connector name."""
    running_generation: dict[str, int] = field(default_factory=dict)
    """The config generation whose tasks were submitted to Spark, by connector."""
    failed_jobs: set[str] = field(default_factory=set)
    """Connectors whose Spark job failed: not resubmitted until a restart."""
    restart_connector: set[str] = field(default_factory=set)
    """Connectors whose instance a REST restart asked to restart."""


@dataclass(frozen=True)
class _Wake:
    pass


@dataclass(frozen=True)
class _RestartTask:
    connector: str
    task: int
    generation: int
    """The config generation the caller read; the restart is refused (409) if another runs."""


@dataclass(frozen=True)
class _RestartConnector:
    connector: str
    instance: bool
    tasks: tuple[int, ...]


@dataclass(frozen=True)
class _JobFailed:
    connector: str
    generation: int
    trace: str


@dataclass(frozen=True)
class _Release:
    pass


@dataclass(frozen=True)
class _Pass:
    pass


@dataclass(frozen=True)
class _Stop:
    pass


_Message = _Wake | _RestartTask | _RestartConnector | _JobFailed | _Release | _Pass | _Stop


@dataclass(frozen=True)
class ReconcilerParts:
    """What the reconciler works with; each part is thread-safe on its own."""

    config: WorkerConfig
    config_store: ConfigStore
    status_store: StatusStore
    runner: SparkTaskRunner
    registry: SlotRegistry
    specs: TaskSpecBuilder
    auto_restarts: AutoRestarts
    write: Callable[[str, Callable[[], None]], None]
    """A leader-checked config-topic write (:meth:`ConfigWriter.write`)."""
    resolved: Callable[[dict[str, str]], dict[str, str]]
    """A connector config with its config-provider variables resolved."""
    connector_started: Callable[[bool], None]
    """Counts a connector instance start (its argument: it failed to start)."""
    rotate_session_key: Callable[[], None]
    """Writes a new session key when the current one is due (every pass, first)."""
    reset_active_topics_of_deleted: Callable[[ClusterConfigState, frozenset[str]], None]
    """Tombstones the active topics of deleted connectors not in the given running set."""
    leader_epoch: Callable[[], int]
    """This worker's election (:attr:`Leadership.epoch`), for the generation of the
    statuses it writes (``status_store.status_generation``)."""
    job_failed: Callable[[str, Sequence[int], int, str | None, str], None]
    """Writes the FAILED statuses of a connector's tasks whose Spark job failed, and
    plans their automatic restarts (:meth:`TaskEvents.job_failed`)."""


class Reconciler:
    """The reconcile thread and the state it alone owns.

    ``is_leader`` and ``leadership_lock`` are the herder's: a pass runs under the
    lock and only while this worker leads, so a step-down or a takeover never
    interleaves with a pass that is starting tasks.
    """

    def __init__(self, parts: ReconcilerParts, is_leader: Callable[[], bool],
                 leadership_lock: threading.Lock) -> None:
        self._parts = parts
        self._is_leader = is_leader
        self._leadership_lock = leadership_lock
        self._queue: queue.SimpleQueue[tuple[_Message, Future[None] | None]] = \
            queue.SimpleQueue()
        self._owned = ReconcileState()
        # Guards _closed: once the thread has torn down, requests are answered at once.
        self._close_lock = threading.Lock()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self.hosted_count = 0
        """How many connector instances run here: published by the thread for metrics."""

    # ------------------------------------------------------ any thread

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def wake(self) -> None:
        """Ask for a reconcile pass soon (a config change, a write)."""
        self._queue.put((_Wake(), None))

    def job_failed(self, connector: str, generation: int, trace: str) -> None:
        """Spark's callback: the job running ``generation`` of ``connector`` died."""
        self._queue.put((_JobFailed(connector, generation, trace), None))

    def restart_task(self, connector: str, task: int, generation: int) -> None:
        """Restart one task; ConflictException if ``generation`` (what the caller
        read from the config topic) is not the one running."""
        self._ask(_RestartTask(connector, task, generation))

    def restart_connector(self, connector: str, instance: bool, tasks: tuple[int, ...]) -> None:
        """Restart the connector's instance (on the next pass) and/or some tasks."""
        self._ask(_RestartConnector(connector, instance, tasks))

    def release(self) -> None:
        """Stop every task and connector instance this worker runs; returns when done
        (or at once if the thread has already stopped, having torn down)."""
        self._ask(_Release(), timeout_s=None)  # as long as the graceful stops take

    def reconcile_now(self) -> None:
        """Run a pass on the reconcile thread; returns when it is done (tests use
        it to step the thread deterministically)."""
        self._ask(_Pass())

    def stop(self, timeout_s: float | None = None) -> None:
        """Stop the thread; it stops every task and connector instance first.
        By default waits for a pass in progress, the graceful stop of every task,
        then the instances."""
        if timeout_s is None:
            timeout_s = self._graceful_s() * 3 + 60
        self._queue.put((_Stop(), None))
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            log.warning("the reconcile thread did not stop within %.0fs; its tasks and "
                        "connector instances may still be stopping", timeout_s)

    def _ask(self, message: _Message, timeout_s: float | None = REQUEST_TIMEOUT_S) -> None:
        future: Future[None] = Future()
        with self._close_lock:
            if self._closed or not self._thread.is_alive():  # torn down, or never started
                if not isinstance(message, _Release):  # nothing is left to release
                    raise ConflictException("This worker's reconcile thread is not running "
                                            "(the worker is starting or stopping); retry "
                                            "the request")
                return
            self._queue.put((message, future))
        try:
            future.result(timeout=timeout_s)
        except TimeoutError as e:
            raise ConflictException(
                f"This worker's reconcile thread did not take the request within "
                f"{timeout_s:.0f}s (it is busy stopping or starting tasks); retry it") from e

    # ------------------------------------------------ the thread alone

    @property
    def _state(self) -> ReconcileState:
        if threading.current_thread() is not self._thread:
            raise OwnershipError(
                f"thread {threading.current_thread().name!r} touched the reconcile state; "
                "only the reconcile thread may (send it a message instead)")
        return self._owned

    def _run(self) -> None:
        try:
            while self._serve():
                self._pass()
        finally:
            self._teardown()
            with self._close_lock:
                self._closed = True
            self._drain_after_close()

    def _serve(self) -> bool:
        """Wait up to a period for messages and handle all queued; False on stop."""
        try:
            batch = [self._queue.get(timeout=RECONCILE_PERIOD_S)]
        except queue.Empty:
            return True
        while True:
            try:
                batch.append(self._queue.get_nowait())
            except queue.Empty:
                break
        keep_going = True
        for message, reply in batch:
            if isinstance(message, _Stop):
                keep_going = False
                continue
            if not keep_going and reply is not None:
                self._queue.put((message, reply))  # answered by _drain_after_close
                continue
            self._handle(message, reply)
        return keep_going

    def _handle(self, message: _Message, reply: Future[None] | None) -> None:
        try:
            match message:
                case _RestartTask(connector, task, generation):
                    if generation != self._state.running_generation.get(connector):
                        raise ConflictException(
                            f"Tasks of {connector} are being reconfigured; retry the "
                            "restart once the new generation is running")
                    self._restart_task(connector, task)
                case _RestartConnector(connector, instance, tasks):
                    if instance:
                        self._state.restart_connector.add(connector)
                    for task in tasks:
                        self._restart_task(connector, task)
                case _JobFailed(connector, generation, trace):
                    self._job_failed(connector, generation, trace)
                case _Release():
                    self._stop_everything()
                    self._state.failed_jobs.clear()
                case _Pass():
                    self._pass()
        except Exception as e:
            if reply is None:
                log.exception("reconcile thread: handling %s failed", type(message).__name__)
            else:
                reply.set_exception(e)
            return
        if reply is not None:
            reply.set_result(None)

    def _drain_after_close(self) -> None:
        while True:
            try:
                message, reply = self._queue.get_nowait()
            except queue.Empty:
                return
            if reply is None:
                continue
            if isinstance(message, _Release):
                reply.set_result(None)  # the teardown released everything
            else:
                reply.set_exception(ConflictException(
                    "This worker is stopping; retry the request on the new leader"))

    def _teardown(self) -> None:
        try:
            self._stop_everything()
        except Exception:
            log.exception("stopping tasks and connector instances failed")

    def _stop_everything(self) -> None:
        """Stop every task (all connectors' slots are told first, so their
        graceful stops overlap), then every connector instance."""
        state = self._state
        running = list(state.running_generation)
        for name in running:
            self._parts.registry.close(name)
        for name in running:
            self._parts.runner.wait_stopped(name, self._graceful_s())
            state.running_generation.pop(name, None)
        for host in state.hosted.values():
            host.stop()
        state.hosted.clear()
        self.hosted_count = 0

    def _graceful_s(self) -> float:
        return float(self._parts.config["task.shutdown.graceful.timeout.ms"]) / 1000

    def _status_generation(self, config_generation: int) -> int:
        return status_generation(config_generation, self._parts.leader_epoch())

    # ------------------------------------------------------- the pass

    def _pass(self) -> None:
        try:
            # Under the leadership lock: a step-down waits for the pass to finish,
            # so it never races a pass that is starting tasks.
            with self._leadership_lock:
                if self._is_leader():
                    self._reconcile_all()
        except Exception:
            log.exception("reconcile pass failed; retrying")
            time.sleep(RECONCILE_PERIOD_S)

    def _reconcile_all(self) -> None:
        state = self._state
        self._parts.rotate_session_key()
        snap = self._parts.config_store.snapshot()
        for name in set(snap.connectors()) | set(state.hosted) | set(state.running_generation):
            self._reconcile(name, snap)
            snap = self._parts.config_store.snapshot()
        self.hosted_count = len(state.hosted)
        message = self._parts.runner.shortfall()
        if message is not None:  # say why tasks wait in their status, not only in the log
            self._parts.registry.note_waiting(WAITING_NOTE_AFTER_S, message)
        self._restart_due_tasks()
        self._parts.reset_active_topics_of_deleted(snap, frozenset(state.running_generation))

    def _reconcile(self, name: str, snap: ClusterConfigState) -> None:
        config = snap.connector_config(name)
        if config is None:
            self._teardown_connector(name)
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
                self._write_task_configs(name, configs, snap)
                return  # the listener wakes us with the new generation
        self._ensure_tasks(name, snap, paused=target is TargetState.PAUSED)
        host.state = State.PAUSED if target is TargetState.PAUSED else State.RUNNING
        self._put_connector_status(name, host, snap)

    def _write_task_configs(self, name: str, configs: list[dict[str, str]],
                            snap: ClusterConfigState) -> None:
        store = self._parts.config_store
        self._parts.write(f"write task configs of {name}",
                          lambda: store.put_task_configs(name, configs))
        generation = store.snapshot().config_generation(name)  # the write read it
        log.info("connector %s: wrote task configs for %d task(s), generation %d "
                 "(was %d task(s))", name, len(configs), generation, snap.task_count(name),
                 extra={"event": "task_configs_written", "connector": name,
                        "generation": generation, "tasks": len(configs)})

    def _host(self, name: str, config: dict[str, str]) -> HostedConnector:
        state = self._state
        host = state.hosted.get(name)
        restart = name in state.restart_connector
        if host is not None and host.config == config and not restart:
            return host
        state.restart_connector.discard(name)
        if host is not None:
            host.stop()
        host = HostedConnector(name, config, self.wake,
                               lambda: self._offset_reader(name, config),
                               self._parts.config.config_resolver)
        host.start()
        self._parts.connector_started(host.state is State.FAILED)
        state.hosted[name] = host
        return host

    def _offset_reader(self, name: str, config: dict[str, str]) -> TaskOffsetStorageReader:
        worker = self._parts.config
        own = ConnectorConfig(self._parts.resolved(config)).offsets_storage_topic
        return TaskOffsetStorageReader(
            connector=name, bootstrap_servers=worker.bootstrap_servers,
            global_topic=worker["offset.storage.topic"],
            connector_topic=own if own != worker["offset.storage.topic"] else None,
            consumer_overrides=self._parts.specs.client_overrides("consumer"),
            admin_overrides=self._parts.specs.client_overrides("admin"))

    def _ensure_tasks(self, name: str, snap: ClusterConfigState, paused: bool) -> None:
        state, registry = self._state, self._parts.registry
        generation = snap.config_generation(name)
        if state.running_generation.get(name) == generation:
            registry.set_paused(name, paused)
            return
        if name in state.running_generation:
            self._stop_tasks(name)
        if name in state.failed_jobs:
            return
        configs = snap.task_configs(name)
        if not configs:
            return
        connector_config = snap.connector_config(name) or {}
        host = state.hosted.get(name)
        hidden = host.password_keys if host is not None else frozenset()
        # The Spark job's name (TaskSpec.submission): unique across submissions and
        # across runs of the worker, so no slot of an earlier job passes for this one's.
        submission = uuid.uuid4().hex
        specs = [self._parts.specs.build(name, i, generation, cfg, connector_config,
                                         snap.session_key, password_keys=hidden,
                                         submission=submission)
                 for i, cfg in enumerate(configs)]
        # Before the instances start: a task this leader took over from a dead
        # one reads UNASSIGNED here, not its predecessor's RUNNING, until the new
        # instance reports (the generation includes this leader's election, so
        # the status store's stale-UNASSIGNED rule lets it replace that RUNNING).
        for i in range(len(specs)):
            self._parts.status_store.put_task(name, i, State.UNASSIGNED.value,
                                              self._parts.config.worker_id,
                                              generation=self._status_generation(generation))
        registry.open(name, generation, len(specs), paused,
                      version=None if host is None else host.task_version,
                      submission=submission)
        self._parts.runner.submit(name, generation, specs)
        state.running_generation[name] = generation

    def _stop_tasks(self, name: str) -> None:
        self._parts.registry.close(name)
        self._parts.runner.wait_stopped(name, self._graceful_s())
        self._state.running_generation.pop(name, None)

    def _stop_connector(self, name: str, snap: ClusterConfigState) -> None:
        state, status_store = self._state, self._parts.status_store
        if name in state.running_generation:
            self._stop_tasks(name)
        host = state.hosted.pop(name, None)
        if host is not None:
            host.stop()
        if snap.task_count(name):  # Connect (KIP-875) empties the task configs of a stopped one
            store = self._parts.config_store
            self._parts.write(f"clear task configs of stopped {name}",
                              lambda: store.put_task_configs(name, []))
        current = status_store.connector_status(name)
        if current is None or current.state != State.STOPPED.value:
            # Connect shows the version of a stopped connector too, never started or not.
            version = (host.version if host is not None else connector_version(
                (snap.connector_config(name) or {}).get("connector.class", "")))
            status_store.put_connector(name, State.STOPPED.value, self._parts.config.worker_id,
                                       generation=self._status_generation(
                                           snap.config_generation(name)),
                                       version=version)

    def _teardown_connector(self, name: str) -> None:
        state = self._state
        self._parts.auto_restarts.forget(name)
        if name in state.running_generation:
            self._stop_tasks(name)
        host = state.hosted.pop(name, None)
        if host is not None:
            host.stop()
            status_store = self._parts.status_store
            status_store.delete_connector(name, len(status_store.task_statuses(name)))
        state.failed_jobs.discard(name)

    def _put_connector_status(self, name: str, host: HostedConnector,
                              snap: ClusterConfigState) -> None:
        status_store, worker_id = self._parts.status_store, self._parts.config.worker_id
        generation = self._status_generation(snap.config_generation(name))
        current = status_store.connector_status(name)
        if current is None or (current.state, current.trace, current.worker_id,
                               current.generation, current.version) != (
                host.state.value, host.trace, worker_id, generation, host.version):
            status_store.put_connector(name, host.state.value, worker_id, host.trace,
                                       generation=generation, version=host.version)

    # ------------------------------------------------------- restarts

    def _restart_due_tasks(self) -> None:
        """Automatic restarts whose delay is over (:mod:`.auto_restart`); only a task
        still FAILED in the same generation: a REST restart or a new generation
        took care of the others."""
        running, failed_jobs = self._state.running_generation, self._state.failed_jobs
        for connector, task, generation in self._parts.auto_restarts.due():
            if running.get(connector) != generation:
                continue
            if connector not in failed_jobs:  # else the job, all its slots, are gone
                slot = self._parts.registry.slot(connector, task)
                if slot is None or slot.state is not State.FAILED:
                    continue
            # A failed job's first due restart resubmits it, with every task: the
            # others' restarts then find their generation no longer running.
            self._restart_task(connector, task, automatic=True)

    def _restart_task(self, name: str, task: int, automatic: bool = False) -> None:
        state, registry = self._state, self._parts.registry
        if not automatic:
            self._parts.auto_restarts.cancel(name, task)
        self._parts.status_store.put_task(
            name, task, State.RESTARTING.value, self._parts.config.worker_id,
            generation=self._status_generation(state.running_generation.get(name, -1)))
        job = self._parts.runner.job(name)
        slot = None
        if name in state.failed_jobs or job is None or job.done.is_set():
            state.failed_jobs.discard(name)
            state.running_generation.pop(name, None)  # resubmit on the next pass
        elif not registry.restart(name, task):
            state.running_generation.pop(name, None)
        else:
            slot = registry.slot(name, task)
        how = ("its Spark job is resubmitted" if slot is None else
               f"restart {slot.restart_seq} sent to its slot (host {slot.host}, pid "
               f"{slot.pid}, Spark attempt {slot.attempt})")
        log.info("automatic restart of task %s-%d: %s" if automatic else
                 "restart of task %s-%d requested: %s", name, task, how,
                 extra={"event": "task_restart_requested", "connector": name, "task": task,
                        "restart": None if slot is None else slot.restart_seq,
                        "automatic": automatic})

    def _job_failed(self, connector: str, generation: int, trace: str) -> None:
        state = self._state
        if state.running_generation.get(connector) != generation:
            return
        state.failed_jobs.add(connector)
        host = state.hosted.get(connector)
        version = None if host is None else host.task_version
        tasks = sorted(slot.task for slot in self._parts.registry.slots()
                       if slot.connector == connector)
        for task in tasks:
            log.error("task %s-%d failed (generation %d): its Spark job failed: %s",
                      connector, task, generation, trace_headline(trace),
                      extra={"event": "task_failed", "connector": connector,
                             "task": task, "generation": generation})
        self._parts.job_failed(connector, tasks, generation, version, trace)
        self._parts.registry.close(connector)
