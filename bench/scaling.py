"""Scaling across tasks and executors (docs/benchmarks.md#scaling): aggregate and per-core
throughput with 1, 2, 4 and 8 tasks, per setup.

    .venv/bin/python -m bench.run --bootstrap-server HOST:PORT --only scaling

Setups, each with ``tasks.max`` = 1, 2, 4, 8 (``TASK_COUNTS``):

* ``local[8], sequence``: one worker of this project with Spark ``local[8]``
  (every task holds a Spark slot while it runs, so 8 tasks need 8 slots), the
  sequence connector, one source partition per task.
* ``local[8], file``: the same worker, this project's file source, one input
  file per task (``files``, one connector with ``tasks.max`` = N): the
  like-for-like counterpart of the Kafka Connect setup.
* ``standalone 2x4, sequence``: one worker whose Spark master is a real Spark
  standalone cluster on loopback, ``SparkStandaloneCluster`` from
  ``tests/support/spark_standalone.py`` (imported from the tests directory, which
  ``bench.common`` puts on ``sys.path`` for the tests' support package): 2 Spark
  Workers advertising 4 cores each, ``spark.executor.cores=4``,
  ``spark.cores.max=8``: exactly 2 executor JVMs, one per Worker, with 4 task
  slots each, so 8 tasks fit. Those "cores" are Spark scheduling slots: on a
  2-core machine the 8 slots share the same 2 CPUs as everything else.
* ``Kafka Connect, file``: Apache Kafka Connect 4.1.1 (``bench.kafka_connect``),
  ``FileStreamSourceConnector``, which makes one task whatever ``tasks.max``
  says (one file, one task): N tasks are N connectors of one task and one
  input file each, all in the one Connect worker.

Every scenario: 100 B values, ``transaction.boundary=interval`` every 100 ms
(polls of 1,000 records for the sequence connector, 2,000 lines for the file
sources, as in ``bench.project``), one output topic of 8 partitions for all
tasks. The sources do not end: the sequence connector runs without
``max.records``; the input files are hard links of one file large enough for
the window (``bench.steady.input_lines``).

Measured: steady-state throughput with all N tasks running. Once every task
has committed a transaction (one committed source offset per task, from
``GET /connectors/{name}/offsets``) and 0.5 s more, a window of ``window_s``
seconds (5 s x ``--scale``) opens; the records committed in it are the
difference of the topic's last stable offsets (ListOffsets with
READ_COMMITTED, summed over the partitions: what a ``read_committed``
consumer can see) at its two ends. No consumer reads the topic, so measuring
takes no CPU from the setup. Counting from the first record of a fixed count
(``bench.project``'s method) would measure the start of N tasks one after
another (up to 5 s for Kafka Connect's 8 connectors) rather than N tasks
running; start-up is reported apart (creation until every task has
committed).

Aggregate = records in the window / its length. Per core = aggregate / the
CPUs the setup's processes can use: ``os.cpu_count()`` (the worker, its Spark
JVM, the executors, Kafka Connect's JVM and the broker all share them); for the
cluster, the cores Spark granted its executors if fewer. CPU s per million
records: the worker's process tree over the window, plus the executor JVMs'
trees (their PySpark daemons and task workers) on the cluster; for Kafka
Connect its JVM. The broker's CPU is not counted anywhere.

Each setup first runs a throw-away warm-up (8 tasks, a 1 s window) so that the
executors' PySpark daemons, the Python workers and the JVMs' JIT are in place.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.common import (
    MIN_WINDOW_S,
    Measurement,
    Scenario,
    WorkerProcess,
    free_port,
    window_for,
)
from bench.project import boundary_config, sequence_config
from bench.steady import Roots, measure_steady
from bench.steady import inputs as _inputs
from bench.steady import pid_of as _pid
from bench.steady import wait as _wait

TASK_COUNTS = (1, 2, 4, 8)
PARTITIONS = 8
VALUE_SIZE = 100
INTERVAL_MS = 100
LOCAL_SLOTS = max(TASK_COUNTS)
SETTLE_S = 0.5  # after every task has committed, before the window opens
# The standalone cluster: 2 Workers x 4 cores, one 4-core executor on each.
CLUSTER_WORKERS = 2
CLUSTER_CORES_PER_WORKER = 4

SETUP_LOCAL = f"local[{LOCAL_SLOTS}], sequence"
SETUP_LOCAL_FILE = f"local[{LOCAL_SLOTS}], file"
SETUP_CLUSTER = f"standalone {CLUSTER_WORKERS}x{CLUSTER_CORES_PER_WORKER}, sequence"
SETUP_JAVA = "Kafka Connect, file"
SETUPS = (SETUP_LOCAL, SETUP_LOCAL_FILE, SETUP_CLUSTER, SETUP_JAVA)

Once = Callable[[int, float], Measurement]  # (tasks, window seconds)


def cpus() -> int:
    return os.cpu_count() or 1


__all__ = ["plot_scaling", "scaling_scenarios", "scaling_table", "window_for"]


def scaling_scenarios(bootstrap: str, runs: int, window_s: float, workdir: Path,
                      setups: tuple[str, ...] = SETUPS) -> list[Scenario]:
    """Every setup in ``setups`` with every task count, ``runs`` runs each."""
    out: list[Scenario] = []
    if SETUP_LOCAL in setups or SETUP_LOCAL_FILE in setups:
        with _local_worker(bootstrap, workdir) as worker:
            roots: Roots = lambda: [_pid(worker)]  # noqa: E731
            if SETUP_LOCAL in setups:
                out += _series(SETUP_LOCAL, runs, window_s, lambda n, w: _measure(
                    worker, [_sequence(n)], w, n, roots, cpus()))
            if SETUP_LOCAL_FILE in setups:
                def local_files(n: int, w: float) -> Measurement:
                    files = _inputs(workdir, n, window_s)
                    return _measure(worker, [_files_config(files)], w, n, roots, cpus(),
                                    inputs=files)

                out += _series(SETUP_LOCAL_FILE, runs, window_s, local_files)
    if SETUP_CLUSTER in setups:
        with _cluster_worker(bootstrap, workdir) as (worker, cluster):
            roots = lambda: [_pid(worker), *(e.pid for e in cluster.executors())]  # noqa: E731
            granted = sum(int(a.get("cores", 0)) for a in cluster.applications()) or cpus()
            out += _series(SETUP_CLUSTER, runs, window_s, lambda n, w: _measure(
                worker, [_sequence(n)], w, n, roots, min(granted, cpus()),
                placement=lambda names: _placement(worker, cluster, names)))
    if SETUP_JAVA in setups:
        from bench.kafka_connect import CONNECTOR_CLASS, JavaWorker

        java = JavaWorker(bootstrap, workdir)
        try:
            java.start()

            def java_files(n: int, w: float) -> Measurement:
                # One connector per task: FileStreamSourceConnector makes one task.
                files = _inputs(workdir, n, window_s)
                return _measure(java, [_file_config(p, CONNECTOR_CLASS) for p in files], w, n,
                                lambda: [_pid(java)], cpus(), inputs=files)

            out += _series(SETUP_JAVA, runs, window_s, java_files)
        finally:
            java.stop()
    return out


def _series(setup: str, runs: int, window_s: float, once: Once) -> list[Scenario]:
    """A warm-up run (8 tasks, a 1 s window), then every task count."""
    started = time.monotonic()
    once(max(TASK_COUNTS), MIN_WINDOW_S)
    print(f"  scaling/{setup}: warm-up done in {time.monotonic() - started:.0f} s", flush=True)
    out = []
    for tasks in TASK_COUNTS:
        scenario = Scenario("scaling", setup, tasks)
        for i in range(runs):
            m = once(tasks, window_s)
            scenario.runs.append(m)
            print(f"  scaling/{setup}, {tasks} tasks, run {i + 1}: "
                  f"{m.records_per_s:,.0f} rec/s, {m.records_per_s_per_core or 0:,.0f} per core, "
                  f"{m.cpu_s_per_million:.1f} CPU s/M, start {m.startup_seconds or 0:.1f} s"
                  f"{f', tasks per executor {m.placement}' if m.placement else ''}", flush=True)
        out.append(scenario)
    print(f"  scaling/{setup}: {time.monotonic() - started:.0f} s in all", flush=True)
    return out


# -- setups -------------------------------------------------------------------


@contextmanager
def _local_worker(bootstrap: str, workdir: Path) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(bootstrap, f"bench-scaling-{uuid.uuid4().hex[:8]}", free_port(),
                           workdir, {"spark.master": f"local[{LOCAL_SLOTS}]",
                                     "spark.driver.memory": "1g"})
    try:
        yield worker.start()
    finally:
        worker.stop()


@contextmanager
def _cluster_worker(bootstrap: str, workdir: Path) -> Iterator[tuple[WorkerProcess, Any]]:
    """A Spark standalone cluster (2 Workers x 4 cores) and a worker whose Spark
    app gets one 4-core executor on each; both stopped on the way out."""
    from support.spark_standalone import (
        SparkStandaloneCluster,  # tests/, on sys.path via bench.common
    )

    slots = CLUSTER_WORKERS * CLUSTER_CORES_PER_WORKER
    cluster = SparkStandaloneCluster(workdir / "spark", workers=CLUSTER_WORKERS,
                                     cores_per_worker=CLUSTER_CORES_PER_WORKER,
                                     memory_per_worker="2g")
    worker: WorkerProcess | None = None
    try:
        cluster.start()
        worker = WorkerProcess(
            bootstrap, f"bench-scaling-{uuid.uuid4().hex[:8]}", free_port(), workdir,
            {**cluster.driver_conf(), "spark.executor.cores": str(CLUSTER_CORES_PER_WORKER),
             "spark.cores.max": str(slots), "spark.executor.memory": "1g",
             "spark.driver.memory": "1g"}, env=cluster.driver_env())
        worker.start()
        _wait(lambda: len(cluster.executors()) >= CLUSTER_WORKERS, 180,
              f"{CLUSTER_WORKERS} executors on the standalone cluster")
        yield worker, cluster
    finally:
        if worker is not None:
            worker.stop()
        cluster.stop()


# -- connector configs and inputs ------------------------------------------------


def _sequence(tasks: int) -> dict[str, str]:
    """The sequence connector, one source partition per task, without end."""
    return sequence_config(tasks, 0, VALUE_SIZE, "interval", INTERVAL_MS) | {"max.records": "0"}


def _files_config(paths: list[Path]) -> dict[str, str]:
    """This project's file source: one connector, one task per file."""
    return {"connector.class": "FileStreamSourceConnector",
            "files": ",".join(map(str, paths)), "tasks.max": str(len(paths)),
            **boundary_config("interval", INTERVAL_MS, interval_batch=2000)}


def _file_config(path: Path, connector_class: str) -> dict[str, str]:
    return {"connector.class": connector_class, "file": str(path), "tasks.max": "1",
            **boundary_config("interval", INTERVAL_MS, interval_batch=2000)}


# -- one measurement ---------------------------------------------------------------


def _measure(worker: Any, configs: list[dict[str, str]], window_s: float, tasks: int,
             roots: Roots, cores: int, *, inputs: list[Path] | None = None,
             placement: Callable[[list[str]], str | None] | None = None) -> Measurement:
    """Create ``configs`` (one connector each, ``tasks`` tasks in all) writing one
    new topic; once every task has committed and ``SETTLE_S`` more, count the
    records committed over ``window_s`` seconds; delete the connectors
    (``bench.steady.measure_steady``)."""
    return measure_steady(
        worker, configs, window_s, tasks, partitions=PARTITIONS, value_size=VALUE_SIZE,
        warmup_s=SETTLE_S, roots=roots, cores=cores, inputs=inputs, placement=placement,
        transactions=lambda _, seconds: round(tasks * seconds * 1000 / INTERVAL_MS),
        prefix="scaling")


def _placement(worker: WorkerProcess, cluster: Any, names: list[str]) -> str | None:
    """Tasks per executor, e.g. ``"2+2"`` (Worker 0's executor first)."""
    pids = {int(s["pid"]) for s in worker.slots() if s["connector"] in names and s.get("pid")}
    per_worker = [0] * CLUSTER_WORKERS
    for executor in cluster.executors():
        per_worker[executor.worker] += len(pids & set(cluster.python_workers(executor.pid)))
    return "+".join(map(str, per_worker)) if sum(per_worker) else None


# -- results ---------------------------------------------------------------------


def scaling_table(scenarios: list[Scenario]) -> str:
    if not scenarios:
        return ""
    lines = [f"### Scaling: 1 to {max(TASK_COUNTS)} tasks (100 B, interval {INTERVAL_MS} ms, "
             f"{PARTITIONS} partitions, steady state)", "",
             "| setup | tasks | aggregate records/s | spread | per-core records/s | cores | "
             "CPU s / M records | start s | tasks per executor |",
             "|---|---|---|---|---|---|---|---|---|"]
    for s in scenarios:
        placements = sorted({r.placement for r in s.runs if r.placement})
        lines.append(
            f"| {s.name} | {s.tasks} | {_fmt(s.median('records_per_s'))} | "
            f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
            f"{_fmt(s.median('records_per_s_per_core'))} | {_fmt(s.median('cores'))} | "
            f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} | "
            f"{_fmt(s.median('startup_seconds'), '{:.1f}')} | "
            f"{', '.join(placements) or '-'} |")
    return "\n".join(lines)


def _fmt(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def plot_scaling(scenarios: list[Scenario], path: Path) -> None:
    """Aggregate and per-core records/s, and CPU s per million records, against
    tasks; one line per setup."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    panels = (("records_per_s", "aggregate records/s", "Aggregate throughput"),
              ("records_per_s_per_core", "records/s per core",
               f"Per core ({cpus()} cores on this machine)"),
              ("cpu_s_per_million", "CPU s per million records",
               "CPU cost (worker tree / Connect JVM)"))
    for setup in dict.fromkeys(s.name for s in scenarios):
        series = sorted((s for s in scenarios if s.name == setup), key=lambda s: s.tasks)
        for ax, (attr, _, _) in zip(axes, panels, strict=True):
            ax.plot([s.tasks for s in series], [s.median(attr) or 0 for s in series],
                    marker="o", label=setup)
    thousands = FuncFormatter(lambda v, _: f"{v / 1000:,.0f}k")
    for ax, (attr, label, title) in zip(axes, panels, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(TASK_COUNTS), [str(t) for t in TASK_COUNTS])
        ax.set_xlabel("tasks")
        ax.set_ylabel(label)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
        if attr != "cpu_s_per_million":
            ax.yaxis.set_major_formatter(thousands)
    axes[0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Scaling, 100 B records, interval {INTERVAL_MS} ms transactions, "
                 f"{PARTITIONS} partitions, steady state; {cpus()}-core machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
