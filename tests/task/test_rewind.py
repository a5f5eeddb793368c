"""Rules 5 and 6 of ``TransactionContext`` (connect_runtime/api/task.py): rewinding,
by the task's request or for an idle transaction near ``transaction.timeout.ms``.

A rewind replaces the task instance, which the slot does
(:func:`connect_runtime.task.slot.run_task`) with the
:class:`~connect_runtime.task.startup.TaskFactory` startup keeps. These tests run
that pair against the real broker without Spark: each new instance reads its
offsets from Kafka as a task does, and a ``read_committed`` consumer checks that
every record shows exactly once. tests/e2e/test_transactions_e2e.py runs the same
through a worker.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import ClassVar

import pytest
from support.offsets import committed_transactions
from test_transaction_rules import (
    PART,
    StepTask,
    deps,
    in_thread,
    offsets_read_back,
    recs,
    run_loop,
    start_steps,
)

from connect_runtime.api.record import RecordMetadata, SourceRecord
from connect_runtime.api.task import SourceTask, TransactionContext
from connect_runtime.errors import ConnectError
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, Outcome
from connect_runtime.task.slot import run_task
from connect_runtime.task.startup import StartedTask, TaskFactory
from connect_runtime.testing import Outcome as KitOutcome
from connect_runtime.testing import TaskRunner


class Upstream:
    """A source of numbered records in groups that consumers must see whole: each
    group's last record ends a transaction. Records from ``late_from`` on exist only
    once ``late_at`` (monotonic) has passed: until then a task has a group open
    and nothing to read. Shared by every instance of one task class."""

    def __init__(self, topic: str, total: int, group: int, *, rewind_at: int | None = None,
                 late_from: int | None = None, late_by_s: float = 0.0) -> None:
        self.topic, self.total, self.group = topic, total, group
        self.rewind_at = rewind_at  # the first instance rewinds in the poll returning this
        self.late_from = total if late_from is None else late_from
        self.late_at = time.monotonic() + late_by_s
        self.starts: list[dict[str, object] | None] = []  # the offset each instance read
        self.stops = 0
        self.committed: list[list[int]] = []  # per instance: commit_record seqs

    def available(self) -> int:
        return self.total if time.monotonic() >= self.late_at else self.late_from


def grouped_task(upstream: Upstream) -> type[SourceTask]:
    class GroupedTask(SourceTask):
        shared: ClassVar[Upstream] = upstream

        def start(self, config: dict[str, str]) -> None:
            offset = self.context.offset_storage_reader.offset(PART)
            self.shared.starts.append(offset)
            self.next = int(offset["seq"]) if offset else 0  # type: ignore[call-overload]
            self.mine: list[int] = []
            self.shared.committed.append(self.mine)
            self.txn = self.context.transaction_context()

        def poll(self) -> list[SourceRecord] | None:
            up = self.shared
            end = min(self.next + 2, up.available())
            if end <= self.next:
                time.sleep(0.05)
                return None
            batch = recs(up.topic, self.next, end - self.next)
            self.next = end
            assert self.txn is not None
            for r in batch:
                if (r.value["seq"] + 1) % up.group == 0:
                    self.txn.commit_transaction(r)
            if up.rewind_at is not None and batch[0].value["seq"] <= up.rewind_at < end:
                up.rewind_at = None  # once
                self.txn.rewind_transaction()
            return batch

        def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
            self.mine.append(record.value["seq"])

        def stop(self) -> None:
            self.shared.stops += 1
    return GroupedTask


def started_for(bootstrap: str, offsets: str, task_class: type[SourceTask],
                loop_deps: LoopDeps, timeout_s: float = 30.0) -> StartedTask:
    """As startup makes it for boundary=connector: the factory reads the offsets from
    Kafka for each instance."""
    factory = TaskFactory(task_class=task_class, config={},
                          read_offsets=lambda: TaskOffsetStorageReader("c", bootstrap, offsets),
                          boundary_kind="connector", interval_ms=0)
    task, boundary = factory.start()
    return StartedTask(mode=TaskMode.EXACTLY_ONCE, task=task, producer=loop_deps.producer,
                       offsets_topic=offsets, connector_offsets_topic=None,
                       key_converter=loop_deps.key_converter,
                       value_converter=loop_deps.value_converter, boundary=boundary,
                       transaction_timeout_s=timeout_s, factory=factory)


def run_instances(started: StartedTask, loop_deps: LoopDeps, done: Callable[[], bool],
                  timeout: float) -> tuple[Outcome, list[SourceTask | None]]:
    """:func:`run_task` as the slot runs it, until ``done()``; also returns what it
    attached (the live instance, None between instances)."""
    attached: list[SourceTask | None] = []

    def attach(task: SourceTask | None) -> None:
        attached.append(task)

    outcome = in_thread(lambda: run_task(started, loop_deps, attach, lambda t: t.stop()),
                         loop_deps.signals, done, timeout)
    return outcome, attached


def test_rule5_a_rewind_mid_group_reads_the_group_again_exactly_once(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """Groups 0-3, 4-7, 8-11, two records a poll. In the poll returning 6 and 7, the
    first instance asks to commit after 7 and to rewind: the rewind wins, 4-7 are
    aborted with no offset, and a new instance reads them again from seq 4."""
    out, offsets = topics
    upstream = Upstream(out, 12, 4, rewind_at=6)
    loop_deps = deps(kafka_bootstrap, offsets, _Idle(), unique_name("txn"))
    task_class = grouped_task(upstream)
    started = started_for(kafka_bootstrap, offsets, task_class, loop_deps)
    first = started.task
    outcome, attached = run_instances(
        started, loop_deps, lambda: len(upstream.committed) == 2 and
        len(upstream.committed[1]) == 8, timeout=60)
    assert outcome is Outcome.STOPPED
    assert committed_transactions(kafka_bootstrap, out) == (list(range(12)), [4, 4, 4])
    assert offsets_read_back(kafka_bootstrap, offsets) == {"seq": 12}
    # A new instance, started from the offset committed after the first group.
    assert upstream.starts == [None, {"seq": 4}]
    assert upstream.stops == 2  # the rewound instance, and the last one on stop
    # commit_record: never for the abandoned 4-7 on the first instance.
    assert upstream.committed == [[0, 1, 2, 3], list(range(4, 12))]
    # The slot's control learns each live instance, and None while they change.
    assert len(attached) == 4 and attached[0] is first and attached[1] is None
    assert isinstance(attached[2], task_class) and attached[2] is not first
    assert attached[3] is None


def test_the_test_kit_rewinds_as_the_loop_does(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """The rule-5 run above, once through connect_runtime.testing's TaskRunner and
    once through the loop and the slot's TaskFactory against the broker: the same
    transactions, the same instances started from the same offsets, the same
    records acknowledged, the same offset at the end."""
    out, offsets = topics
    kit_upstream = Upstream(out, 12, 4, rewind_at=6)
    with TaskRunner(grouped_task(kit_upstream), {}, boundary="connector") as runner:
        runner.run(until=lambda: len(runner.committed_records()) == 12)
    assert [t.outcome for t in runner.transactions] == [
        KitOutcome.COMMITTED, KitOutcome.DISCARDED, KitOutcome.COMMITTED, KitOutcome.COMMITTED]
    assert runner.restarts == 1

    upstream = Upstream(out, 12, 4, rewind_at=6)
    loop_deps = deps(kafka_bootstrap, offsets, _Idle(), unique_name("txn"))
    started = started_for(kafka_bootstrap, offsets, grouped_task(upstream), loop_deps)
    outcome, _ = run_instances(started, loop_deps, lambda: len(upstream.committed) == 2 and
                               len(upstream.committed[1]) == 8, timeout=60)
    assert outcome is Outcome.STOPPED

    sizes = [len(t.records) for t in runner.transactions if t.outcome is KitOutcome.COMMITTED]
    assert committed_transactions(kafka_bootstrap, out) == (
        [r.value["seq"] for r in runner.committed_records()], sizes)
    assert upstream.starts == kit_upstream.starts == [None, {"seq": 4}]
    assert upstream.committed == kit_upstream.committed
    assert upstream.stops == kit_upstream.stops
    assert offsets_read_back(kafka_bootstrap, offsets) == runner.offsets.offset(PART) == {"seq": 12}


def test_rule5_a_rewind_while_stopping_starts_no_new_instance(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    upstream = Upstream(out, 4, 4, rewind_at=2)
    loop_deps = deps(kafka_bootstrap, offsets, _Idle(), unique_name("txn"))
    started = started_for(kafka_bootstrap, offsets, grouped_task(upstream), loop_deps)
    original_poll = started.task.poll

    def poll_then_stop() -> list[SourceRecord] | None:
        batch = original_poll()
        if upstream.rewind_at is None:  # this poll asked to rewind
            loop_deps.signals.request_stop()
        return batch
    started.task.poll = poll_then_stop  # type: ignore[method-assign]
    outcome, _ = run_instances(started, loop_deps, lambda: False, timeout=10)
    assert outcome is Outcome.STOPPED
    assert upstream.starts == [None] and upstream.stops == 1
    assert committed_transactions(kafka_bootstrap, out) == ([], [])
    assert offsets_read_back(kafka_bootstrap, offsets) is None  # the next start reads 0-3


def test_rule6_an_idle_open_group_is_rewound_before_the_broker_times_it_out(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        caplog: pytest.LogCaptureFixture) -> None:
    """transaction.timeout.ms=3000: records 0-3 of the group 0-5 come at once, 4-5 only
    after 14 s, beyond the timeout and the broker's abort of timed-out transactions
    (checked every 10 s). Kafka Connect's task fails (the broker aborted 0-3 and
    bumped the epoch); here each idle instance is rewound at 2.25 s, and the one
    running when 4-5 arrive commits the whole group once."""
    out, offsets = topics
    upstream = Upstream(out, 6, 6, late_from=4, late_by_s=14)
    loop_deps = deps(kafka_bootstrap, offsets, _Idle(), unique_name("txn"), timeout_ms=3000)
    started = started_for(kafka_bootstrap, offsets, grouped_task(upstream), loop_deps, 3.0)
    caplog.set_level(logging.WARNING, logger="connect_runtime.task.exactly_once_loop")
    outcome, _ = run_instances(started, loop_deps,
                               lambda: any(len(c) == 6 for c in upstream.committed), timeout=60)
    assert outcome is Outcome.STOPPED
    assert committed_transactions(kafka_bootstrap, out) == (list(range(6)), [6])
    assert offsets_read_back(kafka_bootstrap, offsets) == {"seq": 6}
    assert len(upstream.starts) >= 3 and set(map(str, upstream.starts)) == {"None"}
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(upstream.starts) - 1
    assert all(w.startswith("Task c-0 (connector c): its transaction has been open ")
               and "transaction.timeout.ms (3000 ms)" in w and "Rewinding it" in w
               for w in warnings), warnings


class _Idle(SourceTask):
    """The placeholder LoopDeps is built with; run_task puts the real instance in."""

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> None:
        raise AssertionError("the placeholder task was polled")

    def stop(self) -> None:
        pass


def test_rule6_a_poll_that_blocks_past_the_timeout_fails_the_task_saying_so(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """Not rescued: no empty poll came while the transaction could still be rewound.
    The poll returns, past the timeout, with a request to commit, and the broker has
    aborted the transaction and bumped the epoch, which librdkafka reports at
    commit as fencing. Before, the commit path forgot that a transaction was open,
    so the task stopped as a fenced zombie; it fails naming the timeout."""
    out, offsets = topics
    first = recs(out, 0, 2)

    def block_then_commit(txn: TransactionContext) -> list[SourceRecord]:
        time.sleep(13)  # transaction.timeout.ms 2 s, and the broker checks every 10 s
        txn.commit_transaction()
        return []
    task = StepTask([lambda txn: first, block_then_commit])
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn"), 2000),
                               boundary=start_steps(task), transaction_timeout_s=2)
    with pytest.raises(ConnectError, match=r"its transaction stayed open 1\ds, longer than "
                                           r"transaction.timeout.ms \(2s\)"):
        run_loop(loop, lambda: False, timeout=60)
    assert not loop.rewound
    assert committed_transactions(kafka_bootstrap, out) == ([], [])
    assert offsets_read_back(kafka_bootstrap, offsets) is None
