"""The executor's end of the slot channel: reports out, commands in.

A :class:`SlotControl` keeps the slot's channel to its worker open
(:mod:`connect_runtime.protocol.slot_channel`) on two background threads: the
*writer* connects (and reconnects), sends the slot's state when it changes, the
topics its task produced to when the task loop reports some (KIP-558), and,
when nothing else was sent for a keepalive interval, the task's metrics if they
changed (:mod:`connect_runtime.task.metrics`) or else an empty keepalive; the
*reader* applies what the worker
pushes (run, pause, stop, restart, a new session key) to the running task
loop's :class:`~connect_runtime.task.loop.LoopSignals`, and the logger levels
set through the worker's ``/admin/loggers`` to this process's loggers (before
the task starts: the slot waits for the first answer).
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

from websockets.exceptions import ConnectionClosed, InvalidHandshake
from websockets.sync.client import ClientConnection, connect

from connect_runtime.log_levels import LevelSetting, apply_settings
from connect_runtime.logs import thread_in_context
from connect_runtime.protocol import signing
from connect_runtime.protocol.slot_channel import (
    CLOSE_DONE,
    CLOSE_FORBIDDEN,
    CLOSE_NO_SUCH_TASK,
    HELLO_TIMEOUT_S,
    KEEPALIVE,
    KEEPALIVE_INTERVAL_S,
    Command,
    InvalidSlotMessage,
    SlotAnswer,
    SlotHello,
    SlotMetrics,
    SlotReport,
    SlotTopics,
    TaskMetricsSnapshot,
    TaskStall,
    channel_url,
)
from connect_runtime.protocol.states import State, check_transition
from connect_runtime.security.tls import client_context
from connect_runtime.storage.config_store import read_config_snapshot

if TYPE_CHECKING:
    from connect_runtime.protocol.task_spec import TaskSpec
    from connect_runtime.task.loop import LoopSignals
    from connect_runtime.task.metrics import TaskMetrics

log = logging.getLogger(__name__)

# A refused key means ours was rotated out; reading the config topic for the new
# one is expensive, so at most this often.
KEY_REFRESH_INTERVAL_S = 5.0
RECONNECT_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)


def where_this_runs() -> str:
    """The name an operator finds this process by: the executor pod's name on
    Kubernetes (Spark sets SPARK_EXECUTOR_POD_NAME on its executor pods, and
    their host names are cut to 63 characters from the front, so a long pod
    name is not its host name), the host name elsewhere."""
    return os.environ.get("SPARK_EXECUTOR_POD_NAME") or socket.gethostname()


class SlotControl:
    """The slot's channel to the driver, and the commands it carries."""

    def __init__(self, spec: TaskSpec, attempt: int) -> None:
        self.spec = spec
        self.attempt = attempt
        self.run_id = uuid.uuid4().hex
        self.url = channel_url(spec.worker_url, spec.connector, spec.task)
        self._hello = SlotHello(connector=spec.connector, task=spec.task,
                                run_id=self.run_id, generation=spec.generation,
                                submission=spec.submission,
                                attempt=attempt, pid=os.getpid(), host=where_this_runs())
        self.state = State.UNASSIGNED
        self.trace: str | None = None
        self.fenced = False
        # A loop call stuck past task.stall.threshold.ms; set by the stall watchdog's
        # thread (report_stall), guarded by _state_lock like state and trace.
        self.stall: TaskStall | None = None
        self.command = Command.RUN
        self.restart_seq: int | None = None
        # The first answer says whether a restart already waits for this process.
        self.restart_pending = False
        self.signals: LoopSignals | None = None
        self.task: Any = None
        # The restart counter the current task instance started under; a different
        # value from the driver means "restart": stop this instance, start anew.
        self.running_restart_seq: int | None = None
        # The key to sign with; starts as the one the spec was built with and
        # follows the leader's rotations through its answers.
        self.session_key = spec.session_key
        self._next_key_refresh = 0.0
        self._refreshing = False
        self._answered = False  # on the current connection
        self.changed = threading.Condition()
        # The logger levels last applied to this process; guarded by ``changed``.
        self._log_levels: tuple[LevelSetting, ...] = ()
        self._state_lock = threading.Lock()
        self._topics: set[str] = set()  # reported by the task loop, not yet sent
        # Set by the slot before its first task instance starts; sent by the writer.
        self.metrics: TaskMetrics | None = None
        self._metrics_sent: TaskMetricsSnapshot | None = None
        self._closed = threading.Event()
        self._report_now = threading.Event()
        self._thread = thread_in_context(self._run, name=f"slot-channel-{spec.task_label}")
        self._thread.start()

    # Called from the slot's main thread.
    def report(self, state: State, trace: str | None = None) -> None:
        """Set the state the slot reports, and send it now.

        Raises :class:`~connect_runtime.errors.IllegalStateTransition` on a
        transition the lifecycle does not allow: a runtime bug, caught in tests.
        """
        with self._state_lock:
            self.state, self.trace = check_transition(self.state, state), trace
        self._report_now.set()

    # Called from the stall watchdogs' thread (task.stall_watch); never blocks.
    def report_stall(self, stall: TaskStall | None) -> None:
        """Send ``stall`` (None: the stuck call returned) with the slot's state, now."""
        with self._state_lock:
            self.stall = stall
        self._report_now.set()

    # Called from the task loop's thread (LoopDeps.on_topics); never blocks on the network.
    def report_topics(self, topics: frozenset[str]) -> None:
        """Send ``topics`` (the task produced to them, KIP-558) to the worker soon."""
        with self._state_lock:
            self._topics |= topics
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
        """Send the final state, say goodbye (a normal close: not lost) and stop."""
        self._closed.set()
        self._report_now.set()
        self._thread.join(10)

    # Writer thread.
    def _run(self) -> None:
        failures = 0
        while not self._closed.is_set() and self.command is not Command.STOP:
            self._answered = False
            self._session()
            # A channel that never got an answer was refused (or never opened): back
            # off, or a refusing worker would be called in a tight loop.
            failures = 0 if self._answered else failures + 1
            if failures:
                self._closed.wait(RECONNECT_BACKOFF_S[min(failures, len(RECONNECT_BACKOFF_S)) - 1])
        self._closed.set()
        with self.changed:
            self.changed.notify_all()

    def _session(self) -> None:
        """One connection: open it, report until it or the slot closes."""
        try:
            # No proxy: the worker is reached directly, whatever the executor's
            # environment says. No protocol pings: our keepalives are the pings.
            tls = self.spec.rest_tls
            with connect(self.url, open_timeout=10,
                         ping_interval=None, close_timeout=2, proxy=None, compression=None,
                         ssl=client_context(tls) if tls is not None else None) as ws:
                challenge = ws.recv(timeout=HELLO_TIMEOUT_S)
                ws.send(self._hello.answer(challenge, self.session_key,
                                           self.spec.session_key_algorithm))
                reader = thread_in_context(self._read, args=(ws,),
                                           name=f"slot-answers-{self.spec.task_label}")
                reader.start()
                try:
                    self._send_until_closed(ws)
                finally:
                    # 1000 only when the slot ends: any other close makes the worker
                    # treat the slot as lost until it reconnects.
                    ws.close(CLOSE_DONE if self._closed.is_set() else 1001)
                    reader.join(5)
        except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed,
                InvalidSlotMessage) as e:
            # The worker may be restarting; the task keeps running. If the worker is
            # gone for good, a new leader fences this task's producer.
            log.debug("task %s: channel to %s failed: %r", self.spec.task_label, self.url, e)

    def _send_until_closed(self, ws: ClientConnection) -> None:
        sent: tuple[State, str | None, bool, TaskStall | None] | None = None
        self._metrics_sent = None  # a new connection hears the metrics anew
        # Metrics go out on their own clock: a task producing steadily reports its
        # topics every few seconds too, and those wake-ups must not starve them.
        metrics_due = time.monotonic() + KEEPALIVE_INTERVAL_S
        try:
            while True:
                closing = self._closed.is_set()
                with self._state_lock:
                    current = (self.state, self.trace, self.fenced, self.stall)
                    restart_seq = self.restart_seq
                    topics, self._topics = self._topics, set()
                spoke = bool(topics) or current != sent
                if topics:
                    self._send_topics(ws, topics)
                if current != sent:
                    ws.send(SlotReport(state=current[0], trace=current[1],
                                       restart_seq=restart_seq, fenced=current[2],
                                       stall=current[3]).to_json())
                    sent = current
                if closing:
                    return
                now = time.monotonic()
                if now >= metrics_due:
                    metrics_due = now + KEEPALIVE_INTERVAL_S
                    frame = self._metrics_frame()
                    if frame or not spoke:  # changed metrics, or the keepalive owed
                        ws.send(frame)
                elif not spoke:
                    ws.send(KEEPALIVE)
                self._report_now.wait(max(metrics_due - time.monotonic(), 0.0))
                self._report_now.clear()
        except ConnectionClosed:
            return

    def _metrics_frame(self) -> bytes:
        """The task's metrics if they changed since last sent, else a keepalive:
        either one tells the worker the slot is alive."""
        if self.metrics is None:
            return KEEPALIVE
        snapshot = self.metrics.snapshot()
        if snapshot == self._metrics_sent:
            return KEEPALIVE
        self._metrics_sent = snapshot
        return SlotMetrics(snapshot).to_json()

    def _send_topics(self, ws: ClientConnection, topics: set[str]) -> None:
        """Send ``topics``; kept for the next connection if this one is closed."""
        try:
            ws.send(SlotTopics(frozenset(topics)).to_json())
        except ConnectionClosed:
            with self._state_lock:
                self._topics |= topics
            raise

    # Reader thread.
    def _read(self, ws: ClientConnection) -> None:
        try:
            for message in ws:
                data = message if isinstance(message, bytes) else message.encode()
                try:
                    answer = SlotAnswer.from_json(data)
                except InvalidSlotMessage:
                    log.warning("task %s: ignoring a malformed answer", self.spec.task_label,
                                exc_info=True)
                    continue
                self._on_answer(answer)
        except ConnectionClosed:
            pass
        code = ws.close_code
        if code == CLOSE_NO_SUCH_TASK:
            self._on_answer(SlotAnswer.stop(self.restart_seq or 0))
        elif code == CLOSE_FORBIDDEN:
            self._refresh_key()  # signed with a key the leader no longer accepts
        self._report_now.set()  # wake the writer: the connection is gone

    def _on_answer(self, answer: SlotAnswer) -> None:
        with self.changed:
            if answer.log_levels != self._log_levels:
                # The whole list each time: replayed in order, it gives each logger
                # the level the worker's gave it (connect_runtime.log_levels).
                apply_settings(answer.log_levels)
                self._log_levels = answer.log_levels
            if self.restart_seq is None:
                self.restart_pending = answer.restart_pending
            self.command = answer.command
            self.restart_seq = answer.restart_seq
            if answer.session_key:  # a TLS channel hands the key over
                self.session_key = answer.session_key
            elif answer.session_key_id is not None and answer.session_key_id != (
                    signing.key_id(self.session_key) if self.session_key else None):
                # The leader rotated its key (KIP-507 TTL): read it where workers do.
                self._refresh_key_soon()
            self.changed.notify_all()
        self._answered = True
        if self.signals is not None:
            self._apply(self.signals)

    def _refresh_key_soon(self) -> None:
        """:meth:`_refresh_key` on a thread of its own (a config-topic read must not
        hold up the answers behind it), after its rate limit; one at a time."""
        with self._state_lock:
            if self._refreshing:
                return
            self._refreshing = True

        def refresh() -> None:
            try:
                self._closed.wait(max(0.0, self._next_key_refresh - time.monotonic()))
                if not self._closed.is_set():
                    self._refresh_key()
            finally:
                with self._state_lock:
                    self._refreshing = False
        thread_in_context(refresh, name=f"slot-key-{self.spec.task_label}").start()

    def _refresh_key(self) -> None:
        """Read the current session key from the config topic (at most every 5 s)."""
        now = time.monotonic()
        if now < self._next_key_refresh:
            return
        self._next_key_refresh = now + KEY_REFRESH_INTERVAL_S
        try:
            snapshot = read_config_snapshot(self.spec.bootstrap_servers, self.spec.config_topic,
                                            self.spec.consumer_overrides,
                                            admin_overrides=self.spec.admin_overrides,
                                            timeout=30)
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
