"""The worker's metrics store and Prometheus collector, fed by hand-made snapshots."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.clock import FakeClock

from connect_runtime.cluster.metrics import ClusterView, TaskMetricsStore, WorkerMetrics
from connect_runtime.protocol.slot_channel import ErrorTotals, OffsetCommits, TaskMetricsSnapshot
from connect_runtime.task.metrics import TaskMetrics


def snapshot(**values: Any) -> TaskMetricsSnapshot:
    return dataclasses.replace(TaskMetrics("exactly-once").snapshot(), **values)


def view(**overrides: Any) -> ClusterView:
    return ClusterView(**{
        "connector_states": {"seq": "RUNNING", "bad": "RUNNING"},
        "task_states": {("seq", 0): "RUNNING", ("bad", 0): "FAILED"},
        "connector_classes": {"seq": "SequenceSourceConnector", "bad": "Bad"},
        "hosted_connectors": 2, "hosted_tasks": 2,
        "leader_url": "http://w1:8083", "is_leader": True, **overrides})


def test_rates_come_from_the_snapshots_of_the_last_30_seconds() -> None:
    clock = FakeClock(100.0)
    store = TaskMetricsStore(clock=clock)
    for i in range(20):  # one snapshot every 3 s, 100 records polled each time
        store.record("seq", 0, 1, snapshot(poll_total=100 * i, write_total=90 * i,
                                           poll_batches=i, poll_time_ms_total=5.0 * i))
        clock.now += 3
    history = store.tasks()[("seq", 0)]
    assert history.rate(lambda m: m.poll_total, clock.now) == pytest.approx(100 / 3)
    assert history.rate(lambda m: m.write_total, clock.now) == pytest.approx(30)
    assert history.poll_batch_avg_ms(clock.now) == pytest.approx(5.0)
    series = history.series()
    assert len(series.t_ms) == 19 and series.poll_rate[-1] == pytest.approx(100 / 3)


def test_a_new_generation_starts_a_new_history_and_retires_the_old_totals() -> None:
    store = TaskMetricsStore(clock=FakeClock(100.0))
    store.record("seq", 0, 1, snapshot(poll_total=500, startup_attempts=2, startup_failures=1))
    store.record("seq", 0, 2, snapshot(poll_total=3, startup_attempts=1))
    assert store.tasks()[("seq", 0)].generation == 2
    assert len(store.tasks()[("seq", 0)].samples) == 1
    assert (store.retired_startup_attempts, store.retired_startup_failures) == (2, 1)
    store.keep_only([("other", 0, 1)])  # seq was deleted
    assert store.tasks() == {}
    assert (store.retired_startup_attempts, store.retired_startup_failures) == (3, 1)


def test_history_is_bounded_in_time() -> None:
    clock = FakeClock(100.0)
    store = TaskMetricsStore(clock=clock, history_s=10)
    for i in range(10):
        store.record("seq", 0, 1, snapshot(poll_total=i))
        clock.now += 3
    assert len(store.tasks()[("seq", 0)].samples) == 4


def scrape(metrics: WorkerMetrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = metrics.exposition().decode()
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_the_exposition_has_connects_names_and_labels() -> None:
    metrics = WorkerMetrics("w1:8083", view)
    metrics.counters.connector_started(failed=False)
    metrics.counters.connector_started(failed=True)
    metrics.counters.rebalanced()
    metrics.counters.leadership_changed()
    metrics.tasks.record("seq", 0, 1, snapshot(
        poll_total=10, write_total=9, txn_size_min=3, txn_size_max=5, txn_size_avg=4.0,
        commit_latency_ms_p50=2.0, commit_latency_ms_p99=9.0, startup_attempts=1,
        offsets=(OffsetCommits({"sequence.partition": 0}, {"seq": 10, "note": "x"}, 4),),
        errors=ErrorTotals(record_errors=1, record_failures=2, records_skipped=1, retries=1,
                           errors_logged=1)))
    got = scrape(metrics)
    task = {("connector", "seq"), ("task", "0"), ("worker", "w1:8083")}

    def at(name: str, *extra: tuple[str, str], labels: set[tuple[str, str]] = task) -> float:
        return got[(name, frozenset(labels | set(extra)))]

    assert at("kafka_connect_source_task_source_record_poll_total") == 10
    assert at("kafka_connect_source_task_source_record_write_total") == 9
    assert at("kafka_connect_source_task_transaction_size_avg") == 4
    assert at("kafka_connect_source_task_commit_latency_ms", ("quantile", "0.99")) == 9
    assert at("kafka_connect_source_task_committed_offset",
              ("source_partition", '{"sequence.partition":0}'), ("field", "seq")) == 10
    assert at("kafka_connect_source_task_source_partition_commits_total",
              ("source_partition", '{"sequence.partition":0}')) == 4
    assert at("kafka_connect_task_error_total_record_failures") == 2
    assert at("kafka_connect_task_error_total_errors_logged") == 1
    assert math.isnan(at("kafka_connect_source_task_time_since_last_commit_ms"))
    worker = {("worker", "w1:8083")}
    assert at("kafka_connect_worker_connector_startup_attempts_total", labels=worker) == 2
    assert at("kafka_connect_worker_connector_startup_failure_total", labels=worker) == 1
    assert at("kafka_connect_worker_task_startup_attempts_total", labels=worker) == 1
    assert at("kafka_connect_worker_tasks_by_state", ("state", "FAILED"), labels=worker) == 1
    assert at("kafka_connect_worker_rebalance_completed_rebalances_total", labels=worker) == 1
    assert at("kafka_connect_worker_leadership_changes_total", labels=worker) == 1
    assert at("kafka_connect_worker_rebalance_leader", ("leader_name", "http://w1:8083"),
              labels=worker) == 1
    assert at("kafka_connect_connector_task_status", ("status", "failed"),
              labels={("connector", "bad"), ("task", "0"), ("worker", "w1:8083")}) == 1
    # Only this project's own registry: no Python process or GC metrics.
    assert not any(name.startswith(("python_", "process_")) for name, _ in got)


def test_a_follower_without_tasks_or_a_known_leader_still_answers() -> None:
    metrics = WorkerMetrics("w2:8083", lambda: view(is_leader=False, leader_url=None,
                                                     hosted_tasks=0))
    got = scrape(metrics)
    assert got[("kafka_connect_worker_is_leader", frozenset({("worker", "w2:8083")}))] == 0
    assert not any(name == "kafka_connect_worker_rebalance_leader" for name, _ in got)
    assert math.isnan(got[("kafka_connect_worker_rebalance_time_since_last_rebalance_ms",
                           frozenset({("worker", "w2:8083")}))])


def test_stalled_seconds_is_a_gauge_per_hosted_task_zero_when_not_stuck() -> None:
    metrics = WorkerMetrics("w1:8083", lambda: view(
        stalled_s={("seq", 0): 0.0, ("bad", 0): 312.5}))
    got = scrape(metrics)

    def stalled(connector: str) -> float:
        return got[("kafka_connect_worker_task_stalled_seconds", frozenset(
            {("connector", connector), ("task", "0"), ("worker", "w1:8083")}))]

    assert (stalled("seq"), stalled("bad")) == (0.0, 312.5)
