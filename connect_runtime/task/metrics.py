"""What a task slot measures for Kafka Connect's source-task metrics.

One :class:`TaskMetrics` per slot. The task loop's thread updates it, per
batch and per commit, never per record: an attribute add or two on paths that
already do far more. The process's slot-channel thread reads it with
:meth:`TaskMetrics.snapshot` on every beat (``KEEPALIVE_INTERVAL_S``) and sends it in place of
the keepalive when it changed, so the numbers reach the worker every few
seconds at no extra frame
(:class:`~connect_runtime.protocol.slot_channel.SlotMetrics`).

Totals count from the slot's start and survive restarts of the task instance
inside the slot, so they only grow, as Prometheus counters must; a new slot (a
new generation, or Spark re-running it) starts again from zero, which
Prometheus' ``rate()`` reads as a counter reset. Windowed values (transaction
sizes, commit latency quantiles) cover the last :data:`WINDOW_S` seconds,
like Connect's sampled stats.

Reads from another thread see each attribute whole (the GIL); a snapshot taken
mid-commit may pair a new commit count with the previous latency window, which
the next snapshot corrects.
"""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from typing import TYPE_CHECKING, Any

import orjson

from connect_runtime.protocol.slot_channel import (
    ERROR_COUNTS,
    ErrorTotals,
    OffsetCommits,
    TaskMetricsSnapshot,
)

if TYPE_CHECKING:
    from connect_runtime.task.error_handler import ErrorCounts

WINDOW_S = 60.0
"""Transaction sizes and commit latencies are reported over this window."""

MAX_OFFSET_PARTITIONS = 100
"""Committed offsets are reported for at most this many source partitions per
task, the most recently committed: a connector with a million partitions must
not send a million offsets every few seconds (nor make a million series)."""

_WINDOW_CAP = 10_000  # entries per window: a bound on memory at very high commit rates


def _quantile(sorted_values: list[float], q: float) -> float:
    """The ``q`` quantile by the nearest-rank method (what a latency reading expects)."""
    rank = max(int(q * len(sorted_values) + 0.999999) - 1, 0)
    return sorted_values[min(rank, len(sorted_values) - 1)]


class TaskMetrics:
    """Counters of one slot; see the module docstring for who writes and reads."""

    def __init__(self, mode: str, clock: Any = time.monotonic) -> None:
        self.mode = mode  # a TaskMode value: "exactly-once" or "at-least-once"
        self._clock = clock
        # source-record-poll-*, poll-batch-*-time-ms
        self.polled = 0
        self.poll_batches = 0
        self.poll_time_s = 0.0
        self.poll_time_max_s = 0.0
        # source-record-write-*: records handed to the producer (after transforms)
        self.written = 0
        # source-record-active-count: polled, not yet committed (EOS) or acknowledged
        self.active = 0
        self.active_max = 0
        # Commits: transactions (EOS) or offset flushes (at-least-once).
        self.commits = 0
        self.aborts = 0
        self.records_committed = 0
        self.last_commit_ms: int | None = None  # wall clock, for "time since last commit"
        self._sizes: deque[tuple[float, int]] = deque(maxlen=_WINDOW_CAP)
        self._latencies: deque[tuple[float, float]] = deque(maxlen=_WINDOW_CAP)
        # serialized offset key -> (serialized offset, commits of that partition)
        self._offsets: OrderedDict[bytes, tuple[bytes | None, int]] = OrderedDict()
        # Task startup (the worker's task-startup-* totals add these up).
        self.startup_attempts = 0
        self.startup_failures = 0
        # Error counts of the instances that ended, plus the running one's.
        self._errors_before = dict.fromkeys(ERROR_COUNTS, 0)
        self._errors: ErrorCounts | None = None

    # ----------------------------------------------------- the loop's thread

    def polled_batch(self, size: int, seconds: float) -> None:
        """One ``poll()`` returned ``size`` records after ``seconds``."""
        self.polled += size
        self.poll_batches += 1
        self.poll_time_s += seconds
        if seconds > self.poll_time_max_s:
            self.poll_time_max_s = seconds

    def set_active(self, count: int) -> None:
        self.active = count
        if count > self.active_max:
            self.active_max = count

    def committed(self, size: int, latency_s: float,
                  offsets: list[tuple[bytes, bytes | None]]) -> None:
        """A transaction (or an offset flush) of ``size`` records committed in
        ``latency_s``, writing ``offsets`` (serialized key, serialized offset).
        Transaction sizes count transactions that carried records: the
        offsets-only one that follows an abort would drag the minimum to 0."""
        now = self._clock()
        self.commits += 1
        self.records_committed += size
        self.last_commit_ms = int(time.time() * 1000)
        if size:  # an offsets-only commit (after an abort) is not a transaction size
            self._sizes.append((now, size))
        self._latencies.append((now, latency_s * 1000.0))
        kept = self._offsets
        for key, value in offsets:
            commits = kept.pop(key, (None, 0))[1]
            kept[key] = (value, commits + 1)
        while len(kept) > MAX_OFFSET_PARTITIONS:
            kept.popitem(last=False)

    def aborted(self) -> None:
        self.aborts += 1

    def startup(self, failed: bool) -> None:
        self.startup_attempts += 1
        if failed:
            self.startup_failures += 1

    def attach_errors(self, counts: ErrorCounts | None) -> None:
        """Count ``counts`` (a new task instance's) from now on, keeping the totals
        of the instance before it."""
        if self._errors is not None:
            for name, value in self._error_counts(self._errors).items():
                self._errors_before[name] += value
        self._errors = counts

    # ----------------------------------------------- the writer's thread

    def snapshot(self) -> TaskMetricsSnapshot:
        """The numbers as the slot channel carries them."""
        now = self._clock()
        horizon = now - WINDOW_S
        sizes = [s for t, s in list(self._sizes) if t >= horizon]
        latencies = sorted(ms for t, ms in list(self._latencies) if t >= horizon)
        errors = dict(self._errors_before)
        if self._errors is not None:
            for name, value in self._error_counts(self._errors).items():
                errors[name] += value
        return TaskMetricsSnapshot(
            mode=self.mode,
            poll_total=self.polled, poll_batches=self.poll_batches,
            poll_time_ms_total=round(self.poll_time_s * 1000.0, 3),
            poll_time_ms_max=round(self.poll_time_max_s * 1000.0, 3),
            write_total=self.written,
            active_count=self.active, active_max=self.active_max,
            commits=self.commits, aborts=self.aborts,
            records_committed=self.records_committed,
            last_commit_ms=self.last_commit_ms,
            txn_size_min=min(sizes) if sizes else None,
            txn_size_max=max(sizes) if sizes else None,
            txn_size_avg=sum(sizes) / len(sizes) if sizes else None,
            commit_latency_ms_p50=_quantile(latencies, 0.5) if latencies else None,
            commit_latency_ms_p99=_quantile(latencies, 0.99) if latencies else None,
            offsets=tuple(OffsetCommits(orjson.loads(key)[1],
                                        None if value is None else orjson.loads(value), commits)
                          for key, (value, commits) in list(self._offsets.items())),
            startup_attempts=self.startup_attempts,
            startup_failures=self.startup_failures,
            errors=ErrorTotals(**errors),
        )

    @staticmethod
    def _error_counts(counts: ErrorCounts) -> dict[str, int]:
        """The counts under the names the channel carries (ErrorCounts' field names)."""
        return {name: getattr(counts, name) for name in ERROR_COUNTS}
