"""The rules of ``TransactionContext`` (connect_runtime/api/task.py), rules 1-4, one
test each or more, against the real broker: what a ``read_committed`` consumer
sees, and which offsets a new instance of the task reads back from Kafka.

Rules 5 and 6 (rewinding) are in test_rewind.py; the pure parts of every rule
(which request wins, when an idle transaction is too old) in test_boundaries.py.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from support.offsets import committed_transactions

from connect_runtime.api.record import RecordMetadata, SourceRecord
from connect_runtime.api.task import SourceTask, TransactionContext
from connect_runtime.converters import load_converter
from connect_runtime.errors import ConnectError
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome
from connect_runtime.task.metrics import TaskMetrics

PART = {"p": 0}
Step = Callable[[TransactionContext], list[SourceRecord] | None]


def rec(topic: str, n: int) -> SourceRecord:
    """Record ``n``; its offset points at the next one."""
    return SourceRecord(PART, {"seq": n + 1}, topic, value={"seq": n}, key=str(n))


def recs(topic: str, start: int, count: int) -> list[SourceRecord]:
    return [rec(topic, n) for n in range(start, start + count)]


class StepTask(SourceTask):
    """Each poll runs the next step (``step(transaction_context)`` returns the list),
    then idles; records what the framework told it."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.committed: list[tuple[int, RecordMetadata | None]] = []
        self.commits = 0

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        if not self.steps:
            time.sleep(0.01)
            return None
        txn = self.context.transaction_context()
        assert txn is not None
        return self.steps.pop(0)(txn)

    def commit(self) -> None:
        self.commits += 1

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.committed.append((record.value["seq"], metadata))

    def stop(self) -> None:
        pass


def producer(bootstrap: str, txn_id: str, timeout_ms: int = 30_000) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                  "transaction.timeout.ms": timeout_ms})
    p.init_transactions(30)
    return p


def deps(bootstrap: str, offsets: str, task: SourceTask, txn_id: str,
         timeout_ms: int = 30_000, metrics: TaskMetrics | None = None) -> LoopDeps:
    return LoopDeps(
        label="c-0", connector="c", task=task, producer=producer(bootstrap, txn_id, timeout_ms),
        offsets_topic=offsets, forbidden_topics=frozenset({offsets}),
        key_converter=load_converter("StringConverter", {}, True),
        value_converter=load_converter("JsonConverter", {}, False), signals=LoopSignals(),
        metrics=metrics)


def start_steps(task: StepTask) -> BoundaryPolicy:
    """Hand ``task`` a transaction context, as startup does for boundary=connector."""
    ctx = TaskTransactionContext()
    task.initialize(_Context(ctx))
    return BoundaryPolicy("connector", 0, ctx)


class _Context:
    def __init__(self, txn: TaskTransactionContext) -> None:
        self.txn = txn
        self.config: dict[str, str] = {}
        self.offset_storage_reader: Any = None

    def transaction_context(self) -> TaskTransactionContext:
        return self.txn


def run_loop(loop: ExactlyOnceTaskLoop, done: Callable[[], bool], timeout: float = 30) -> Outcome:
    """``loop.run()`` on a thread until ``done()`` or the loop ends, then a stop;
    re-raises what the loop raised."""
    return in_thread(loop.run, loop.signals, done, timeout)


def in_thread(run: Callable[[], Outcome], signals: LoopSignals, done: Callable[[], bool],
               timeout: float) -> Outcome:
    result: list[Outcome] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(run())
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    signals.request_stop()
    thread.join(60)
    assert not thread.is_alive(), "the loop did not stop"
    if errors:
        raise errors[0]
    return result[0]


def offsets_read_back(bootstrap: str, offsets: str) -> dict[str, object] | None:
    """What a new instance of the task reads for PART, from Kafka, as startup does."""
    return TaskOffsetStorageReader("c", bootstrap, offsets).offset(PART)


# ------------------------------------------------------------------ rule 1


def test_rule1_a_request_without_a_record_ends_the_open_transaction_or_is_dropped(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics

    def commit_with(records: list[SourceRecord] | None) -> Step:
        def step(txn: TransactionContext) -> list[SourceRecord] | None:
            txn.commit_transaction()
            return records
        return step
    task = StepTask([
        lambda txn: recs(out, 0, 3),
        commit_with(recs(out, 3, 2)),  # ends 0-4: earlier polls' records too
        commit_with(None),             # nothing open: dropped, never carried over
        lambda txn: recs(out, 5, 1),   # would commit alone if the request had carried over
        lambda txn: recs(out, 6, 1),
        commit_with(None),             # a poll returning nothing ends what is open: 5-6
        lambda txn: recs(out, 7, 1),   # never asked to end: aborted on stop
    ])
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn")),
                               boundary=start_steps(task), transaction_timeout_s=30)
    assert run_loop(loop, lambda: not task.steps and task.commits >= 2) is Outcome.STOPPED
    assert committed_transactions(kafka_bootstrap, out) == (list(range(7)), [5, 2])
    assert offsets_read_back(kafka_bootstrap, offsets) == {"seq": 7}


# ------------------------------------------------------------------ rule 2


def test_rule2_a_record_request_naming_a_record_of_an_earlier_poll_fails_the_task(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """Kafka Connect ignores such a request, and the transaction stays open until it
    times out; here the task fails at once, naming the record."""
    out, offsets = topics
    first = recs(out, 0, 3)

    def name_an_earlier_record(txn: TransactionContext) -> list[SourceRecord]:
        txn.commit_transaction(first[1])  # already sent, with record 2 after it
        return recs(out, 3, 2)
    task = StepTask([lambda txn: first, name_an_earlier_record])
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn")),
                               boundary=start_steps(task), transaction_timeout_s=30)
    with pytest.raises(ConnectError, match=r"commit_transaction\(record\) for a record that the "
                                           r"poll\(\) did not return \(a SourceRecord for topic "
                                           rf"'{out}', source offset \{{'seq': 2\}}\)"):
        run_loop(loop, lambda: False, timeout=8)
    assert committed_transactions(kafka_bootstrap, out) == ([], [])
    assert offsets_read_back(kafka_bootstrap, offsets) is None


# ------------------------------------------------------------------ rule 3


def test_rule3_requests_of_one_poll_act_in_record_order(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    a, b = recs(out, 0, 8), recs(out, 8, 2)

    def cut_in_three(txn: TransactionContext) -> list[SourceRecord]:
        txn.commit_transaction(a[1])
        txn.commit_transaction(a[1])  # the same request twice is one
        txn.abort_transaction(a[4])
        txn.commit_transaction()      # after the list: 5-7
        return a

    def record_wins(txn: TransactionContext) -> list[SourceRecord]:
        txn.commit_transaction(b[-1])  # the last record's request ends the transaction...
        txn.abort_transaction()        # ...so this one finds nothing open (Connect's rule)
        return b
    task = StepTask([cut_in_three, record_wins])
    metrics = TaskMetrics("exactly-once")
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn"),
                                    metrics=metrics),
                               boundary=start_steps(task), transaction_timeout_s=30)
    # 0-1, the offsets-only transaction after aborting 2-4, 5-7, 8-9.
    assert run_loop(loop, lambda: task.commits >= 4) is Outcome.STOPPED
    assert committed_transactions(kafka_bootstrap, out) == ([0, 1, 5, 6, 7, 8, 9], [2, 3, 2])
    assert metrics.aborts == 1
    assert offsets_read_back(kafka_bootstrap, offsets) == {"seq": 10}


def test_rule3_a_commit_and_abort_conflict_fails_the_task_even_if_caught(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """Before, the first request quietly won when the task caught the error of the
    second; Kafka Connect fails the task, and so does this."""
    out, offsets = topics

    def conflicting(txn: TransactionContext) -> list[SourceRecord]:
        txn.commit_transaction()
        with contextlib.suppress(ConnectError):  # a task that swallows the error
            txn.abort_transaction()
        return recs(out, 0, 2)
    task = StepTask([conflicting])
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn")),
                               boundary=start_steps(task), transaction_timeout_s=30)
    with pytest.raises(ConnectError, match="both to commit and to abort"):
        run_loop(loop, lambda: False, timeout=8)
    assert committed_transactions(kafka_bootstrap, out) == ([], [])
    assert offsets_read_back(kafka_bootstrap, offsets) is None


# ------------------------------------------------------------------ rule 4


def test_rule4_an_aborted_transactions_offsets_advance_past_its_records(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    dropped = recs(out, 0, 3)

    def abort(txn: TransactionContext) -> list[SourceRecord]:
        txn.abort_transaction(dropped[-1])
        return dropped
    task = StepTask([abort])
    loop = ExactlyOnceTaskLoop(deps(kafka_bootstrap, offsets, task, unique_name("txn")),
                               boundary=start_steps(task), transaction_timeout_s=30)
    assert run_loop(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    assert committed_transactions(kafka_bootstrap, out) == ([], [])
    assert offsets_read_back(kafka_bootstrap, offsets) == {"seq": 3}  # never handed again
    assert task.committed == [(0, None), (1, None), (2, None)]
