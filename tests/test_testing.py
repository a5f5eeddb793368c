"""The connector author's test kit (``connect_runtime.testing``), used as an author would.

Each test drives a small task through the kit and checks what an author reads
back: the transactions, their outcomes, records and offsets, the offsets the
task is handed again, and the hooks the task heard. That those rules are the
real loop's against a real broker is ``tests/task/test_testing_kit_vs_loop.py``'s
claim; here they are checked one by one, in milliseconds.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import pytest
from support.clock import FakeClock

from connect_runtime import (
    ConfigException,
    ConnectError,
    DataException,
    InvalidOffsetException,
    RecordBatch,
    RecordMetadata,
    SourceRecord,
    SourceTask,
)
from connect_runtime.testing import (
    CommittedOffsets,
    MemoryTaskContext,
    Outcome,
    RecordingTransactionContext,
    TaskRunner,
    Transaction,
)

Ask = Callable[[Any, list[Any]], None]  # (transaction context, the poll's items) -> requests


class Counter(SourceTask):
    """Counts up from its committed offset, ``per_poll`` records a poll, in
    partition ``{"p": 0}`` with offset ``{"next": n + 1}``; every third poll is
    idle. Notes every hook the framework calls."""

    per_poll = 3

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.polls = 0
        self.commits = 0
        self.ask: Ask | None = None
        self.next = 0

    def start(self, config: dict[str, str]) -> None:
        self.calls.append("start")
        self.config = config
        committed = self.context.offset_storage_reader.offset({"p": 0})
        self.next = 0 if committed is None else int(committed["next"])  # type: ignore[call-overload]

    def poll(self) -> list[Any] | None:
        self.polls += 1
        if self.polls % 3 == 0:
            return None
        items: list[Any] = [SourceRecord({"p": 0}, {"next": n + 1}, "out", value=n)
                            for n in range(self.next, self.next + self.per_poll)]
        self.next += self.per_poll
        if self.ask is not None:
            self.ask(self.context.transaction_context(), items)
        return items

    def commit(self) -> None:
        self.commits += 1
        self.calls.append("commit")

    def stop(self) -> None:
        self.calls.append("stop")


class Tracking(Counter):
    """Overrides ``commit_record``: the framework then hands it every record."""

    def __init__(self) -> None:
        super().__init__()
        self.acked: list[tuple[Any, RecordMetadata | None]] = []

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.acked.append((record.value, metadata))


def values(txn: Transaction) -> list[Any]:
    return [r.value for r in txn.records]


def shape(runner: TaskRunner[Any]) -> list[tuple[str, list[Any], list[Any]]]:
    """(outcome, record values, committed offsets) of each transaction."""
    return [(t.outcome.value, values(t), [o for _, o in t.offsets]) for t in runner.transactions]


# ------------------------------------------------------------ the kit alone


def test_importing_and_running_the_kit_loads_neither_kafka_nor_spark() -> None:
    """Authors run it in plain pytest: no broker, no JVM, no Kafka client needed."""
    script = textwrap.dedent("""
        import sys
        from connect_runtime import SourceRecord, SourceTask
        from connect_runtime.testing import TaskRunner

        class One(SourceTask):
            def start(self, config): pass
            def poll(self): return [SourceRecord({"p": 0}, {"n": 1}, "t", value=1)]
            def stop(self): pass

        with TaskRunner(One, {}, boundary="connector") as runner:
            runner.run(polls=2)
        with TaskRunner(One, {}) as runner:
            runner.run(polls=2)
        assert len(runner.transactions) == 2, runner.transactions
        print(sorted({m.split(".")[0] for m in sys.modules} & {"confluent_kafka", "pyspark",
                                                               "py4j", "httpx"}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_poll_boundary_one_transaction_per_poll_with_records() -> None:
    with TaskRunner(Tracking, {"k": "v"}) as runner:
        assert runner.task.config == {"k": "v"}
        ended = runner.run(polls=6)  # the 3rd and 6th polls are idle
        assert runner.offsets.offset({"p": 0}) == {"next": 12}
    assert ended == runner.transactions
    assert shape(runner) == [("committed", [0, 1, 2], [{"next": 3}]),
                             ("committed", [3, 4, 5], [{"next": 6}]),
                             ("committed", [6, 7, 8], [{"next": 9}]),
                             ("committed", [9, 10, 11], [{"next": 12}])]
    task = runner.task
    assert task.calls == ["start"] + ["commit"] * 4 + ["stop"]
    # Kafka offsets: one per record, one per commit marker.
    assert [(v, m.offset) for v, m in task.acked if m] == [
        (0, 0), (1, 1), (2, 2), (3, 4), (4, 5), (5, 6), (6, 8), (7, 9), (8, 10),
        (9, 12), (10, 13), (11, 14)]
    assert [r.value for r in runner.committed_records()] == list(range(12))


def test_a_new_runner_on_the_committed_offsets_resumes_where_they_point() -> None:
    with TaskRunner(Counter, {}) as first:
        first.run(polls=2)
    with TaskRunner(Counter, {}, offsets=first.offsets) as second:
        second.run(polls=1)
    assert shape(second) == [("committed", [6, 7, 8], [{"next": 9}])]
    with TaskRunner(Counter, {}, offsets=[({"p": 0}, {"next": 40})]) as seeded:
        assert seeded.task.next == 40


def test_latest_offset_per_source_partition_in_order_of_last_write() -> None:
    a, b = {"file": "a"}, {"file": "b"}

    class TwoFiles(Counter):
        def poll(self) -> list[Any] | None:
            return [SourceRecord(a, {"line": 1}, "t"), SourceRecord(b, {"line": 1}, "t"),
                    SourceRecord(dict(a), {"line": 2}, "t"),  # equal partition, other dict
                    SourceRecord(None, None, "t"),  # no source partition: no offset
                    SourceRecord(b, None, "t")]  # a tombstone for b

    runner = TaskRunner(TwoFiles, {}, offsets=[(b, {"line": 0})])
    with runner:
        runner.run(polls=1)
    assert runner.transactions[0].offsets == (({"file": "a"}, {"line": 2}),
                                              ({"file": "b"}, None))
    assert runner.offsets.items() == [({"file": "a"}, {"line": 2})]  # b's offset removed


def test_interval_boundary_ends_a_transaction_at_the_first_poll_after_the_interval() -> None:
    clock = FakeClock()

    class Slow(Counter):
        def poll(self) -> list[Any] | None:
            clock.advance(0.1)  # each poll takes 100 ms
            return super().poll()

    with TaskRunner(Slow, {}, boundary="interval", interval_ms=150, clock=clock) as runner:
        runner.run(polls=7)
        # Began at 0.1 s, ended by the idle poll of 0.3 s (idle polls end it on time);
        # began at 0.4 s, ended at 0.6 s; the third, begun at 0.7 s, is open.
        assert shape(runner) == [("committed", [0, 1, 2, 3, 4, 5], [{"next": 6}]),
                                 ("committed", [6, 7, 8, 9, 10, 11], [{"next": 12}])]
    assert shape(runner)[2] == ("committed", [12, 13, 14], [{"next": 15}])  # stop commits it


def test_connector_boundaries_commit_and_abort_where_the_task_asks() -> None:
    def ask(ctx: RecordingTransactionContext, items: list[Any]) -> None:
        first = items[0].value
        if first == 0:
            ctx.commit_transaction(items[1])  # ends after record 1; record 2 opens the next
        elif first == 3:
            ctx.abort_transaction(items[2])  # aborts 2..5; their offsets still commit
        elif first == 6:
            ctx.commit_transaction()  # after this poll's records
        elif first == 9:
            ctx.abort_transaction()

    with TaskRunner(Tracking, {}, boundary="connector") as runner:
        runner.task.ask = ask  # type: ignore[assignment]
        runner.run(polls=6)
        task = runner.task
    assert shape(runner) == [("committed", [0, 1], [{"next": 2}]),
                             ("aborted", [2, 3, 4, 5], [{"next": 6}]),
                             ("committed", [6, 7, 8], [{"next": 9}]),
                             ("aborted", [9, 10, 11], [{"next": 12}])]
    assert runner.offsets.offset({"p": 0}) == {"next": 12}
    assert [v for v, m in task.acked if m is None] == [2, 3, 4, 5, 9, 10, 11]
    assert task.commits == 4  # an abort's offsets commit alone, then commit() is called
    # Aborted records take offsets (and a marker) in Kafka too.
    assert [(v, m.offset) for v, m in task.acked if m] == [(0, 0), (1, 1), (6, 8), (7, 9),
                                                           (8, 10)]


def test_an_abort_of_records_without_offsets_commits_nothing() -> None:
    class NoOffsets(Counter):
        def poll(self) -> list[Any] | None:
            records = [SourceRecord(None, None, "t", value=n) for n in range(2)]
            self.context.transaction_context().abort_transaction(records[-1])  # type: ignore[union-attr]
            return records

    with TaskRunner(NoOffsets, {}, boundary="connector") as runner:
        runner.run(polls=1)
        assert runner.task.commits == 0
    assert shape(runner) == [("aborted", [0, 1], [])]


def test_stop_discards_a_connector_transaction_the_task_did_not_end() -> None:
    with TaskRunner(Counter, {}, boundary="connector") as runner:
        runner.run(polls=2)
    assert shape(runner) == [("discarded", [0, 1, 2, 3, 4, 5], [])]
    assert runner.offsets.items() == []  # a restart reads them again
    assert runner.committed_records() == []


def test_a_commit_asked_for_in_stop_ends_the_open_transaction() -> None:
    class CommitsOnStop(Counter):
        def stop(self) -> None:
            super().stop()
            self.context.transaction_context().commit_transaction()  # type: ignore[union-attr]

    with TaskRunner(CommitsOnStop, {}, boundary="connector") as runner:
        runner.run(polls=1)
    assert shape(runner) == [("committed", [0, 1, 2], [{"next": 3}])]
    assert runner.task.calls == ["start", "stop", "commit"]


def test_asking_to_commit_and_abort_the_same_record_fails_the_task() -> None:
    def both(ctx: RecordingTransactionContext, items: list[Any]) -> None:
        if items[0].value == 3:
            ctx.commit_transaction(items[0])
            ctx.abort_transaction(items[0])

    runner = TaskRunner(Counter, {}, boundary="connector")
    task = runner.start()
    task.ask = both  # type: ignore[assignment]
    runner.poll()
    with pytest.raises(ConnectError, match="both to commit and to abort"):
        runner.poll()
    assert shape(runner) == [("discarded", [0, 1, 2], [])]  # the open transaction
    assert task.calls == ["start", "stop"]
    with pytest.raises(ConnectError, match="the runner is failed; poll"):
        runner.poll()
    assert runner.stop() == runner.transactions  # a no-op now


def test_an_offset_that_is_not_flat_primitives_fails_at_commit_naming_the_key() -> None:
    class Nested(Counter):
        def poll(self) -> list[Any] | None:
            return [SourceRecord({"p": 0}, {"pos": {"line": 1}}, "t")]

    runner = TaskRunner(Nested, {})
    runner.start()
    with pytest.raises(InvalidOffsetException, match="key 'pos' holds a dict"):
        runner.poll()
    assert [t.outcome for t in runner.transactions] == [Outcome.DISCARDED]
    assert runner.offsets.items() == []


# ---------------------------------------------------------------- batches


def test_a_batch_is_never_split_and_commits_its_last_rows_offset() -> None:
    part = {"file": "f"}

    class Batches(Counter):
        def poll(self) -> list[Any] | None:
            self.polls += 1
            if self.polls > 1:
                return None
            early = SourceRecord(part, {"pos": 1}, "t", value="r")
            batch = RecordBatch("t", ["a", "b", "c"], source_partition=part,
                                source_offsets=[{"pos": 2}, {"pos": 3}, {"pos": 4}])
            empty = RecordBatch("t", [], source_partition=part, source_offset={"pos": 99})
            last = RecordBatch("t", ["d"], source_partition=part, source_offset={"pos": 5})
            ctx = self.context.transaction_context()
            assert ctx is not None
            ctx.commit_transaction(early)
            ctx.abort_transaction(batch)
            ctx.commit_transaction(empty)  # ends what is open: nothing, after the abort
            ctx.commit_transaction(last)
            return [early, batch, empty, last]

    with TaskRunner(Batches, {}, boundary="connector") as runner:
        runner.run(polls=2)
    assert shape(runner) == [("committed", ["r"], [{"pos": 1}]),
                             ("aborted", ["a", "b", "c"], [{"pos": 4}]),
                             ("committed", ["d"], [{"pos": 5}])]
    batch = runner.transactions[1].items[0]
    assert isinstance(batch, RecordBatch)
    assert [r.source_offset for r in runner.transactions[1].records] == [
        {"pos": 2}, {"pos": 3}, {"pos": 4}]


def test_a_task_tracking_records_gets_each_row_of_a_batch() -> None:
    class RowsTracked(Tracking):
        def poll(self) -> list[Any] | None:
            self.polls += 1
            return [RecordBatch("t", [1, 2], source_partition={"p": 0},
                                source_offset={"next": 2 * self.polls}, partition=3,
                                timestamps=[10, 20])]

    with TaskRunner(RowsTracked, {}) as runner:
        runner.run(polls=2)
        acked = runner.task.acked
    assert [(v, m) for v, m in acked] == [
        (1, RecordMetadata("t", 3, 0, 10)), (2, RecordMetadata("t", 3, 1, 20)),
        (1, RecordMetadata("t", 3, 3, 10)), (2, RecordMetadata("t", 3, 4, 20))]
    assert runner.offsets.offset({"p": 0}) == {"next": 4}


def test_a_malformed_batch_fails_the_task_as_the_framework_would() -> None:
    class Bad(Counter):
        def poll(self) -> list[Any] | None:
            return [RecordBatch("t", [1, 2], keys=["only one"])]

    runner = TaskRunner(Bad, {})
    runner.start()
    with pytest.raises(DataException, match="2 values but 1 keys"):
        runner.poll()


# ----------------------------------------------------------------- rewind


def test_a_rewind_discards_the_open_transaction_and_restarts_on_the_committed_offsets() -> None:
    instances: list[Counter] = []

    def rewind_once(ctx: RecordingTransactionContext, items: list[Any]) -> None:
        if items[0].value == 0:
            ctx.commit_transaction(items[-1])
        elif items[0].value == 6 and len(instances) == 1:
            ctx.rewind_transaction()

    def make() -> Counter:
        task = Counter()
        task.ask = rewind_once  # type: ignore[assignment]
        instances.append(task)
        return task

    with TaskRunner(make, {}, boundary="connector") as runner:
        runner.run(polls=4)  # 0-2 commit; 3-5 sent; 6-8 polled with the rewind
        assert runner.restarts == 1 and len(instances) == 2
        assert runner.task is instances[1]
        runner.task.ask = None
        runner.run(polls=1)
        runner.context.transaction_context().commit_transaction()  # type: ignore[union-attr]
        runner.run(polls=1)
    assert shape(runner) == [("committed", [0, 1, 2], [{"next": 3}]),
                             ("discarded", [3, 4, 5, 6, 7, 8], []),
                             ("committed", [3, 4, 5, 6, 7, 8], [{"next": 9}])]
    old, new = instances
    assert old.calls == ["start", "commit", "stop"]
    assert new.calls == ["start", "commit", "stop"] and new.context is runner.context
    assert old.context.transaction_context() is not new.context.transaction_context()
    assert [kind for kind, _ in old.context.transaction_context().requests] == [  # type: ignore[union-attr]
        "commit", "rewind"]


def test_a_rewind_asked_in_commit_acts_at_the_end_of_that_poll() -> None:
    class RewindsOnCommit(Counter):
        def poll(self) -> list[Any] | None:
            items = super().poll()
            ctx = self.context.transaction_context()
            assert ctx is not None
            if items and items[0].value == 0:
                ctx.commit_transaction(items[0])  # 0 commits; 1, 2 stay open
            return items

        def commit(self) -> None:
            super().commit()
            if self.commits == 1:
                self.context.transaction_context().rewind_transaction()  # type: ignore[union-attr]

    with TaskRunner(RewindsOnCommit, {}, boundary="connector") as runner:
        runner.run(polls=1)
        assert runner.restarts == 1
        assert runner.task.next == 1  # the new instance resumes after record 0
    assert shape(runner) == [("committed", [0], [{"next": 1}]),
                             ("discarded", [1, 2], [])]


# -------------------------------------------- the parts alone, bad input


def test_the_parts_work_alone_for_a_test_that_calls_poll_itself() -> None:
    txns = RecordingTransactionContext()
    context = MemoryTaskContext({"a": "1"}, [({"p": 0}, {"next": 7})], txns)
    task = Counter()
    task.ask = lambda ctx, items: ctx.commit_transaction(items[-1])
    task.initialize(context)
    task.start(context.config)
    polled = task.poll()
    assert polled is not None and [r.value for r in polled] == [7, 8, 9]
    assert txns.requests == [("commit", polled[-1])]
    assert MemoryTaskContext({}).transaction_context() is None


def test_committed_offsets_read_back_as_from_the_offsets_topic() -> None:
    offsets = CommittedOffsets([({"a": 1, "b": "x"}, {"pos": 1.5}), ({"c": True}, None)])
    assert offsets.offset({"b": "x", "a": 1}) == {"pos": 1.5}  # field order does not matter
    assert offsets.offset({"c": True}) is None
    first = offsets.offset({"a": 1, "b": "x"})
    assert first is not None
    first["pos"] = 0  # a fresh dict each time
    assert offsets.offsets([{"a": 1, "b": "x"}, {"z": 0}]) == [
        ({"a": 1, "b": "x"}, {"pos": 1.5}), ({"z": 0}, None)]
    with pytest.raises(InvalidOffsetException, match="key 'pos' holds a list"):
        offsets.write([({"z": 0}, {"pos": 2}), ({"a": 1, "b": "x"}, {"pos": [1]})])
    assert offsets.items() == [({"a": 1, "b": "x"}, {"pos": 1.5})]  # nothing of it kept


@pytest.mark.parametrize(("make", "error", "message"), [
    (lambda: TaskRunner(Counter, {}, boundary="sometimes"), ConfigException,
     "Invalid value 'sometimes' for configuration transaction.boundary"),
    (lambda: TaskRunner(Counter, {}, boundary="interval", interval_ms=-1), ConfigException,
     "transaction.boundary.interval.ms: Value must be an int >= 0"),
    (lambda: TaskRunner(Counter, {}).poll(), ConnectError, "the runner is new; poll"),
    (lambda: TaskRunner(Counter, {}).task, ConnectError, "the task is not started"),
    (lambda: TaskRunner(Counter, {}).run(), ConnectError, "give polls=<rounds>, until="),
])
def test_misuse_is_named(make: Callable[[], object], error: type[Exception],
                         message: str) -> None:
    with pytest.raises(error, match=message):
        make()


def test_run_until_says_how_far_it_got() -> None:
    with TaskRunner(Counter, {}) as runner:
        ended = runner.run(until=lambda: len(runner.committed_records()) >= 5)
        assert len(ended) == 2
        with pytest.raises(TimeoutError, match=r"after 4 polls; 4 transactions ended, 12 "):
            runner.run(4, until=lambda: False)
        with pytest.raises(TimeoutError, match=r"still false after 0.05s"):
            runner.run(until=lambda: False, timeout_s=0.05)


def test_a_task_that_raises_from_poll_fails_and_is_stopped() -> None:
    class Broken(Counter):
        def poll(self) -> list[Any] | None:
            if self.polls:
                raise RuntimeError("source went away")
            return super().poll()

        def stop(self) -> None:
            super().stop()
            raise OSError("and stop failed")

    runner = TaskRunner(Broken, {}, boundary="connector")
    task = runner.start()
    runner.poll()
    with pytest.raises(RuntimeError, match="source went away") as raised:
        runner.poll()
    assert "stop() raised too: OSError('and stop failed')" in raised.value.__notes__
    assert task.calls == ["start", "stop"]
    assert shape(runner) == [("discarded", [0, 1, 2], [])]
