"""Stuck tasks, diagnosed: which loop call has not returned, for how long, and where.

Kafka Connect shows a task whose ``poll()`` (or commit) never returns as RUNNING
forever. Here the slot watches the two calls through which a task can hang its
loop for good (the loop's hot path pays two attribute writes per poll, no lock):

* the task loop's thread sets :attr:`CallWatch.current` to ``(call, start)``
  before the call and back to None after it (``start`` on
  :func:`time.perf_counter`'s clock), one tuple written whole, so a reader on
  another thread never sees a call paired with another's start;
* a :class:`StallWatchdog` looks every :func:`check_interval_s` and, once
  the same call has been in progress for ``task.stall.threshold.ms``, takes the
  loop thread's live stack (``sys._current_frames``) and reports a
  :class:`~connect_runtime.protocol.slot_channel.TaskStall`; when that call
  returns (or raises) it reports None: the stall cleared.

The looking is done by one thread per process for all its started watchdogs
(``_Roster``): a process hosting 20 tasks (``tasks.per.process``) would
otherwise run 20 threads that each wake every second to read one attribute.
Each check runs in the log context of the task's thread that started its
watchdog, so a line it logs names that task. The decision is
:func:`stalled_call`, pure. A watchdog's ``_reported`` is written by the roster
thread alone (or by the caller of :meth:`StallWatchdog.check`, in tests).
"""

from __future__ import annotations

import contextvars
import logging
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

from connect_runtime.protocol.slot_channel import TaskStall

__all__ = ["COMMIT", "POLL", "CallWatch", "StallWatchdog", "check_interval_s", "stalled_call"]

POLL = "poll()"
COMMIT = "commit"
STACK_LIMIT = 40
"""Frames of the stack reported, innermost first kept: what blocks is at the bottom."""
_LOOP_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "loop.py")

log = logging.getLogger(__name__)

Call = tuple[str, float]
"""A call in progress: its name and its start on ``time.perf_counter``'s clock."""


class CallWatch:
    """Which call the task loop's thread is in (``current``), written by that thread
    only; read by the watchdog. None between calls."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: Call | None = None


def stalled_call(current: Call | None, now: float, threshold_s: float) -> Call | None:
    """``current`` if it has been in progress for ``threshold_s`` at ``now``, else None."""
    if current is None or now - current[1] < threshold_s:
        return None
    return current


def check_interval_s(threshold_s: float) -> float:
    """How often the watchdog looks: a quarter of the threshold, between 50 ms and 1 s
    (a stall is reported at most this late; an idle check costs one attribute read)."""
    return max(0.05, min(1.0, threshold_s / 4))


class StallWatchdog:
    """Reports the stalls of the calls ``calls`` shows, made on thread ``thread_id``.

    ``report(stall)`` hears a :class:`TaskStall` once per stuck call, and None when
    that call returned; it must not block (the slot channel queues it).
    ``scrub`` is applied to the stack (a source line may quote a secret).
    """

    def __init__(self, calls: CallWatch, thread_id: int, threshold_ms: int,
                 report: Callable[[TaskStall | None], None],
                 scrub: Callable[[str], str] = lambda text: text,
                 clock: Callable[[], float] = time.perf_counter,
                 wall: Callable[[], float] = time.time) -> None:
        self._calls = calls
        self._thread_id = thread_id
        self._threshold_ms = threshold_ms
        self._report = report
        self.scrub = scrub  # the slot swaps it per task instance (its secrets)
        self._clock = clock
        self._wall = wall
        self._reported: Call | None = None  # the roster thread's alone (see the module doc)

    def check(self) -> None:
        """One look: report a new stall, or the end of the one reported."""
        current = self._calls.current
        now = self._clock()
        stalled = stalled_call(current, now, self._threshold_ms / 1000)
        if stalled is self._reported:
            return
        if stalled is None:
            self._reported = None
            self._report(None)
            return
        stack = self._stack()
        if stack is None or self._calls.current is not stalled:
            return  # it returned while we looked: the stack would be of something else
        self._reported = stalled
        elapsed = now - stalled[1]
        self._report(TaskStall(
            call=stalled[0], stalled_ms=int(elapsed * 1000),
            since_ms=int((self._wall() - elapsed) * 1000), threshold_ms=self._threshold_ms,
            stack=self.scrub(stack)))

    def _stack(self) -> str | None:
        """The watched thread's stack, from the task loop's ``run`` on (the frames
        above it, PySpark's worker and the slot, are the same for every task)."""
        frame = sys._current_frames().get(self._thread_id)
        if frame is None:
            return None
        frames = traceback.extract_stack(frame, STACK_LIMIT)
        start = next((i for i, f in enumerate(frames)
                      if f.name == "run" and f.filename == _LOOP_FILE), 0)
        return "".join(traceback.format_list(frames[start:]))

    def start(self) -> StallWatchdog:
        """Start looking, in the calling thread's log context."""
        _ROSTER.add(self, contextvars.copy_context())
        return self

    def close(self) -> None:
        """Stop looking; once this returns, no check of this watchdog runs or reports."""
        _ROSTER.remove(self)

    @property
    def interval_s(self) -> float:
        return check_interval_s(self._threshold_ms / 1000)


class _Roster:
    """The one thread of a process that runs the checks of every started watchdog,
    every smallest :attr:`StallWatchdog.interval_s` among them. Started with the
    first watchdog (not in PySpark's daemon, which forks the slots and must have no
    thread), idle while none is started."""

    def __init__(self) -> None:
        # Guards _watched and _thread, and is held through each round of checks,
        # so that remove() returns only between rounds.
        self._cond = threading.Condition()
        self._watched: dict[StallWatchdog, contextvars.Context] = {}
        self._thread: threading.Thread | None = None

    def add(self, watchdog: StallWatchdog, context: contextvars.Context) -> None:
        with self._cond:
            self._watched[watchdog] = context
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="task-stall-watch",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def remove(self, watchdog: StallWatchdog) -> None:
        with self._cond:
            self._watched.pop(watchdog, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                if not self._watched:
                    self._cond.wait()
                    continue
                self._cond.wait(min(w.interval_s for w in self._watched))
                for watchdog, context in list(self._watched.items()):
                    try:
                        context.run(watchdog.check)
                    except Exception:  # one task's report failing must not blind the rest
                        context.run(log.exception, "stall watchdog check failed")


_ROSTER = _Roster()
