"""Driver-side view of the task slots running on Spark executors.

Each slot holds a channel to this worker (:mod:`connect_runtime.protocol.slot_channel`).
The registry records what slots report, tells the herder about state changes
(which it writes to the status topic) and logs those a person looks for (a task
started, failed, lost: :func:`task_event_line`), pushes commands to them, and declares a
slot *lost* when its channel closes abnormally or stays silent for
``LIVENESS_TIMEOUT_S``: the task shows FAILED with where it ran, promptly,
instead of RUNNING until Spark notices the dead executor.

A slot of an older generation, or of a connector no longer hosted here, is told
to stop and does not speak for the task: only the current generation does.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from connect_runtime.log_levels import LevelSetting
from connect_runtime.logs import trace_headline
from connect_runtime.protocol.slot_channel import (
    LIVENESS_TIMEOUT_S,
    Command,
    SlotAnswer,
    SlotHello,
    SlotMetrics,
    SlotReport,
    SlotTopics,
    TaskMetricsSnapshot,
    TaskStall,
)
from connect_runtime.protocol.states import State

log = logging.getLogger(__name__)

StateListener = Callable[[str, int, State, "str | None"], None]
TopicsListener = Callable[[str, int, frozenset[str]], None]
"""Hears the topics a slot's task produced to (KIP-558); called on the REST event
loop, so it must not block."""
MetricsListener = Callable[[str, int, int, TaskMetricsSnapshot], None]
"""Hears a current slot's metrics (connector, task, generation, snapshot); called on
the REST event loop, so it must not block."""
Push = Callable[[SlotAnswer | None], None]
"""Sends an answer down one slot's channel; ``None`` closes the channel as lost.
Called from any thread, never blocks (the channel queues it)."""
SessionKeyAnswer = tuple["str | None", "str | None"]
"""The session key to hand slots (base64, or None over plain channels) and its id."""
LogLine = tuple[int, str, dict[str, Any]]
"""A log level, a message and the record's ``extra`` fields (``connect_runtime.logs``)."""


@dataclass
class SlotView:
    connector: str
    task: int
    generation: int
    restart_seq: int = 0
    state: State = State.UNASSIGNED
    trace: str | None = None
    run_id: str | None = None
    pid: int | None = None
    host: str | None = None
    attempt: int = 0
    last_seen: float = 0.0
    connected: bool = False
    # The slot's producer was fenced by another producer with its transactional.id.
    fenced: bool = False
    # The registry declared the slot lost; lost_restart_seq is the restart counter then.
    lost: bool = False
    lost_restart_seq: int = 0
    opened_at: float = 0.0  # when the generation was submitted (registry clock)
    version: str | None = None  # the task's version() (KIP-891), for its status
    submission: str = ""  # the Spark job its slots belong to (TaskSpec.submission)
    # A loop call stuck past task.stall.threshold.ms (RUNNING or PAUSED only), and
    # when the registry heard of it (its clock): how long it is stuck, skew-free.
    stall: TaskStall | None = None
    stall_heard_at: float = 0.0

    def stalled_s(self, now: float) -> float:
        """How long its stuck call has not returned at ``now`` (registry clock); 0 if none."""
        if self.stall is None:
            return 0.0
        return self.stall.stalled_ms / 1000 + max(0.0, now - self.stall_heard_at)

    @property
    def status_trace(self) -> str | None:
        """The trace its status shows: the stall's while one is known, else the slot's."""
        if self.stall is not None:
            return self.stall.trace(f"{self.connector}-{self.task}")
        return self.trace

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector, "task": self.task, "generation": self.generation,
            "submission": self.submission, "state": self.state.value, "pid": self.pid,
            "host": self.host, "attempt": self.attempt, "restart_seq": self.restart_seq,
            "fenced": self.fenced, "connected": self.connected, "lost": self.lost,
            "last_seen_ms_ago": int((time.monotonic() - self.last_seen) * 1000)
            if self.last_seen else None,
        }


def task_event_line(previous: State, slot: SlotView,
                    lost_why: str | None = None) -> LogLine | None:
    """The lifecycle log line of ``slot``'s change from ``previous`` to ``slot.state``,
    None if the change is not one a person looks for (docs/operations.md, "Logs").

    ``task_lost``: the registry declared the slot lost (``lost_why`` says why);
    ``task_failed``: the slot reported FAILED (the trace's headline, not the whole
    trace, which is in the task's status); ``task_started``: RUNNING or PAUSED
    after any other state (a resume, PAUSED to RUNNING, is not a start).
    """
    label = f"{slot.connector}-{slot.task}"
    where = f"host {slot.host}, pid {slot.pid}, Spark attempt {slot.attempt}"
    fields: dict[str, Any] = {
        "connector": slot.connector, "task": slot.task, "generation": slot.generation,
        "restart": slot.restart_seq, "attempt": slot.attempt, "host": slot.host,
        "pid": slot.pid}
    if lost_why is not None:
        return (logging.ERROR, f"task {label} lost: {lost_why}; it ran on {where} "
                f"(generation {slot.generation}) and is FAILED until restarted",
                {"event": "task_lost", **fields})
    if slot.state is State.FAILED:
        return (logging.ERROR, f"task {label} failed on {where} (generation "
                f"{slot.generation}, restart {slot.restart_seq}): {trace_headline(slot.trace)}",
                {"event": "task_failed", **fields})
    running = (State.RUNNING, State.PAUSED)
    if slot.state in running and previous not in running:
        paused = " paused" if slot.state is State.PAUSED else ""
        return (logging.INFO, f"task {label} started{paused} on {where} (generation "
                f"{slot.generation}, restart {slot.restart_seq})",
                {"event": "task_started", **fields})
    return None


def stall_event_line(before: TaskStall | None, stuck_for_s: float,
                     slot: SlotView) -> LogLine | None:
    """``task_stalled`` when ``slot`` reports a stuck call it did not before (WARNING,
    naming the innermost frame of the stack; the whole stack is in the status),
    ``task_stall_cleared`` when the stuck call ``before`` (stuck ``stuck_for_s``
    seconds by now) returned or its task left RUNNING (INFO); None otherwise."""
    label = f"{slot.connector}-{slot.task}"
    fields: dict[str, Any] = {
        "connector": slot.connector, "task": slot.task, "generation": slot.generation,
        "host": slot.host, "pid": slot.pid}
    stall = slot.stall
    if stall is not None and stall != before:
        frames = [line.strip() for line in stall.stack.splitlines()
                  if line.lstrip().startswith("File ")]
        where = f"; innermost frame: {frames[-1]}" if frames else ""
        return (logging.WARNING, f"task {label} is stuck: {stall.call} has not returned for "
                f"{stall.stalled_ms // 1000} s (task.stall.threshold.ms={stall.threshold_ms})"
                f"{where}; the task thread's stack is in the task's status trace",
                {"event": "task_stalled", **fields, "call": stall.call})
    if stall is None and before is not None:
        return (logging.INFO, f"task {label} is no longer stuck: {before.call} returned "
                f"(or the task left RUNNING) after about {stuck_for_s:.0f} s; state "
                f"{slot.state.value}",
                {"event": "task_stall_cleared", **fields, "call": before.call})
    return None


@dataclass(eq=False)
class SlotChannel:
    """One open channel of one slot; a reconnect makes a new one."""

    key: tuple[str, int]
    run_id: str
    push: Push
    serial: int


class SlotRegistry:
    """The slots of the connectors this worker hosts, keyed by (connector, task).

    Thread-safe: channel handlers (on the REST event loop), the herder's
    reconcile thread, the events thread and status reads call it concurrently.
    The channel methods never block the event loop: they take the lock for a
    few dict operations and queue state changes; the events thread (after
    :meth:`start`) passes them to ``on_state_change`` (a status write) in the
    order the registry recorded them, so 2,000 channels closing at once do not
    queue REST requests behind 2,000 status writes. Pushes and
    ``on_state_change`` are called outside the lock.
    """

    def __init__(self, on_state_change: StateListener, *,
                 session_key: Callable[[], SessionKeyAnswer] = lambda: (None, None),
                 log_levels: Callable[[], tuple[LevelSetting, ...]] = lambda: (),
                 liveness_timeout_s: float = LIVENESS_TIMEOUT_S,
                 clock: Callable[[], float] = time.monotonic,
                 on_topics: TopicsListener | None = None,
                 on_metrics: MetricsListener | None = None) -> None:
        """``session_key`` gives what every answer says of the current session key:
        the key (base64) if the channels are TLS, else None, and its id
        (:func:`~connect_runtime.protocol.signing.key_id`); ``log_levels`` the
        logger levels the slots' processes apply (``/admin/loggers``). Both are
        read once per batch of answers, not once per slot.
        ``on_topics`` and ``on_metrics`` hear what current slots say in
        :meth:`topics` and :meth:`metrics`."""
        self._on_state_change = on_state_change
        self._on_topics = on_topics
        self._on_metrics = on_metrics
        self._session_key = session_key
        self._log_levels = log_levels
        self._timeout = liveness_timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}
        self._command: dict[str, Command] = {}
        self._slots: dict[tuple[str, int], SlotView] = {}
        self._channels: dict[tuple[str, int], SlotChannel] = {}
        self._serials = itertools.count(1)
        # State changes, queued under _lock (so in the order the registry saw
        # them) and delivered in that order under _delivery_lock, outside _lock.
        # Two threads writing one task's status must not reorder it: a stale
        # UNASSIGNED written after a fresh RUNNING would stick.
        self._events: deque[tuple[str, int, State, str | None, LogLine | None]] = deque()
        self._delivery_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------ the herder

    def open(self, connector: str, generation: int, task_count: int, paused: bool,
             version: str | None = None, submission: str = "") -> None:
        """``generation`` of ``connector`` is being submitted to Spark, as job
        ``submission`` (``TaskSpec.submission``): only its slots speak for the
        tasks. ``version`` is the tasks' (KIP-891), which their statuses carry."""
        with self._lock:
            stopped = self._drop(connector)
            self._generation[connector] = generation
            self._command[connector] = Command.PAUSE if paused else Command.RUN
            for task in range(task_count):
                self._slots[(connector, task)] = SlotView(connector, task, generation,
                                                          opened_at=self._clock(),
                                                          version=version,
                                                          submission=submission)
        self._send(stopped)

    def set_paused(self, connector: str, paused: bool) -> None:
        with self._lock:
            command = Command.PAUSE if paused else Command.RUN
            if self._command.get(connector, command) is command:
                return
            self._command[connector] = command
            pushes = [(ch.push, self._answer(self._slots[k]))
                      for k, ch in self._channels.items() if k[0] == connector]
        self._send(pushes)

    def close(self, connector: str) -> None:
        """Tell every slot of ``connector`` to stop and forget them."""
        with self._lock:
            stopped = self._drop(connector)
        self._send(stopped)

    def _drop(self, connector: str) -> list[tuple[Push, SlotAnswer | None]]:
        self._generation.pop(connector, None)
        self._command.pop(connector, None)
        stopped: list[tuple[Push, SlotAnswer | None]] = []
        for key in [k for k in self._slots if k[0] == connector]:
            slot = self._slots.pop(key)
            channel = self._channels.pop(key, None)
            if channel is not None:
                stopped.append((channel.push, SlotAnswer.stop(slot.restart_seq)))
        return stopped

    def restart(self, connector: str, task: int) -> bool:
        """Bump the task's restart counter; False if no slot of it is hosted here."""
        with self._lock:
            slot = self._slots.get((connector, task))
            if slot is None:
                return False
            slot.restart_seq += 1
            # The herder has written RESTARTING; whatever the slot reports next is news,
            # even the same FAILED trace as before.
            slot.state, slot.trace, slot.stall = State.RESTARTING, None, None
            channel = self._channels.get((connector, task))
            pushes = [] if channel is None else [(channel.push, self._answer(slot))]
        self._send(pushes)
        return True

    def note_waiting(self, longer_than_s: float, why: str) -> None:
        """Put ``why`` in the (UNASSIGNED) status of every slot submitted longer ago
        than ``longer_than_s`` that never connected: Spark has not started it.
        Once per slot and generation."""
        deadline = self._clock() - longer_than_s
        with self._lock:
            for slot in self._slots.values():
                if slot.run_id is None and slot.opened_at < deadline \
                        and slot.state is State.UNASSIGNED and slot.trace is None:
                    self._change(slot, State.UNASSIGNED, why)
        self._deliver()

    def push_all(self) -> None:
        """Send every connected slot its answer again (the session key rotated, or
        a logger level was set)."""
        with self._lock:
            pushes = [(ch.push, self._answer(self._slots[k])) for k, ch in self._channels.items()]
        self._send(pushes)

    def slot(self, connector: str, task: int) -> SlotView | None:
        with self._lock:
            slot = self._slots.get((connector, task))
            return None if slot is None else SlotView(**slot.__dict__)

    def slots(self) -> list[SlotView]:
        with self._lock:
            return [SlotView(**s.__dict__) for s in self._slots.values()]

    def stalled_seconds(self) -> dict[tuple[str, int], float]:
        """How long each hosted task's stuck call has not returned, now (0.0: none)."""
        now = self._clock()
        with self._lock:
            return {key: slot.stalled_s(now) for key, slot in self._slots.items()}

    # ------------------------------------------------------------ the channels

    def connect(self, connector: str, task: int, hello: SlotHello,
                push: Push) -> SlotChannel | None:
        """A slot opened its channel. None: no such task, generation or submission
        here, or a newer attempt of the slot has spoken (the handler tells it to
        stop). Otherwise the answer is pushed at once."""
        key = (connector, task)
        with self._lock:
            slot = self._slots.get(key)
            if slot is None or hello.generation != slot.generation:
                return None
            if hello.submission != slot.submission:
                # A slot of an earlier job of this generation, one Spark gave up
                # while the slot lived on (its executor cut off, say): the job
                # submitted since owns the task, whatever the attempt numbers say.
                return None
            if hello.run_id != slot.run_id and hello.attempt < slot.attempt:
                # An older attempt, still alive after Spark re-ran its slot (its
                # executor JVM hung, not its Python worker): the newer one owns the
                # task, and the older one's producer is fenced by it anyway.
                return None
            replaced = self._channels.get(key)
            channel = SlotChannel(key, hello.run_id, push, next(self._serials))
            self._channels[key] = channel
            restart_pending = False
            if slot.lost and hello.run_id != slot.run_id:
                # A new process (Spark re-ran the slot). If the user restarted the
                # task after the old one was lost, that restart is for this one.
                restart_pending = slot.restart_seq > slot.lost_restart_seq
            if hello.run_id != slot.run_id:
                slot.lost = False
            slot.run_id, slot.pid, slot.host = hello.run_id, hello.pid, hello.host
            slot.attempt, slot.connected, slot.last_seen = hello.attempt, True, self._clock()
            answer = self._answer(slot, restart_pending=restart_pending)
        pushes: list[tuple[Push, SlotAnswer | None]] = [(push, answer)]
        if replaced is not None:
            pushes.append((replaced.push, None))  # the old connection of a reconnecting slot
        self._send(pushes)
        return channel

    def keepalive(self, channel: SlotChannel) -> None:
        """The slot is alive. Cheap: called for every frame, on the event loop."""
        slot = self._slots.get(channel.key)
        if slot is not None and self._channels.get(channel.key) is channel:
            slot.last_seen = self._clock()

    def report(self, channel: SlotChannel, report: SlotReport) -> None:
        """Record a slot's report; a change of state is passed to ``on_state_change``."""
        with self._lock:
            slot = self._slots.get(channel.key)
            if slot is None or self._channels.get(channel.key) is not channel:
                return  # a stale channel (replaced, or the generation was closed)
            slot.last_seen = self._clock()
            slot.fenced = report.fenced
            seen = report.restart_seq
            # A report sent before the slot heard of a restart describes the instance
            # being restarted (typically its FAILED state): it must not overwrite
            # the RESTARTING the herder just recorded.
            stale = seen is not None and seen < slot.restart_seq
            slot.lost = False  # if it was: the same process speaks again, its state stands
            # A stall means something only while the instance runs: a FAILED sent before
            # the watchdog saw the call end must not carry it (nor log twice).
            stall = report.stall if report.state in (State.RUNNING, State.PAUSED) else None
            if not stale and (report.state, report.trace, stall) != (
                    slot.state, slot.trace, slot.stall):
                self._change(slot, report.state, report.trace, stall=stall)
        self._deliver()

    def topics(self, channel: SlotChannel, message: SlotTopics) -> None:
        """The slot's task produced to ``message.topics`` (KIP-558): passed to
        ``on_topics`` if the channel is current; a stale one (replaced, or its
        generation closed, e.g. its connector deleted) speaks for no task."""
        with self._lock:
            slot = self._slots.get(channel.key)
            if slot is None or self._channels.get(channel.key) is not channel:
                return
            slot.last_seen = self._clock()
        if self._on_topics is not None:
            self._on_topics(channel.key[0], channel.key[1], message.topics)

    def metrics(self, channel: SlotChannel, message: SlotMetrics) -> None:
        """A slot's metrics, in place of a keepalive: passed to ``on_metrics`` with
        the slot's generation if the channel is current."""
        with self._lock:
            slot = self._slots.get(channel.key)
            if slot is None or self._channels.get(channel.key) is not channel:
                return
            slot.last_seen = self._clock()
            generation = slot.generation
        if self._on_metrics is not None:
            self._on_metrics(channel.key[0], channel.key[1], generation, message.snapshot)

    def disconnect(self, channel: SlotChannel, clean: bool) -> None:
        """The channel closed. ``clean``: the slot said goodbye (its last report
        stands); otherwise its process or executor died and the slot is lost."""
        with self._lock:
            if self._channels.get(channel.key) is not channel:
                return
            del self._channels[channel.key]
            slot = self._slots.get(channel.key)
            if slot is None:
                return
            slot.connected = False
            if not clean:
                self._mark_lost(slot, "its connection to the worker closed without a final report")
        self._deliver()

    def check_liveness(self) -> None:
        """Declare lost every connected slot silent for longer than the timeout."""
        deadline = self._clock() - self._timeout
        pushes: list[tuple[Push, SlotAnswer | None]] = []
        with self._lock:
            for key, channel in list(self._channels.items()):
                slot = self._slots[key]
                if slot.last_seen < deadline:
                    del self._channels[key]
                    slot.connected = False
                    self._mark_lost(slot, f"nothing was heard from it for {self._timeout:.0f} s")
                    pushes.append((channel.push, None))
        self._send(pushes)
        self._deliver()

    def start(self) -> None:
        """Deliver state changes and check liveness (every second) on a daemon
        thread until :meth:`stop`. Until then, changes are delivered by the
        thread that made them (what unit tests rely on)."""
        self._thread = threading.Thread(target=self._run, name="slot-events", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        next_check = self._clock() + 1.0
        while not self._stop.is_set():
            self._wake.wait(max(0.0, next_check - self._clock()))
            self._wake.clear()
            self._drain()
            if self._clock() >= next_check:
                self.check_liveness()
                next_check = self._clock() + 1.0

    # ------------------------------------------------------------ internals

    def _answer(self, slot: SlotView, *, restart_pending: bool = False) -> SlotAnswer:
        return SlotAnswer(self._command[slot.connector], slot.restart_seq,
                          restart_pending=restart_pending)

    def _mark_lost(self, slot: SlotView, why: str) -> None:
        """Mark ``slot`` lost (under the lock); FAILED with where it ran, if that is news."""
        if slot.state is State.UNASSIGNED:
            return  # the slot ended (stopped) or never started: nothing ran
        slot.lost, slot.lost_restart_seq = True, slot.restart_seq
        if slot.state is State.FAILED:
            return  # already FAILED; its trace says why, which is more useful
        self._change(slot, State.FAILED, (
            f"Task {slot.connector}-{slot.task} lost: {why}. It ran in Spark attempt "
            f"{slot.attempt} of its slot, in process {slot.pid} on host {slot.host}. The "
            "executor or the Python worker running it most likely died; its open "
            "transaction, if any, was never committed. Spark re-runs the slot when it "
            "notices. Restart the task to resume from its last committed offsets."),
            lost_why=why)

    def _change(self, slot: SlotView, state: State, trace: str | None,
                lost_why: str | None = None, stall: TaskStall | None = None) -> None:
        """Record a new state and stall (under the lock) and queue it for
        ``on_state_change`` with the trace its status shows (the stall's while there
        is one) and its lifecycle log line: where the slot ran is read here, under
        the lock, not when the line is logged."""
        now = self._clock()
        previous, before, stuck_for = slot.state, slot.stall, slot.stalled_s(now)
        if stall != before:
            slot.stall, slot.stall_heard_at = stall, now
        slot.state, slot.trace = state, trace
        line = task_event_line(previous, slot, lost_why) or stall_event_line(
            before, stuck_for, slot)
        self._events.append((slot.connector, slot.task, state, slot.status_trace, line))

    def _deliver(self) -> None:
        """Pass queued state changes on: to the events thread if it runs (callers
        on the REST event loop must not wait for a status write), else now."""
        if self._thread is not None:
            self._wake.set()
        else:
            self._drain()

    def _drain(self) -> None:
        """Log each queued change's lifecycle line and call ``on_state_change`` for
        it, in order, outside the lock."""
        with self._delivery_lock:
            while self._events:
                connector, task, state, trace, line = self._events.popleft()
                if line is not None:
                    log.log(line[0], line[1], extra=line[2])
                self._on_state_change(connector, task, state, trace)

    def _send(self, pushes: Sequence[tuple[Push, SlotAnswer | None]]) -> None:
        """Send each answer with the current session key and logger levels (looked
        up once: a pause or a key rotation answers hundreds of slots at a time)."""
        if not any(a is not None for _, a in pushes):
            for push, _ in pushes:
                push(None)
            return
        (key, key_id), levels = self._session_key(), self._log_levels()
        for push, answer in pushes:
            push(None if answer is None
                 else dataclasses.replace(answer, session_key=key, session_key_id=key_id,
                                          log_levels=levels))
