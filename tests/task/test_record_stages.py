"""The per-record stages against the real broker: transforms that drop records,
errors.* tolerance, header conversion and the missing-topic check, in both loops.

The chain here is a stand-in (pure logic) for connect_runtime.transforms; what
is claimed is how the loops and Kafka treat what it decides.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

import orjson
import pytest
from confluent_kafka import Producer
from support.kafka import read_topic, wait_for
from test_at_least_once_loop import Running, latest_offsets
from test_exactly_once_loop import ScriptedTask, read_committed, run_until

from connect_runtime.api.record import SourceRecord
from connect_runtime.converters import SimpleHeaderConverter, load_converter
from connect_runtime.errors import DataException
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.boundaries import BoundaryPolicy
from connect_runtime.task.error_handler import ErrorHandler
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome
from connect_runtime.task.metrics import TaskMetrics

T = TypeVar("T")


class DropOdd:
    """Drops records whose value has an odd seq; tags the others."""

    def __init__(self) -> None:
        self.closed = False

    def apply(self, record: SourceRecord,
              run: Callable[[str, Callable[[], T]], T] | None = None) -> SourceRecord | None:
        def stage() -> SourceRecord | None:
            if record.value["seq"] % 2:
                return None
            return dataclasses.replace(record, value={**record.value, "tag": "even"})
        return run("transform 'drop-odd' (test)", stage) if run else stage()  # type: ignore[arg-type,return-value]

    def close(self) -> None:
        self.closed = True


class PickyConverter:
    """A JSON-ish converter that cannot encode seq 4."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        pass

    def from_connect(self, topic: str, schema: Any, value: Any) -> bytes | None:
        if value.get("seq") == 4:
            raise DataException(f"cannot encode seq 4 for {topic}")
        return orjson.dumps(value)


def seqs(n: int, topic: str) -> list[SourceRecord]:
    return [SourceRecord({"p": 0}, {"seq": i + 1}, topic, value={"seq": i}) for i in range(n)]


def deps(bootstrap: str, task: ScriptedTask, offsets: str, producer: Producer,
         **extra: Any) -> LoopDeps:
    return LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}),
        key_converter=load_converter("StringConverter", {}, True),
        value_converter=extra.pop("value_converter", None) or PickyConverter(),
        signals=LoopSignals(), **extra)


def eos_loop(bootstrap: str, task: ScriptedTask, offsets: str, txn_id: str,
             **extra: Any) -> ExactlyOnceTaskLoop:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id,
                         "linger.ms": 5})
    producer.init_transactions(30)
    return ExactlyOnceTaskLoop(deps(bootstrap, task, offsets, producer, **extra),
                               boundary=BoundaryPolicy("poll", 0, None), transaction_timeout_s=30)


def test_exactly_once_dropped_and_skipped_records_still_advance_offsets_in_the_transaction(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = ScriptedTask([seqs(10, out)])
    chain = DropOdd()
    metrics = TaskMetrics("exactly-once")
    loop = eos_loop(kafka_bootstrap, task, offsets, unique_name("txn"), transforms=chain,
                    errors=ErrorHandler(label="c-0", tolerate_all=True), metrics=metrics)
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    # Odd seqs were dropped by the chain, seq 4 skipped by tolerance; one transaction.
    assert [v for _, _, v in read_committed(kafka_bootstrap, out)] == [
        {"seq": s, "tag": "even"} for s in (0, 2, 6, 8)]
    assert metrics.snapshot().txn_size_max == 4
    stored = read_committed(kafka_bootstrap, offsets)
    assert [v for _, _, v in stored] == [{"seq": 10}]  # past the dropped record 9
    # commit_record hears of every polled record; dropped ones have no metadata.
    assert [r.source_offset["seq"] for r, _ in task.committed] == list(range(1, 11))  # type: ignore[index]
    assert [m is None for _, m in task.committed] == [s % 2 == 1 or s == 4 for s in range(10)]
    assert loop._sender.errors.counts.records_skipped == 1


def test_without_tolerance_a_converter_error_fails_the_task_and_commits_nothing(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    task = ScriptedTask([seqs(3, out), seqs(6, out)[3:]])
    loop = eos_loop(kafka_bootstrap, task, offsets, unique_name("txn"))
    with pytest.raises(DataException, match=f"cannot encode seq 4 for {out}"):
        run_until(loop, lambda: False, timeout=10)
    assert [v["seq"] for _, _, v in read_committed(kafka_bootstrap, out)] == [0, 1, 2]
    assert [v for _, _, v in read_committed(kafka_bootstrap, offsets)] == [{"seq": 3}]


def test_at_least_once_dropped_records_are_done_at_once_and_their_offsets_flush(
        kafka_bootstrap: str, topics: tuple[str, str]) -> None:
    out, offsets = topics
    task = ScriptedTask([seqs(10, out)])  # type: ignore[arg-type]
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    loop = AtLeastOnceTaskLoop(
        deps(kafka_bootstrap, task, offsets, producer, transforms=DropOdd(),
             errors=ErrorHandler(label="c-0", tolerate_all=True)),
        offset_flush_interval_s=0.2, offset_flush_timeout_s=5)
    running = Running(loop)  # type: ignore[arg-type]
    wait_for(lambda: latest_offsets(kafka_bootstrap, offsets) == {0: {"seq": 10}}, 15,
             "the offset past the last (dropped) record")
    assert running.stop() is Outcome.STOPPED
    assert [r["value"]["seq"] for r in read_topic(kafka_bootstrap, out)] == [0, 2, 6, 8]


def test_a_record_for_a_missing_topic_fails_naming_the_topic_and_the_fix(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    missing = unique_name("missing")
    task = ScriptedTask([seqs(2, out), seqs(1, missing)])
    loop = eos_loop(kafka_bootstrap, task, offsets, unique_name("txn"),
                    value_converter=load_converter("JsonConverter", {}, False))
    with pytest.raises(DataException) as failed:
        run_until(loop, lambda: False, timeout=10)
    message = str(failed.value)
    assert f"topic {missing!r}, which does not exist" in message
    assert "topic.creation.default.replication.factor" in message
    assert [v["seq"] for _, _, v in read_committed(kafka_bootstrap, out)] == [0, 1]


def test_header_values_are_converted_or_refused_by_name(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    good = SourceRecord({"p": 0}, {"seq": 1}, out, value={"seq": 0},
                        headers=[("s", "text"), ("b", b"\x00raw"), ("n", None)])
    bad = SourceRecord({"p": 0}, {"seq": 2}, out, value={"seq": 1}, headers=[("count", 3)])
    task = ScriptedTask([[good], [bad]])
    loop = eos_loop(kafka_bootstrap, task, offsets, unique_name("txn"),
                    value_converter=load_converter("JsonConverter", {}, False))
    with pytest.raises(DataException, match=r"header 'count' of type int"):
        run_until(loop, lambda: False, timeout=10)
    [record] = read_topic(kafka_bootstrap, out)
    assert record["headers"] == [("s", b"text"), ("b", b"\x00raw"), ("n", None)]


def test_the_default_header_converter_writes_connects_text_for_typed_values(
        kafka_bootstrap: str, topics: tuple[str, str], unique_name: Callable[[str], str]) -> None:
    out, offsets = topics
    record = SourceRecord({"p": 0}, {"seq": 1}, out, value={"seq": 0},
                          headers=[("count", 3), ("ok", True), ("s", "text"), ("b", b"\x01")])
    task = ScriptedTask([[record]])
    loop = eos_loop(kafka_bootstrap, task, offsets, unique_name("txn"),
                    value_converter=load_converter("JsonConverter", {}, False),
                    header_converter=SimpleHeaderConverter())
    assert run_until(loop, lambda: task.commits >= 1) is Outcome.STOPPED
    [written] = read_topic(kafka_bootstrap, out)
    assert written["headers"] == [("count", b"3"), ("ok", b"true"), ("s", b"text"),
                                  ("b", b"\x01")]
