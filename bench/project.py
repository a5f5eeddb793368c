"""This project: connectors on a real worker (Spark local[*]) against the same broker.

Two methods (``bench.run --method``): ``run_connector`` ("count") writes a fixed
number of records and times them with a ``read_committed`` consumer reading the
topic meanwhile; ``run_connector_window`` ("window") runs a source that does not
end and counts the records committed over a steady-state window by the topic's
last stable offsets, without a consumer, as ``bench.limit.run_limit_window``
measures the limit.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import (
    WARMUP_S,
    CommittedCounter,
    Measurement,
    WorkerProcess,
    create_topic,
    free_port,
    rss_mb,
    tree_cpu_seconds,
)
from bench.steady import measure_steady


def start_worker(bootstrap: str, workdir: Path) -> WorkerProcess:
    worker = WorkerProcess(bootstrap, f"bench-{uuid.uuid4().hex[:8]}", free_port(), workdir,
                           # local[*] on a 2-core machine has 2 task slots, and every task holds
                           # one while it runs: at least 4 threads for the 4-task runs.
                           {"spark.master": f"local[{max(os.cpu_count() or 1, 4)}]",
                            "spark.driver.memory": "1g"})
    return worker.start()


def _wait_json(worker: Any, path: str, ok: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = worker.rest("GET", path)
        if r.status_code == 200 and ok(r.json()):
            return
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting on {path}")


def run_connector(worker: Any, config: dict[str, str], records: int, partitions: int,
                  value_size: int, transactions_hint: int, timeout: float = 600) -> Measurement:
    """Create a connector writing ``records`` records, measure, delete it.

    ``transactions_hint``: the number of transactions (poll boundary: records /
    batch size), or minus the interval in ms (interval boundary: one transaction
    per interval over the measured time).
    """
    name = f"bench-{uuid.uuid4().hex[:8]}"
    topic = f"{name}-out"
    create_topic(worker.bootstrap, topic, partitions)
    counter = CommittedCounter(worker.bootstrap, topic, partitions, records)
    assert worker.proc is not None
    cpu0 = tree_cpu_seconds(worker.proc.pid)
    created = time.time()
    r = worker.rest("POST", "/connectors", json={"name": name, "config": {**config,
                                                                           "topic": topic}})
    if r.status_code != 201:
        raise RuntimeError(f"create failed: {r.status_code} {r.text}")
    try:
        if not counter.wait(timeout):
            raise RuntimeError(f"only {counter.count} of {records} records arrived")
        cpu = tree_cpu_seconds(worker.proc.pid) - cpu0
        slots = [s for s in worker.slots() if s["connector"] == name and s.get("pid")]
        task_rss = [m for s in slots if (m := rss_mb(int(s["pid"]))) is not None]
        assert counter.first is not None and counter.last is not None
        first_created = counter.first_created or counter.first
        seconds = counter.last - first_created
        if transactions_hint < 0:  # an interval in ms: one transaction per interval
            transactions_hint = max(1, round(seconds * 1000 / -transactions_hint))
        return Measurement(
            records=records, value_size=value_size, seconds=seconds,
            cpu_seconds=cpu, transactions=transactions_hint,
            startup_seconds=counter.first - created,
            latency_p50_ms=counter.percentile(0.5), latency_p99_ms=counter.percentile(0.99),
            worker_rss_mb=rss_mb(worker.proc.pid),
            task_rss_mb=max(task_rss) if task_rss else None)
    finally:
        counter.stop()
        _delete(worker, name)


def run_connector_window(worker: Any, config: dict[str, str], tasks: int, value_size: int,
                         boundary: str, size_or_ms: int, window_s: float,
                         inputs: list[Path] | None = None) -> Measurement:
    """Create a connector whose source does not run out within the window (the
    sequence connector without ``max.records``; a file source over ``inputs``,
    checked afterwards), ``tasks`` tasks writing a new topic of ``tasks``
    partitions; once every task has committed and ``WARMUP_S`` more, count the
    records committed over ``window_s`` seconds (``bench.steady``). CPU: the
    worker's process tree (for Kafka Connect: its JVM) over the window."""
    def transactions(records: int, seconds: float) -> int:
        if boundary == "poll":  # one per poll of ``size_or_ms`` records
            return round(records / size_or_ms)
        return round(tasks * seconds * 1000 / size_or_ms)

    m = measure_steady(worker, [config], window_s, tasks, partitions=tasks,
                       value_size=value_size, warmup_s=WARMUP_S, transactions=transactions,
                       inputs=inputs, prefix="bench")
    assert worker.proc is not None
    m.worker_rss_mb = rss_mb(worker.proc.pid)
    return m


def _delete(worker: Any, name: str) -> None:
    """Delete the connector and wait until its tasks are gone (no overlap with the next)."""
    worker.rest("DELETE", f"/connectors/{name}")
    _wait_json(worker, "/connectors", lambda names: name not in names, 120)
    if isinstance(worker, WorkerProcess):
        _wait_json(worker, "/internal/tasks",
                   lambda slots: not any(s["connector"] == name for s in slots), 120)


def sequence_config(tasks: int, records: int, value_size: int, boundary: str,
                    size_or_ms: int, rate: float = 0, emit_batches: bool = True,
                    ) -> dict[str, str]:
    return {"connector.class": "SequenceSourceConnector", "tasks.max": str(tasks),
            "partitions": str(tasks), "max.records": str(records // tasks),
            "record.size.bytes": str(value_size), "rate.per.sec": str(rate),
            "emit.batches": str(emit_batches).lower(),
            **boundary_config(boundary, size_or_ms, interval_batch=1000)}


def boundary_config(boundary: str, size_or_ms: int, interval_batch: int) -> dict[str, str]:
    """``poll``: transactions of ``size_or_ms`` records (the poll batch size);
    ``interval``: one every ``size_or_ms`` ms, polls of ``interval_batch``."""
    if boundary == "poll":
        return {"batch.size": str(size_or_ms)}
    return {"batch.size": str(interval_batch), "transaction.boundary": "interval",
            "transaction.boundary.interval.ms": str(size_or_ms)}


def write_lines(path: Path, records: int, value_size: int) -> None:
    """``records`` lines whose JSON string value is about ``value_size`` bytes."""
    body = "y" * max(1, value_size - 12)
    with path.open("w") as out:
        for i in range(records):
            out.write(f"{i:010d}{body}\n")


def write_inputs(workdir: Path, records: int, value_size: int) -> Path:
    """The input file of ``records`` lines in ``workdir``, written once and reused
    by every file scenario of that size (ours and Kafka Connect's)."""
    path = workdir / f"input-{records}x{value_size}.txt"
    if not path.exists():
        write_lines(path, records, value_size)
    return path


def file_config(path: Path, boundary: str, size_or_ms: int,
                connector_class: str = "FileStreamSourceConnector") -> dict[str, str]:
    """One file-source task over ``path``; ``batch.size`` 2,000 with ``interval``
    (Kafka Connect's default), or the poll transaction size."""
    return {"connector.class": connector_class, "file": str(path), "tasks.max": "1",
            **boundary_config(boundary, size_or_ms, interval_batch=2000)}


def measure_recovery(worker: WorkerProcess, timeout: float = 120) -> float:
    """SIGKILL a task's Python worker, restart the task by REST: seconds from the
    kill to the first committed record produced after it."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    topic = f"{name}-out"
    create_topic(worker.bootstrap, topic, 1)
    config = sequence_config(1, 0, 100, "poll", 1000, rate=20_000) | {"max.records": "0",
                                                                       "topic": topic}
    worker.rest("POST", "/connectors", json={"name": name, "config": config})
    counter = CommittedCounter(worker.bootstrap, topic, 1, 1 << 62)
    try:
        _wait_json(worker, f"/connectors/{name}/status",
                   lambda s: [t["state"] for t in s.get("tasks", [])] == ["RUNNING"], 120)
        time.sleep(2)
        slot = next(s for s in worker.slots() if s["connector"] == name)
        killed = time.time()
        os.kill(int(slot["pid"]), signal.SIGKILL)
        _wait_json(worker, f"/connectors/{name}/status",
                   lambda s: [t["state"] for t in s.get("tasks", [])] == ["FAILED"], 60)
        worker.rest("POST", f"/connectors/{name}/tasks/0/restart")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            arrival = counter.first_arrival_created_after(killed)
            if arrival is not None:
                return arrival - killed
            time.sleep(0.05)
        raise RuntimeError("the task did not recover")
    finally:
        counter.stop()
        _delete(worker, name)

