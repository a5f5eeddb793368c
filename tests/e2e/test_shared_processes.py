"""Several tasks of a connector in one Python process (``tasks.per.process``).

Four tasks share one Spark slot on a real worker and broker. Task 1 blocks
forever in ``poll()`` (its ``stop()`` cannot wake it) and task 2 raises after 5
records. The others must not notice: tasks 0 and 3 keep committing, task 2 alone
is FAILED and, restarted through REST, resumes in the same process from its
committed offset; task 1 is reported stuck and stays RUNNING. Status, the stall
report and ``/internal/tasks`` stay per task. Deleting the connector then ends
the process (the blocked task never returns, so the slot is cancelled after the
graceful timeout), and what was committed has no gap and no duplicate.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from support.kafka import create_topic, read_topic, sequences, wait_for
from support.processes import alive
from support.workers import WorkerProcess

TASKS = 4
BLOCKED, FAILING = 1, 2


def _offsets(worker: WorkerProcess, name: str) -> dict[int, int]:
    """The committed ``seq`` of each task's source partition."""
    r = worker.rest("GET", f"/connectors/{name}/offsets")
    assert r.status_code == 200, r.text
    return {int(o["partition"]["share"]): int(o["offset"]["seq"]) for o in r.json()["offsets"]}


def _slots(worker: WorkerProcess, name: str) -> dict[int, dict[str, Any]]:
    return {int(s["task"]): s for s in worker.slots() if s["connector"] == name}


def test_tasks_sharing_a_process_are_isolated_from_a_blocked_and_a_failed_one(
        worker: WorkerProcess, kafka_bootstrap: str,
        unique_name: Callable[[str], str]) -> None:
    name, topic = unique_name("shared"), f"shared-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    response = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.SharingSourceConnector", "topic": topic,
        "tasks.max": str(TASKS), "tasks.per.process": str(TASKS),
        "share.block": str(BLOCKED), "share.fail": str(FAILING),
        "task.stall.threshold.ms": "2000"}})
    assert response.status_code == 201, response.text
    deleted = False
    try:
        def states() -> list[str]:
            return worker.task_states(name)
        wait_for(lambda: states() == ["RUNNING", "RUNNING", "FAILED", "RUNNING"], 90,
                 f"{name}: task 2 FAILED, the others RUNNING")
        status = worker.status(name)
        assert f"sharing task {FAILING} fails at seq 5" in status["tasks"][FAILING]["trace"]
        # The blocked task is reported stuck, on its own status only.
        wait_for(lambda: "is stuck: poll()" in (
            worker.status(name)["tasks"][BLOCKED].get("trace") or ""), 60,
            f"{name}-{BLOCKED} to be reported stuck")
        status = worker.status(name)
        assert [t.get("trace") is None for t in status["tasks"]] == [True, False, False, True]

        # One process hosts all four, and /internal/tasks says so per task.
        slots = _slots(worker, name)
        assert sorted(slots) == list(range(TASKS))
        pids = {s["pid"] for s in slots.values()}
        assert len(pids) == 1 and None not in pids, slots
        pid = pids.pop()

        # The others keep committing while one is blocked and one has failed.
        before = _offsets(worker, name)
        wait_for(lambda: all(_offsets(worker, name).get(t, 0) > before.get(t, 0) + 20
                             for t in (0, 3)), 60, "tasks 0 and 3 to keep committing")
        assert _offsets(worker, name).get(FAILING) == 5
        assert BLOCKED not in _offsets(worker, name)

        # A REST restart of the failed task runs it again in the same process,
        # from its committed offset.
        r = worker.rest("POST", f"/connectors/{name}/tasks/{FAILING}/restart")
        assert r.status_code == 204, r.text
        wait_for(lambda: states()[FAILING] == "RUNNING", 60, f"{name}-{FAILING} to run again")
        wait_for(lambda: _offsets(worker, name).get(FAILING, 0) > 25, 60,
                 f"{name}-{FAILING} to commit again")
        assert _slots(worker, name)[FAILING]["pid"] == pid
        assert states() == ["RUNNING"] * TASKS

        # Deleting it ends the process, blocked task and all.
        r = worker.rest("DELETE", f"/connectors/{name}")
        assert r.status_code == 204, r.text
        deleted = True
        wait_for(lambda: not alive(pid), 90, f"process {pid} of the shared slot to end")
    finally:
        if not deleted:
            worker.rest("DELETE", f"/connectors/{name}")

    records = read_topic(kafka_bootstrap, topic)
    seqs = sequences(records)
    assert BLOCKED not in seqs
    for task in (0, FAILING, 3):
        got = seqs[task]
        assert got == list(range(len(got))), f"task {task}: gap or duplicate"
    assert len(seqs[FAILING]) > 25
    assert {r["value"]["pid"] for r in records} == {pid}
