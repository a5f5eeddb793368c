"""The stall watchdog: when a loop call counts as stuck, what it reports, and when
it clears. The thread it watches is real and really blocked; only the clock is
the test's."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Iterator

import pytest
from support.clock import FakeClock

from connect_runtime.protocol.slot_channel import TaskStall
from connect_runtime.task.stall_watch import (
    COMMIT,
    POLL,
    CallWatch,
    StallWatchdog,
    check_interval_s,
    stalled_call,
)


def test_a_call_is_stalled_from_the_threshold_on() -> None:
    call = (POLL, 10.0)
    assert stalled_call(None, 100.0, 2.0) is None
    assert stalled_call(call, 11.999, 2.0) is None
    assert stalled_call(call, 12.0, 2.0) is call
    assert stalled_call(call, 500.0, 2.0) is call


def test_the_watchdog_looks_four_times_per_threshold_between_50_ms_and_1_s() -> None:
    assert check_interval_s(2.0) == 0.5
    assert check_interval_s(300.0) == 1.0
    assert check_interval_s(0.001) == 0.05


class Blocked:
    """A real thread in a call the way the loop marks one, until released."""

    def __init__(self, calls: CallWatch, clock: FakeClock, call: str = POLL) -> None:
        self.calls, self.clock, self.call = calls, clock, call
        self.entered, self.release = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.blocking_call, daemon=True)
        self.thread.start()
        assert self.entered.wait(5)

    def blocking_call(self) -> None:
        self.calls.current = (self.call, self.clock())
        self.entered.set()
        self.release.wait(30)  # the line the stack must name
        self.calls.current = None

    def done(self) -> None:
        self.release.set()
        self.thread.join(5)


@pytest.fixture
def watched() -> Iterator[tuple[CallWatch, FakeClock, list[TaskStall | None]]]:
    yield CallWatch(), FakeClock(50.0), []


def _watchdog(calls: CallWatch, clock: FakeClock, reports: list[TaskStall | None],
              thread: threading.Thread) -> StallWatchdog:
    assert thread.ident is not None
    return StallWatchdog(calls, thread.ident, 2000, reports.append, clock=clock,
                         wall=lambda: 1_000.0)


def test_a_stuck_call_is_reported_once_with_its_live_stack_and_cleared_when_it_returns(
        watched: tuple[CallWatch, FakeClock, list[TaskStall | None]]) -> None:
    calls, clock, reports = watched
    blocked = Blocked(calls, clock)
    try:
        watchdog = _watchdog(calls, clock, reports, blocked.thread)
        clock.now += 1.9
        watchdog.check()
        assert reports == []  # under the threshold
        clock.now += 0.6
        watchdog.check()
        watchdog.check()  # still the same call: nothing new
        assert len(reports) == 1
        stall = reports[0]
        assert stall is not None
        assert (stall.call, stall.stalled_ms, stall.since_ms, stall.threshold_ms) == (
            POLL, 2500, 997_500, 2000)
        line = inspect.getsourcelines(Blocked.blocking_call)[1] + 3  # release.wait(30)
        # The innermost frame of this file (threading's own frames come after it).
        ours = [f for f in stall.stack.splitlines() if 'test_stall_watch.py", line' in f]
        assert ours[-1].endswith(f'test_stall_watch.py", line {line}, in blocking_call'), \
            stall.stack
        assert "self.release.wait(30)" in stall.stack
    finally:
        blocked.done()
    watchdog.check()
    assert reports[1:] == [None]
    watchdog.check()
    assert reports[1:] == [None]  # cleared once


def test_a_new_call_stuck_after_a_cleared_one_is_a_new_stall(
        watched: tuple[CallWatch, FakeClock, list[TaskStall | None]]) -> None:
    calls, clock, reports = watched
    first = Blocked(calls, clock, POLL)
    watchdog = _watchdog(calls, clock, reports, first.thread)
    clock.now += 3
    watchdog.check()
    first.done()
    second = Blocked(calls, clock, COMMIT)
    try:
        watchdog = StallWatchdog(calls, second.thread.ident or 0, 2000, reports.append,
                                 clock=clock)
        watchdog.check()  # a fresh watchdog: nothing reported yet, nothing stuck yet
        clock.now += 2
        watchdog.check()
        assert [r.call if r else None for r in reports] == [POLL, COMMIT]
    finally:
        second.done()


def test_the_stack_is_scrubbed(
        watched: tuple[CallWatch, FakeClock, list[TaskStall | None]]) -> None:
    calls, clock, reports = watched
    blocked = Blocked(calls, clock)
    try:
        watchdog = _watchdog(calls, clock, reports, blocked.thread)
        watchdog.scrub = lambda text: text.replace("release", "[hidden]")
        clock.now += 5
        watchdog.check()
        assert reports[0] is not None and "self.[hidden].wait(30)" in reports[0].stack
    finally:
        blocked.done()


def test_the_watchdog_thread_reports_on_its_own() -> None:
    calls, reports = CallWatch(), []
    entered, release = threading.Event(), threading.Event()

    def stuck_poll() -> None:
        calls.current = (POLL, time.perf_counter())
        entered.set()
        release.wait(30)
        calls.current = None

    thread = threading.Thread(target=stuck_poll, daemon=True)
    thread.start()
    assert entered.wait(5) and thread.ident is not None
    watchdog = StallWatchdog(calls, thread.ident, 100, reports.append).start()
    try:
        for _ in range(100):
            if reports:
                break
            release.wait(0.05)
        assert reports and reports[0] is not None and "stuck_poll" in reports[0].stack
        release.set()
        thread.join(5)
        for _ in range(100):
            if len(reports) > 1:
                break
            time.sleep(0.05)
        assert reports[1:] == [None]
    finally:
        release.set()
        watchdog.close()


def test_the_watchdogs_of_a_process_share_one_thread_and_stop_when_closed() -> None:
    """Two tasks stuck at once are both reported, by the same one thread, each in the
    log context of the thread that started its watchdog; a closed one reports no more."""
    from connect_runtime.logs import LogContext, log_context

    release = threading.Event()
    watches: list[CallWatch] = []
    idents: list[int] = []

    def stuck() -> None:
        calls = CallWatch()
        calls.current = (POLL, time.perf_counter())
        watches.append(calls)
        idents.append(threading.get_ident())
        release.wait(30)
        calls.current = None

    threads = [threading.Thread(target=stuck, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    while len(watches) < 2:
        time.sleep(0.01)
    reports: list[tuple[str, int, object]] = []
    dogs = []
    try:
        for i, (calls, ident) in enumerate(zip(watches, idents, strict=True)):
            def report(stall: TaskStall | None, i: int = i) -> None:
                from connect_runtime.logs import current_log_context
                context = current_log_context()
                reports.append((f"task-{i}", threading.get_ident(),
                                context.task if context else None))
            with log_context(LogContext("c", i)):
                dogs.append(StallWatchdog(calls, ident, 100, report).start())
        for _ in range(200):
            if {r[0] for r in reports} == {"task-0", "task-1"}:
                break
            time.sleep(0.02)
        assert {r[0] for r in reports} == {"task-0", "task-1"}
        assert len({r[1] for r in reports}) == 1  # one thread checked both
        assert all(r[2] == int(r[0][-1]) for r in reports), reports
        dogs[0].close()
        count = len(reports)
        release.set()  # both calls return: only the open watchdog may report it
        for _ in range(100):
            if len(reports) > count:
                break
            time.sleep(0.02)
        assert [r[0] for r in reports[count:]] == ["task-1"]
    finally:
        release.set()
        for dog in dogs:
            dog.close()
