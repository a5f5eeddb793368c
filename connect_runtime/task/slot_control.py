"""The executor's end of the slot channel: reports out, commands in.

A :class:`SlotControl` keeps one task's channel to its worker open
(:mod:`connect_runtime.protocol.slot_channel`): it connects (and reconnects),
sends the task's state when it changes, the topics its loop produced to
(KIP-558), and on the process's beat (every ``KEEPALIVE_INTERVAL_S``) the task's
metrics if they changed (:mod:`connect_runtime.task.metrics`) or else an empty
keepalive; it applies what the worker pushes (run, pause, stop, restart, a new
session key) to the running loop's :class:`~connect_runtime.task.loop.LoopSignals`,
and the logger levels set through the worker's ``/admin/loggers`` to this
process's loggers (before the task starts: the slot waits for the first answer).

**One owner.** Every channel of a process runs on one thread, the process's
:class:`ChannelHub` (an asyncio event loop), whatever the number of tasks it
hosts: a process of 50 idle tasks has one channel thread, not 100 readers and
writers, and their beats fall on the same instants, so one wake-up serves them
all. A channel's state (:class:`_ChannelState`: the reported state, trace,
stall and topics, the running instance's signals, the restart counter it
started under) is read and written by that thread alone; the other threads
post to it:

* the slot's thread: :meth:`SlotControl.report`, :meth:`~SlotControl.begin_instance`,
  :meth:`~SlotControl.attach`, :meth:`~SlotControl.close` (these wait for the
  hub to apply them, never for the network);
* the task loop: :meth:`~SlotControl.report_topics`; the stall watchdog:
  :meth:`~SlotControl.report_stall` (these do not wait).

Reaching the state from any other thread raises
:class:`~connect_runtime.errors.OwnershipError` (as the reconciler's does), so a
new code path that forgets to post fails the first time it runs. What the other
threads read, the worker's orders, is published by the hub as one immutable
:class:`Orders` (command, restart counter, session key), replaced whole under
:attr:`SlotControl.changed`: a reader never sees a command paired with another
answer's counter.

Nothing the hub runs blocks: a task's ``stop()`` (connector code, which may
hang) runs on a thread of its own, and the config-topic read of a rotated
session key on the loop's executor.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import contextlib
import logging
import math
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from connect_runtime.errors import OwnershipError
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

T = TypeVar("T")

# A refused key means ours was rotated out; reading the config topic for the new
# one is expensive, so at most this often.
KEY_REFRESH_INTERVAL_S = 5.0
RECONNECT_BACKOFF_S = (0.1, 0.25, 0.5, 1.0, 2.0)
CLOSE_WAIT_S = 10.0
"""How long :meth:`SlotControl.close` waits for the final report and goodbye."""


def where_this_runs() -> str:
    """The name an operator finds this process by: the executor pod's name on
    Kubernetes (Spark sets SPARK_EXECUTOR_POD_NAME on its executor pods, and
    their host names are cut to 63 characters from the front, so a long pod
    name is not its host name), the host name elsewhere."""
    return os.environ.get("SPARK_EXECUTOR_POD_NAME") or socket.gethostname()


def next_beat(now: float, phase: float, interval_s: float = KEEPALIVE_INTERVAL_S) -> float:
    """The first instant after ``now`` (monotonic clock) on the process's beat:
    ``phase`` plus multiples of ``interval_s``, the same for every channel of the
    process, so their keepalives and metrics go out on one wake-up. Each process
    draws its own ``phase`` (:class:`ChannelHub`): the monotonic clock is the
    machine's, and processes on one beat would all hit the worker at once."""
    return (math.floor((now - phase) / interval_s) + 1) * interval_s + phase


class ChannelHub:
    """The thread that runs every slot channel of this process: an asyncio event
    loop on a daemon thread named ``slot-channels``, started by the first
    :class:`SlotControl` and kept for the process's life (PySpark reuses Python
    workers; a forked child gets a hub of its own, see :meth:`get`)."""

    _lock = threading.Lock()  # guards _instance
    _instance: ChannelHub | None = None

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.phase = random.uniform(0.0, KEEPALIVE_INTERVAL_S)  # of this process's beat
        self.loop = asyncio.new_event_loop()
        self.loop.set_exception_handler(_log_loop_exception)
        self.thread = threading.Thread(target=self._run, name="slot-channels", daemon=True)
        self.thread.start()

    @classmethod
    def get(cls) -> ChannelHub:
        """This process's hub, started if need be (a hub inherited through a fork
        has no thread in the child: the child starts its own)."""
        with cls._lock:
            hub = cls._instance
            if hub is None or hub.pid != os.getpid() or not hub.thread.is_alive():
                hub = cls._instance = ChannelHub()
            return hub

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def owns(self) -> bool:
        return threading.current_thread() is self.thread

    def post(self, fn: Callable[..., object], *args: object) -> None:
        """Run ``fn(*args)`` on the hub soon, in the caller's log context; never waits."""
        self.loop.call_soon_threadsafe(fn, *args)

    def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run ``fn(*args)`` on the hub and return its result (or raise its
        exception) here. Waits for the hub, which never blocks, not the network."""
        if self.owns():
            return fn(*args)
        done: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as e:
                done.set_exception(e)
        self.loop.call_soon_threadsafe(run)
        return done.result()

    def start(self, coro: Coroutine[Any, Any, None]) -> concurrent.futures.Future[None]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)


def _log_loop_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # An exception no caller waits for (a posted call, a channel coroutine): a bug
    # in this module, an OwnershipError among them. Tests see it at ERROR.
    log.error("slot channel thread: %s", context.get("message"),
              exc_info=context.get("exception"))


@dataclass(frozen=True, slots=True)
class Orders:
    """What the worker last told the slot, published whole by the hub.
    ``restart_seq`` is None until the first answer."""

    command: Command = Command.RUN
    restart_seq: int | None = None
    restart_pending: bool = False
    """The first answer said a restart already waits for this process."""
    session_key: str | None = None


@dataclass
class _ChannelState:
    """What only the hub's thread reads and writes (see the module docstring)."""

    state: State = State.UNASSIGNED
    trace: str | None = None
    fenced: bool = False
    stall: TaskStall | None = None
    """A loop call stuck past ``task.stall.threshold.ms`` (task.stall_watch)."""
    topics: set[str] = field(default_factory=set)
    """Reported by the task loop, not yet sent."""
    topics_sent: set[str] = field(default_factory=set)
    """Sent on the current connection: others go out at once, these on the beat."""
    signals: LoopSignals | None = None
    task: Any = None
    running_restart_seq: int | None = None
    """The counter the current instance started under: another value means restart."""
    log_levels: tuple[LevelSetting, ...] = ()
    """Last applied to this process's loggers."""
    next_key_refresh: float = 0.0
    key_refresh: asyncio.Task[None] | None = None
    """A rotated key being read (one at a time)."""
    answered: bool = False
    """On the current connection."""
    metrics_sent: TaskMetricsSnapshot | None = None
    closing: bool = False
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when there is something to send, or the connection ended."""


class SlotControl:
    """One task's channel to the driver, and the orders it carries (see the module
    docstring for which thread may call what)."""

    def __init__(self, spec: TaskSpec, attempt: int, metrics: TaskMetrics | None = None) -> None:
        self.spec = spec
        self.attempt = attempt
        self.run_id = uuid.uuid4().hex
        self.url = channel_url(spec.worker_url, spec.connector, spec.task)
        self._hello = SlotHello(connector=spec.connector, task=spec.task,
                                run_id=self.run_id, generation=spec.generation,
                                submission=spec.submission,
                                attempt=attempt, pid=os.getpid(), host=where_this_runs())
        self.metrics = metrics  # thread-safe on its own; the hub reads its snapshots
        # Published by the hub, replaced whole; ``changed`` guards the replacing and
        # ``_ended`` and wakes the slot's thread when either changes.
        self.changed = threading.Condition()
        self._orders = Orders(session_key=spec.session_key)
        self._ended = False
        self._hub = ChannelHub.get()
        self._owned = _ChannelState()  # the hub's alone once _run starts
        self._done = self._hub.start(self._run())

    # ------------------------------------------------------------ any thread

    @property
    def command(self) -> Command:
        return self._orders.command

    @property
    def restart_seq(self) -> int | None:
        return self._orders.restart_seq

    @property
    def restart_pending(self) -> bool:
        return self._orders.restart_pending

    @property
    def session_key(self) -> str | None:
        return self._orders.session_key

    def wait_for_answer(self) -> None:
        """Block until the driver has answered at least once (or the channel ended)."""
        with self.changed:
            self.changed.wait_for(lambda: self._orders.restart_seq is not None or self._ended)

    def wait_for_change(self, seen_restart_seq: int | None) -> None:
        """Block until a restart is requested or the slot must stop."""
        with self.changed:
            self.changed.wait_for(lambda: self._orders.command is Command.STOP
                                  or self._orders.restart_seq != seen_restart_seq
                                  or self._ended)

    # ------------------------------------------------------- the slot's thread

    def report(self, state: State, trace: str | None = None, *, fenced: bool = False) -> None:
        """Set the state the slot reports (``fenced``: a newer producer fenced this
        one), and send it now.

        Raises :class:`~connect_runtime.errors.IllegalStateTransition` on a
        transition the lifecycle does not allow: a runtime bug, caught in tests.
        """
        self._hub.call(self._set_state, state, trace, fenced)

    def begin_instance(self, signals: LoopSignals) -> int | None:
        """A task instance starts with ``signals``: from now on a restart counter
        other than the one returned (the current one) stops it. Taken on the hub,
        so an answer cannot slip between reading the counter and keeping it."""
        return self._hub.call(self._begin_instance, signals)

    def attach(self, signals: LoopSignals | None, task: Any) -> None:
        """The live instance (``task.stop()`` is called on a stop request) and its
        loop's signals, to which the current orders are applied at once; None
        while instances change."""
        self._hub.call(self._attach, signals, task)

    def close(self) -> None:
        """Send the final state, say goodbye (a normal close: not lost) and stop."""
        self._hub.post(self._close)
        try:
            self._done.result(CLOSE_WAIT_S)
        except concurrent.futures.TimeoutError:
            log.warning("task %s: the slot channel did not close within %.0fs",
                        self.spec.task_label, CLOSE_WAIT_S)
        except Exception:
            log.error("task %s: the slot channel failed", self.spec.task_label, exc_info=True)

    # ---------------------------------------------- other threads; never wait

    def report_stall(self, stall: TaskStall | None) -> None:
        """Send ``stall`` (None: the stuck call returned) with the slot's state, now.
        Called from the stall watchdogs' thread (task.stall_watch)."""
        self._hub.post(self._set_stall, stall)

    def report_topics(self, topics: frozenset[str]) -> None:
        """Send ``topics`` (the task produced to them, KIP-558) to the worker: at once
        if the connection has not carried one of them yet, else on the next beat.
        Called from the task loop's thread (LoopDeps.on_topics)."""
        self._hub.post(self._add_topics, topics)

    # ----------------------------------------------------------- the hub alone

    @property
    def _state(self) -> _ChannelState:
        if not self._hub.owns():
            raise OwnershipError(
                f"thread {threading.current_thread().name!r} touched the slot channel's "
                "state; only the slot-channels thread may (post to it instead)")
        return self._owned

    def _publish(self, orders: Orders | None = None, *, ended: bool = False) -> None:
        self._state  # noqa: B018 - the ownership check: only the hub publishes
        with self.changed:
            if orders is not None:
                self._orders = orders
            self._ended = self._ended or ended
            self.changed.notify_all()

    def _set_state(self, state: State, trace: str | None, fenced: bool) -> None:
        st = self._state
        st.state, st.trace = check_transition(st.state, state), trace
        st.fenced = st.fenced or fenced
        st.wake.set()

    def _set_stall(self, stall: TaskStall | None) -> None:
        st = self._state
        st.stall = stall
        st.wake.set()

    def _add_topics(self, topics: frozenset[str]) -> None:
        st = self._state
        st.topics |= topics
        if not topics <= st.topics_sent:
            st.wake.set()

    def _begin_instance(self, signals: LoopSignals) -> int | None:
        st = self._state
        st.running_restart_seq = self._orders.restart_seq
        self._attach(signals, None)
        return st.running_restart_seq

    def _attach(self, signals: LoopSignals | None, task: Any) -> None:
        st = self._state
        st.signals, st.task = signals, task
        self._apply(self._orders)

    def _close(self) -> None:
        st = self._state
        st.closing = True
        st.wake.set()

    async def _run(self) -> None:
        st = self._state
        failures = 0
        try:
            while not st.closing and self._orders.command is not Command.STOP:
                st.answered = False
                await self._session()
                # A channel that never got an answer was refused (or never opened): back
                # off, or a refusing worker would be called in a tight loop.
                failures = 0 if st.answered else failures + 1
                if failures and not st.closing:
                    await self._sleep(RECONNECT_BACKOFF_S[min(failures,
                                                              len(RECONNECT_BACKOFF_S)) - 1])
        finally:
            self._publish(ended=True)

    async def _sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` or until woken (a report, a close)."""
        st = self._state
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(st.wake.wait(), max(seconds, 0.0))
        st.wake.clear()

    async def _session(self) -> None:
        """One connection: open it, report until it or the slot closes."""
        st = self._state
        try:
            # No proxy: the worker is reached directly, whatever the executor's
            # environment says. No protocol pings: our keepalives are the pings.
            tls = self.spec.rest_tls
            secure: dict[str, Any] = {} if tls is None else {"ssl": client_context(tls)}
            async with connect(self.url, open_timeout=10, ping_interval=None, close_timeout=2,
                               proxy=None, compression=None, **secure) as ws:
                challenge = await asyncio.wait_for(ws.recv(), HELLO_TIMEOUT_S)
                await ws.send(self._hello.answer(challenge, self._orders.session_key,
                                                 self.spec.session_key_algorithm))
                reader = asyncio.ensure_future(self._read(ws))
                try:
                    await self._send_until_closed(ws)
                finally:
                    # 1000 only when the slot ends: any other close makes the worker
                    # treat the slot as lost until it reconnects.
                    await ws.close(CLOSE_DONE if st.closing else 1001)
                    await asyncio.wait({reader}, timeout=5)
        except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed,
                InvalidSlotMessage) as e:
            # The worker may be restarting; the task keeps running. If the worker is
            # gone for good, a new leader fences this task's producer.
            log.debug("task %s: channel to %s failed: %r", self.spec.task_label, self.url, e)

    async def _send_until_closed(self, ws: ClientConnection) -> None:
        st = self._state
        sent: tuple[State, str | None, bool, TaskStall | None] | None = None
        st.metrics_sent = None  # a new connection hears the metrics and topics anew
        st.topics_sent = set()
        # Metrics go out on the process's beat: a task producing steadily reports its
        # topics every few seconds too, and those must not starve them.
        beat = next_beat(time.monotonic(), self._hub.phase)
        try:
            while True:
                closing = st.closing
                current = (st.state, st.trace, st.fenced, st.stall)
                now = time.monotonic()
                topics = st.topics if (st.topics - st.topics_sent or now >= beat) else set()
                spoke = bool(topics) or current != sent
                if topics:
                    await self._send_topics(ws, topics)
                if current != sent:
                    await ws.send(SlotReport(state=current[0], trace=current[1],
                                             restart_seq=self._orders.restart_seq,
                                             fenced=current[2], stall=current[3]).to_json())
                    sent = current
                if closing:
                    return
                if now >= beat:
                    beat = next_beat(now, self._hub.phase)
                    frame = self._metrics_frame()
                    if frame or not spoke:  # changed metrics, or the keepalive owed
                        await ws.send(frame)
                await self._sleep(beat - time.monotonic())
                if ws.close_code is not None:
                    return  # the reader saw the connection end
        except ConnectionClosed:
            return

    def _metrics_frame(self) -> bytes:
        """The task's metrics if they changed since last sent, else a keepalive:
        either one tells the worker the slot is alive."""
        st = self._state
        if self.metrics is None:
            return KEEPALIVE
        snapshot = self.metrics.snapshot()
        if snapshot == st.metrics_sent:
            return KEEPALIVE
        st.metrics_sent = snapshot
        return SlotMetrics(snapshot).to_json()

    async def _send_topics(self, ws: ClientConnection, topics: set[str]) -> None:
        """Send ``topics``; kept for the next connection if this one is closed."""
        st = self._state
        st.topics = set()
        try:
            await ws.send(SlotTopics(frozenset(topics)).to_json())
        except ConnectionClosed:
            st.topics |= topics
            raise
        st.topics_sent |= topics

    async def _read(self, ws: ClientConnection) -> None:
        st = self._state
        try:
            async for message in ws:
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
            self._on_answer(SlotAnswer.stop(self._orders.restart_seq or 0))
        elif code == CLOSE_FORBIDDEN:
            await self._refresh_key()  # signed with a key the leader no longer accepts
        st.wake.set()  # wake the writer: the connection is gone

    def _on_answer(self, answer: SlotAnswer) -> None:
        st = self._state
        if answer.log_levels != st.log_levels:
            # The whole list each time: replayed in order, it gives each logger
            # the level the worker's gave it (connect_runtime.log_levels).
            apply_settings(answer.log_levels)
            st.log_levels = answer.log_levels
        old = self._orders
        orders = replace(old, command=answer.command, restart_seq=answer.restart_seq)
        if old.restart_seq is None:
            orders = replace(orders, restart_pending=answer.restart_pending)
        if answer.session_key:  # a TLS channel hands the key over
            orders = replace(orders, session_key=answer.session_key)
        elif answer.session_key_id is not None and answer.session_key_id != (
                signing.key_id(old.session_key) if old.session_key else None):
            # The leader rotated its key (KIP-507 TTL): read it where workers do.
            self._refresh_key_soon()
        # The live loop hears the orders before the slot's thread can see them: a
        # thread woken by a restart finds its instance already told to stop.
        self._apply(orders)
        self._publish(orders)
        st.answered = True

    def _refresh_key_soon(self) -> None:
        """:meth:`_refresh_key` after its rate limit, in the background (answers
        behind it go on being applied); one at a time."""
        st = self._state
        if st.key_refresh is not None and not st.key_refresh.done():
            return

        async def refresh() -> None:
            # Nothing waits for this task: a close during the (at most 5 s) delay
            # only means the read is skipped.
            await asyncio.sleep(max(0.0, st.next_key_refresh - time.monotonic()))
            if not st.closing:
                await self._refresh_key()
        st.key_refresh = asyncio.ensure_future(refresh())

    async def _refresh_key(self) -> None:
        """Read the current session key from the config topic (at most every 5 s),
        on the loop's executor: the read blocks for up to 30 s."""
        st = self._state
        now = time.monotonic()
        if now < st.next_key_refresh:
            return
        st.next_key_refresh = now + KEY_REFRESH_INTERVAL_S
        spec = self.spec
        try:
            snapshot = await asyncio.get_running_loop().run_in_executor(
                None, lambda: read_config_snapshot(
                    spec.bootstrap_servers, spec.config_topic, spec.consumer_overrides,
                    admin_overrides=spec.admin_overrides, timeout=30))
        except Exception as e:
            log.warning("task %s: could not read the session key: %r", spec.task_label, e)
            return
        if snapshot.session_key is not None:
            key = base64.b64encode(snapshot.session_key.key).decode("ascii")
            self._publish(replace(self._orders, session_key=key))

    def _apply(self, orders: Orders) -> None:
        """Apply ``orders`` to the live instance's signals."""
        st = self._state
        signals = st.signals
        if signals is None:
            return
        stop = orders.command is Command.STOP or (
            st.running_restart_seq is not None
            and orders.restart_seq != st.running_restart_seq)
        if stop and not signals.stop:
            signals.request_stop()
            if st.task is not None:
                # Connector code: it may block, and the hub serves every task's channel.
                thread_in_context(self._stop_task, args=(st.task,),
                                  name=f"slot-stop-{self.spec.task_label}").start()
        elif not stop:
            paused = orders.command is Command.PAUSE
            if signals.paused != paused:
                signals.set_paused(paused)

    def _stop_task(self, task: Any) -> None:
        try:
            task.stop()  # may wake a blocked poll(); contract: callable from any thread
        except Exception:
            log.warning("task %s: stop() raised", self.spec.task_label, exc_info=True)
