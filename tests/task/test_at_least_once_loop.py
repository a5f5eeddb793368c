"""The at-least-once task loop and startup against the real broker (no Spark).

What a user can see: records are readable (read_committed too) as soon as they
are produced, before any offset is written; offsets appear at the flush interval,
on pause and on stop, and never for a record the broker did not acknowledge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from support.kafka import create_topic, read_topic, wait_for

from connect_runtime.api.record import RecordMetadata, SourceRecord
from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.errors import ConnectError
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.storage.offsets.mirror import GlobalOffsetMirror
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome
from connect_runtime.task.metrics import TaskMetrics
from connect_runtime.task.slot import loop_for
from connect_runtime.task.stall_watch import COMMIT, POLL
from connect_runtime.task.startup import start_task


class ScriptedTask(SourceTask):
    """Returns pre-built batches, then idles; records what the framework told it."""

    def __init__(self, batches: list[list[SourceRecord]]) -> None:
        self.batches = list(batches)
        self.acked: list[tuple[SourceRecord, RecordMetadata | None]] = []
        self.commits = 0

    def start(self, config: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        if not self.batches:
            time.sleep(0.01)
            return None
        return self.batches.pop(0)

    def commit(self) -> None:
        self.commits += 1

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        self.acked.append((record, metadata))

    def stop(self) -> None:
        pass


def records(topic: str, part: str, start: int, count: int) -> list[SourceRecord]:
    """Records seq start.. of source partition ``part``; each offset points at the next."""
    return [SourceRecord({"p": part}, {"seq": n + 1}, topic, value={"p": part, "seq": n},
                         key=part) for n in range(start, start + count)]


@pytest.fixture
def out_partitions() -> int:
    """The ``topics`` fixture's output topic (support.topics) has three partitions here."""
    return 3


def make_loop(bootstrap: str, offsets: str, task: SourceTask, *, interval_s: float = 60,
              timeout_s: float = 5, message_timeout_ms: int = 30000,
              mirror: GlobalOffsetMirror | None = None,
              forbidden: frozenset[str] | None = None,
              metrics: TaskMetrics | None = None) -> AtLeastOnceTaskLoop:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5,
                         "message.timeout.ms": message_timeout_ms})
    return AtLeastOnceTaskLoop(LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=forbidden if forbidden is not None else frozenset({offsets}),
        key_converter=load_converter("org.apache.kafka.connect.storage.StringConverter", {},
                                     True, config_key="key.converter"),
        value_converter=load_converter("org.apache.kafka.connect.json.JsonConverter", {},
                                       False, config_key="value.converter"),
        signals=LoopSignals(), offset_mirror=mirror, metrics=metrics),
        offset_flush_interval_s=interval_s, offset_flush_timeout_s=timeout_s)


class Running:
    """``loop.run()`` on a thread, as a slot runs it; ``stop()`` returns its outcome."""

    def __init__(self, loop: AtLeastOnceTaskLoop) -> None:
        self.loop = loop
        self.started = time.monotonic()
        self.outcome: Outcome | None = None
        self.error: BaseException | None = None
        # A daemon, so a failed assertion before stop() cannot hang the test session.
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.outcome = self.loop.run()
        except BaseException as e:
            self.error = e

    def stop(self) -> Outcome | None:
        self.loop.signals.request_stop()
        self.thread.join(30)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
        return self.outcome


def offset_records(bootstrap: str, topic: str) -> list[tuple[list[Any], Any]]:
    """Every offset record ever written, in order: ([connector, partition], offset)."""
    return [(orjson.loads(r["key"]), r["value"]) for r in read_topic(bootstrap, topic)]


def latest_offsets(bootstrap: str, topic: str) -> dict[str, Any]:
    return {key[1]["p"]: value for key, value in offset_records(bootstrap, topic)}


def test_records_are_visible_at_once_and_offsets_follow_at_the_interval(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    out, offsets = topics
    task = ScriptedTask([records(out, "a", 0, 3), records(out, "b", 0, 2),
                         records(out, "a", 3, 4)])
    metrics = TaskMetrics("at-least-once")
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=4, metrics=metrics)
    running = Running(loop)
    # No transaction: read_committed consumers see the records before any offset exists.
    wait_for(lambda: len(read_topic(kafka_bootstrap, out)) == 9, 10,
                    "the records to be readable")
    # commit() follows each successful flush.
    assert task.commits == 0, "the interval passed before the check; the test is moot"
    assert offset_records(kafka_bootstrap, offsets) == []
    # At the interval: one offset record per source partition, the latest of each.
    wait_for(lambda: task.commits >= 1, 10, "the first interval flush")
    assert time.monotonic() - running.started >= 4
    assert latest_offsets(kafka_bootstrap, offsets) == {"a": {"seq": 7}, "b": {"seq": 2}}
    assert task.commits == 1
    assert running.stop() is Outcome.STOPPED
    # commit_record saw every record once, with where it landed; commit() after each flush.
    assert sorted((r.value["p"], r.value["seq"]) for r, _ in task.acked) == (
        [("a", n) for n in range(7)] + [("b", n) for n in range(2)])
    landed = {(r["partition"], r["offset"]) for r in read_topic(kafka_bootstrap, out)}
    assert {(m.partition, m.offset) for _, m in task.acked if m is not None} == landed
    assert task.commits == 2  # the interval flush, then the one on stop
    # Metrics: a flush that wrote offsets is this mode's commit; the one on stop had none.
    snap = metrics.snapshot()
    assert (snap.poll_total, snap.poll_batches, snap.write_total) == (9, 3, 9)
    assert (snap.commits, snap.records_committed, snap.active_count) == (1, 9, 0)
    assert sorted((o.partition["p"], (o.offset or {})["seq"]) for o in snap.offsets) \
        == [("a", 7), ("b", 2)]


def test_stop_waits_for_acks_and_writes_the_last_offsets(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    out, offsets = topics
    batches = [records(out, "a", n * 50, 50) + records(out, "b", n * 50, 50) for n in range(10)]
    task = ScriptedTask(batches)
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=600)
    running = Running(loop)
    wait_for(lambda: not task.batches, 10, "every batch to be polled")
    assert running.stop() is Outcome.STOPPED
    assert len(task.acked) == 1000
    assert latest_offsets(kafka_bootstrap, offsets) == {"a": {"seq": 500}, "b": {"seq": 500}}
    assert len(offset_records(kafka_bootstrap, offsets)) == 2  # one flush, one per partition
    assert task.commits == 1


def test_pause_flushes_then_idles_until_resumed(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    out, offsets = topics
    task = ScriptedTask([records(out, "a", 0, 5)])
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=600)
    paused: list[bool] = []
    loop.on_paused = paused.append
    running = Running(loop)
    wait_for(lambda: not task.batches, 10, "the batch to be polled")
    loop.signals.set_paused(True)
    wait_for(lambda: paused == [True], 10, "the loop to pause")
    assert latest_offsets(kafka_bootstrap, offsets) == {"a": {"seq": 5}}
    task.batches.append(records(out, "a", 5, 2))
    time.sleep(0.3)
    assert len(task.batches) == 1, "a paused task must not be polled"
    loop.signals.set_paused(False)
    wait_for(lambda: not task.batches, 10, "polling to resume")
    assert running.stop() is Outcome.STOPPED
    assert paused == [True, False]
    assert latest_offsets(kafka_bootstrap, offsets) == {"a": {"seq": 7}}


def test_a_record_the_broker_never_acknowledges_fails_the_task_and_blocks_its_offsets(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    missing = unique_name("no-such-topic")  # the test broker never auto-creates topics
    a = records(out, "a", 0, 4)
    a[2].topic = missing  # a2 fails after message.timeout.ms; a3 is acked long before
    task = ScriptedTask([a[:2], [a[2]], [a[3]], records(out, "b", 0, 3)])
    # Flushes every 0.3 s while a2 is in flight: each may only write what is safe.
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=0.3,
                     message_timeout_ms=3000)
    # As if the topic was deleted after the task's first write to it: the sender's
    # first-use check passed then, so the record fails only at delivery.
    loop._sender._checked_topics.add(missing)
    running = Running(loop)
    running.thread.join(30)
    assert isinstance(running.error, ConnectError)
    message = str(running.error)
    assert "did not acknowledge a record" in message and missing in message
    assert "{'seq': 3}" in message  # the failed record's offset is named
    assert task.commits >= 3, "flushes ran while the record was in flight"
    # Nothing of source partition a at or past the failed record was ever written ...
    written = offset_records(kafka_bootstrap, offsets)
    assert {v["seq"] for k, v in written if k[1]["p"] == "a"} == {2}
    # ... while b, and the records after a2 themselves, went through (at least once).
    assert latest_offsets(kafka_bootstrap, offsets) == {"a": {"seq": 2}, "b": {"seq": 3}}
    delivered = {(r["value"]["p"], r["value"]["seq"]) for r in read_topic(kafka_bootstrap, out)}
    assert delivered == {("a", 0), ("a", 1), ("a", 3), ("b", 0), ("b", 1), ("b", 2)}
    assert a[2] not in [r for r, _ in task.acked]
    assert a[3] in [r for r, _ in task.acked]


def test_a_task_may_not_write_to_an_internal_topic(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    out, offsets = topics
    bad = records(offsets, "a", 2, 1)
    task = ScriptedTask([records(out, "a", 0, 2) + bad + records(out, "a", 3, 1)])
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=600)
    running = Running(loop)
    running.thread.join(30)
    assert running.error is not None and "internal topics" in str(running.error)
    # The records before it were produced (no transaction to undo them), and, as in
    # Connect's final commit after a failure, their offsets were written: up to the
    # bad record, never past it; the record after it was never produced.
    assert [(r["value"]["seq"]) for r in read_topic(kafka_bootstrap, out)] == [0, 1]
    assert [v for _, v in offset_records(kafka_bootstrap, offsets)] == [{"seq": 2}]
    assert task.commits == 0  # a failing task's hooks are not called again


def test_own_offsets_topic_is_mirrored_to_the_global_one_tombstones_included(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, own = topics
    global_topic = unique_name("global-offsets")
    create_topic(kafka_bootstrap, global_topic)
    mirror = GlobalOffsetMirror(kafka_bootstrap, global_topic)
    try:
        gone = SourceRecord({"p": "gone"}, None, out, value={"p": "gone", "seq": 0})
        task = ScriptedTask([[*records(out, "a", 0, 3), gone]])
        loop = make_loop(kafka_bootstrap, own, task, interval_s=600, mirror=mirror,
                         forbidden=frozenset({own, global_topic}))
        running = Running(loop)
        wait_for(lambda: not task.batches, 10, "the batch to be polled")
        assert running.stop() is Outcome.STOPPED
        assert mirror.flush(10)
    finally:
        mirror.close(5)
    assert latest_offsets(kafka_bootstrap, own) == {"a": {"seq": 3}, "gone": None}
    assert latest_offsets(kafka_bootstrap, global_topic) == {"a": {"seq": 3}, "gone": None}


# ------------------------------------------------------------------ startup


def spec_for(bootstrap: str, connector: str, out: str, global_offsets: str,
             **overrides: Any) -> TaskSpec:
    fields: dict[str, Any] = dict(
        connector=connector, task=0, generation=7,
        task_config={"task.class": "connect_runtime.connectors.sequence.SequenceSourceTask",
                     "topic": out,
                     "sequence.partitions": "0", "task.id": "0", "batch.size": "10",
                     "max.records": "30", "poll.idle.ms": "10"},
        connector_config={"name": connector, "connector.class": "SequenceSource",
                          "transaction.boundary": "connector"},
        bootstrap_servers=bootstrap, group_id="g",
        # Neither exists: an at-least-once task must not read the config topic or
        # ask a leader to fence anything.
        config_topic="no-config-topic", status_topic="no-status-topic",
        global_offsets_topic=global_offsets, worker_url="http://127.0.0.1:9",
        worker_id="w", eos_support="disabled", offset_flush_interval_ms=600_000,
        offset_flush_timeout_ms=5000)
    fields.update(overrides)
    return TaskSpec(**fields)


def start_and_run(spec: TaskSpec, offsets: str, expect_records: int) -> TaskMetrics:
    """start_task, then the loop until ``expect_records`` are acknowledged, then stop;
    returns the loop's metrics."""
    started = start_task(spec, lambda: False)
    assert started.boundary is None
    assert started.offset_flush_timeout_s == 5.0
    assert started.task.context.transaction_context() is None
    # As the slot builds it: the loop class from the started task's mode.
    metrics = TaskMetrics("at-least-once")
    loop = loop_for(started.mode).for_started(LoopDeps(
        label=spec.task_label, connector=spec.connector, task=started.task,
        producer=started.producer, offsets_topic=started.offsets_topic,
        forbidden_topics=frozenset({offsets}), key_converter=started.key_converter,
        value_converter=started.value_converter, signals=LoopSignals(), metrics=metrics), started)
    assert isinstance(loop, AtLeastOnceTaskLoop)
    running = Running(loop)
    wait_for(lambda: loop._submitted.acknowledged >= expect_records, 20,
             "the sequence to be sent")
    time.sleep(0.2)  # room for records beyond the expected ones, if the task resent any
    assert running.stop() is Outcome.STOPPED
    started.task.stop()
    started.producer.flush(5)
    return metrics


@pytest.mark.parametrize("mode", ["disabled", "preparing"])
def test_at_least_once_startup_skips_fencing_and_resumes_from_flushed_offsets(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str],
        caplog: pytest.LogCaptureFixture, mode: str) -> None:
    out, offsets = topics
    spec = spec_for(kafka_bootstrap, unique_name("conn"), out, offsets, eos_support=mode,
                    producer_overrides={"transactional.id": "user-picked"})
    caplog.set_level(logging.WARNING)
    # max.records=30: the sequence ends, so a restart that resumes has nothing to send.
    assert start_and_run(spec, offsets, 30).polled == 30
    assert start_and_run(spec, offsets, 0).polled == 0
    seqs = [r["value"]["seq"] for r in read_topic(kafka_bootstrap, out)]
    assert sorted(seqs) == list(range(30)), "the restart resumed from the flushed offset"
    assert latest_offsets_by_field(kafka_bootstrap, offsets) == {0: {"seq": 30}}
    warnings = [r.getMessage() for r in caplog.records]
    assert any("transaction.boundary=connector" in w for w in warnings)
    assert any("ignoring the producer's transactional.id" in w for w in warnings)


def latest_offsets_by_field(bootstrap: str, topic: str) -> dict[int, Any]:
    return {key[1]["sequence.partition"]: value
            for key, value in offset_records(bootstrap, topic)}


def test_the_loop_tells_the_stall_watch_it_is_in_poll_or_the_offset_commit(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    """What the slot's stall watchdog reads (task/stall_watch.py): poll() while the
    task polls, the commit while it flushes offsets and calls commit()."""
    out, offsets = topics

    class Watching(ScriptedTask):
        seen: list[str | None] = []

        def poll(self) -> list[SourceRecord] | None:
            current = loop.call_watch.current
            self.seen.append(None if current is None else current[0])
            return super().poll()

        def commit(self) -> None:
            current = loop.call_watch.current
            self.seen.append(None if current is None else current[0])
            super().commit()

    task = Watching([records(out, "a", 0, 3)])
    loop = make_loop(kafka_bootstrap, offsets, task, interval_s=600)
    running = Running(loop)
    wait_for(lambda: not task.batches, 10, "the batch to be polled")
    assert running.stop() is Outcome.STOPPED
    assert set(task.seen[:-1]) == {POLL} and task.seen[-1] == COMMIT  # the flush on stop
    assert loop.call_watch.current is None
