"""The loop scaffold alone (no broker): mode -> loop class, the signals, the skeleton's
order of hooks. What each loop does inside its hooks is tested against the real
broker in test_exactly_once_loop and test_at_least_once_loop."""

from __future__ import annotations

import threading
from typing import Any
from unittest.mock import Mock

import pytest

from connect_runtime.api.record import SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.boundaries import BoundaryPolicy
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome, TaskLoop
from connect_runtime.task.slot import loop_for
from connect_runtime.task.stall_watch import POLL, CallWatch
from connect_runtime.task.startup import StartedTask


def test_loop_for_picks_the_loop_of_each_mode() -> None:
    assert loop_for(TaskMode.EXACTLY_ONCE) is ExactlyOnceTaskLoop
    assert loop_for(TaskMode.AT_LEAST_ONCE) is AtLeastOnceTaskLoop
    for mode in TaskMode:
        assert loop_for(mode).mode is mode


def test_signals_wake_the_loop_for_stop_and_for_pause_changes() -> None:
    signals = LoopSignals()
    assert not signals.stop and not signals.paused and not signals.wakeup.is_set()
    signals.set_paused(True)
    assert signals.paused and signals.wakeup.is_set()
    signals.wakeup.clear()
    signals.set_paused(False)
    assert not signals.paused and signals.wakeup.is_set()
    signals.wakeup.clear()
    woke = threading.Event()

    def waiter() -> None:
        if signals.wakeup.wait(10):
            woke.set()
    thread = threading.Thread(target=waiter)
    thread.start()
    signals.request_stop()
    thread.join(10)
    assert woke.is_set() and signals.stop


class Task(SourceTask):
    """Hands out ``script`` one poll at a time; a callable entry runs instead."""

    def __init__(self, script: list[Any]) -> None:
        self.script = script

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        step = self.script.pop(0)
        return step() if callable(step) else step

    def stop(self) -> None:
        pass


def deps(task: SourceTask, signals: LoopSignals, **extra: Any) -> LoopDeps:
    return LoopDeps(label="c-0", connector="c", task=task, producer=Mock(),
                    offsets_topic="offsets", forbidden_topics=frozenset({"offsets"}),
                    key_converter=load_converter("StringConverter", {}, True),
                    value_converter=load_converter("JsonConverter", {}, False),
                    signals=signals, **extra)


class Recording(TaskLoop):
    """Records the hooks the skeleton calls, in order."""

    mode = TaskMode.AT_LEAST_ONCE

    def __init__(self, deps: LoopDeps) -> None:
        super().__init__(deps)
        self.calls: list[Any] = []
        self.failure_outcome: Outcome | None = None

    @classmethod
    def for_started(cls, deps: LoopDeps, started: StartedTask) -> Recording:
        return cls(deps)

    def _send_polled(self, polled: list[SourceRecord]) -> int:
        self.calls.append(("send", len(polled)))
        return len(polled)

    def _after_poll(self, size: int) -> None:
        self.calls.append(("after_poll", size))

    def _before_pause(self) -> None:
        self.calls.append("before_pause")

    def _while_paused(self) -> None:
        self.calls.append("while_paused")
        self.signals.set_paused(False)

    def _final_commit(self) -> None:
        self.calls.append("final_commit")

    def _on_failure(self, error: BaseException) -> Outcome | None:
        self.calls.append(("failure", type(error).__name__))
        return self.failure_outcome


def test_the_skeleton_polls_sends_pauses_and_commits_on_stop_in_order() -> None:
    signals = LoopSignals()
    record = SourceRecord({"p": 0}, {"n": 1}, "out", value=1)
    paused: list[bool] = []
    task = Task([[record, record], None, lambda: signals.set_paused(True), [],
                 lambda: signals.request_stop()])
    loop = Recording(deps(task, signals, on_paused=paused.append))
    assert loop.run() is Outcome.STOPPED
    assert loop.calls == [("send", 2), ("after_poll", 2), ("after_poll", 0), ("after_poll", 0),
                          "before_pause", "while_paused", ("after_poll", 0), ("after_poll", 0),
                          "final_commit"]
    assert paused == [True, False]
    assert not task.script


def test_a_failure_returns_what_the_loop_decides_or_propagates() -> None:
    def boom() -> None:
        raise RuntimeError("boom")

    loop = Recording(deps(Task([boom]), LoopSignals()))
    with pytest.raises(RuntimeError, match="boom"):
        loop.run()
    assert loop.calls == [("failure", "RuntimeError")]
    loop = Recording(deps(Task([boom]), LoopSignals()))
    loop.failure_outcome = Outcome.FENCED
    assert loop.run() is Outcome.FENCED


def test_an_exactly_once_loop_needs_a_boundary() -> None:
    signals = LoopSignals()
    started = Mock(spec=StartedTask, mode=TaskMode.EXACTLY_ONCE, boundary=None,
                   transaction_timeout_s=60.0)
    with pytest.raises(ValueError, match="without a transaction boundary"):
        ExactlyOnceTaskLoop.for_started(deps(Task([]), signals), started)
    started.boundary = BoundaryPolicy("poll", 0, None)
    loop = loop_for(TaskMode.EXACTLY_ONCE).for_started(deps(Task([]), signals), started)
    assert isinstance(loop, ExactlyOnceTaskLoop) and loop.boundary is started.boundary
    assert loop.transaction_timeout_s == 60.0


def test_poll_is_marked_for_the_stall_watch_and_unmarked_even_when_it_raises() -> None:
    watch = CallWatch()
    seen: list[Any] = []

    def boom() -> None:
        seen.append(watch.current)
        raise RuntimeError("boom")

    loop = Recording(deps(Task([boom]), LoopSignals(), call_watch=watch))
    with pytest.raises(RuntimeError, match="boom"):
        loop.run()
    assert seen[0] is not None and seen[0][0] == POLL
    assert watch.current is None
