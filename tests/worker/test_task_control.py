from __future__ import annotations

from connect_runtime.worker.states import State
from connect_runtime.worker.task_control import TaskSlotRegistry


def test_registry_reports_changes_answers_commands_and_ignores_stale_generations() -> None:
    events: list[tuple[str, int, State, str | None]] = []
    reg = TaskSlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)))
    reg.open("c", generation=7, task_count=2, paused=False)
    report = {"generation": 7, "state": "RUNNING", "pid": 11, "attempt": 0}
    assert reg.heartbeat("c", 0, report) == {"command": "run", "restart_seq": 0}
    assert reg.heartbeat("c", 0, report) == {"command": "run", "restart_seq": 0}
    assert events == [("c", 0, State.RUNNING, None)]  # a repeat is not news
    # An older generation is told to stop and does not speak for the task.
    assert reg.heartbeat("c", 1, {**report, "generation": 6})["command"] == "stop"
    assert len(events) == 1
    reg.set_paused("c", True)
    assert reg.heartbeat("c", 0, report)["command"] == "pause"


def test_a_restart_makes_the_same_failure_news_again() -> None:
    events: list[tuple[str, int, State, str | None]] = []
    reg = TaskSlotRegistry(lambda c, t, s, tr: events.append((c, t, s, tr)))
    reg.open("c", generation=1, task_count=1, paused=False)
    failed = {"generation": 1, "state": "FAILED", "trace": "boom"}
    reg.heartbeat("c", 0, failed)
    assert reg.restart("c", 0)
    assert reg.heartbeat("c", 0, failed)["restart_seq"] == 1
    assert [e[2] for e in events] == [State.FAILED, State.FAILED]
    assert not reg.restart("c", 5)  # no such slot
    reg.close("c")
    assert reg.heartbeat("c", 0, failed)["command"] == "stop"
