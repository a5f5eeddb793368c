"""The test kit does not lie: a task run through ``connect_runtime.testing`` ends
its transactions as the real exactly-once loop does against a real broker.

The same scripted task (records, a record batch with per-row offsets, several
source partitions, connector-defined commits and aborts naming records, a
batch and whole polls, a trailing transaction left open) runs once through
:class:`~connect_runtime.testing.TaskRunner` and once through
:class:`~connect_runtime.task.exactly_once_loop.ExactlyOnceTaskLoop`. What a
``read_committed`` consumer sees, transaction by transaction (sizes read from
the offsets' gaps, as ``test_exactly_once_loop.py`` does), the offsets topic's
records in order, the hooks the task heard with the Kafka offsets
``commit_record`` was given, and the loop's commit and abort counts must all be
what the kit reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from support.kafka import transaction_sizes
from test_exactly_once_loop import make_loop, metrics_of, read_committed, run_until

from connect_runtime.api.record import RecordBatch, RecordMetadata, SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.startup import TaskContext
from connect_runtime.testing import CommittedOffsets, Outcome, TaskRunner

# One poll of the script: its items, then the requests (kind, index of the item
# named, or None for "after this poll") the task makes before returning them.
Step = tuple[list[Any], list[tuple[str, int | None]]]


def script(topic: str) -> list[Step | None]:
    """A poll script exercising every rule the kit models; None is an idle poll."""
    a, b = {"src": "a"}, {"src": "b"}

    def rec(part: dict[str, str] | None, n: int) -> SourceRecord:
        return SourceRecord(part, None if part is None else {"n": n + 1}, topic,
                            value={"n": n}, key=str(n))

    def batch(part: dict[str, str], first: int, rows: int, per_row: bool) -> RecordBatch:
        values = [{"n": n} for n in range(first, first + rows)]
        if per_row:
            return RecordBatch(topic, values, source_partition=part,
                               source_offsets=[{"n": n + 1} for n in range(first, first + rows)])
        return RecordBatch(topic, values, source_partition=part,
                           source_offset={"n": first + rows})

    return [
        # Ends mid-poll after record 1; the batch and record 5 stay open.
        ([rec(a, 0), rec(a, 1), batch(b, 2, 3, per_row=True), rec(a, 5)], [("commit", 1)]),
        None,
        # The open transaction (2..5) and these two are aborted after record 7.
        ([rec(b, 6), rec(a, 7), rec(None, 8)], [("abort", 1)]),
        # Record 8 (no offset) and a batch with a per-batch offset, committed by name;
        # an empty batch named afterwards ends nothing.
        ([batch(a, 9, 2, per_row=False), RecordBatch(topic, [], source_partition=a)],
         [("commit", 0), ("commit", 1)]),
        # A whole poll committed, and one aborted whose records carry no offsets.
        ([rec(b, 11), rec(a, 12)], [("commit", None)]),
        ([rec(None, 13), rec(None, 14)], [("abort", None)]),
        None,
        # Left open: the task never ends it, so stopping discards it.
        ([rec(a, 15), batch(b, 16, 2, per_row=True)], []),
    ]


class ScriptTask(SourceTask):
    """Polls a script, asking its TransactionContext as each step says; then idles.
    Does not override commit_record: batches go whole through the column path."""

    def __init__(self, steps: list[Step | None]) -> None:
        self.steps = list(steps)
        self.commits = 0

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[Any] | None:
        if not self.steps:
            time.sleep(0.01)
            return None
        step = self.steps.pop(0)
        if step is None:
            return None
        items, requests = step
        ctx = self.context.transaction_context()
        assert ctx is not None
        for kind, index in requests:
            named = None if index is None else items[index]
            (ctx.commit_transaction if kind == "commit" else ctx.abort_transaction)(named)
        return items

    def commit(self) -> None:
        self.commits += 1

    def stop(self) -> None:
        pass


class TrackingScriptTask(ScriptTask):
    """Overrides commit_record: records one by one, batches expanded to rows."""

    def __init__(self, steps: list[Step | None]) -> None:
        super().__init__(steps)
        self.acked: list[tuple[Any, int | None]] = []

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.acked.append((record.value["n"], None if metadata is None else metadata.offset))


@pytest.mark.parametrize("task_class", [ScriptTask, TrackingScriptTask])
def test_the_kit_reports_the_transactions_the_loop_commits_to_kafka(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[ScriptTask]) -> None:
    out, offsets = topics
    steps = script(out)

    # The kit.
    with TaskRunner(lambda: task_class(steps), {}, boundary="connector") as runner:
        runner.run(polls=len(steps))
        kit_task = runner.task
    kit = runner.transactions
    outcomes = [t.outcome for t in kit]
    assert outcomes == [Outcome.COMMITTED, Outcome.ABORTED, Outcome.COMMITTED,
                        Outcome.COMMITTED, Outcome.ABORTED, Outcome.DISCARDED], \
        "the script no longer covers what it should"

    # The real loop, with the runtime's own transaction context.
    ctx = TaskTransactionContext()
    task = task_class(steps)
    task.initialize(TaskContext({}, CommittedOffsets(), ctx))
    task.start({})
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("connector", 0, ctx), unique_name("txn"))
    run_until(loop, lambda: not task.steps)

    seen = read_committed(kafka_bootstrap, out)
    assert [v["n"] for _, _, v in seen] == [r.value["n"] for r in runner.committed_records()]
    assert transaction_sizes([o for o, _, _ in seen]) == [
        len(t.records) for t in kit if t.outcome is Outcome.COMMITTED]
    stored = [(orjson.loads(k)[1], v) for _, k, v in read_committed(kafka_bootstrap, offsets)]
    assert stored == [pair for t in kit for pair in t.offsets]
    assert stored, "no offsets were committed: nothing compared"
    assert (metrics_of(loop).commits, metrics_of(loop).aborts) == (
        sum(1 for t in kit if t.outcome is Outcome.COMMITTED or t.offsets),
        outcomes.count(Outcome.ABORTED))
    assert task.commits == kit_task.commits
    if isinstance(task, TrackingScriptTask):
        assert isinstance(kit_task, TrackingScriptTask)
        assert task.acked == kit_task.acked
        assert None in dict(task.acked).values(), "no record was acknowledged as aborted"
