"""The executor's end of the slot protocol: heartbeats out, commands in.

A :class:`SlotControl` runs a background thread that reports the slot's state
to the worker (the driver) and applies the answer (run, pause, stop, restart)
to the running task loop's :class:`~connect_runtime.task.loop.LoopSignals`.
The messages are :mod:`connect_runtime.protocol.heartbeat`'s.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

import httpx

from connect_runtime.protocol import signing
from connect_runtime.protocol.heartbeat import (
    HEARTBEAT_INTERVAL_S,
    Command,
    InvalidHeartbeat,
    SlotAnswer,
    SlotReport,
    heartbeat_url,
)
from connect_runtime.protocol.states import State, check_transition
from connect_runtime.storage.config_store import read_config_snapshot

if TYPE_CHECKING:
    from connect_runtime.protocol.task_spec import TaskSpec
    from connect_runtime.task.loop import LoopSignals

log = logging.getLogger(__name__)

# A 403 means our key was rotated out; reading the config topic for the new one
# is expensive, so at most this often.
KEY_REFRESH_INTERVAL_S = 5.0


class SlotControl:
    """Heartbeats to the driver on a background thread and applies its commands."""

    def __init__(self, spec: TaskSpec, attempt: int) -> None:
        self.spec = spec
        self.attempt = attempt
        self.run_id = uuid.uuid4().hex
        # Where the slot runs: fixed for the life of this executor process.
        self._pid, self._host = os.getpid(), socket.gethostname()
        self.url = heartbeat_url(spec.worker_url, spec.connector, spec.task)
        self.state = State.UNASSIGNED
        self.trace: str | None = None
        self.fenced = False
        self.command = Command.RUN
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
        """Set the state the next heartbeat reports, and send it now.

        Raises :class:`~connect_runtime.errors.IllegalStateTransition` on a
        transition the lifecycle does not allow: a runtime bug, caught in tests.
        """
        self.state, self.trace = check_transition(self.state, state), trace
        self._report_now.set()

    def wait_for_answer(self) -> None:
        """Block until the driver has answered at least once (or the slot closes)."""
        with self.changed:
            self.changed.wait_for(lambda: self.restart_seq is not None or self._closed.is_set())

    def wait_for_change(self, seen_restart_seq: int | None) -> None:
        """Block until a restart is requested or the slot must stop."""
        with self.changed:
            self.changed.wait_for(lambda: self.command is Command.STOP
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
        content = SlotReport(
            run_id=self.run_id, generation=self.spec.generation, state=self.state,
            trace=self.trace, attempt=self.attempt,
            restart_seq=self.restart_seq,  # lets the driver spot reports older than a restart
            fenced=self.fenced, pid=self._pid, host=self._host,
        ).to_json()
        try:
            headers = {"Content-Type": "application/json",
                       **signing.sign_headers(self.session_key,
                                              self.spec.session_key_algorithm, content)}
            response = self._client.post(self.url, content=content, headers=headers)
            if response.status_code == 403:
                self._refresh_key()  # signed with a key the leader no longer accepts
                return
            if response.status_code == 404:
                answer = SlotAnswer.stop(self.restart_seq or 0)
            else:
                response.raise_for_status()
                answer = SlotAnswer.from_json(response.content)
        except (httpx.HTTPError, InvalidHeartbeat) as e:
            # The worker may be restarting; the task keeps running. If the worker is
            # gone for good, a new leader fences this task's producer.
            log.debug("heartbeat for %s failed: %r", self.spec.task_label, e)
            return
        with self.changed:
            self.command = answer.command
            self.restart_seq = answer.restart_seq
            if answer.session_key:  # the leader rotated its key (KIP-507 TTL)
                self.session_key = answer.session_key
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
        stop = self.command is Command.STOP or (
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
            paused = self.command is Command.PAUSE
            if signals.paused != paused:
                signals.set_paused(paused)
