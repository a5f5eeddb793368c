"""Shared pieces of the benchmark harness: measurements, topics, processes."""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "e2e")]
from harness import WorkerProcess, free_port, process_tree  # noqa: E402  (tests' harness)

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
        return self.records / self.seconds

    @property
    def records_per_s_per_core(self) -> float | None:
        return self.records_per_s / self.cores if self.cores else None

    @property
    def mb_per_s(self) -> float:
        return self.records * self.value_size / self.seconds / 1e6

    @property
    def cpu_s_per_million(self) -> float:
        return self.cpu_seconds / self.records * 1e6

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


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        f.result()


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


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU of ``root`` and its live descendants (and reaped children)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in process_tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # utime, stime, cutime, cstime are fields 14-17 (1-based) of the stat line.
        total += sum(int(x) for x in fields[11:15])
    return total / tick


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None
