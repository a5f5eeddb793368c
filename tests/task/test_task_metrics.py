"""A slot's metrics: what the loops count, and the snapshot the channel carries."""

from __future__ import annotations

import orjson
import pytest
from support.clock import FakeClock

from connect_runtime.protocol.slot_channel import ErrorTotals, OffsetCommits, TaskMetricsSnapshot
from connect_runtime.storage.offsets.format import serialize_key, serialize_value
from connect_runtime.task.error_handler import ErrorCounts
from connect_runtime.task.metrics import MAX_OFFSET_PARTITIONS, WINDOW_S, TaskMetrics


def offset(partition: int, seq: int) -> tuple[bytes, bytes | None]:
    return serialize_key("c", {"p": partition}), serialize_value({"seq": seq})


def test_polls_writes_and_active_records_are_counted() -> None:
    m = TaskMetrics("exactly-once")
    m.polled_batch(10, 0.002)
    m.polled_batch(30, 0.010)
    m.written += 40
    m.set_active(40)
    m.set_active(0)
    snap = m.snapshot()
    assert (snap.poll_total, snap.poll_batches, snap.write_total) == (40, 2, 40)
    assert snap.poll_time_ms_total == pytest.approx(12.0)
    assert snap.poll_time_ms_max == pytest.approx(10.0)
    assert (snap.active_count, snap.active_max) == (0, 40)
    assert TaskMetricsSnapshot.from_object(orjson.loads(orjson.dumps(snap.to_object()))) \
        == snap  # through JSON and back


def test_transaction_sizes_and_latencies_cover_the_window_only() -> None:
    clock = FakeClock(1000.0)
    m = TaskMetrics("exactly-once", clock=clock)
    m.committed(500, 0.5, [])
    clock.now += WINDOW_S + 1  # the 500 ages out
    for size, latency_ms in ((10, 1), (20, 2), (30, 3), (40, 100)):
        m.committed(size, latency_ms / 1000, [])
    m.committed(0, 0.004, [offset(0, 5)])  # offsets only, after an abort: no size
    m.aborted()
    snap = m.snapshot()
    assert (snap.txn_size_min, snap.txn_size_max, snap.txn_size_avg) == (10, 40, 25)
    assert snap.commit_latency_ms_p50 == pytest.approx(3.0)
    assert snap.commit_latency_ms_p99 == pytest.approx(100.0)
    assert (snap.commits, snap.aborts, snap.records_committed) == (6, 1, 600)
    assert snap.last_commit_ms is not None


def test_an_idle_task_reports_no_sizes_rather_than_zero() -> None:
    snap = TaskMetrics("at-least-once").snapshot()
    assert snap.txn_size_min is None and snap.commit_latency_ms_p50 is None
    assert snap.last_commit_ms is None and snap.offsets == ()


def test_committed_offsets_keep_the_most_recent_partitions_with_their_commit_counts() -> None:
    m = TaskMetrics("exactly-once")
    m.committed(1, 0.001, [offset(0, 1), offset(1, 1)])
    m.committed(1, 0.001, [offset(0, 2)])
    assert m.snapshot().offsets == (OffsetCommits({"p": 1}, {"seq": 1}, 1),
                                    OffsetCommits({"p": 0}, {"seq": 2}, 2))
    for p in range(2, MAX_OFFSET_PARTITIONS + 2):
        m.committed(1, 0.001, [offset(p, 1)])
    kept = [o.partition["p"] for o in m.snapshot().offsets]
    assert len(kept) == MAX_OFFSET_PARTITIONS and 1 not in kept and 0 not in kept
    m.committed(1, 0.001, [(serialize_key("c", {"p": 7}), None)])  # a tombstone
    assert m.snapshot().offsets[-1] == OffsetCommits({"p": 7}, None, 2)


def test_error_counts_add_up_across_task_instances_of_the_slot() -> None:
    m = TaskMetrics("exactly-once")
    first = ErrorCounts(record_errors=2, record_failures=3)
    m.attach_errors(first)
    m.startup(failed=False)
    second = ErrorCounts(record_errors=1, records_skipped=1)
    m.attach_errors(second)  # a restart: the first instance's counts stay
    m.startup(failed=True)
    assert m.snapshot().errors == ErrorTotals(record_errors=3, record_failures=3,
                                              records_skipped=1)
    assert (m.startup_attempts, m.startup_failures) == (2, 1)
