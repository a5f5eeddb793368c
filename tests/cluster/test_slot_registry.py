"""The driver's view of slots: reports, pushed commands, liveness (a fake clock)."""

from __future__ import annotations

import dataclasses
import logging

import pytest
from support.clock import FakeClock

from connect_runtime.cluster.slot_registry import (
    SlotChannel,
    SlotRegistry,
    SlotView,
    task_event_line,
)
from connect_runtime.log_levels import LevelSetting
from connect_runtime.protocol.slot_channel import (
    Command,
    SlotAnswer,
    SlotHello,
    SlotReport,
    SlotTopics,
    TaskStall,
)
from connect_runtime.protocol.states import State

Event = tuple[str, int, State, "str | None"]


class Pushed:
    """What the registry pushed down one channel."""

    def __init__(self) -> None:
        self.answers: list[SlotAnswer | None] = []

    def __call__(self, answer: SlotAnswer | None) -> None:
        self.answers.append(answer)

    @property
    def last(self) -> SlotAnswer | None:
        return self.answers[-1]


def _registry() -> tuple[SlotRegistry, list[Event], FakeClock]:
    events: list[Event] = []
    clock = FakeClock(100.0)
    reg = SlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)),
                       liveness_timeout_s=10.0, clock=clock)
    return reg, events, clock


def _hello(generation: int = 1, run_id: str = "r1", attempt: int = 0,
           submission: str = "") -> SlotHello:
    # The registry trusts the route to have bound connector and task to the channel.
    return SlotHello(connector="c", task=0, run_id=run_id, generation=generation,
                     attempt=attempt, pid=11, host="h", submission=submission)


def _report(state: State, trace: str | None = None, restart_seq: int | None = 0,
            fenced: bool = False) -> SlotReport:
    return SlotReport(state=state, trace=trace, restart_seq=restart_seq, fenced=fenced)


def _connect(reg: SlotRegistry, task: int = 0, **hello: object) -> tuple[SlotChannel, Pushed]:
    pushed = Pushed()
    channel = reg.connect("c", task, _hello(**hello), pushed)  # type: ignore[arg-type]
    assert channel is not None
    return channel, pushed


def _lose_a_running_slot(reg: SlotRegistry) -> None:
    """Task c-0 runs, then its channel closes without a close frame (its process died)."""
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    reg.report(channel, _report(State.RUNNING))
    reg.disconnect(channel, clean=False)


def test_connect_answers_at_once_and_commands_are_pushed_as_they_change() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=2, paused=False)
    channel, pushed = _connect(reg)
    assert pushed.answers == [SlotAnswer(Command.RUN, 0)]
    reg.report(channel, _report(State.RUNNING))
    reg.report(channel, _report(State.RUNNING))
    assert events == [("c", 0, State.RUNNING, None)]  # a repeat is not news
    reg.set_paused("c", True)
    reg.set_paused("c", True)  # no change, no push
    assert pushed.answers[1:] == [SlotAnswer(Command.PAUSE, 0)]
    assert reg.restart("c", 0)
    assert pushed.last == SlotAnswer(Command.PAUSE, 1)
    reg.push_all()  # a key rotation: the same answer again, with the new key added by REST
    assert pushed.last == SlotAnswer(Command.PAUSE, 1)
    reg.close("c")
    assert pushed.last == SlotAnswer(Command.STOP, 1)
    reg.report(channel, _report(State.FAILED, "late"))  # a closed generation says nothing
    assert len(events) == 1


def test_an_older_generation_or_an_unknown_task_is_not_connected() -> None:
    reg, _, _ = _registry()
    reg.open("c", generation=5, task_count=1, paused=False)
    assert reg.connect("c", 0, _hello(generation=4), Pushed()) is None
    assert reg.connect("c", 1, _hello(generation=5), Pushed()) is None
    assert reg.connect("other", 0, _hello(generation=5), Pushed()) is None


def test_a_report_sent_before_the_slot_heard_of_a_restart_does_not_undo_it() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    failed = _report(State.FAILED, "died", restart_seq=0)
    reg.report(channel, failed)
    assert reg.restart("c", 0)
    reg.report(channel, failed)  # still FAILED, but sent under restart_seq 0
    view = reg.slot("c", 0)
    assert view is not None and view.state is State.RESTARTING
    reg.report(channel, _report(State.RESTARTING, restart_seq=1))
    reg.report(channel, _report(State.FAILED, "died", restart_seq=1))
    assert [e[2] for e in events] == [State.FAILED, State.FAILED]  # the same failure is news


def test_an_abnormal_close_loses_the_slot_at_once_and_says_where_it_ran() -> None:
    reg, events, _ = _registry()
    _lose_a_running_slot(reg)
    view = reg.slot("c", 0)
    assert view is not None and view.lost and not view.connected
    state, trace = events[-1][2], events[-1][3]
    assert state is State.FAILED and trace is not None
    assert "c-0 lost" in trace and "process 11 on host h" in trace and "closed" in trace


def test_a_clean_close_keeps_the_last_report() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    reg.report(channel, _report(State.RUNNING))
    reg.report(channel, _report(State.UNASSIGNED))
    reg.disconnect(channel, clean=True)
    assert [e[2] for e in events] == [State.RUNNING, State.UNASSIGNED]


def test_silence_past_the_timeout_loses_the_slot_and_closes_its_channel() -> None:
    reg, events, clock = _registry()
    reg.open("c", generation=1, task_count=2, paused=False)
    quiet, quiet_pushed = _connect(reg, task=0)
    talkative, _ = _connect(reg, task=1, run_id="r2")
    reg.report(quiet, _report(State.RUNNING))
    reg.report(talkative, _report(State.RUNNING))
    clock.now += 9.0
    reg.keepalive(talkative)
    reg.check_liveness()
    assert [e[2] for e in events] == [State.RUNNING, State.RUNNING]
    clock.now += 1.5  # task 0 silent for 10.5 s, task 1 for 1.5 s
    reg.check_liveness()
    assert events[-1][:3] == ("c", 0, State.FAILED) and "10 s" in (events[-1][3] or "")
    assert quiet_pushed.last is None  # its channel is closed as lost
    reg.check_liveness()
    assert len(events) == 3  # declared once
    # The same process comes back (a new connection, same run_id): its state stands.
    back, _ = _connect(reg, task=0)
    reg.report(back, _report(State.RUNNING))
    view = reg.slot("c", 0)
    assert view is not None and view.state is State.RUNNING and not view.lost
    assert events[-1][2] is State.RUNNING


def test_a_restart_while_lost_is_handed_to_the_process_spark_reruns() -> None:
    reg, _, _ = _registry()
    _lose_a_running_slot(reg)
    assert reg.restart("c", 0)  # the user restarts the FAILED (lost) task
    _, pushed = _connect(reg, run_id="r2", attempt=1)
    assert pushed.last == SlotAnswer(Command.RUN, 1, restart_pending=True)


def test_a_rerun_without_a_restart_is_not_told_to_resume() -> None:
    reg, _, _ = _registry()
    _lose_a_running_slot(reg)
    _, pushed = _connect(reg, run_id="r2", attempt=1)
    assert pushed.last == SlotAnswer(Command.RUN, 0, restart_pending=False)


def test_a_reconnect_replaces_the_old_channel() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    old, old_pushed = _connect(reg)
    new, _ = _connect(reg)
    assert old_pushed.last is None  # closed
    reg.disconnect(old, clean=False)  # the old one's close is not a loss
    reg.report(old, _report(State.FAILED, "stale"))  # nor does it speak any more
    assert events == []
    reg.report(new, _report(State.RUNNING))
    assert events == [("c", 0, State.RUNNING, None)]


def test_a_slot_that_never_ran_or_already_failed_is_not_announced_again() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=2, paused=False)
    idle, _ = _connect(reg, task=0)
    reg.disconnect(idle, clean=False)  # UNASSIGNED: nothing ran
    failed, _ = _connect(reg, task=1, run_id="r2")
    reg.report(failed, _report(State.FAILED, "boom"))
    reg.disconnect(failed, clean=False)
    assert [e[2:] for e in events] == [(State.FAILED, "boom")]
    view = reg.slot("c", 1)
    assert view is not None and view.lost and view.trace == "boom"


def test_fenced_flag_is_recorded_from_reports() -> None:
    reg, _, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    reg.report(channel, _report(State.FAILED, fenced=True))
    view = reg.slot("c", 0)
    assert view is not None and view.fenced and view.to_dict()["fenced"] is True


def test_slots_spark_has_not_started_get_the_reason_once() -> None:
    reg, events, clock = _registry()
    reg.open("c", generation=1, task_count=2, paused=False)
    started, _ = _connect(reg, task=0)
    reg.report(started, _report(State.RUNNING))
    reg.note_waiting(10.0, "no slot")
    assert len(events) == 1  # not yet: submitted just now
    clock.now += 11.0
    reg.note_waiting(10.0, "no slot")
    reg.note_waiting(10.0, "no slot")
    assert events[1:] == [("c", 1, State.UNASSIGNED, "no slot")]  # only the waiting one, once
    late, _ = _connect(reg, task=1, run_id="r2")
    reg.report(late, _report(State.RUNNING))
    assert events[-1] == ("c", 1, State.RUNNING, None)


def test_an_older_attempt_still_alive_after_a_rerun_is_told_to_stop() -> None:
    # Spark re-ran the slot while the first attempt's Python worker still ran (its
    # executor JVM hung): the two must not take the channel from each other.
    reg, _, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    _connect(reg, run_id="first", attempt=0)
    _connect(reg, run_id="second", attempt=1)
    assert reg.connect("c", 0, _hello(run_id="first", attempt=0), Pushed()) is None
    view = reg.slot("c", 0)
    assert view is not None and view.run_id == "second"


def test_a_slot_of_a_job_submitted_before_is_told_to_stop_whatever_its_attempt() -> None:
    # Spark gave the first job up (its slots' executor losses reached
    # spark.task.maxFailures) while a slot of it lived on, cut off; the job was
    # submitted again with the same generation. The old slot, Spark attempt 3,
    # reconnects after the new job's attempt 0 has: it must not take the task.
    reg, _, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False, submission="job-1")
    _connect(reg, run_id="old", attempt=3, submission="job-1")
    reg.close("c")
    reg.open("c", generation=1, task_count=1, paused=False, submission="job-2")
    _, pushed = _connect(reg, run_id="new", attempt=0, submission="job-2")
    assert reg.connect("c", 0, _hello(run_id="old", attempt=3, submission="job-1"),
                       Pushed()) is None
    view = reg.slot("c", 0)
    assert view is not None and view.run_id == "new" and view.submission == "job-2"
    assert pushed.answers == [SlotAnswer(Command.RUN, 0)]  # the new channel stays open


def test_once_started_changes_are_written_by_the_registrys_thread_in_order() -> None:
    import threading

    callers: list[str] = []
    events: list[State] = []
    done = threading.Event()

    def listener(c: str, t: int, state: State, trace: str | None) -> None:
        callers.append(threading.current_thread().name)
        events.append(state)
        if state is State.PAUSED:
            done.set()
    reg = SlotRegistry(listener)
    reg.start()
    try:
        reg.open("c", generation=1, task_count=1, paused=False)
        channel, _ = _connect(reg)
        for state in (State.RUNNING, State.PAUSED):
            reg.report(channel, _report(state))
        assert done.wait(5)
    finally:
        reg.stop()
    assert events == [State.RUNNING, State.PAUSED] and set(callers) == {"slot-events"}


def test_answers_carry_the_session_key_looked_up_once_per_batch() -> None:
    lookups: list[int] = []

    def key() -> tuple[str | None, str | None]:
        lookups.append(1)
        return "a2V5", "id1"
    reg = SlotRegistry(lambda c, t, s, tr: None, session_key=key)
    reg.open("c", generation=1, task_count=2, paused=False)
    _, first = _connect(reg, task=0)
    _, second = _connect(reg, task=1, run_id="r2")
    lookups.clear()
    reg.set_paused("c", True)  # one batch of two answers
    assert first.last == second.last == SlotAnswer(Command.PAUSE, 0, session_key="a2V5",
                                                   session_key_id="id1")
    assert len(lookups) == 1


def test_answers_carry_the_logger_levels_of_the_moment() -> None:
    levels: tuple[LevelSetting, ...] = ()
    reg = SlotRegistry(lambda c, t, s, tr: None, log_levels=lambda: levels)
    reg.open("c", generation=1, task_count=1, paused=False)
    _, pushed = _connect(reg)
    assert pushed.last == SlotAnswer(Command.RUN, 0)
    levels = (LevelSetting("my_connector", "DEBUG"),)
    reg.push_all()  # what the herder does after /admin/loggers set a level
    assert pushed.last == SlotAnswer(Command.RUN, 0, log_levels=levels)
    reg.close("c")
    assert pushed.last == SlotAnswer(Command.STOP, 0, log_levels=levels)


# ----------------------------------------------------------- active topics (KIP-558)


def test_topics_of_current_slots_reach_the_listener_and_keep_them_alive() -> None:
    heard: list[tuple[str, int, frozenset[str]]] = []
    clock = FakeClock(100.0)
    reg = SlotRegistry(lambda *_: None, liveness_timeout_s=10.0, clock=clock,
                       on_topics=lambda c, t, topics: heard.append((c, t, topics)))
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    reg.report(channel, _report(State.RUNNING))
    clock.now += 8
    reg.topics(channel, SlotTopics(frozenset({"orders"})))
    assert heard == [("c", 0, frozenset({"orders"}))]
    clock.now += 8  # 16 s after the report, 8 after the topics: still alive
    reg.check_liveness()
    slot = reg.slot("c", 0)
    assert slot is not None and slot.connected and not slot.lost
    # A closed generation (the connector was deleted) speaks for no task.
    reg.close("c")
    reg.topics(channel, SlotTopics(frozenset({"late"})))
    assert heard == [("c", 0, frozenset({"orders"}))]


# ----------------------------------------------------------- lifecycle log lines


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str, str]]:
    """(level, event, message) of the registry's lifecycle lines."""
    return [(r.levelname, r.__dict__["event"], r.getMessage()) for r in caplog.records
            if r.name == "connect_runtime.cluster.slot_registry" and "event" in r.__dict__]


def test_a_start_a_failure_and_a_restart_are_one_line_each_saying_where(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.cluster.slot_registry")
    reg, _, _ = _registry()
    reg.open("c", generation=7, task_count=1, paused=False)
    channel, _ = _connect(reg, generation=7)
    reg.report(channel, _report(State.RUNNING))
    reg.set_paused("c", True)
    reg.report(channel, _report(State.PAUSED))
    reg.report(channel, _report(State.RUNNING))  # a resume is not a start
    trace = ("Task c-0 (connector c) failed:\nTraceback (most recent call last):\n"
             '  File "t.py", line 1, in poll\nRuntimeError: boom "quoted"\nsecond line\n')
    reg.report(channel, _report(State.FAILED, trace))
    assert reg.restart("c", 0)
    reg.report(channel, _report(State.RESTARTING, restart_seq=1))
    reg.report(channel, _report(State.RUNNING, restart_seq=1))
    assert _lines(caplog) == [
        ("INFO", "task_started",
         "task c-0 started on host h, pid 11, Spark attempt 0 (generation 7, restart 0)"),
        ("ERROR", "task_failed", "task c-0 failed on host h, pid 11, Spark attempt 0 "
                                 '(generation 7, restart 0): RuntimeError: boom "quoted"'),
        ("INFO", "task_started",
         "task c-0 started on host h, pid 11, Spark attempt 0 (generation 7, restart 1)"),
    ]
    started = [r for r in caplog.records if r.__dict__.get("event") == "task_started"][-1]
    assert {k: started.__dict__[k] for k in ("connector", "task", "generation", "restart",
                                             "attempt", "host", "pid")} == {
        "connector": "c", "task": 0, "generation": 7, "restart": 1, "attempt": 0,
        "host": "h", "pid": 11}


def test_a_lost_slot_is_one_task_lost_line_not_a_failure(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.cluster.slot_registry")
    reg, events, _ = _registry()
    _lose_a_running_slot(reg)
    assert events[-1][2] is State.FAILED
    assert _lines(caplog)[1:] == [(
        "ERROR", "task_lost", "task c-0 lost: its connection to the worker closed without a "
        "final report; it ran on host h, pid 11, Spark attempt 0 (generation 1) and is "
        "FAILED until restarted")]


def test_a_task_started_paused_says_so() -> None:
    slot = SlotView("c", 2, generation=3, state=State.PAUSED, host="h", pid=5, attempt=1)
    line = task_event_line(State.UNASSIGNED, slot)
    assert line is not None and line[0] == logging.INFO and line[2]["event"] == "task_started"
    assert line[1] == "task c-2 started paused on host h, pid 5, Spark attempt 1 " \
                      "(generation 3, restart 0)"
    assert task_event_line(State.RUNNING, dataclasses.replace(slot, state=State.RESTARTING)) \
        is None


# ------------------------------------------------------------------ stuck tasks

STACK = ('  File "/app/task.py", line 40, in poll\n    data = self._sock.recv(1)\n')


def _stall(stalled_ms: int = 312_000, call: str = "poll()") -> TaskStall:
    return TaskStall(call=call, stalled_ms=stalled_ms, since_ms=1_800_000_000_000,
                     threshold_ms=300_000, stack=STACK)


def test_a_stall_is_the_running_tasks_trace_until_it_clears(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.cluster.slot_registry")
    reg, events, clock = _registry()
    reg.open("c", generation=7, task_count=1, paused=False)
    channel, _ = _connect(reg, generation=7)
    reg.report(channel, _report(State.RUNNING))
    stall = _stall()
    reg.report(channel, dataclasses.replace(_report(State.RUNNING), stall=stall))
    assert events[-1] == ("c", 0, State.RUNNING, stall.trace("c-0"))
    assert events[-1][3] is not None and events[-1][3].startswith(
        "Task c-0 is stuck: poll() has not returned for 312 s (since 2027-01-15T08:00:00Z; "
        "task.stall.threshold.ms=300000). Its state does not change;")
    assert events[-1][3].endswith(STACK)
    # How long is live, on the registry's clock (not the executor's).
    clock.now += 10
    assert reg.stalled_seconds() == {("c", 0): pytest.approx(322.0)}
    # The same report again (a reconnect sends it anew) is no news.
    reg.report(channel, dataclasses.replace(_report(State.RUNNING), stall=stall))
    assert len(events) == 2
    reg.report(channel, _report(State.RUNNING))  # the call returned
    assert events[-1] == ("c", 0, State.RUNNING, None)
    assert reg.stalled_seconds() == {("c", 0): 0.0}
    lines = _lines(caplog)[1:]
    assert lines == [
        ("WARNING", "task_stalled", "task c-0 is stuck: poll() has not returned for 312 s "
         "(task.stall.threshold.ms=300000); innermost frame: File \"/app/task.py\", line 40, "
         "in poll; the task thread's stack is in the task's status trace"),
        ("INFO", "task_stall_cleared", "task c-0 is no longer stuck: poll() returned (or the "
         "task left RUNNING) after about 322 s; state RUNNING")]
    stalled = next(r for r in caplog.records if r.__dict__.get("event") == "task_stalled")
    assert stalled.__dict__["call"] == "poll()"


def test_a_stall_means_nothing_once_the_task_failed_or_restarts() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=False)
    channel, _ = _connect(reg)
    reg.report(channel, dataclasses.replace(_report(State.RUNNING), stall=_stall()))
    # The call raised: FAILED may still carry the stall the watchdog has not cleared.
    reg.report(channel, dataclasses.replace(_report(State.FAILED, "boom"), stall=_stall()))
    assert events[-1] == ("c", 0, State.FAILED, "boom")
    assert reg.stalled_seconds() == {("c", 0): 0.0}
    reg.report(channel, _report(State.FAILED, "boom"))  # the clear that follows: no news
    assert len(events) == 2
    reg.report(channel, dataclasses.replace(_report(State.RUNNING), stall=_stall()))
    assert reg.restart("c", 0)
    assert reg.slot("c", 0) is not None and reg.slot("c", 0).stall is None  # type: ignore[union-attr]


def test_a_paused_task_stuck_in_its_commit_shows_it() -> None:
    reg, events, _ = _registry()
    reg.open("c", generation=1, task_count=1, paused=True)
    channel, _ = _connect(reg)
    stall = _stall(call="commit")
    reg.report(channel, dataclasses.replace(_report(State.PAUSED), stall=stall))
    assert events[-1] == ("c", 0, State.PAUSED, stall.trace("c-0"))
    assert "commit has not returned" in stall.trace("c-0")
