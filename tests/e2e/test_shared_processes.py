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


def _delete_and_see_the_process_end(worker: WorkerProcess, name: str, pid: int) -> None:
    """Deleting the connector ends its shared process, blocked tasks and all (the
    slot is cancelled after the graceful timeout)."""
    r = worker.rest("DELETE", f"/connectors/{name}")
    assert r.status_code == 204, r.text
    wait_for(lambda: not alive(pid), 90, f"process {pid} of the shared slot to end")


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
        _delete_and_see_the_process_end(worker, name, pid)
        deleted = True
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


def test_by_default_a_connectors_tasks_share_one_process_per_core(
        worker: WorkerProcess, kafka_bootstrap: str,
        unique_name: Callable[[str], str]) -> None:
    """``tasks.per.process`` unset on the connector and the worker (``auto``): the
    shared worker's ``local[8]`` has 8 slots, but 5 tasks go into one process per
    core of this machine (2 on a 2-core one: processes of 3 and 2 tasks)."""
    import os

    name, topic = unique_name("packed"), f"packed-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    response = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.SharingSourceConnector", "topic": topic,
        "tasks.max": "5"}})
    assert response.status_code == 201, response.text
    wait_for(lambda: worker.task_states(name) == ["RUNNING"] * 5, 90, f"{name} RUNNING")
    slots = _slots(worker, name)
    processes = min(5, len(os.sched_getaffinity(0)), 8)
    size, longer = divmod(5, processes)
    by_pid: dict[int, list[int]] = {}
    for task, slot in sorted(slots.items()):
        by_pid.setdefault(slot["pid"], []).append(task)
    assert sorted(by_pid.values()) == sorted(
        [list(range(i * size + min(i, longer), (i + 1) * size + min(i + 1, longer)))
         for i in range(processes)]), slots


def test_a_task_blocked_in_commit_or_stop_stalls_neither_its_siblings_nor_the_shutdown(
        worker: WorkerProcess, kafka_bootstrap: str,
        unique_name: Callable[[str], str]) -> None:
    """Three tasks in one process: task 1 blocks forever in ``commit()`` after its
    5th record, task 2 in ``stop()``. Task 0 keeps committing, and so does task 2
    until it is asked to stop; a REST restart of task 2 (whose old instance never
    returns from ``stop()``) leaves task 0 running; deleting the connector ends
    the process all the same, and what was committed has no gap and no duplicate."""
    in_commit, in_stop = 1, 2
    name, topic = unique_name("blocked"), f"blocked-{uuid.uuid4().hex[:8]}"
    create_topic(kafka_bootstrap, topic, 1)
    response = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.SharingSourceConnector", "topic": topic,
        "tasks.max": "3", "tasks.per.process": "3", "share.block.commit": str(in_commit),
        "share.block.stop": str(in_stop)}})
    assert response.status_code == 201, response.text
    deleted = False
    try:
        wait_for(lambda: worker.task_states(name) == ["RUNNING"] * 3, 90, f"{name} RUNNING")
        pids = {s["pid"] for s in _slots(worker, name).values()}
        assert len(pids) == 1 and None not in pids
        pid = pids.pop()
        # Task 1 committed its 5 records, then blocked in commit(); the others go on.
        wait_for(lambda: _offsets(worker, name).get(in_commit) == 5, 60,
                 f"{name}-{in_commit} to commit 5 records")
        before = _offsets(worker, name)
        wait_for(lambda: all(_offsets(worker, name).get(t, 0) > before[t] + 20
                             for t in (0, in_stop)), 60, "tasks 0 and 2 to keep committing")
        assert _offsets(worker, name)[in_commit] == 5

        # Task 2's stop() never returns: its restart must not take task 0 with it.
        committed = _offsets(worker, name)  # task 2's, at least, are in the topic at the end
        r = worker.rest("POST", f"/connectors/{name}/tasks/{in_stop}/restart")
        assert r.status_code == 204, r.text
        before = _offsets(worker, name)
        wait_for(lambda: _offsets(worker, name).get(0, 0) > before[0] + 20, 60,
                 "task 0 to keep committing after task 2's restart")
        assert worker.task_states(name)[0] == "RUNNING"
        assert _slots(worker, name)[0]["pid"] == pid

        _delete_and_see_the_process_end(worker, name, pid)
        deleted = True
    finally:
        if not deleted:
            worker.rest("DELETE", f"/connectors/{name}")

    seqs = sequences(read_topic(kafka_bootstrap, topic))
    assert seqs[in_commit] == list(range(5))
    for task in (0, in_stop):
        assert seqs[task] == list(range(len(seqs[task]))), f"task {task}: gap or duplicate"
    # Task 0 committed 20 more after task 2's restart; task 2 kept what it had
    # committed when it was asked to stop (how many that was is the test's timing).
    assert len(seqs[0]) > committed[0] + 20
    assert len(seqs[in_stop]) >= committed[in_stop] > 20
