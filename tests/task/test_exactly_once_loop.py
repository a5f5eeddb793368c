"""The exactly-once commit path against the real broker (no Spark: the loop itself).

Transaction sizes are observed from Kafka's side: in a single-partition topic
each committed transaction is followed by one commit marker, which takes an
offset, so the offsets that a read_committed consumer sees jump by 2 where a
transaction ended. Aborted records leave a larger jump and are never returned.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from support.kafka import read_topic, transaction_sizes

from connect_runtime.api.record import SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.errors import ConnectError, DataException, InvalidOffsetException
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome, TaskLoop
from connect_runtime.task.metrics import TaskMetrics
from connect_runtime.task.stall_watch import COMMIT, POLL


class ScriptedTask(SourceTask):
    """Returns pre-built batches, then idles; records what the framework told it."""

    def __init__(self, batches: list[list[SourceRecord]], idle_s: float = 0.01) -> None:
        self.batches = list(batches)
        self.idle_s = idle_s
        self.committed: list[tuple[SourceRecord, Any]] = []
        self.commits = 0
        self.on_poll: Callable[[list[SourceRecord]], None] | None = None

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        if not self.batches:
            time.sleep(self.idle_s)
            return None
        batch = self.batches.pop(0)
        if self.on_poll:
            self.on_poll(batch)
        return batch

    def commit(self) -> None:
        self.commits += 1

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        self.committed.append((record, metadata))

    def stop(self) -> None:
        pass


def records(topic: str, start: int, count: int, partition: dict[str, Any] | None = None,
            ) -> list[SourceRecord]:
    part = partition if partition is not None else {"p": 0}
    return [SourceRecord(part, {"seq": n + 1}, topic, value={"seq": n}, key=str(n))
            for n in range(start, start + count)]


def make_loop(bootstrap: str, out: str, offsets: str, task: SourceTask, boundary: BoundaryPolicy,
              txn_id: str) -> tuple[ExactlyOnceTaskLoop, Any]:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    loop = ExactlyOnceTaskLoop(LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}),
        key_converter=load_converter("org.apache.kafka.connect.storage.StringConverter", {},
                                     True, config_key="key.converter"),
        value_converter=load_converter("org.apache.kafka.connect.json.JsonConverter", {},
                                       False, config_key="value.converter"),
        signals=LoopSignals(), metrics=TaskMetrics("exactly-once")),
        boundary=boundary, transaction_timeout_s=30)
    return loop, producer


def metrics_of(loop: TaskLoop) -> TaskMetrics:
    """The loop's metrics (what the tests read commits, aborts and sizes from)."""
    assert loop.metrics is not None, "the loop was built without metrics"
    return loop.metrics


def run_until(loop: TaskLoop, done: Callable[[], bool], timeout: float = 30) -> Outcome:
    """``loop.run()`` on a thread until ``done()`` (or the loop ends), then a stop."""
    result: list[Outcome] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            result.append(loop.run())
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=target)
    thread.start()
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.02)
    loop.signals.request_stop()
    thread.join(30)
    if errors:
        raise errors[0]
    return result[0]


def read_committed(bootstrap: str, topic: str) -> list[tuple[int, Any, Any]]:
    """(offset, key, value) of every record visible to read_committed consumers."""
    return [(r["offset"], r["key"], r["value"]) for r in read_topic(bootstrap, topic)]


def test_poll_boundary_commits_each_batch_with_its_offsets(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = ScriptedTask([records(out, 0, 3), records(out, 3, 5), records(out, 8, 2)])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("poll", 0, None), unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 3) is Outcome.STOPPED
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(10))
    assert transaction_sizes([o for o, _, _ in seen]) == [3, 5, 2]
    snap = metrics_of(loop).snapshot()
    assert (snap.commits, snap.txn_size_max, snap.txn_size_min) == (3, 5, 2)
    # One offset record per transaction (one source partition), the last one wins.
    stored = read_committed(kafka_bootstrap, offsets)
    assert len(stored) == 3
    assert orjson.loads(stored[-1][1]) == ["c", {"p": 0}]
    assert stored[-1][2] == {"seq": 10}
    # commit_record saw every record in order, with where it landed.
    assert [r.value["seq"] for r, _ in task.committed] == list(range(10))
    assert [m.offset for _, m in task.committed] == [o for o, _, _ in seen]


def test_interval_boundary_groups_batches_by_time(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    batches = [records(out, i * 2, 2) for i in range(20)]
    task = ScriptedTask(batches)
    task.on_poll = lambda _batch: time.sleep(0.05)  # 20 batches over ~1 s
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("interval", 300, None), unique_name("txn"))
    run_until(loop, lambda: not task.batches and task.commits >= 1)
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == list(range(40))
    sizes = transaction_sizes([o for o, _, _ in seen])
    # ~1 s of batches cut every 300 ms: a few multi-batch transactions, not 20.
    assert 2 <= len(sizes) <= 6, sizes
    assert max(sizes) >= 8


def test_connector_aborts_are_invisible_but_their_offsets_commit(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    ctx = TaskTransactionContext()
    first, second, third = records(out, 0, 4), records(out, 4, 4), records(out, 8, 4)
    task = ScriptedTask([first + second, third])
    ctx.commit_transaction(first[-1])  # commit after record 3
    ctx.abort_transaction(second[-1])  # abort records 4..7

    def after_third(batch: list[SourceRecord]) -> None:
        if batch is third:
            ctx.commit_transaction()
    task.on_poll = after_third
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("connector", 0, ctx), unique_name("txn"))
    # Three commits: records 0-3, the offsets-only transaction after the abort,
    # records 8-11. Stopping earlier discards the unfinished third transaction.
    run_until(loop, lambda: task.commits >= 3)
    seen = read_committed(kafka_bootstrap, out)
    assert [v["seq"] for _, _, v in seen] == [0, 1, 2, 3, 8, 9, 10, 11]
    assert metrics_of(loop).aborts == 1
    # The aborted records were acknowledged as not delivered.
    assert [m for r, m in task.committed if 4 <= r.value["seq"] < 8] == [None] * 4


def test_offsets_of_a_trailing_abort_are_committed_on_stop(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    ctx = TaskTransactionContext()
    batch = records(out, 0, 3)
    ctx.abort_transaction(batch[-1])
    task = ScriptedTask([batch])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("connector", 0, ctx), unique_name("txn"))
    run_until(loop, lambda: metrics_of(loop).aborts >= 1)
    assert read_committed(kafka_bootstrap, out) == []
    stored = read_committed(kafka_bootstrap, offsets)
    assert [v for _, _, v in stored] == [{"seq": 3}]  # the task will not be handed 0..2 again


def test_non_primitive_offset_fails_the_task_and_commits_nothing(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    good = records(out, 0, 2)
    bad = SourceRecord({"p": 0}, {"seq": {"nested": 1}}, out, value={"seq": 2})
    task = ScriptedTask([[*good, bad]])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("poll", 0, None), unique_name("txn"))
    with pytest.raises(InvalidOffsetException, match="nested"):
        run_until(loop, lambda: False, timeout=5)
    assert read_committed(kafka_bootstrap, out) == []
    assert read_committed(kafka_bootstrap, offsets) == []


def test_a_task_may_not_write_to_its_offsets_topic(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = ScriptedTask([records(out, 0, 2) + records(offsets, 2, 1)])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("poll", 0, None), unique_name("txn"))
    with pytest.raises(Exception, match="internal topics"):
        run_until(loop, lambda: False, timeout=5)
    assert read_committed(kafka_bootstrap, out) == []
    assert read_committed(kafka_bootstrap, offsets) == []


def test_a_fenced_loop_stops_quietly_and_its_open_transaction_never_shows(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    from confluent_kafka import Producer

    out, offsets = topics
    txn_id = unique_name("txn")
    task = ScriptedTask([records(out, 0, 3), records(out, 3, 3)])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("interval", 60_000, None), txn_id)
    fenced = threading.Event()

    def fence_after_first(batch: list[SourceRecord]) -> None:
        if batch[0].value["seq"] == 3:  # the first batch is in the open transaction
            zombie_killer = Producer({"bootstrap.servers": kafka_bootstrap,
                                      "transactional.id": txn_id})
            zombie_killer.init_transactions(30)
            fenced.set()
    task.on_poll = fence_after_first
    outcome = run_until(loop, lambda: False, timeout=8)
    assert fenced.is_set()
    assert outcome is Outcome.FENCED
    assert read_committed(kafka_bootstrap, out) == []
    assert read_committed(kafka_bootstrap, offsets) == []


class NoMetadataTask(ScriptedTask):
    """Does not override commit_record, so the loop sends whole runs of records (send_records)."""

    commit_record = SourceTask.commit_record  # type: ignore[assignment]


def read_raw(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every committed message of ``topic`` as confluent-kafka returns it."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-reader",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    def high(p: int) -> int:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1])

    ends = {p: high(p) for p in range(partitions)}
    out: list[Any] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            # Right after the topic's creation a fresh consumer may see a high
            # watermark of 0 for a partition that has data: ask again until it
            # shows, or it is empty for real (settled after a few seconds).
            settling = time.monotonic() < deadline - 25
            ends.update({p: high(p) for p, end in ends.items() if end == 0 and settling})
            done = consumer.position([TopicPartition(topic, p) for p in range(partitions)])
            caught_up = all(tp.offset >= ends[tp.partition] for tp in done
                            if ends[tp.partition] > 0)
            if caught_up and (not settling or all(ends.values())):
                break
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                out.append(msg)
    finally:
        consumer.close()
    return out


@pytest.mark.parametrize("task_class", [NoMetadataTask, ScriptedTask],
                         ids=["whole-batch path", "per-record path"])
def test_every_record_field_reaches_kafka_and_the_latest_offset_wins(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        task_class: type[ScriptedTask]) -> None:
    _, offsets = topics
    out = unique_name("fields")
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(out, 2, 1)])[out].result()
    a, a_again, b = {"p": "a"}, {"p": "a"}, {"p": "b"}  # a_again: equal to a, another dict
    batch = [
        SourceRecord(a, {"n": 1}, out, {"v": 1}, "k1"),
        SourceRecord(b, {"n": 2}, out, b"raw-bytes", None, partition=1),
        SourceRecord(a_again, {"n": 3}, out, "text", 7, timestamp=1_700_000_000_123),
        SourceRecord(None, None, out, None, "tombstone",
                     headers=[("h1", b"x"), ("h2", "y"), ("h3", None)]),
        SourceRecord(a, {"n": 4}, out, [1, 2], None, partition=0, timestamp=1_700_000_000_456),
    ]
    task = task_class([batch])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("poll", 0, None), unique_name("txn"))
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    messages = read_raw(kafka_bootstrap, out, 2)
    by_key = {m.key(): m for m in messages if m.key() is not None}
    assert by_key[b"k1"].value() == b'{"v":1}'
    assert by_key[b"7"].value() == b'"text"'  # a non-str key goes through str()
    assert by_key[b"7"].timestamp()[1] == 1_700_000_000_123
    assert by_key[b"tombstone"].value() is None
    assert by_key[b"tombstone"].headers() == [("h1", b"x"), ("h2", b"y"), ("h3", None)]
    keyless = {m.value(): m for m in messages if m.key() is None}
    assert len(messages) == 5 and len(keyless) == 2
    assert keyless[b"raw-bytes"].partition() == 1  # bytes pass through the JSON converter
    assert keyless[b"[1,2]"].partition() == 0
    assert keyless[b"[1,2]"].timestamp()[1] == 1_700_000_000_456
    # One offset per serialized partition; for "a" the last record's (n=4), though
    # an equal but distinct dict (n=3) came after a's first record.
    stored = {tuple(orjson.loads(k)[1].values()): v
              for _, k, v in read_committed(kafka_bootstrap, offsets)}
    assert stored == {("a",): {"n": 4}, ("b",): {"n": 2}}


def test_a_value_no_converter_can_encode_fails_the_batch_and_commits_nothing(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    unencodable = SourceRecord({"p": 0}, {"seq": 3}, out, value={1, 2})
    task = NoMetadataTask([[*records(out, 0, 2), unencodable]])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task,
                        BoundaryPolicy("poll", 0, None), unique_name("txn"))
    with pytest.raises(DataException, match=f"Converting set to JSON for topic {out} failed"):
        run_until(loop, lambda: False, timeout=5)
    assert read_committed(kafka_bootstrap, out) == []
    assert read_committed(kafka_bootstrap, offsets) == []


class Endless(ScriptedTask):
    """One record per poll, forever, and never asks to commit."""

    def __init__(self, topic: str) -> None:
        super().__init__([])
        self.topic, self.n = topic, 0

    def poll(self) -> list[SourceRecord] | None:
        time.sleep(0.05)
        self.n += 1
        return records(self.topic, self.n, 1)


def test_a_transaction_the_broker_timed_out_fails_the_task_saying_so(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """The broker aborts a transaction open past transaction.timeout.ms and bumps the
    producer's epoch; librdkafka reports fencing. No other producer exists: the task
    fails with what happened and the fix, instead of stopping as a fenced zombie."""
    from confluent_kafka import Producer

    out, offsets = topics
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 5,
                         "transactional.id": unique_name("txn"), "transaction.timeout.ms": 2000})
    producer.init_transactions(30)
    ctx = TaskTransactionContext()
    loop = ExactlyOnceTaskLoop(LoopDeps(
        label="c-0", connector="c", task=Endless(out), producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}),
        key_converter=load_converter("StringConverter", {}, True),
        value_converter=load_converter("JsonConverter", {}, False),
        signals=LoopSignals()), boundary=BoundaryPolicy("connector", 0, ctx),
        transaction_timeout_s=2)
    with pytest.raises(ConnectError) as failed:
        run_until(loop, lambda: False, timeout=60)
    message = str(failed.value)
    assert "longer than transaction.timeout.ms (2s)" in message, message
    assert "commit_transaction" in message and "producer.override.transaction.timeout.ms" \
        in message
    assert read_committed(kafka_bootstrap, out) == []


def test_the_loop_tells_the_stall_watch_it_is_in_poll_or_the_commit(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    """What the slot's stall watchdog reads (task/stall_watch.py): the call in progress
    while the task's code runs, nothing between calls."""
    out, offsets = topics
    task = ScriptedTask([records(out, 0, 2)])
    loop, _ = make_loop(kafka_bootstrap, out, offsets, task, BoundaryPolicy("poll", 0, None),
                        unique_name("txn"))
    seen: list[str | None] = []
    task.on_poll = lambda _: seen.append(None if loop.call_watch.current is None
                                         else loop.call_watch.current[0])
    counted = task.commit

    def commit() -> None:
        seen.append(None if loop.call_watch.current is None else loop.call_watch.current[0])
        counted()
    task.commit = commit  # type: ignore[method-assign]
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    assert seen[:2] == [POLL, COMMIT]
    assert loop.call_watch.current is None
