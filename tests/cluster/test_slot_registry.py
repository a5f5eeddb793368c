from __future__ import annotations

from dataclasses import replace

from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.protocol.heartbeat import Command, SlotAnswer, SlotReport
from connect_runtime.protocol.states import State


def _report(generation: int, state: State, trace: str | None = None,
            restart_seq: int | None = None, fenced: bool = False) -> SlotReport:
    return SlotReport(run_id="r", generation=generation, state=state, trace=trace, attempt=0,
                      restart_seq=restart_seq, fenced=fenced, pid=11, host="h")


def test_registry_reports_changes_answers_commands_and_ignores_stale_generations() -> None:
    events: list[tuple[str, int, State, str | None]] = []
    reg = SlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)))
    reg.open("c", generation=7, task_count=2, paused=False)
    report = _report(7, State.RUNNING)
    assert reg.heartbeat("c", 0, report) == SlotAnswer(Command.RUN, 0)
    assert reg.heartbeat("c", 0, report) == SlotAnswer(Command.RUN, 0)
    assert events == [("c", 0, State.RUNNING, None)]  # a repeat is not news
    # An older generation is told to stop and does not speak for the task.
    assert reg.heartbeat("c", 1, replace(report, generation=6)).command is Command.STOP
    assert len(events) == 1
    reg.set_paused("c", True)
    assert reg.heartbeat("c", 0, report).command is Command.PAUSE


def test_a_restart_makes_the_same_failure_news_again() -> None:
    events: list[tuple[str, int, State, str | None]] = []
    reg = SlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)))
    reg.open("c", generation=1, task_count=1, paused=False)
    failed = _report(1, State.FAILED, "boom")
    reg.heartbeat("c", 0, failed)
    assert reg.restart("c", 0)
    assert reg.heartbeat("c", 0, failed).restart_seq == 1
    assert [e[2] for e in events] == [State.FAILED, State.FAILED]
    assert not reg.restart("c", 5)  # no such slot
    reg.close("c")
    assert reg.heartbeat("c", 0, failed).command is Command.STOP


def test_a_report_sent_before_the_slot_heard_of_a_restart_does_not_undo_it() -> None:
    events: list[tuple[str, int, State, str | None]] = []
    reg = SlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)))
    reg.open("c", generation=1, task_count=1, paused=False)
    failed = _report(1, State.FAILED, "died", restart_seq=0)
    reg.heartbeat("c", 0, failed)
    assert reg.restart("c", 0)
    # Still FAILED, but sent under restart_seq 0: it predates the restart.
    assert reg.heartbeat("c", 0, failed).restart_seq == 1
    view = reg.slot("c", 0)
    assert view is not None and view.state is State.RESTARTING
    assert [e[2] for e in events] == [State.FAILED]
    # Having heard the restart, the slot's reports count again (RESTARTING is
    # what the registry already holds, so only the new failure is news).
    reg.heartbeat("c", 0, replace(failed, state=State.RESTARTING, trace=None, restart_seq=1))
    reg.heartbeat("c", 0, replace(failed, restart_seq=1))
    assert [e[2] for e in events] == [State.FAILED, State.FAILED]


def test_fenced_flag_is_recorded_from_reports() -> None:
    reg = SlotRegistry(lambda c, t, s, tr: None)
    reg.open("c", generation=1, task_count=1, paused=False)
    reg.heartbeat("c", 0, _report(1, State.FAILED, fenced=True))
    view = reg.slot("c", 0)
    assert view is not None and view.fenced and view.to_dict()["fenced"] is True
