"""The exactly-once task loop alone, in this process: no worker, no Spark.

    .venv/bin/python -m bench.task_loop --bootstrap-server HOST:PORT \\
        [--connector sequence|file] [--boundary poll|interval] [--size 10000] \\
        [--records 1000000] [--value-size 100]

Runs :class:`~connect_runtime.task.exactly_once_loop.ExactlyOnceTaskLoop` over one
task of the sequence or the file connector against a real broker, with the
worker's converters (``StringConverter`` keys, ``JsonConverter`` values) and the
task producer's settings, until every record is committed; prints records/s and
CPU seconds per million records of this process (librdkafka's threads
included). It is what the profile in docs/benchmarks.md samples::

    py-spy record -r 200 -o profile.svg -- .venv/bin/python -m bench.task_loop ...

Without Spark and the worker around it, the figure is the loop's own per-record
cost; ``bench.run`` measures the whole product.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from confluent_kafka import Producer

from bench.common import Measurement, create_topic
from bench.project import write_lines
from connect_runtime.api.record import SourcePartition
from connect_runtime.api.task import SourceTask
from connect_runtime.connectors.file import TASK_FILES, FileStreamSourceTask
from connect_runtime.connectors.sequence import TASK_ID, TASK_PARTITIONS, SequenceSourceTask
from connect_runtime.converters import Converter, load_converter
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.task.boundaries import BoundaryPolicy
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome
from connect_runtime.task.metrics import TaskMetrics
from connect_runtime.task.startup import TRANSACTIONAL_PRODUCER_DEFAULTS, TaskContext


class _NoOffsets:
    """An offsets reader of a connector that never committed: every task starts at 0."""

    def offset(self, partition: SourcePartition) -> dict[str, object] | None:
        return None

    def offsets(self, partitions: Iterable[SourcePartition]
                ) -> list[tuple[SourcePartition, dict[str, object] | None]]:
        return [(p, None) for p in partitions]


def _stop_after(loop: ExactlyOnceTaskLoop, metrics: TaskMetrics, records: int) -> None:
    """Stop ``loop`` once ``records`` records are committed (checked in task.commit)."""
    task = loop.task
    original = task.commit

    def commit() -> None:
        original()
        if metrics.records_committed >= records:
            loop.signals.request_stop()
    task.commit = commit  # type: ignore[method-assign]


def make_task(connector: str, topic: str, records: int, value_size: int, batch: int,
              workdir: Path, emit_batches: bool = True) -> SourceTask:
    """A started task; ``emit_batches=False`` makes the sequence task return one
    SourceRecord per record instead of RecordBatch columns (the file task always
    returns batches)."""
    task: SourceTask
    if connector == "sequence":
        config = {"topic": topic, "batch.size": str(batch), "max.records": str(records),
                  "record.size.bytes": str(value_size), TASK_PARTITIONS: "0", TASK_ID: "0",
                  "emit.batches": str(emit_batches).lower()}
        task = SequenceSourceTask()
    else:
        path = workdir / "input.txt"
        write_lines(path, records, value_size)
        config = {"topic": topic, "batch.size": str(batch), TASK_FILES: str(path)}
        task = FileStreamSourceTask()
    task.initialize(TaskContext(config, _NoOffsets()))
    task.start(config)
    return task


def run_loop(bootstrap: str, connector: str, boundary: str, size: int, records: int,
             value_size: int, emit_batches: bool = True) -> Measurement:
    """One run: ``records`` records of ``value_size`` bytes through the loop."""
    with tempfile.TemporaryDirectory() as tmp:
        batch = size if boundary == "poll" else 1000
        return drive(bootstrap, lambda topic: make_task(
            connector, topic, records, value_size, batch, Path(tmp), emit_batches),
            records, load_converter("JsonConverter", {}, False),
            BoundaryPolicy(boundary, size if boundary == "interval" else 0, None),
            value_size)


def drive(bootstrap: str, make: Callable[[str], SourceTask], records: int,
          value_converter: Converter, boundary: BoundaryPolicy,
          value_size: int = 0) -> Measurement:
    """Run the task ``make(topic)`` returns through the exactly-once loop, with
    ``StringConverter`` keys and ``value_converter``, on fresh topics, until
    ``records`` are committed; its wall time and this process's CPU time."""
    suffix = uuid.uuid4().hex[:8]
    topic, offsets = f"bench-loop-{suffix}", f"bench-loop-offsets-{suffix}"
    create_topic(bootstrap, topic, 1)
    create_topic(bootstrap, offsets, 1)
    task = make(topic)
    producer = Producer({"bootstrap.servers": bootstrap, **TRANSACTIONAL_PRODUCER_DEFAULTS,
                         "transactional.id": f"bench-loop-{suffix}"})
    producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)
    # The slot's metrics, as the worker's slots have them: they count what is committed.
    metrics = TaskMetrics(TaskMode.EXACTLY_ONCE.value)
    loop = ExactlyOnceTaskLoop(
        LoopDeps(label="bench-0", connector="bench", task=task, producer=producer,
                 offsets_topic=offsets, forbidden_topics=frozenset({offsets}),
                 key_converter=load_converter("StringConverter", {}, True),
                 value_converter=value_converter, signals=LoopSignals(), metrics=metrics),
        boundary=boundary, transaction_timeout_s=60)
    _stop_after(loop, metrics, records)
    cpu0, t0 = os.times(), time.perf_counter()
    outcome = loop.run()
    elapsed = time.perf_counter() - t0
    cpu1 = os.times()
    task.stop()
    producer.flush(30)
    if outcome is not Outcome.STOPPED or metrics.records_committed < records:
        raise SystemExit(f"loop ended {outcome.value} after {metrics.records_committed} records")
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return Measurement(records=metrics.records_committed, value_size=value_size,
                       seconds=elapsed, cpu_seconds=cpu, transactions=metrics.commits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--connector", choices=("sequence", "file"), default="sequence")
    parser.add_argument("--boundary", choices=("poll", "interval"), default="poll")
    parser.add_argument("--size", type=int, default=10_000,
                        help="poll: records per transaction; interval: milliseconds")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--records-form", action="store_true",
                        help="sequence: one SourceRecord per record instead of RecordBatch")
    args = parser.parse_args()
    for i in range(args.runs):
        m = run_loop(args.bootstrap_server, args.connector, args.boundary, args.size,
                     args.records, args.value_size, not args.records_form)
        print(f"{args.connector} {args.boundary} {args.size}, {args.value_size} B, run {i + 1}: "
              f"{m.records_per_s:,.0f} records/s, {m.cpu_s_per_million:.2f} CPU s / M records, "
              f"{m.txn_size:,.0f} records/transaction", flush=True)


if __name__ == "__main__":
    main()
