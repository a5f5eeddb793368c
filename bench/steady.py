"""Connectors measured in steady state: create them on a worker (this project's or
Kafka Connect's), wait until every task has committed, then count the records
committed over a window by the topic's last stable offsets
(``bench.common.measure_window``), with no consumer reading the topic.

Shared by ``bench.scaling`` (1 to 8 tasks) and ``bench.project`` (the
"window" method of the single-connector scenarios, the way the limit is
measured too: ``bench.limit.run_limit_window``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import (
    CommittedOffsets,
    Measurement,
    create_topic,
    measure_window,
    tree_cpu_seconds,
)

Roots = Callable[[], list[int]]
# Input files: enough lines for one task alone at up to this rate, from its
# start through the window (the first of 8 Kafka Connect connectors starts up to
# ~5 s before the last, but shares the CPUs with the others once they run).
INPUT_RATE = 1_200_000
INPUT_LEAD_S = 3.0
INPUT_VALUE_SIZE = 100


def measure_steady(worker: Any, configs: list[dict[str, str]], window_s: float, tasks: int, *,
                   partitions: int, value_size: int, warmup_s: float,
                   transactions: Callable[[int, float], int], roots: Roots | None = None,
                   cores: int | None = None, inputs: list[Path] | None = None,
                   placement: Callable[[list[str]], str | None] | None = None,
                   prefix: str = "steady") -> Measurement:
    """Create ``configs`` (one connector each, ``tasks`` tasks in all) writing one
    new topic of ``partitions`` partitions; once every task has committed and
    ``warmup_s`` more, count the records committed over ``window_s`` seconds;
    delete the connectors. CPU: the process trees of ``roots`` (default: the
    worker's) over the window. ``transactions(records, seconds)``: how many
    transactions the window held (the sources' boundary says)."""
    run = f"{prefix}-{uuid.uuid4().hex[:8]}"
    topic = f"{run}-out"
    create_topic(worker.bootstrap, topic, partitions)
    names = [f"{run}-{i}" for i in range(len(configs))]
    visible = CommittedOffsets(worker.bootstrap, topic, partitions)
    pids = roots or (lambda: [pid_of(worker)])
    created = time.time()
    try:
        for name, config in zip(names, configs, strict=True):
            r = worker.rest("POST", "/connectors", json={
                "name": name, "config": {**config, "topic": topic}})
            if r.status_code != 201:
                raise RuntimeError(f"create failed: {r.status_code} {r.text}")
        window = measure_window(
            visible, window_s, lambda: sum(tree_cpu_seconds(pid) for pid in pids()),
            started=created, ready=lambda: all_committed(worker, names, tasks),
            warmup_s=warmup_s, timeout=300, poll_s=0.2)
        if inputs is not None:
            check_not_exhausted(worker, names, inputs)
        states = task_states(worker, names)
        if states != ["RUNNING"] * tasks:
            raise RuntimeError(f"expected {tasks} RUNNING tasks, status shows {states}")
        return Measurement(
            records=window.records, value_size=value_size, seconds=window.seconds,
            cpu_seconds=window.cpu_seconds,
            transactions=max(1, transactions(window.records, window.seconds)),
            startup_seconds=window.ready_seconds, cores=cores,
            placement=placement(names) if placement else None)
    finally:
        delete(worker, names)


def offsets(worker: Any, names: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in names:
        r = worker.rest("GET", f"/connectors/{name}/offsets")
        if r.status_code == 200:
            out += r.json().get("offsets", [])
    return out


def all_committed(worker: Any, names: list[str], tasks: int) -> bool:
    """True once every task has committed a transaction: one committed source
    offset per task (one source partition or file per task), and no task failed."""
    task_states(worker, names)  # raises if one failed
    return sum(1 for o in offsets(worker, names) if o.get("offset")) >= tasks


def check_not_exhausted(worker: Any, names: list[str], inputs: list[Path]) -> None:
    """Every file task was still reading when the window closed."""
    size = max(p.stat().st_size for p in inputs)
    done = [o for o in offsets(worker, names)
            if int(o.get("offset", {}).get("position", 0)) >= size]
    if done:
        raise RuntimeError(f"{len(done)} task(s) reached the end of their input within the "
                           f"window: raise INPUT_RATE")


def task_states(worker: Any, names: list[str]) -> list[str]:
    states = []
    for name in names:
        r = worker.rest("GET", f"/connectors/{name}/status")
        if r.status_code != 200:
            return []
        tasks = r.json().get("tasks", [])
        failed = [t for t in tasks if t.get("state") == "FAILED"]
        if failed:
            raise RuntimeError(f"{name}: task failed: {failed[0].get('trace', '')[:2000]}")
        states += [t["state"] for t in tasks]
    return states


def delete(worker: Any, names: list[str]) -> None:
    """Delete every connector, then wait until they and their tasks are gone."""
    for name in names:
        worker.rest("DELETE", f"/connectors/{name}")

    def gone() -> bool:
        if set(names) & set(worker.rest("GET", "/connectors").json()):
            return False
        return not any(s["connector"] in names for s in worker.slots())

    wait(gone, 120, f"connectors {names} deleted")


def pid_of(worker: Any) -> int:
    assert worker.proc is not None
    return int(worker.proc.pid)


def wait(ok: Callable[[], bool], timeout: float, what: str,
         show: Callable[[], Any] | None = None, interval: float = 0.2) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ok():
            return
        time.sleep(interval)
    raise RuntimeError(f"timed out waiting for {what}" + (f": {show()}" if show else ""))


# -- input files that do not run out within a window ------------------------------


def input_lines(window_s: float) -> int:
    return int(INPUT_RATE * (window_s + INPUT_LEAD_S))


def inputs(workdir: Path, tasks: int, window_s: float) -> list[Path]:
    """One input path per task: hard links of one file (written once) of
    ``input_lines`` lines of ``INPUT_VALUE_SIZE`` B as JSON strings. Every task
    reads its own path from the start."""
    lines = input_lines(window_s)
    first = workdir / f"steady-{lines}-0.txt"
    if not first.exists():
        write_lines(first, lines)
    paths = [first]
    for i in range(1, tasks):
        path = first.with_name(f"steady-{lines}-{i}.txt")
        if not path.exists():
            os.link(first, path)
        paths.append(path)
    return paths


def write_lines(path: Path, lines: int, chunk: int = 100_000) -> None:
    """The lines of ``bench.project.write_lines``, written a chunk at a time."""
    body = "y" * (INPUT_VALUE_SIZE - 12)
    with path.open("w") as out:
        for start in range(0, lines, chunk):
            out.write("".join(f"{i:010d}{body}\n" for i in range(start, min(lines, start + chunk))))
