"""The executor side of one connector task: a long-running Spark task ("slot").

A slot runs task instances one after another until the driver says stop:

* It reports its state to the worker (driver) every ``HEARTBEAT_INTERVAL_S``
  over the worker's internal REST route, and gets back what to do: run, pause
  or stop, and a restart counter that bumps on REST restarts.
* A task that fails reports FAILED with its traceback and waits for a restart;
  the slot does not end, so Spark has nothing to re-run.
* Spark re-running a slot (attempt > 0) means the previous attempt's process
  died (e.g. SIGKILL of the Python worker). The retry never silently resumes
  work: it reports FAILED and waits for a REST restart, as Connect would.
* Startup abandoned (a newer generation exists) or a fenced producer ends the
  slot quietly: the newer generation owns the work.
* The task loop follows ``exactly.once.source.support``: transactional when
  ``enabled``, at-least-once (Connect's regular source task) otherwise.

Errors cross the process boundary as formatted text (the traceback string), so
an exception that does not pickle still reaches the status topic intact.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import socket
import threading
import time
import traceback
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from connect_runtime.storage.config_store import read_config_snapshot
from connect_runtime.storage.offsets import GlobalOffsetMirror
from connect_runtime.worker import signing
from connect_runtime.worker.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.worker.states import State
from connect_runtime.worker.task_loop import ExactlyOnceTaskLoop, LoopSignals, Outcome
from connect_runtime.worker.task_startup import StartupAbandoned, start_task

if TYPE_CHECKING:
    from connect_runtime.worker.task_spec import TaskSpec

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.25
KEY_REFRESH_INTERVAL_S = 5.0
CMD_RUN, CMD_PAUSE, CMD_STOP = "run", "pause", "stop"


class SlotControl:
    """Heartbeats to the driver on a background thread and applies its commands."""

    def __init__(self, spec: TaskSpec, attempt: int) -> None:
        self.spec = spec
        self.attempt = attempt
        self.run_id = uuid.uuid4().hex
        self.url = (f"{spec.worker_url}/internal/tasks/{quote(spec.connector, safe='')}/"
                    f"{spec.task}/heartbeat")
        self.state = State.UNASSIGNED
        self.trace: str | None = None
        self.fenced = False
        self.command = CMD_RUN
        self.restart_seq: int | None = None
        self.signals: LoopSignals | None = None
        self.task: Any = None
        # The restart counter the current task instance started under; a different
        # value from the driver means "restart": stop this instance, start anew.
        self.running_restart_seq: int | None = None
        # The key to sign with; starts as the one the spec was built with and
        # follows the leader's rotations through heartbeat answers.
        self.session_key = spec.session_key
        self._next_key_refresh = 0.0
        self.changed = threading.Condition()
        self._closed = threading.Event()
        self._report_now = threading.Event()
        self._client = httpx.Client(timeout=10.0)
        self._thread = threading.Thread(target=self._heartbeat_loop, daemon=True,
                                        name=f"slot-control-{spec.task_label}")
        self._thread.start()

    # Called from the slot's main thread.
    def report(self, state: State, trace: str | None = None) -> None:
        self.state, self.trace = state, trace
        self._report_now.set()

    def wait_for_answer(self) -> None:
        """Block until the driver has answered at least once (or the slot closes)."""
        with self.changed:
            self.changed.wait_for(lambda: self.restart_seq is not None or self._closed.is_set())

    def wait_for_change(self, seen_restart_seq: int | None) -> None:
        """Block until a restart is requested or the slot must stop."""
        with self.changed:
            self.changed.wait_for(lambda: self.command == CMD_STOP
                                  or self.restart_seq != seen_restart_seq
                                  or self._closed.is_set())

    def attach(self, signals: LoopSignals | None, task: Any) -> None:
        self.signals, self.task = signals, task
        if signals is not None:
            self._apply(signals)

    def close(self) -> None:
        self._closed.set()
        self._report_now.set()
        self._thread.join(5)
        self._client.close()

    # Heartbeat thread.
    def _heartbeat_loop(self) -> None:
        while not self._closed.is_set():
            self._heartbeat()
            self._report_now.wait(HEARTBEAT_INTERVAL_S)
            self._report_now.clear()
        self._heartbeat()  # last word: the final state

    def _heartbeat(self) -> None:
        body = {
            "run_id": self.run_id,
            "generation": self.spec.generation,
            "state": self.state.value,
            "trace": self.trace,
            "attempt": self.attempt,
            "restart_seq": self.restart_seq,  # lets the driver spot reports older than a restart
            "fenced": self.fenced,
            "pid": os.getpid(),
            "host": socket.gethostname(),
        }
        try:
            content = httpx.Request("POST", self.url, json=body).content
            headers = {"Content-Type": "application/json",
                       **signing.sign_headers(self.session_key,
                                              self.spec.session_key_algorithm, content)}
            response = self._client.post(self.url, content=content, headers=headers)
            answer: dict[str, Any]
            if response.status_code == 403:
                self._refresh_key()  # signed with a key the leader no longer accepts
                return
            if response.status_code == 404:
                answer = {"command": CMD_STOP, "restart_seq": self.restart_seq or 0}
            else:
                response.raise_for_status()
                answer = response.json()
        except (httpx.HTTPError, ValueError) as e:
            # The worker may be restarting; the task keeps running. If the worker is
            # gone for good, a new leader fences this task's producer.
            log.debug("heartbeat for %s failed: %r", self.spec.task_label, e)
            return
        with self.changed:
            self.command = str(answer.get("command", CMD_RUN))
            self.restart_seq = int(answer.get("restart_seq", 0))
            if answer.get("session_key"):  # the leader rotated its key (KIP-507 TTL)
                self.session_key = str(answer["session_key"])
            self.changed.notify_all()
        if self.signals is not None:
            self._apply(self.signals)

    def _refresh_key(self) -> None:
        """Read the current session key from the config topic (at most every 5 s)."""
        now = time.monotonic()
        if now < self._next_key_refresh:
            return
        self._next_key_refresh = now + KEY_REFRESH_INTERVAL_S
        try:
            snapshot = read_config_snapshot(self.spec.bootstrap_servers, self.spec.config_topic,
                                            self.spec.consumer_overrides, timeout=30)
        except Exception as e:
            log.warning("task %s: could not read the session key: %r", self.spec.task_label, e)
            return
        if snapshot.session_key is not None:
            self.session_key = base64.b64encode(snapshot.session_key.key).decode("ascii")

    def _apply(self, signals: LoopSignals) -> None:
        stop = self.command == CMD_STOP or (
            self.running_restart_seq is not None and self.restart_seq != self.running_restart_seq)
        if stop and not signals.stop:
            signals.request_stop()
            task = self.task
            if task is not None:
                try:
                    task.stop()  # may wake a blocked poll(); contract: callable from any thread
                except Exception:
                    log.warning("task %s: stop() raised", self.spec.task_label, exc_info=True)
        elif not stop:
            paused = self.command == CMD_PAUSE
            if signals.paused != paused:
                signals.set_paused(paused)


def _trace(exc: BaseException, spec: TaskSpec) -> str:
    text = "".join(traceback.format_exception(exc))
    return f"Task {spec.task_label} (connector {spec.connector}) failed:\n{text}"


def _run_instance(spec: TaskSpec, control: SlotControl) -> Outcome | None:
    """One task instance: startup, loop, cleanup. None means startup was abandoned."""
    signals = LoopSignals()
    control.running_restart_seq = control.restart_seq
    control.attach(signals, None)
    started = None
    mirror = None
    try:
        # Sign the fence request with the current key, not the one of submission time.
        current = dataclasses.replace(spec, session_key=control.session_key)
        started = start_task(current, lambda: signals.stop)
        control.attach(signals, started.task)
        if signals.stop:
            return Outcome.STOPPED
        if started.connector_offsets_topic:
            mirror = GlobalOffsetMirror(spec.bootstrap_servers, spec.global_offsets_topic,
                                        spec.producer_overrides)
        control.report(State.PAUSED if signals.paused else State.RUNNING)
        common: dict[str, Any] = dict(
            label=spec.task_label, connector=spec.connector, task=started.task,
            producer=started.producer, offsets_topic=started.offsets_topic,
            forbidden_topics=frozenset(
                t for t in (spec.config_topic, spec.global_offsets_topic,
                            started.connector_offsets_topic, spec.status_topic) if t),
            key_converter=started.key_converter, value_converter=started.value_converter,
            signals=signals, offset_mirror=mirror, create_topic=started.create_topic,
            on_paused=lambda p: control.report(State.PAUSED if p else State.RUNNING),
        )
        loop: ExactlyOnceTaskLoop | AtLeastOnceTaskLoop
        if started.boundary is not None:  # exactly.once.source.support=enabled
            loop = ExactlyOnceTaskLoop(boundary=started.boundary,
                                       transaction_timeout_s=started.transaction_timeout_s,
                                       **common)
        else:  # disabled or preparing: Connect's at-least-once WorkerSourceTask
            loop = AtLeastOnceTaskLoop(offset_flush_interval_s=started.offset_flush_interval_s,
                                       offset_flush_timeout_s=started.offset_flush_timeout_s,
                                       **common)
        outcome = loop.run()
        return outcome
    except StartupAbandoned as e:
        log.info("task %s: %s", spec.task_label, e)
        return None
    finally:
        control.attach(None, None)
        if started is not None:
            _stop_task_quietly(spec, started.task)
            _close_producer_quietly(spec, started.producer)
        if mirror is not None:
            mirror.close(10)


def _close_producer_quietly(spec: TaskSpec, producer: Any) -> None:
    """Cleanup must never replace the error that ended the task in its trace."""
    try:
        producer.flush(5)
    except Exception:
        log.info("task %s: producer flush at close failed", spec.task_label, exc_info=True)


def _stop_task_quietly(spec: TaskSpec, task: Any) -> None:
    try:
        task.stop()
    except Exception:
        log.warning("task %s: stop() raised during cleanup", spec.task_label, exc_info=True)


def _restarting(control: SlotControl) -> None:
    """Leave FAILED as soon as a restart is heard, not only once startup is done."""
    if control.command != CMD_STOP:
        control.report(State.RESTARTING)


def run_slot(spec: TaskSpec, attempt: int) -> str:
    """Host task ``spec`` until told to stop. Returns how the slot ended. Never raises."""
    control = SlotControl(spec, attempt)
    try:
        control.wait_for_answer()
        if attempt > 0:
            # Read before reporting: the answer to the report may already carry a
            # restart, and waiting for a change from *that* value would wait forever.
            seen = control.restart_seq
            control.report(State.FAILED, (
                f"Task {spec.task_label}: the process running it died (Spark re-ran its slot as "
                f"attempt {attempt}); the open transaction, if any, was never committed. "
                "Restart the task to resume from its last committed offsets."))
            control.wait_for_change(seen)
            _restarting(control)
        while control.command != CMD_STOP:
            try:
                outcome = _run_instance(spec, control)
            except Exception as e:
                control.report(State.FAILED, _trace(e, spec))
                control.wait_for_change(control.running_restart_seq)
                _restarting(control)
                continue
            if outcome is None:
                return "abandoned"
            if outcome is Outcome.FENCED:
                control.fenced = True
                # Usually a newer generation fenced us, and the worker ignores reports
                # of stale generations. If not, the user must see why the task stopped.
                control.report(State.FAILED, (
                    f"Task {spec.task_label}: its producer (transactional.id "
                    f"{spec.transactional_id}) was fenced by another producer with the same "
                    "transactional.id; this instance stopped without committing."))
                return "fenced"
            if control.command == CMD_STOP:
                control.report(State.UNASSIGNED)
                return "stopped"
            control.report(State.RESTARTING)  # a restart was requested: run again
        control.report(State.UNASSIGNED)
        return "stopped"
    finally:
        control.close()


def slot_partition(index: int, specs: Iterator[TaskSpec]) -> Iterator[tuple[int, str]]:
    """Spark ``mapPartitionsWithIndex`` entry point: one spec per partition."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    for spec in specs:
        yield spec.task, run_slot(spec, attempt)
