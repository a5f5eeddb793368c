"""The RecordBatch (column) path of both task loops against the real broker.

A poll may return :class:`RecordBatch` items among its ``SourceRecord`` items.
What is claimed here is what Kafka and the offsets topic show for them: every
row arrives in order with its columns, the offset committed with a batch is
that of its last row, a batch is never split across transactions whatever the
boundary, aborted batches are invisible but their offsets commit, and a bad
batch fails the task without anything of its transaction becoming visible.

Transaction sizes are read from Kafka's side (``transaction_sizes``): in a
one-partition topic every commit marker takes an offset, so a committed
transaction is a run of consecutive offsets.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from confluent_kafka import KafkaError, Producer
from support.kafka import create_topic, read_topic, transaction_sizes
from test_exactly_once_loop import metrics_of, read_committed, read_raw, run_until

from connect_runtime.api.record import RecordBatch, RecordMetadata, SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.errors import DataException, InvalidOffsetException
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.batches import check, expand
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome, TaskLoop
from connect_runtime.task.metrics import TaskMetrics
from connect_runtime.task.submitted_records import SubmittedRecords
from connect_runtime.transforms import TransformationChain

# ----------------------------------------------------------------- helpers


class BatchTask(SourceTask):
    """Returns scripted poll results (a None entry: one idle poll), then idles.

    Does not override ``commit_record``, so the loops take the column path.
    ``on_poll(items)`` runs inside ``poll`` before the items are returned: where
    a task asks its TransactionContext to end a transaction.
    """

    def __init__(self, polls: list[list[Any] | None], idle_s: float = 0.01) -> None:
        self.polls = list(polls)
        self.idle_s = idle_s
        self.commits = 0
        self.on_poll: Callable[[list[Any]], None] | None = None

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord | RecordBatch] | None:
        if not self.polls:
            time.sleep(self.idle_s)
            return None
        items = self.polls.pop(0)
        if items is None:
            time.sleep(self.idle_s)
            return None
        if self.on_poll is not None:
            self.on_poll(items)
        return items

    def commit(self) -> None:
        self.commits += 1

    def stop(self) -> None:
        pass


class MetadataTask(BatchTask):
    """Overrides ``commit_record``: the loops expand batches into one record per row."""

    def __init__(self, polls: list[list[Any] | None], idle_s: float = 0.01) -> None:
        super().__init__(polls, idle_s)
        self.committed: list[tuple[SourceRecord, RecordMetadata | None]] = []

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.committed.append((record, metadata))


TASK_CLASSES = pytest.mark.parametrize("task_class", [BatchTask, MetadataTask],
                                       ids=["columns", "per-row"])


def converters() -> dict[str, Any]:
    return dict(
        key_converter=load_converter("org.apache.kafka.connect.storage.StringConverter", {},
                                     True, config_key="key.converter"),
        value_converter=load_converter("org.apache.kafka.connect.json.JsonConverter", {},
                                       False, config_key="value.converter"))


def eos_loop(bootstrap: str, offsets: str, task: SourceTask, boundary: BoundaryPolicy,
             txn_id: str, producer_config: dict[str, Any] | None = None,
             transforms: TransformationChain | None = None,
             producer_class: type[Producer] = Producer) -> ExactlyOnceTaskLoop:
    producer = producer_class({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5, **(producer_config or {})})
    producer.init_transactions(30)
    return ExactlyOnceTaskLoop(LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}), signals=LoopSignals(), transforms=transforms,
        metrics=TaskMetrics("exactly-once"), **converters()),
        boundary=boundary, transaction_timeout_s=30)


def alo_loop(bootstrap: str, offsets: str, task: SourceTask,
             transforms: TransformationChain | None = None) -> AtLeastOnceTaskLoop:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    return AtLeastOnceTaskLoop(LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}), signals=LoopSignals(), transforms=transforms,
        metrics=TaskMetrics("at-least-once"), **converters()),
        offset_flush_interval_s=600, offset_flush_timeout_s=10)


def values_of(bootstrap: str, topic: str) -> list[Any]:
    return [v for _, _, v in read_committed(bootstrap, topic)]


def stored_offsets(bootstrap: str, topic: str) -> list[tuple[Any, Any]]:
    """Every offset record committed, in order: ``(source partition, offset)``, after
    checking each key is ``["c", {partition}]``."""
    out = []
    for _, key, value in read_committed(bootstrap, topic):
        connector, partition = orjson.loads(key)
        assert connector == "c"
        out.append((partition, value))
    return out


def latest_offsets(bootstrap: str, topic: str) -> dict[str, Any]:
    return {partition["p"]: offset for partition, offset in stored_offsets(bootstrap, topic)}


def rows(topic: str, start: int, count: int, *, partition: dict[str, Any] | None = None,
         offset: dict[str, Any] | None = None, per_row: bool = False, **columns: Any,
         ) -> RecordBatch:
    """A batch of rows ``seq start..``: values ``{"seq": n}``, keys ``str(n)``; with
    ``per_row`` each row's offset is ``{"seq": n + 1}``, else ``offset`` is the batch's."""
    seqs = range(start, start + count)
    part = partition if partition is not None else {"p": 0}
    return RecordBatch(topic, values=[{"seq": n} for n in seqs], keys=[str(n) for n in seqs],
                       source_partition=part,
                       source_offset=None if per_row else (
                           offset if offset is not None else {"seq": start + count}),
                       source_offsets=[{"seq": n + 1} for n in seqs] if per_row else None,
                       **columns)


def fails_with_nothing_committed(loop: TaskLoop, error: type[Exception], match: str,
                                 bootstrap: str, topics: tuple[str, str]) -> None:
    """``loop`` fails with ``error`` (message matching ``match``) and neither its
    output topic nor its offsets topic shows a committed record."""
    with pytest.raises(error, match=match):
        run_until(loop, lambda: False, timeout=10)
    for topic in topics:
        assert read_committed(bootstrap, topic) == [], topic


def record(topic: str, n: int, partition: dict[str, Any] | None = None,
           offset: dict[str, Any] | None = None) -> SourceRecord:
    return SourceRecord(partition if partition is not None else {"p": 0},
                        offset if offset is not None else {"seq": n + 1}, topic,
                        value={"seq": n}, key=str(n))


# ------------------------------------------------------ mixed polls, offsets


@TASK_CLASSES
def test_a_mixed_poll_reaches_kafka_in_order_with_the_latest_offset_per_partition(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[BatchTask]) -> None:
    out, offsets = topics
    a, a_again, b = {"p": "a"}, {"p": "a"}, {"p": "b"}  # a_again: equal to a, another dict
    items: list[Any] = [
        record(out, 0, a, {"a": 1}),
        record(out, 1, a, {"a": 2}),
        rows(out, 2, 3, partition=b, offset={"b": 3}),  # per-batch offset
        record(out, 5, a_again, {"a": 3}),
        RecordBatch(out, values=[{"seq": n} for n in range(6, 10)],
                    keys=[str(n) for n in range(6, 10)], source_partition=a,
                    source_offsets=[{"a": n} for n in range(4, 8)]),  # per-row offsets
    ]
    task = task_class([items])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [(k, v) for _, k, v in seen] == [(str(n).encode(), {"seq": n}) for n in range(10)]
    assert transaction_sizes([o for o, _, _ in seen]) == [10]
    snap = metrics_of(loop).snapshot()
    assert (snap.commits, snap.txn_size_max) == (1, 10)
    # One transaction: one offset record per source partition, the latest of each
    # (for "a" the batch's last row, after an equal but distinct dict's record).
    stored = stored_offsets(kafka_bootstrap, offsets)
    assert sorted(stored, key=lambda s: s[0]["p"]) == [({"p": "a"}, {"a": 7}),
                                                      ({"p": "b"}, {"b": 3})]


def test_per_batch_and_per_row_offsets_both_commit_the_batchs_last_offset(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = BatchTask([[rows(out, 0, 4, per_row=True)], [rows(out, 4, 4, offset={"seq": 99})]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 2) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(8))
    assert transaction_sizes([o for o, _, _ in seen]) == [4, 4]
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": 4}),
                                                        ({"p": 0}, {"seq": 99})]


def test_commit_record_hears_of_every_row_with_its_own_offset_and_where_it_landed(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    per_row, per_batch = rows(out, 0, 4, per_row=True), rows(out, 4, 3, offset={"seq": 99})
    task = MetadataTask([[per_row], [per_batch]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 2) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(7))
    # Once per row, in order: a per-row offset is the row's own, a per-batch one is
    # on every row of the batch.
    assert [(r.value, r.key) for r, _ in task.committed] == [
        ({"seq": n}, str(n)) for n in range(7)]
    assert [r.source_offset for r, _ in task.committed] == (
        [{"seq": n} for n in range(1, 5)] + [{"seq": 99}] * 3)
    assert all(r.source_partition == {"p": 0} and r.topic == out for r, _ in task.committed)
    metadata = [m for _, m in task.committed]
    assert all(m is not None and m.topic == out and m.partition == 0 for m in metadata)
    assert [m.offset for m in metadata if m is not None] == [o for o, _, _ in seen]
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": 4}),
                                                        ({"p": 0}, {"seq": 99})]


# ------------------------------------------------------------------ columns


@TASK_CLASSES
def test_every_column_reaches_kafka(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[BatchTask]) -> None:
    _, offsets = topics
    out = unique_name("columns")
    create_topic(kafka_bootstrap, out, partitions=2)
    ts = 1_700_000_000_000
    # partition 1, no keys column, bytes / data / tombstone values, timestamps and
    # headers per row (None entries included).
    fixed = RecordBatch(
        out, values=[b"raw-bytes", {"v": 1}, None, [1, 2]], source_partition={"p": 0},
        source_offset={"n": 4}, partition=1, timestamps=[ts + 1, None, ts + 3, ts + 4],
        headers=[[("s", "text")], None, [("b", b"\x00raw"), ("n", None)], []])
    # no partition: keys with None and a non-str key; only tombstones with keys.
    keyed = RecordBatch(out, values=[None, None, None], keys=["k0", None, 7],
                        source_partition={"p": 1}, source_offsets=[{"n": 1}, {"n": 2}, None])
    # every column but values absent: the shortest produce call.
    plain = RecordBatch(out, values=[b"p0", b"p1"])
    task = task_class([[fixed, keyed, plain]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    before = int(time.time() * 1000)
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    messages = read_raw(kafka_bootstrap, out, 2)
    assert len(messages) == 9
    on_one = sorted((m for m in messages if m.partition() == 1), key=lambda m: m.offset())
    first = on_one[:4]  # the fixed batch went first, in order, to partition 1
    assert [(m.key(), m.value()) for m in first] == [
        (None, b"raw-bytes"), (None, b'{"v":1}'), (None, None), (None, b"[1,2]")]
    assert [m.timestamp()[1] for m in first[::2]] == [ts + 1, ts + 3]
    assert first[3].timestamp()[1] == ts + 4
    assert first[1].timestamp()[1] >= before  # None: the producer's time
    assert [m.headers() for m in first] == [
        [("s", b"text")], None, [("b", b"\x00raw"), ("n", None)], None]
    keyed_seen = {m.key(): m.value() for m in messages if m.key() is not None}
    assert keyed_seen == {b"k0": None, b"7": None}  # a non-str key goes through str()
    assert sum(m.key() is None and m.value() is None for m in messages) == 2
    assert sorted(m.value() for m in messages if m.value() in (b"p0", b"p1")) == [b"p0", b"p1"]
    # A per-row offset of None (the last row's) is what commits: a tombstone.
    assert sorted(stored_offsets(kafka_bootstrap, offsets), key=lambda s: s[0]["p"]) == [
        ({"p": 0}, {"n": 4}), ({"p": 1}, None)]


def test_a_value_the_fast_encoder_refuses_mid_column_takes_the_full_contract(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    # The column's first value suits orjson, so the column gets the C encoder;
    # later rows it refuses (bytes to pass through, a dataclass-free Decimal-like
    # value JsonConverter writes itself) go alone through from_connect, in order.
    out, offsets = topics
    mixed = RecordBatch(out, values=[{"a": 1}, b"raw", {"b": 2}, 2**70, {"c": 3}],
                        keys=["k0", b"k1", "k2", "k3", "k4"], source_partition={"p": 0},
                        source_offset={"n": 5})
    task = BatchTask([[mixed]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    messages = read_raw(kafka_bootstrap, out, 1)
    assert [(m.key(), m.value()) for m in messages] == [
        (b"k0", b'{"a":1}'), (b"k1", b"raw"), (b"k2", b'{"b":2}'),
        (b"k3", str(2**70).encode()), (b"k4", b'{"c":3}')]
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"n": 5})]


@pytest.mark.parametrize("first_bad", [False, True],
                         ids=["fast-encoder-column", "full-contract-column"])
def test_a_value_no_converter_takes_fails_the_task_naming_the_topic_counted_once(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        first_bad: bool) -> None:
    # A bad first value gives the whole column the converter's full contract
    # (no C encoder), which counts the failure itself: the task error metrics
    # must see one failure either way, as for a SourceRecord.
    out, offsets = topics
    values = [object(), {"c": 3}] if first_bad else [{"a": 1}, object(), {"c": 3}]
    bad = RecordBatch(out, values=values, source_partition={"p": 0},
                      source_offset={"n": 3})
    task = BatchTask([[record(out, 0)], [record(out, 1), bad]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    with pytest.raises(DataException, match=re.escape(f"for topic {out} failed")):
        run_until(loop, lambda: False, timeout=10)
    assert values_of(kafka_bootstrap, out) == [{"seq": 0}]  # the earlier poll only
    counts = loop._sender.errors.counts
    assert (counts.record_errors, counts.record_failures) == (1, 1)


# ------------------------------------------------------------------- aborts


@TASK_CLASSES
def test_an_aborted_batch_is_invisible_but_its_offset_commits(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[BatchTask]) -> None:
    out, offsets = topics
    ctx = TaskTransactionContext()
    first, aborted, last = (rows(out, 0, 3), rows(out, 3, 4, per_row=True),
                            rows(out, 7, 2, offset={"seq": 42}))
    task = task_class([[first], [aborted], [last]])

    def decide(items: list[Any]) -> None:  # from inside poll, as a task would
        [batch] = items
        (ctx.abort_transaction if batch is aborted else ctx.commit_transaction)(batch)
    task.on_poll = decide
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("connector", 0, ctx),
                    unique_name("txn"))
    # first's transaction, the offsets-only one after the abort, last's.
    assert run_until(loop, lambda: task.commits >= 3) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == [0, 1, 2, 7, 8]
    assert transaction_sizes([o for o, _, _ in seen]) == [3, 2]
    assert metrics_of(loop).aborts == 1
    # The aborted batch's last offset committed on its own: it is not handed again.
    assert [o for _, o in stored_offsets(kafka_bootstrap, offsets)] == [
        {"seq": 3}, {"seq": 7}, {"seq": 42}]
    if isinstance(task, MetadataTask):
        assert [(r.value["seq"], m is None) for r, m in task.committed] == [
            (n, 3 <= n < 7) for n in range(9)]


def test_a_trailing_aborted_batch_commits_its_offset_on_stop(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    ctx = TaskTransactionContext()
    aborted = rows(out, 0, 5)
    ctx.abort_transaction(aborted)
    task = BatchTask([[record(out, 100), aborted]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("connector", 0, ctx),
                    unique_name("txn"))
    assert run_until(loop, lambda: metrics_of(loop).aborts >= 1) is Outcome.STOPPED
    assert read_committed(kafka_bootstrap, out) == []  # the record before it went too
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": 5})]


# ------------------------------------------------- batches over a transaction


class CountingProducer(Producer):
    """Counts the rows ``produce`` refused with a full queue (BufferError)."""

    refused = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().produce(*args, **kwargs)
        except BufferError:
            self.refused += 1
            raise


def test_poll_boundary_a_batch_bigger_than_the_producer_queue_is_one_transaction(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    n = 25_000
    big = RecordBatch(out, values=list(range(n)), source_partition={"p": 0},
                      source_offset={"seq": n})
    task = BatchTask([[big]])
    # A 2,000-message queue: the column path waits out BufferError and goes on
    # from the refused row.
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"), {"queue.buffering.max.messages": 2000},
                    producer_class=CountingProducer)
    assert run_until(loop, lambda: task.commits >= 1, timeout=60) is Outcome.STOPPED
    assert isinstance(loop.producer, CountingProducer) and loop.producer.refused > 0
    seen = read_committed(kafka_bootstrap, out)
    assert [v for _, _, v in seen] == list(range(n))
    assert transaction_sizes([o for o, _, _ in seen]) == [n]
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": n})]


def test_interval_boundary_never_splits_a_batch(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    n = 20_000
    big = RecordBatch(out, values=[{"seq": i} for i in range(3, 3 + n)],
                      source_partition={"p": 0}, source_offset={"seq": 3 + n})
    after = [record(out, 3 + n), record(out, 4 + n)]
    # Idle polls between: the 1 ms interval has passed at each, so each poll's
    # records end up in a transaction of their own; the batch takes far longer
    # than 1 ms to produce and is still one transaction.
    task = BatchTask([[record(out, i) for i in range(3)], None, [big], None, after])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("interval", 1, None),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 3, timeout=60) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(n + 5))
    assert transaction_sizes([o for o, _, _ in seen]) == [3, n, 2]
    assert [o for _, o in stored_offsets(kafka_bootstrap, offsets)] == [
        {"seq": 3}, {"seq": 3 + n}, {"seq": 5 + n}]


def test_connector_boundary_commits_a_named_batch_whole(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    ctx = TaskTransactionContext()
    n = 15_000
    head = [record(out, i) for i in range(3)]
    big = RecordBatch(out, values=[{"seq": i} for i in range(3, 3 + n)],
                      source_partition={"p": 0}, source_offset={"seq": 3 + n})
    tail = [record(out, 3 + n), record(out, 4 + n)]

    def decide(items: list[Any]) -> None:
        if items[0] is head[0]:
            ctx.commit_transaction(head[1])  # after record 1
            ctx.commit_transaction(big)  # after the batch's last row: records 2.. and it
        else:
            ctx.commit_transaction()  # after this poll
    task = BatchTask([[*head, big, tail[0]], [tail[1]]])
    task.on_poll = decide
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("connector", 0, ctx),
                    unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 3, timeout=60) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(n + 5))
    assert transaction_sizes([o for o, _, _ in seen]) == [2, n + 1, 2]
    assert [o for _, o in stored_offsets(kafka_bootstrap, offsets)] == [
        {"seq": 2}, {"seq": 3 + n}, {"seq": 5 + n}]


def test_an_empty_batch_named_in_commit_transaction_ends_the_transaction(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """BUG: _send_record_batch returns for an empty batch before asking the
    connector boundary, so commit_transaction(empty batch) is never acted on: the
    transaction stays open (and the request stays in the context for good)."""
    out, offsets = topics
    ctx = TaskTransactionContext()
    full, empty = rows(out, 0, 3), RecordBatch(out, values=[], source_partition={"p": 1})
    task = BatchTask([[full, empty]])
    task.on_poll = lambda items: ctx.commit_transaction(items[-1])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("connector", 0, ctx),
                    unique_name("txn"))
    run_until(loop, lambda: task.commits >= 1, timeout=3)
    assert task.commits == 1, "the transaction the task asked to commit never committed"
    assert [v["seq"] for v in values_of(kafka_bootstrap, out)] == [0, 1, 2]
    assert not ctx.has_record_requests


# ----------------------------------------------------------------- failures


@TASK_CLASSES
def test_mismatched_columns_fail_the_task_and_nothing_of_its_transaction_shows(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[BatchTask]) -> None:
    out, offsets = topics
    bad = RecordBatch(out, values=[1, 2, 3], keys=["a", "b"], source_partition={"p": 0},
                      source_offset={"seq": 9})
    task = task_class([[record(out, 0)], [record(out, 1), record(out, 2), bad]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    with pytest.raises(DataException, match=re.escape(f"topic '{out}' with 3 values but 2 keys")):
        run_until(loop, lambda: False, timeout=10)
    assert values_of(kafka_bootstrap, out) == [{"seq": 0}]  # the earlier poll only
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": 1})]


NESTED: Any = {"nested": 1}


@pytest.mark.parametrize("fields", [
    {"source_partition": {"p": 0}, "source_offset": {"seq": NESTED}},
    {"source_partition": {"p": 0}, "source_offsets": [{"seq": 1}, {"seq": NESTED}]},
    {"source_partition": {"p": NESTED}, "source_offset": {"seq": 2}},
], ids=["per-batch-offset", "per-row-offset", "partition"])
def test_a_non_flat_offset_or_partition_in_a_batch_fails_the_task(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        fields: dict[str, Any]) -> None:
    out, offsets = topics
    batch = RecordBatch(out, values=[1, 2], **fields)
    task = BatchTask([[record(out, 0, {"p": 1}), batch]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    fails_with_nothing_committed(loop, InvalidOffsetException, "nested", kafka_bootstrap, topics)


def test_a_batch_for_the_offsets_topic_fails_the_task(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = BatchTask([[record(out, 0), rows(offsets, 1, 2)]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    fails_with_nothing_committed(loop, DataException, "internal topics", kafka_bootstrap, topics)


@pytest.mark.parametrize("mode", ["exactly-once", "at-least-once"])
def test_an_item_neither_record_nor_batch_fails_the_task_naming_its_index(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        mode: str) -> None:
    out, offsets = topics
    task = BatchTask([[record(out, 0), rows(out, 1, 2), {"topic": out, "value": 3}]])
    loop: TaskLoop = (eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                               unique_name("txn")) if mode == "exactly-once"
                      else alo_loop(kafka_bootstrap, offsets, task))
    # Nothing of the poll was sent: the list is checked before its first item goes.
    fails_with_nothing_committed(loop, DataException, "returned a dict at index 2 of its list",
                                 kafka_bootstrap, topics)


@pytest.mark.parametrize("values", [b"[1,2,3]", "abc", {"seq": 0}],
                         ids=["bytes", "str", "dict"])
def test_values_that_are_not_a_list_are_refused_like_any_other_column(values: Any) -> None:
    """BUG: check() measures ``values`` with len() only, so a bytes, str or dict
    ``values`` (say a task passing one serialized payload) passes and becomes one
    row per byte, character or key; the other columns refuse these ("a column is
    a list")."""
    with pytest.raises(DataException, match="values are a"):
        check(RecordBatch("t", values=values, source_partition={"p": 0},
                          source_offset={"seq": 1}), "c-0")


def test_a_single_payload_given_as_values_is_not_split_into_rows(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """BUG (see above), as Kafka shows it: ``values=b"[1,2,3]"`` is not refused but
    produced as 7 records, one JSON int per byte."""
    out, offsets = topics
    task = BatchTask([[RecordBatch(out, values=b"[1,2,3]", source_partition={"p": 0},
                                   source_offset={"seq": 1})]])
    loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                    unique_name("txn"))
    error: DataException | None = None
    try:
        run_until(loop, lambda: task.commits >= 1, timeout=10)
    except DataException as e:
        error = e
    seen = values_of(kafka_bootstrap, out)
    assert seen == [], f"a bytes payload became {len(seen)} records: {seen}"
    assert error is not None and out in str(error) and "values" in str(error)


# ----------------------------------------------------------- at-least-once


@TASK_CLASSES
def test_at_least_once_mixed_records_and_batches_arrive_and_flush_their_last_offsets(
        kafka_bootstrap: str, topics: tuple[str, str], task_class: type[BatchTask]) -> None:
    out, offsets = topics
    a, b = {"p": "a"}, {"p": "b"}
    items: list[Any] = [
        record(out, 0, a, {"a": 1}),
        rows(out, 1, 4, partition=a, offset={"a": 5}),
        record(out, 5, b, {"b": 1}),
        RecordBatch(out, values=[{"seq": 6}, {"seq": 7}], keys=["6", "7"],
                    source_partition=b, source_offsets=[{"b": 2}, {"b": 3}]),
    ]
    task = task_class([items, [rows(out, 8, 2, partition=a, offset={"a": 7})]])
    loop = alo_loop(kafka_bootstrap, offsets, task)
    assert run_until(loop, lambda: loop._submitted.acknowledged >= 10) is Outcome.STOPPED
    seen = read_topic(kafka_bootstrap, out)
    assert [(r["key"], r["value"]) for r in seen] == [
        (str(n).encode(), {"seq": n}) for n in range(10)]
    assert metrics_of(loop).polled == 10 and task.commits == 1  # one flush: commit() once
    # One flush on stop: one offset record per source partition, each a batch's last.
    assert sorted(stored_offsets(kafka_bootstrap, offsets), key=lambda s: s[0]["p"]) == [
        ({"p": "a"}, {"a": 7}), ({"p": "b"}, {"b": 3})]
    if isinstance(task, MetadataTask):
        acked = sorted(task.committed, key=lambda c: c[0].value["seq"])
        assert all(m is not None for _, m in acked)
        assert [r.source_offset for r, _ in acked] == [
            {"a": 1}, *[{"a": 5}] * 4, {"b": 1}, {"b": 2}, {"b": 3}, {"a": 7}, {"a": 7}]


@pytest.mark.parametrize("per_row", [False, True], ids=["per-batch", "per-row"])
def test_at_least_once_only_a_per_batch_offsets_last_row_carries_it(
        kafka_bootstrap: str, topics: tuple[str, str], per_row: bool) -> None:
    """What the loop hands SubmittedRecords (tested below with simulated acks):
    with a per-batch offset the rows before the last carry nothing, so a row that
    fails can never let the batch's offset through."""
    out, offsets = topics
    loop = alo_loop(kafka_bootstrap, offsets, BatchTask([]))
    assert loop._send_polled([record(out, 0), rows(out, 1, 3, per_row=per_row)]) == 4
    [queue] = loop._submitted._queues.values()
    assert [(t.record.value["seq"], t.carries) for t in queue] == [
        (0, True), (1, per_row), (2, per_row), (3, True)]
    assert loop.producer.flush(10) == 0
    loop._serve_deliveries(0)
    assert committable(loop._submitted) == {0: {"seq": 4}}


def _tracked_rows(tracked: SubmittedRecords, batch: RecordBatch) -> list[Any]:
    """As the at-least-once loop tracks a per-batch-offset batch: only the last row carries."""
    expanded = expand(batch)
    return [tracked.track(row, i == len(expanded) - 1) for i, row in enumerate(expanded)]


def committable(tracked: SubmittedRecords) -> dict[Any, Any]:
    return {partition["p"]: offset for partition, offset in tracked.take_committable().values()}


def test_rows_that_carry_no_offset_hold_their_partition_back_until_the_last_row() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    before = tracked.track(SourceRecord({"p": "a"}, {"seq": 1}, "t"))
    r0, r1, r2 = _tracked_rows(tracked, RecordBatch(
        "t", values=[1, 2, 3], source_partition={"p": "a"}, source_offset={"seq": 4}))
    other = tracked.track(SourceRecord({"p": "b"}, {"seq": 1}, "t"))
    r0(None, None)
    r1(None, None)
    other(None, None)
    assert committable(tracked) == {"b": {"seq": 1}}  # `before` is still in flight
    before(None, None)
    # r0 and r1 are acked, but carry nothing: the offset stays `before`'s.
    assert committable(tracked) == {"a": {"seq": 1}}
    assert tracked.pending() == 1
    r2(None, None)
    assert committable(tracked) == {"a": {"seq": 4}}
    assert tracked.pending() == 0 and tracked.in_flight == 0


def test_a_last_row_acked_first_waits_for_the_rows_before_it() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    r0, r1, r2 = _tracked_rows(tracked, RecordBatch(
        "t", values=[1, 2, 3], source_partition={"p": "a"}, source_offset={"seq": 3}))
    r2(None, None)
    r0(None, None)
    assert committable(tracked) == {}
    r1(None, None)
    assert committable(tracked) == {"a": {"seq": 3}}


def test_a_failed_middle_row_keeps_the_batchs_offset_uncommittable() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    before = tracked.track(SourceRecord({"p": "a"}, {"seq": 1}, "t"))
    r0, r1, r2 = _tracked_rows(tracked, RecordBatch(
        "t", values=[1, 2, 3], source_partition={"p": "a"}, source_offset={"seq": 4}))
    before(None, None)
    r0(None, None)
    r1(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    r2(None, None)
    assert committable(tracked) == {"a": {"seq": 1}}
    assert committable(tracked) == {}
    assert tracked.failure is not None and tracked.failure.record.value == 2
    assert tracked.in_flight == 0 and tracked.pending() == 2  # r1 and r2 stay


# --------------------------------------------------------------- transforms


def chain() -> TransformationChain:
    """Drops rows with a ``skip`` header; adds ``origin`` to the others' values."""
    return TransformationChain.from_config({
        "transforms": "drop,tag",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "skip",
        "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.tag.static.field": "origin", "transforms.tag.static.value": "batch",
        "predicates": "skip",
        "predicates.skip.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
        "predicates.skip.name": "skip"})


def skipping_batch(topic: str) -> RecordBatch:
    """Rows 0..4; rows 1 and 4 (the last) carry a ``skip`` header."""
    skip = [("skip", "yes")]
    return rows(topic, 0, 5, offset={"seq": 5}, headers=[None, skip, None, None, skip])


@pytest.mark.parametrize("mode", ["eos-columns", "eos-per-row", "alo"])
def test_batch_rows_go_through_the_transforms_and_the_offset_still_commits(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        mode: str) -> None:
    out, offsets = topics
    task = (MetadataTask if mode == "eos-per-row" else BatchTask)([[skipping_batch(out)]])
    loop: TaskLoop
    if mode == "alo":  # stopped once polled: the stop waits for acks, then flushes
        loop = alo_loop(kafka_bootstrap, offsets, task, transforms=chain())
        assert run_until(loop, lambda: not task.polls) is Outcome.STOPPED
    else:
        loop = eos_loop(kafka_bootstrap, offsets, task, BoundaryPolicy("poll", 0, None),
                        unique_name("txn"), transforms=chain())
        assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
        assert metrics_of(loop).snapshot().txn_size_max == 3
    assert values_of(kafka_bootstrap, out) == [{"seq": n, "origin": "batch"} for n in (0, 2, 3)]
    # The last row was dropped; the batch's offset committed all the same.
    assert stored_offsets(kafka_bootstrap, offsets) == [({"p": 0}, {"seq": 5})]
    if isinstance(task, MetadataTask):
        assert [(r.value["seq"], m is None) for r, m in task.committed] == [
            (0, False), (1, True), (2, False), (3, False), (4, True)]

