"""Density (docs/benchmarks.md#density): the memory, CPU, REST latency and start
time of N tasks.

N nearly idle (or busy) exactly-once source tasks, on this project's worker and on
Apache Kafka Connect 4.1.1, on the same broker, in one run.

    .venv/bin/python -m bench.density --bootstrap-server HOST:PORT [--tasks-per-process N]
        [--scale 1.0] [--scenarios idle-10,idle-40,idle-200,busy-40] [--sides ours,java]

(``bash bench/density.sh`` starts a broker of its own and calls this.)
``python -m bench.density --combine A.json B.json ...`` writes the full results
from partial ones (each side or scenario run on its own).

Scenarios (``--scenarios``, ``KIND-N``): ``idle-N`` is N tasks of ``--idle-rate``
(10) records/s each, ``busy-N`` N tasks of ``--busy-rate`` (1,000) records/s each;
the default is ``idle-10``, ``idle-40``, ``idle-200`` and ``busy-40``. Values of
about 100 B; ``transaction.boundary=interval`` every ``INTERVAL_MS`` (1 s) on both
sides (Kafka Connect's verifiable source returns one record per poll: with the
default ``poll`` boundary it would commit a transaction per record); one output
topic of ``PARTITIONS`` partitions per run.

* Ours: ONE ``SequenceSourceConnector`` with ``tasks.max`` = ``partitions`` = N
  (one source partition per task), ``rate.per.sec``, ``record.size.bytes`` 100,
  and ``tasks.per.process`` = ``--tasks-per-process`` (how many of its tasks one
  Spark slot, one Python process, hosts; 0, the default, leaves the key out: the
  worker's default, ``auto``, one process per core). The worker's Spark master is
  ``local[S]`` with S = the slots a process per task (or the given packing) needs
  + ``SPARE_SLOTS`` (``auto`` packs by the machine's cores, not by S).
* Kafka Connect: ONE ``org.apache.kafka.connect.tools.VerifiableSourceConnector``
  with ``tasks.max`` = N (each task its own source partition ``{"id": task}``),
  ``throughput`` = the same rate and ``complete.record.data=true`` (a JSON value of
  about 100 B), on a ``ConnectDistributed`` with
  ``exactly.once.source.support=enabled`` (``bench.kafka_connect``). The connector
  is in ``connect-test-plugins``, which Apache Kafka did not publish for 4.1.1: the
  4.0.2 jar, with ``kafka-server-common`` 4.1.1 for its ``ThroughputThrottler``, is
  added to the worker's classpath (``bench/kafka-connect/test-plugins/pom.xml``).
  Its tasks print two JSON lines per record to stdout (``poll`` and
  ``commitRecord``), which goes to ``/dev/null`` here (its log4j log goes to the
  log file, WARN and above): that printing is a cost of the test connector, not of
  Kafka Connect, and is in its CPU figure.

Each (scenario, side) gets a fresh worker (fresh group id, internal topics, free
port): nothing of an earlier scenario (idle Python workers PySpark keeps for reuse,
a JVM heap grown by an earlier run) is counted in a later one. Per run:

1. start the worker, wait ``BASELINE_SETTLE_S``; baseline = the worker's process
   tree with 0 tasks (ours: the worker's Python process and its Spark JVM; the
   PySpark daemon starts with the first task);
2. ``POST /connectors``; start time = from the POST until every one of the N
   tasks is RUNNING (``GET /connectors/{name}/status``) and has a committed source
   offset (``GET /connectors/{name}/offsets``, polled every ``POLL_S``; both sides
   serve it, KIP-875);
3. ``SETTLE_S`` x ``--scale`` seconds more (Kafka Connect's JIT compiler threads
   still took ~0.2 cores 30 s after its start in a trial with 10 idle tasks), then
   a window of ``WINDOW_S`` x ``--scale`` seconds:
   * CPU: utime + stime of the whole process tree over the window
     (``TreeCpu``), in cores (the JSON has it per memory interval too);
   * memory: RSS (``VmRSS``) and PSS (``smaps_rollup``) summed over the tree, every
     ``MEMORY_EVERY_S`` s; the table shows the medians. Ours: worker + Spark JVM +
     PySpark daemon + every Python process hosting tasks; Kafka Connect: its JVM.
     PSS divides each page among the processes sharing it: the Python processes
     PySpark forks share pages, which RSS counts once per process;
   * REST: ``GET /connectors/{name}/status`` and ``GET /connectors`` alternately,
     ``--rest-rate`` (20) requests/s in all, timed from this client, on one
     keep-alive connection;
   * every task committing: the committed offsets of all N source partitions
     advanced between the window's start and end; records/s = the sum of the
     offsets' advances / the time between the two reads (against N x rate).
4. stop the worker, and SIGKILL any process of its tree that outlived it.

Per task = total / N; marginal per task = (total - the baseline) / N.
``--threads`` also prints the CPU of each kind of thread over the window
(``bench.threads``; docs/benchmarks.md#idle-cost) and keeps it in the JSON.

Writes ``bench/results/density.json``, ``bench/results/density.md`` and
``docs/benchmarks-density.png`` (a partial run, ``--scenarios`` or ``--sides``
other than the defaults, writes ``bench/results/density-partial.*`` instead, and
its plot there) and prints the tables.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench import threads
from bench.common import (
    REPO,
    TreeCpu,
    WorkerProcess,
    create_topic,
    free_port,
    machine,
    process_tree,
    pss_mb,
    rss_mb,
    stat_fields,
)
from bench.control_plane import percentile

RESULTS = REPO / "bench" / "results"
PLOT = REPO / "docs" / "benchmarks-density.png"
TEST_PLUGINS_POM = REPO / "bench" / "kafka-connect" / "test-plugins" / "pom.xml"
TEST_PLUGINS = REPO / ".cache" / "kafka-connect-4.1.1" / "test-plugins"
VERIFIABLE_SOURCE = "org.apache.kafka.connect.tools.VerifiableSourceConnector"

DEFAULT_SCENARIOS = ("idle-10", "idle-40", "idle-200", "busy-40")
SIDES = ("ours", "java")
SIDE_LABELS = {"ours": "connect-runtime", "java": "Kafka Connect 4.1.1"}
IDLE_RATE = 10
BUSY_RATE = 1000
VALUE_SIZE = 100
INTERVAL_MS = 1000  # transaction.boundary.interval.ms, both sides
PARTITIONS = 8
SPARE_SLOTS = 2  # Spark slots beyond what the tasks need
WINDOW_S = 25.0  # x --scale
SETTLE_S = 15.0  # x --scale: after every task has committed, before the window
MIN_WINDOW_S = 5.0
BASELINE_SETTLE_S = 5.0
MEMORY_EVERY_S = 5.0
POLL_S = 0.25
SUSTAINED = 0.95  # of N x rate: below it, the table says the side fell short
START_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Scenario:
    kind: str  # "idle" or "busy"
    tasks: int
    rate: int  # records/s per task

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.tasks}"


@dataclass
class Run:
    """One side of one scenario."""

    scenario: str
    side: str
    tasks: int
    rate: int
    tasks_per_process: int | None  # ours: the key's value (None: not set); Java: None
    baseline_rss_mb: float = 0.0
    baseline_pss_mb: float = 0.0
    rss_mb: float = 0.0
    pss_mb: float = 0.0
    rss_samples: list[float] = field(default_factory=list)
    pss_samples: list[float] = field(default_factory=list)
    cpu_cores_samples: list[float] = field(default_factory=list)  # per memory interval
    processes: int = 0  # in the tree, at the window's end
    threads: int = 0  # in the tree, at the window's end
    task_processes: int | None = None  # ours: distinct Python processes hosting the tasks
    cpu_cores: float = 0.0
    window_s: float = 0.0
    running_s: float | None = None  # POST -> all N tasks RUNNING
    start_s: float | None = None  # POST -> all N RUNNING and committed
    rest_p50_ms: float | None = None
    rest_p99_ms: float | None = None
    rest_max_ms: float | None = None
    rest_requests: int = 0
    rest_errors: int = 0
    rest_by_path: dict[str, dict[str, float | None]] = field(default_factory=dict)
    committing: int = 0  # tasks whose committed offset advanced during the window
    records_per_s: float = 0.0  # committed in the window, all tasks
    error: str | None = None
    # --threads: CPU ms/s by (process, thread group) over the window (bench.threads).
    thread_profile: list[dict[str, object]] = field(default_factory=list)

    @property
    def all_committing(self) -> bool:
        return self.committing >= self.tasks

    @property
    def rss_per_task(self) -> float:
        return self.rss_mb / self.tasks

    @property
    def pss_per_task(self) -> float:
        return self.pss_mb / self.tasks

    @property
    def marginal_rss(self) -> float:
        return (self.rss_mb - self.baseline_rss_mb) / self.tasks

    @property
    def marginal_pss(self) -> float:
        return (self.pss_mb - self.baseline_pss_mb) / self.tasks


def parse_scenarios(text: str, idle_rate: int, busy_rate: int) -> list[Scenario]:
    out = []
    for item in (s.strip() for s in text.split(",") if s.strip()):
        kind, _, n = item.partition("-")
        if kind not in ("idle", "busy") or not n.isdigit() or int(n) < 1:
            raise ValueError(f"scenario {item!r}: expected idle-N or busy-N")
        out.append(Scenario(kind, int(n), idle_rate if kind == "idle" else busy_rate))
    return out


# -- the workers -----------------------------------------------------------------------


def spark_slots(tasks: int, tasks_per_process: int) -> int:
    """Spark slots for ``tasks`` tasks, ``tasks_per_process`` to a slot (0, the
    worker's default: as many as a process per task would take, so ``auto`` is never
    short of slots)."""
    return math.ceil(tasks / max(tasks_per_process, 1)) + SPARE_SLOTS


def our_worker(bootstrap: str, workdir: Path, slots: int) -> WorkerProcess:
    return WorkerProcess(bootstrap, f"bench-density-{uuid.uuid4().hex[:8]}", free_port(),
                         workdir, {"spark.master": f"local[{slots}]",
                                   "spark.driver.memory": "1g",
                                   "value.converter.schemas.enable": "false"})


def test_plugins() -> Path:
    """The jars of ``bench/kafka-connect/test-plugins/pom.xml``, fetched once."""
    from bench.kafka_connect import maven_jars

    return maven_jars(TEST_PLUGINS_POM, TEST_PLUGINS)


def java_worker(bootstrap: str, workdir: Path) -> Any:
    """Kafka Connect 4.1.1 (``bench.kafka_connect.JavaWorker``) with the verifiable
    source on its classpath, stdout to /dev/null, its log4j log (WARN) to its log file."""
    from bench.kafka_connect import JavaWorker, fetch

    class VerifiableJavaWorker(JavaWorker):
        def start(self, timeout: float = 120) -> JavaWorker:
            libs, extra = fetch(), test_plugins()
            log4j = self.props.with_suffix(".log4j2.properties")
            log4j.write_text(
                "status = error\n"
                "appender.file.type = File\nappender.file.name = file\n"
                f"appender.file.fileName = {self.log}\n"
                "appender.file.layout.type = PatternLayout\n"
                "appender.file.layout.pattern = [%d] %p %m (%c)%n\n"
                "rootLogger.level = warn\nrootLogger.appenderRef.file.ref = file\n")
            with self.log.open("ab") as log:
                self.proc = subprocess.Popen(
                    ["java", "-Xms256m", "-Xmx1g", f"-Dlog4j2.configurationFile={log4j}",
                     "-cp", f"{libs}/*:{extra}/*",
                     "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
                    stdout=subprocess.DEVNULL, stderr=log, start_new_session=True)
            return self.wait_ready(timeout)

    return VerifiableJavaWorker(bootstrap, workdir)


def our_config(s: Scenario, topic: str, tasks_per_process: int) -> dict[str, str]:
    config = {"connector.class": "SequenceSourceConnector", "topic": topic,
              "tasks.max": str(s.tasks), "partitions": str(s.tasks), "max.records": "0",
              "rate.per.sec": str(s.rate), "batch.size": str(max(1, s.rate // 10)),
              "record.size.bytes": str(VALUE_SIZE), "transaction.boundary": "interval",
              "transaction.boundary.interval.ms": str(INTERVAL_MS)}
    if tasks_per_process > 0:
        config["tasks.per.process"] = str(tasks_per_process)
    return config


def java_config(s: Scenario, topic: str) -> dict[str, str]:
    return {"connector.class": VERIFIABLE_SOURCE, "topic": topic, "tasks.max": str(s.tasks),
            "throughput": str(s.rate), "complete.record.data": "true",
            "transaction.boundary": "interval",
            "transaction.boundary.interval.ms": str(INTERVAL_MS)}


# -- measurements ---------------------------------------------------------------------


def tree_memory(root: int) -> tuple[float, float, int, int]:
    """(RSS MB, PSS MB, processes, threads) of ``root`` and its descendants."""
    rss = pss = 0.0
    processes = threads = 0
    for pid in process_tree(root):
        r, p = rss_mb(pid), pss_mb(pid)
        if r is None:
            continue
        rss += r
        pss += p or 0.0
        processes += 1
        threads += _threads(pid)
    return rss, pss, processes, threads


def _threads(pid: int) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def _start_time(pid: int) -> str | None:
    """A live process's start time (``/proc/PID/stat`` field 22), which tells a pid's
    reuse apart; None for a zombie (dead, waiting for its parent) or no process."""
    try:
        fields = stat_fields(pid)
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


class RestLoad:
    """``GET /connectors/{name}/status`` and ``GET /connectors`` alternately at
    ``rate`` requests/s in all, on one keep-alive connection, timed here."""

    def __init__(self, url: str, name: str, rate: float) -> None:
        self._paths = [f"/connectors/{name}/status", "/connectors"]
        self._url, self._rate = url, rate
        self.durations: dict[str, list[float]] = {p: [] for p in self._paths}
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rest-load", daemon=True)

    def start(self) -> RestLoad:
        self._thread.start()
        return self

    def _run(self) -> None:
        with httpx.Client(base_url=self._url, timeout=30, trust_env=False) as client:
            due, i = time.monotonic(), 0
            while not self._stop.is_set():
                path = self._paths[i % len(self._paths)]
                t0 = time.perf_counter()
                try:
                    ok = client.get(path).status_code == 200
                except httpx.HTTPError:
                    ok = False
                self.durations[path].append((time.perf_counter() - t0) * 1000)
                self.errors += not ok
                i += 1
                due += 1 / self._rate
                self._stop.wait(max(0.0, due - time.monotonic()))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def _get(worker: Any, path: str) -> Any:
    r = worker.rest("GET", path)
    return r.json() if r.status_code == 200 else None


def task_states(worker: Any, name: str) -> list[str]:
    """The tasks' states; raises when one FAILED (with its trace)."""
    status = _get(worker, f"/connectors/{name}/status") or {}
    tasks = status.get("tasks", [])
    failed = [t for t in tasks if t.get("state") == "FAILED"]
    if failed:
        raise RuntimeError(f"{name}: task {failed[0].get('id')} FAILED: "
                           f"{failed[0].get('trace', '')[:2000]}")
    return [t.get("state", "") for t in tasks]


def committed_offsets(worker: Any, name: str) -> dict[str, float]:
    """Source partition (as JSON) -> its committed position: the offset's one number
    (ours ``{"seq": next}``, the verifiable source's ``{"seqno": last}``)."""
    body = _get(worker, f"/connectors/{name}/offsets") or {}
    out = {}
    for entry in body.get("offsets", []):
        offset = entry.get("offset") or {}
        numbers = [v for v in offset.values() if isinstance(v, int | float)
                   and not isinstance(v, bool)]
        if numbers:
            out[json.dumps(entry.get("partition"), sort_keys=True)] = float(numbers[0])
    return out


def _wait_started(worker: Any, name: str, tasks: int, created: float) -> tuple[float, float]:
    """(POST -> all RUNNING, POST -> all RUNNING and committed), seconds."""
    running: float | None = None
    deadline = created + START_TIMEOUT_S
    while time.monotonic() < deadline:
        states = task_states(worker, name)
        if running is None and len(states) == tasks and all(s == "RUNNING" for s in states):
            running = time.monotonic() - created
        if running is not None and len(committed_offsets(worker, name)) >= tasks:
            return running, time.monotonic() - created
        time.sleep(POLL_S)
    raise RuntimeError(f"{name}: not all {tasks} tasks RUNNING and committed after "
                       f"{START_TIMEOUT_S:.0f} s: states {task_states(worker, name)}, "
                       f"{len(committed_offsets(worker, name))} partitions committed")


def _task_processes(worker: Any, name: str) -> int | None:
    if not isinstance(worker, WorkerProcess):
        return None
    pids = {s.get("pid") for s in worker.slots() if s.get("connector") == name}
    return len(pids - {None}) or None


def measure(side: str, worker: Any, s: Scenario, tasks_per_process: int, window_s: float,
            settle_s: float, rest_rate: float, thread_profile: bool = False) -> Run:
    """One run on a started worker: baseline, create, start time, the window."""
    assert worker.proc is not None
    root = int(worker.proc.pid)
    run = Run(s.name, side, s.tasks, s.rate,
              (tasks_per_process or None) if side == "ours" else None)
    time.sleep(BASELINE_SETTLE_S)
    run.baseline_rss_mb, run.baseline_pss_mb, _, _ = tree_memory(root)
    name = f"density-{s.name}-{side}-{uuid.uuid4().hex[:6]}"
    topic = f"{name}-out"
    create_topic(worker.bootstrap, topic, PARTITIONS)
    config = our_config(s, topic, tasks_per_process) if side == "ours" else \
        java_config(s, topic)
    created = time.monotonic()
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    if r.status_code != 201:
        hint = " (is tasks.per.process known yet? --tasks-per-process 0 leaves it out)" \
            if side == "ours" and "tasks.per.process" in r.text else ""
        raise RuntimeError(f"create {name} failed: {r.status_code} {r.text}{hint}")
    run.running_s, run.start_s = _wait_started(worker, name, s.tasks, created)
    print(f"    all {s.tasks} RUNNING after {run.running_s:.1f} s, all committed after "
          f"{run.start_s:.1f} s", flush=True)
    time.sleep(settle_s)

    named: dict[tuple[int, int], str] = {}
    threads0 = threads.snapshot(root, named) if thread_profile else {}
    threads_t0 = time.monotonic()
    offsets0, o0 = committed_offsets(worker, name), time.monotonic()
    cpu = TreeCpu(root)
    cpu0, t0 = cpu.seconds(), time.monotonic()
    load = RestLoad(worker.url, name, rest_rate).start()
    end = t0 + window_s
    last = (t0, cpu0)
    try:
        while True:
            rss, pss, run.processes, run.threads = tree_memory(root)
            run.rss_samples.append(rss)
            run.pss_samples.append(pss)
            now = (time.monotonic(), cpu.seconds())
            if now[0] - last[0] > 1:
                run.cpu_cores_samples.append((now[1] - last[1]) / (now[0] - last[0]))
                last = now
            left = end - time.monotonic()
            if left <= 0.5:
                break
            time.sleep(min(MEMORY_EVERY_S, left))
        time.sleep(max(0.0, end - time.monotonic()))
    finally:
        load.stop()
    cpu1, t1 = cpu.seconds(), time.monotonic()
    if thread_profile:
        threads1 = threads.snapshot(root, named)
        table = threads.rows(threads0, threads1, time.monotonic() - threads_t0)
        run.thread_profile = [row.to_dict() for row in table]
        print(threads.markdown(table, s.tasks), flush=True)
    offsets1, o1 = committed_offsets(worker, name), time.monotonic()
    states = task_states(worker, name)

    run.window_s = t1 - t0
    run.cpu_cores = (cpu1 - cpu0) / run.window_s
    run.rss_mb = statistics.median(run.rss_samples)
    run.pss_mb = statistics.median(run.pss_samples)
    all_ms = [d for ds in load.durations.values() for d in ds]
    run.rest_p50_ms, run.rest_p99_ms = percentile(all_ms, 0.5), percentile(all_ms, 0.99)
    run.rest_max_ms = max(all_ms, default=None)
    run.rest_requests, run.rest_errors = len(all_ms), load.errors
    run.rest_by_path = {p: {"p50_ms": percentile(ds, 0.5), "p99_ms": percentile(ds, 0.99),
                            "max_ms": max(ds, default=None)}
                        for p, ds in load.durations.items()}
    advanced = {p: offsets1[p] - offsets0.get(p, 0.0) for p in offsets1}
    run.committing = sum(1 for d in advanced.values() if d > 0)
    run.records_per_s = sum(d for d in advanced.values() if d > 0) / (o1 - o0)
    run.task_processes = _task_processes(worker, name)
    if states.count("RUNNING") != s.tasks:
        run.error = f"after the window: {states.count('RUNNING')} of {s.tasks} RUNNING"
    with contextlib.suppress(Exception):  # housekeeping; the broker is the bench's own
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": worker.bootstrap})
        for future in admin.delete_topics([topic]).values():
            future.result(30)
    return run


def run_side(side: str, bootstrap: str, s: Scenario, tasks_per_process: int, workdir: Path,
             window_s: float, settle_s: float, rest_rate: float,
             thread_profile: bool = False) -> Run:
    """A fresh worker of ``side`` for one scenario; stopped (its whole tree) after."""
    if side == "ours":
        worker: Any = our_worker(bootstrap, workdir, spark_slots(s.tasks, tasks_per_process))
    else:
        worker = java_worker(bootstrap, workdir)
    started = time.monotonic()
    tree: list[tuple[int, str | None]] = []
    try:
        worker.start()
        assert worker.proc is not None
        print(f"  {s.name}, {SIDE_LABELS[side]}: worker up in "
              f"{time.monotonic() - started:.0f} s", flush=True)
        run = measure(side, worker, s, tasks_per_process, window_s, settle_s, rest_rate,
                      thread_profile)
        tree = [(p, _start_time(p)) for p in process_tree(int(worker.proc.pid))]
        return run
    except BaseException:
        print(f"  {s.name}, {SIDE_LABELS[side]}: failed; the worker's log ends:\n"
              f"{_log_tail(worker)}", file=sys.stderr, flush=True)
        if worker.proc is not None and worker.proc.poll() is None:
            tree = [(p, _start_time(p)) for p in process_tree(int(worker.proc.pid))]
        raise
    finally:
        worker.stop()
        _kill_leftovers(tree)


def _log_tail(worker: Any, lines: int = 40) -> str:
    """The end of the worker's log (it lives in the run's temporary directory)."""
    if isinstance(worker, WorkerProcess):
        return worker.tail(lines)
    with contextlib.suppress(OSError):
        return "\n".join(worker.log.read_text(errors="replace").splitlines()[-lines:])
    return ""


def _kill_leftovers(tree: list[tuple[int, str | None]]) -> None:
    """SIGKILL the processes of a stopped worker's tree still alive (same pid and
    start time: ours, not a reused pid)."""
    time.sleep(0.5)
    left = [pid for pid, started in tree if started is not None and _start_time(pid) == started]
    names = {pid: _cmdline(pid) for pid in left}
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if left:
        print(f"    killed {len(left)} process(es) that outlived the worker: "
              + "; ".join(f"{pid} {names[pid]}" for pid in left), flush=True)


def _cmdline(pid: int, limit: int = 80) -> str:
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(
            errors="replace").strip()[:limit]
    return "?"


# -- results --------------------------------------------------------------------------------


def _fmt(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def _hosting(run: Run) -> str:
    return f", {run.task_processes} with tasks" if run.task_processes else ""


def _tpp(run: Run) -> str:
    if run.side == "java":
        return "threads"
    return str(run.tasks_per_process) if run.tasks_per_process else "auto (unset)"


def markdown(runs: list[Run], meta: dict[str, Any]) -> str:
    m = meta["machine"]
    head = (f"Commit `{meta['commit']}`{' (with uncommitted changes)' if meta['dirty'] else ''}"
            f", {meta['date']}, {m['arch']}, {m['cpu']}, {m['cores']} cores, Python "
            f"{m['python']}. One connector per side and scenario, fresh worker each; "
            f"~{VALUE_SIZE} B values, transactions every {INTERVAL_MS} ms; window "
            f"{meta['window_s']:.0f} s, from {meta['settle_s']:.0f} s after every task had "
            f"committed; REST {meta['rest_rate']:.0f} requests/s. Ours: "
            f"`SequenceSourceConnector`; Kafka Connect 4.1.1: `VerifiableSourceConnector` "
            f"(connect-test-plugins 4.0.2), `exactly.once.source.support=enabled`.")
    if meta.get("combined_from"):
        head += " Combined from the partial runs " + "; ".join(meta["combined_from"]) + "."
    lines = [head, "",
             "| scenario | side | tasks | tasks/process | processes (threads) | total RSS MB | "
             "total PSS MB | RSS / PSS MB per task | marginal RSS / PSS MB per task | "
             "CPU cores (last 5 s) | REST p50 / p99 ms | start s (all RUNNING) | "
             "records/s (target) | all committing |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        committing = "yes" if r.all_committing else f"no ({r.committing}/{r.tasks})"
        if r.error:
            committing += f"; {r.error}"
        lines.append(
            f"| {r.scenario} | {SIDE_LABELS[r.side]} | {r.tasks} | {_tpp(r)} | "
            f"{r.processes}{_hosting(r)} ({r.threads}) | {r.rss_mb:,.0f} | {r.pss_mb:,.0f} | "
            f"{r.rss_per_task:,.1f} / {r.pss_per_task:,.1f} | "
            f"{r.marginal_rss:,.1f} / {r.marginal_pss:,.1f} | {r.cpu_cores:.2f} "
            f"({_fmt(r.cpu_cores_samples[-1] if r.cpu_cores_samples else None, '{:.2f}')}) | "
            f"{_fmt(r.rest_p50_ms, '{:,.1f}')} / {_fmt(r.rest_p99_ms, '{:,.1f}')} | "
            f"{_fmt(r.start_s, '{:.1f}')} ({_fmt(r.running_s, '{:.1f}')}) | "
            f"{r.records_per_s:,.0f} ({r.tasks * r.rate:,}) | {committing} |")
    short = [r for r in runs if r.records_per_s < SUSTAINED * r.tasks * r.rate]
    if short:
        lines += ["", "**Below the target rate** (under "
                  f"{SUSTAINED:.0%} of N x rate over the window): " + "; ".join(
                      f"{r.scenario} {SIDE_LABELS[r.side]} {r.records_per_s:,.0f} of "
                      f"{r.tasks * r.rate:,} records/s" for r in short) + "."]
    pairs = _pairs(runs)
    if pairs:
        lines += ["", "Ours against Kafka Connect (ratio < 1: ours uses less):", "",
                  "| scenario | tasks | total RSS ours / Java MB | ratio | total PSS ours / "
                  "Java MB | ratio | marginal PSS MB per task ours / Java | CPU cores ours / "
                  "Java |", "|---|---|---|---|---|---|---|---|"]
        for ours, java in pairs:
            lines.append(
                f"| {ours.scenario} | {ours.tasks} | {ours.rss_mb:,.0f} / {java.rss_mb:,.0f} | "
                f"{ours.rss_mb / java.rss_mb:.2f} | {ours.pss_mb:,.0f} / {java.pss_mb:,.0f} | "
                f"{ours.pss_mb / java.pss_mb:.2f} | {ours.marginal_pss:,.1f} / "
                f"{java.marginal_pss:,.1f} | {ours.cpu_cores:.2f} / {java.cpu_cores:.2f} |")
    lines += ["", "Baselines (the same worker with 0 tasks, right before the connector was "
              "created), RSS / PSS MB: " + "; ".join(
                  f"{r.scenario} {SIDE_LABELS[r.side]} {r.baseline_rss_mb:,.0f} / "
                  f"{r.baseline_pss_mb:,.0f}" for r in runs) + "."]
    return "\n".join(lines) + "\n"


def _pairs(runs: list[Run]) -> list[tuple[Run, Run]]:
    by = {(r.scenario, r.side): r for r in runs}
    return [(by[(r.scenario, "ours")], by[(r.scenario, "java")]) for r in runs
            if r.side == "ours" and (r.scenario, "java") in by]


def plot_density(runs: list[Run], path: Path) -> None:
    """Total memory, marginal memory per task and CPU against tasks, per side: idle
    scenarios as lines, busy ones as stars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    colors = {"ours": "tab:blue", "java": "tab:orange"}
    panels: list[tuple[str, str, list[tuple[str, str]]]] = [
        ("total memory of the process tree, MB", "Total memory",
         [("rss_mb", "RSS"), ("pss_mb", "PSS")]),
        ("MB per task above the 0-task worker", "Marginal memory per task",
         [("marginal_rss", "RSS"), ("marginal_pss", "PSS")]),
        ("CPU, cores", "CPU of the process tree", [("cpu_cores", "")])]
    counts = sorted({r.tasks for r in runs})
    for side in SIDES:
        mine = [r for r in runs if r.side == side]
        idle = sorted((r for r in mine if r.scenario.startswith("idle")), key=lambda r: r.tasks)
        busy = [r for r in mine if r.scenario.startswith("busy")]
        for ax, (_, _, attrs) in zip(axes, panels, strict=True):
            for attr, label in attrs:
                style = "--" if label == "RSS" else "-"
                name = f"{SIDE_LABELS[side]}{f' {label}' if label else ''}"
                if idle:
                    ax.plot([r.tasks for r in idle], [getattr(r, attr) for r in idle],
                            style, marker="o", color=colors[side], label=f"{name}, idle")
                if busy:
                    ax.plot([r.tasks for r in busy], [getattr(r, attr) for r in busy],
                            linestyle="none", marker="*", markersize=12,
                            color=colors[side], alpha=0.6 if label == "RSS" else 1.0,
                            label=f"{name}, busy")
    for ax, (ylabel, title, _) in zip(axes, panels, strict=True):
        ax.set_xscale("log")
        ax.set_xticks(counts, [str(c) for c in counts])
        ax.minorticks_off()
        ax.set_xlabel("tasks")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    tpp = sorted({r.tasks_per_process for r in runs if r.side == "ours"}, key=lambda t: t or 0)
    rates = " / ".join(f"{kind} {rate:,}" for kind, rate in sorted(
        {(r.scenario.split("-")[0], r.rate) for r in runs}, reverse=True))
    fig.suptitle(f"Density: N exactly-once source tasks, {rates} records/s per task; ours "
                 f"with tasks.per.process "
                 f"{', '.join(str(t or 'auto (unset)') for t in tpp)}; "
                 f"{os.cpu_count()}-core machine", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True,
                          text=True).stdout.strip()


# -- main -----------------------------------------------------------------------------------


def write_results(runs: list[Run], meta: dict[str, Any], stem: str, plot: Path) -> str:
    """``bench/results/<stem>.{md,json}`` and the plot; returns the markdown."""
    text = markdown(runs, meta)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text)
    (RESULTS / f"{stem}.json").write_text(json.dumps(
        {**meta, "runs": [{**asdict(r), "all_committing": r.all_committing,
                           "rss_per_task_mb": r.rss_per_task, "pss_per_task_mb": r.pss_per_task,
                           "marginal_rss_mb": r.marginal_rss, "marginal_pss_mb": r.marginal_pss}
                          for r in runs]}, indent=1, default=str))
    try:
        plot_density(runs, plot)
    except ImportError:
        print("no plot: matplotlib is missing (pip install -e '.[bench]')", file=sys.stderr)
    return text


def combine(paths: list[Path]) -> str:
    """The runs of several partial results (e.g. each side run on its own) as the
    full results: ``bench/results/density.*`` and the docs plot. Each run keeps what
    it measured; the header says which partial runs they came from."""
    fields = set(Run.__dataclass_fields__)
    runs: list[Run] = []
    metas = []
    for path in paths:
        data = json.loads(path.read_text())
        metas.append(f"{path.name} ({data['commit']}{', dirty' if data['dirty'] else ''}, "
                     f"{data['date']})")
        runs += [Run(**{k: v for k, v in r.items() if k in fields}) for r in data["runs"]]
    order = {name: i for i, name in enumerate(DEFAULT_SCENARIOS)}
    runs.sort(key=lambda r: (order.get(r.scenario, len(order)), r.scenario,
                             SIDES.index(r.side)))
    meta = {**json.loads(paths[0].read_text()), "combined_from": metas}
    meta.pop("runs", None)
    return write_results(runs, meta, "density", PLOT)


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    if argv[:1] == ["--combine"]:
        print(combine([Path(p) for p in argv[1:]]))
        return 0
    parser = argparse.ArgumentParser(prog="bench.density", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                        help="comma-separated idle-N / busy-N (default: %(default)s)")
    parser.add_argument("--sides", default=",".join(SIDES),
                        help="ours, java or both (default: %(default)s)")
    parser.add_argument("--tasks-per-process", type=int, default=0,
                        help="our connector's tasks.per.process (1-64); 0, the default, "
                             "leaves the key out (the worker's default: auto)")
    parser.add_argument("--idle-rate", type=int, default=IDLE_RATE, help="records/s per task")
    parser.add_argument("--busy-rate", type=int, default=BUSY_RATE, help="records/s per task")
    parser.add_argument("--keep-logs", metavar="DIR", default=None,
                        help="run the workers in DIR and keep it (their logs) afterwards")
    parser.add_argument("--rest-rate", type=float, default=20.0, help="REST requests/s")
    parser.add_argument("--scale", type=float, default=1.0,
                        help=f"multiplies the window ({WINDOW_S:.0f} s) and the settling "
                             f"before it ({SETTLE_S:.0f} s)")
    parser.add_argument("--threads", action="store_true",
                        help="also the CPU of each kind of thread over the window "
                             "(bench.threads; Python threads named with py-spy)")
    args = parser.parse_args(argv)
    try:
        scenarios = parse_scenarios(args.scenarios, args.idle_rate, args.busy_rate)
    except ValueError as e:
        parser.error(str(e))
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if not scenarios or not sides or set(sides) - set(SIDES):
        parser.error(f"--sides: a comma-separated subset of {', '.join(SIDES)}")
    if not 0 <= args.tasks_per_process <= 64 or args.scale <= 0 or args.rest_rate <= 0:
        parser.error("need 0 <= --tasks-per-process <= 64, --scale > 0 and --rest-rate > 0")
    window_s = max(MIN_WINDOW_S, WINDOW_S * args.scale)
    settle_s = SETTLE_S * args.scale
    full = [s.name for s in scenarios] == list(DEFAULT_SCENARIOS) and sides == list(SIDES)
    meta = {"commit": _git("rev-parse", "--short", "HEAD"), "dirty": bool(_git(
        "status", "--short")), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": machine(), "args": vars(args), "window_s": window_s, "settle_s": settle_s,
        "rest_rate": args.rest_rate, "interval_ms": INTERVAL_MS, "partitions": PARTITIONS,
        "value_size": VALUE_SIZE}
    if "java" in sides:
        from bench.kafka_connect import fetch

        fetch()
        test_plugins()
    runs: list[Run] = []
    started = time.monotonic()
    if args.keep_logs:
        Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
    workdir = (contextlib.nullcontext(args.keep_logs) if args.keep_logs
               else tempfile.TemporaryDirectory(prefix="bench-density-"))
    with workdir as tmp:
        for s in scenarios:
            for side in sides:
                run = run_side(side, args.bootstrap_server, s, args.tasks_per_process,
                               Path(tmp), window_s, settle_s, args.rest_rate, args.threads)
                runs.append(run)
                print(f"  {s.name}, {SIDE_LABELS[side]}: RSS {run.rss_mb:,.0f} MB, PSS "
                      f"{run.pss_mb:,.0f} MB (marginal {run.marginal_pss:,.1f} MB/task), "
                      f"{run.cpu_cores:.2f} cores, REST p99 {_fmt(run.rest_p99_ms, '{:.1f}')}"
                      f" ms, start {_fmt(run.start_s, '{:.1f}')} s, committing "
                      f"{run.committing}/{run.tasks}, {run.records_per_s:,.0f} records/s",
                      flush=True)
    meta["seconds"] = time.monotonic() - started
    stem = "density" if full else "density-partial"
    text = write_results(runs, meta, stem, PLOT if full else RESULTS / f"{stem}.png")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
