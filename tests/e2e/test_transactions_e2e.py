"""Rewinding connector-defined transactions through a real worker (rules 5 and 6 of
``TransactionContext``, connect_runtime/api/task.py): a task that rewinds mid-group,
and one idle with a group open past ``transaction.timeout.ms``. Checked as a user
would: REST status and offsets, and a ``read_committed`` consumer that must see
every record exactly once, each group in one transaction.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka import create_topic, read_topic, sequences, transaction_sizes, wait_for
from support.workers import WorkerProcess


def run_grouped(worker: WorkerProcess, name: str, topic: str, total: int,
                config: dict[str, str], timeout: float) -> list[dict[str, Any]]:
    """Create the GroupedSourceConnector, wait until ``total`` records are committed
    (failing at once if the task FAILS), return what read_committed sees."""
    create_topic(worker.bootstrap, topic)
    created = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.GroupedSourceConnector", "topic": topic,
        "total": str(total), "transaction.boundary": "connector",
        "exactly.once.support": "required", **config}})
    assert created.status_code == 201, created.text

    def done() -> list[dict[str, Any]] | None:
        task = (worker.status(name).get("tasks") or [{}])[0]
        assert task.get("state") != "FAILED", task.get("trace")
        records = read_topic(worker.bootstrap, topic, timeout=10)
        return records if len(records) >= total else None
    try:
        result: list[dict[str, Any]] = wait_for(done, timeout, f"{total} records in {topic}",
                                                interval=1)
        task = worker.status(name)["tasks"][0]
        assert task["state"] == "RUNNING", task
        offsets = worker.rest("GET", f"/connectors/{name}/offsets").json()["offsets"]
        assert offsets == [{"partition": {"source": "grouped"}, "offset": {"seq": total}}]
        return result
    finally:
        worker.rest("DELETE", f"/connectors/{name}")


def starts(state: Path) -> list[Any]:
    """The offset each task instance read at its start."""
    return [json.loads(line) for line in (state / "starts").read_text().splitlines()]


def test_a_task_that_rewinds_mid_group_delivers_each_record_exactly_once(
        worker: WorkerProcess, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """Groups 0-3, 4-7, 8-11. In the poll returning 6 and 7 the task asks to commit
    after 7 and to rewind: 4-5 (already sent) and 6-7 are never visible, and a new
    instance reads 4-7 again from the committed offset."""
    records = run_grouped(worker, unique_name("rewind"), unique_name("out"), 12,
                          {"group.size": "4", "rewind.at": "6", "state.dir": str(tmp_path)},
                          timeout=90)
    assert sequences(records) == {0: list(range(12))}
    assert transaction_sizes([r["offset"] for r in records]) == [4, 4, 4]
    assert starts(tmp_path) == [None, {"seq": 4}]


def test_an_idle_open_group_outlives_the_transaction_timeout_exactly_once(
        worker: WorkerProcess, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """transaction.timeout.ms=3000, and the group 0-5 waits 14 s for its last two
    records, past the timeout and the broker's abort of timed-out transactions
    (checked every 10 s). Kafka Connect's task fails; here the idle transaction is
    rewound before the timeout, with a WARN, until the group can be committed whole."""
    name = unique_name("idle")
    records = run_grouped(worker, name, unique_name("out"), 6,
                          {"group.size": "6", "late.from": "4", "late.by.ms": "14000",
                           "producer.override.transaction.timeout.ms": "3000",
                           "state.dir": str(tmp_path)}, timeout=120)
    assert sequences(records) == {0: list(range(6))}
    assert transaction_sizes([r["offset"] for r in records]) == [6]
    read = starts(tmp_path)
    assert len(read) >= 3 and read == [None] * len(read), read  # nothing committed before
    log = worker.log_path.read_text(errors="replace")
    warnings = [line for line in log.splitlines()
                if f"Task {name}-0 (connector {name}): its transaction has been open" in line]
    assert warnings and all("transaction.timeout.ms (3000 ms)" in w for w in warnings), warnings
