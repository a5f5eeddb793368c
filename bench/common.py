"""Shared pieces of the benchmark harness: measurements, topics, processes."""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests")]
# The tests' support package (tests/support/), after the path that finds it.
from support.kafka import free_port  # noqa: E402
from support.processes import process_tree  # noqa: E402
from support.workers import WorkerProcess  # noqa: E402

__all__ = ["WorkerProcess", "free_port", "process_tree"]


@dataclass
class Measurement:
    """One run of one scenario."""

    records: int
    value_size: int
    seconds: float  # first record produced (or committed) -> last committed
    cpu_seconds: float = 0.0
    transactions: int = 1
    startup_seconds: float | None = None
    latency_p50_ms: float | None = None
    latency_p99_ms: float | None = None
    worker_rss_mb: float | None = None
    task_rss_mb: float | None = None
    recovery_seconds: float | None = None
    cores: int | None = None  # CPUs the setup could use (bench.scaling)
    placement: str | None = None  # tasks per executor, e.g. "2+2" (bench.scaling)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds if self.seconds else 0.0

    @property
    def records_per_s_per_core(self) -> float | None:
        return self.records_per_s / self.cores if self.cores else None

    @property
    def mb_per_s(self) -> float:
        return self.records * self.value_size / self.seconds / 1e6

    @property
    def cpu_s_per_million(self) -> float:
        return self.cpu_seconds / self.records * 1e6 if self.records else 0.0

    @property
    def txn_size(self) -> float:
        return self.records / max(self.transactions, 1)


@dataclass
class Scenario:
    """Several runs of one configuration; figures are medians, with the spread."""

    group: str  # "limit", "project"
    name: str
    tasks: int = 1
    runs: list[Measurement] = field(default_factory=list)
    # How throughput was measured: "count" (a fixed record count, timed from its
    # first record to its last: the limit from its first produce, the product by
    # a read_committed consumer) or "window" (the growth of the topic's last
    # stable offsets over a steady-state window, no consumer: ``measure_window``).
    method: str = "count"

    def median(self, attr: str) -> float | None:
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        return statistics.median(values) if values else None

    def spread(self, attr: str) -> float | None:
        """(max - min) / median, as a fraction."""
        values = [getattr(r, attr) for r in self.runs if getattr(r, attr) is not None]
        if len(values) < 2:
            return None
        mid = statistics.median(values)
        return (max(values) - min(values)) / mid if mid else None


class TopicSweeper:
    """Deletes the topics a benchmark run created once the run is over.

    A full ``bench/run.sh --method both`` writes some 64 GB, and nothing reads a
    scenario's topics after it: kept, they filled the benchmark machine's disk and the
    broker shut down ("No space left on device"). Topics that existed before
    the run are left, and so are the internal topics of a worker
    (``-configs``, ``-offsets``, ``-status``), which outlive one run."""

    KEEP = ("-configs", "-offsets", "-status")

    def __init__(self, bootstrap: str) -> None:
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        self.before: set[str] = set()
        # While paused, mark and sweep do nothing (see paused).
        self._paused = False

    def _topics(self) -> set[str]:
        return set(self.admin.list_topics(timeout=30).topics)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No deletions inside the block, whatever way it ends."""
        self._paused = True
        try:
            yield
        finally:
            self._paused = False

    def mark(self) -> None:
        if not self._paused:
            self.before = self._topics()

    def sweep(self) -> None:
        if self._paused:
            return
        new = [t for t in self._topics() - self.before
               if not t.startswith("_") and not t.endswith(self.KEEP)]
        if new:
            for f in self.admin.delete_topics(new, operation_timeout=30).values():
                f.result()


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


class CommittedOffsets:
    """The records of a topic that a ``read_committed`` consumer can see: the sum
    of its partitions' last stable offsets (ListOffsets, READ_COMMITTED), read
    without consuming.

    The offsets also count one transaction marker per partition a transaction
    wrote: one per 1,000 records at worst in these benchmarks (0.1%), under 0.1%
    with time-bounded transactions.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self._admin = AdminClient({"bootstrap.servers": bootstrap})
        self._partitions = [TopicPartition(topic, p) for p in range(partitions)]

    def count(self) -> tuple[float, int]:
        """(when, epoch s: the middle of the request; the count)."""
        before = time.time()
        futures = self._admin.list_offsets(
            {tp: OffsetSpec.latest() for tp in self._partitions},
            isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=30)
        count = sum(max(0, f.result().offset) for f in futures.values())
        return (before + time.time()) / 2, count


# The steady-state window (``measure_window``): its length at --scale 1, its
# shortest, and the warm-up between the first committed record and its start.
WINDOW_S = 5.0
MIN_WINDOW_S = 1.0
WARMUP_S = 2.0
EDGE_POLL_S = 0.05  # how often the window's ends read the offsets


def window_for(scale: float) -> float:
    return max(MIN_WINDOW_S, WINDOW_S * scale)


@dataclass
class Window:
    """What ``measure_window`` saw."""

    records: int  # growth of the last stable offsets over the window
    seconds: float  # the window's length, between the middles of its two requests
    cpu_seconds: float  # the ``cpu`` callable's growth over the window
    ready_seconds: float  # from ``started`` until ``ready`` held


def measure_window(visible: CommittedOffsets, window_s: float, cpu: Callable[[], float], *,
                   started: float, ready: Callable[[], bool] | None = None,
                   warmup_s: float = WARMUP_S, warmup_records: int = 0,
                   timeout: float = 300, poll_s: float = 0.05,
                   check: Callable[[], None] | None = None) -> Window:
    """Steady-state throughput of whatever writes the topic of ``visible``,
    measured without reading it: wait until ``ready`` holds (by default: a first
    committed record; polled every ``poll_s``), ``warmup_s`` more (and until
    ``warmup_records`` are committed, for a JVM's JIT), then count the records
    committed over at least ``window_s`` seconds as the growth of the topic's
    last stable offsets, and the CPU seconds ``cpu`` reports over the same time.

    The last stable offset moves only when a transaction commits, so a window of
    fixed ends would count whole transactions or not (with 1 s transactions, a
    5 s window would be off by up to a fifth). The window therefore runs from one
    observed move of the offsets to the first move ``window_s`` or more later
    (offsets read every ``EDGE_POLL_S``): it holds whole transactions, and its
    ends are off by at most that poll interval. ``check`` (raises if the writer
    died) is called while waiting. The writer must not run out of records
    before the window closes: the caller checks that it did not.
    """
    ready = ready or (lambda: visible.count()[1] > 0)
    deadline = time.monotonic() + timeout

    def waiting(what: str) -> None:
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out ({timeout:.0f} s) waiting for {what}")

    while not ready():
        waiting("a first commit")
        time.sleep(poll_s)
    ready_seconds = time.time() - started
    time.sleep(warmup_s)
    while warmup_records and visible.count()[1] < warmup_records:
        waiting(f"{warmup_records} records (warm-up)")
        time.sleep(poll_s)

    def next_move(after: int) -> tuple[float, int]:
        while True:
            t, c = visible.count()
            if c != after:
                return t, c
            waiting("the committed offsets to move")
            time.sleep(EDGE_POLL_S)

    _, c = visible.count()
    t0, c0 = next_move(c)
    cpu0 = cpu()
    time.sleep(max(0.0, t0 + window_s - time.time()))
    _, c = visible.count()
    t1, c1 = next_move(c)
    cpu1 = cpu()
    if check is not None:
        check()
    return Window(records=c1 - c0, seconds=t1 - t0, cpu_seconds=cpu1 - cpu0,
                  ready_seconds=ready_seconds)


class CommittedCounter:
    """Counts a topic's records as a ``read_committed`` consumer sees them.

    Records the wall time of the first and last arrival and, for records whose
    timestamp is their creation time, the creation-to-visible latency.
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, expected: int) -> None:
        self.expected = expected
        self.count = 0
        self.first: float | None = None
        self.last: float | None = None
        self.latencies_ms: list[float] = []
        self.first_created: float | None = None  # earliest record timestamp seen, epoch s
        self._batches: list[tuple[float, int]] = []  # (arrival, newest timestamp ms)
        self.done = threading.Event()
        self._stop = threading.Event()
        self._consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": f"bench-{topic}",
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "fetch.wait.max.ms": 20, "auto.offset.reset": "earliest",
            # librdkafka (2.x) pauses fetching for fetch.queue.backoff.ms (1 s by default)
            # whenever its local queue holds queued.min.messages; with the default this
            # consumer read at most ~200k records/s, below what a task writes, so every
            # throughput figure measured the consumer. Without the pause: 1.1-1.4M/s.
            "fetch.queue.backoff.ms": 0})
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set() and self.count < self.expected:
                msgs = self._consumer.consume(10_000, 0.1)
                now = time.time()
                good = [m for m in msgs if m.error() is None]
                if not good:
                    continue
                if self.first is None:
                    self.first = now
                self.last = now
                self.count += len(good)
                # Sample latencies (every 50th record) to keep the cost flat.
                stamps = [m.timestamp()[1] for m in good[::50]] + [good[-1].timestamp()[1]]
                self.latencies_ms.extend(now * 1000 - t for t in stamps[:-1])
                oldest = min(stamps) / 1000  # good[::50] starts with good[0]
                if self.first_created is None or oldest < self.first_created:
                    self.first_created = oldest
                self._batches.append((now, max(stamps)))
            if self.count >= self.expected:
                self.done.set()
        finally:
            self._consumer.close()

    def first_arrival_created_after(self, t: float) -> float | None:
        """When the first record created after ``t`` (epoch s) became visible."""
        for arrival, newest in list(self._batches):
            if newest > t * 1000:
                return arrival
        return None

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def percentile(self, q: float) -> float | None:
        if not self.latencies_ms:
            return None
        values = sorted(self.latencies_ms)
        return values[min(len(values) - 1, int(q * len(values)))]


def stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` from its third field on: ``[0]`` is the state, and field
    N (1-based, as ``man proc`` numbers them) is ``[N - 3]``. The name (field 2)
    is cut off: it is in parentheses and may hold spaces. Raises OSError when
    there is no such process."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and its live descendants (and reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        try:
            fields = stat_fields(pid)
        except OSError:
            continue
        # utime, stime, cutime, cstime are fields 14-17 (1-based) of the stat line.
        total += sum(int(x) for x in fields[11:15])
    return total / tick


class TreeCpu:
    """The CPU a process tree used, counting processes that left it.

    ``tree_cpu_seconds`` sums the live tree, and reaped children only through
    their parent's ``cutime``: when a process with children exits unreaped
    (a worker stopping its tasks: the Python daemon goes, its task processes
    are reparented), their CPU leaves the sum, and a window over it came out
    negative (-3.48 cores, 200 tasks). This remembers each process's own CPU
    (user + system, without ``cutime``) as last seen, by pid and start time, so
    the total only grows. What a process used between the last sample and its
    exit is missed: sample often (``density`` does, every memory interval)."""

    def __init__(self, root: int) -> None:
        self.root = root
        # (pid, start time in ticks) -> its own CPU ticks when last seen.
        self._seen: dict[tuple[int, int], int] = {}

    def seconds(self) -> float:
        for pid in process_tree(self.root):
            try:
                fields = stat_fields(pid)
            except OSError:
                continue
            # utime and stime are fields 14-15 (1-based), starttime 22.
            self._seen[(pid, int(fields[19]))] = int(fields[11]) + int(fields[12])
        return sum(self._seen.values()) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def pss_mb(pid: int) -> float | None:
    """Proportional set size: each resident page divided by the processes sharing it
    (``/proc/PID/smaps_rollup``). Summed over processes that share pages through
    ``fork`` (PySpark's daemon and its Python workers), it does not count them twice
    as RSS does."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def machine() -> dict[str, Any]:
    """What a result's header says of the machine: architecture, CPU model, cores,
    Python version."""
    cpu = platform.processor() or "cpu"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {"arch": platform.machine(), "cpu": cpu, "cores": os.cpu_count() or 1,
            "python": platform.python_version()}
