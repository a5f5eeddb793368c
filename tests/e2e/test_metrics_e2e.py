"""``GET /metrics`` on a real worker: Connect's names, plausible values, and no
stall when Kafka is away.

The sequence connector with connector-defined boundaries commits exactly
``commit.every.records`` records per transaction and aborts every
``abort.every.transactions``-th one, so the transaction sizes, commit and abort
counters and committed offsets have values the test can predict. A connector
whose records its value converter cannot convert moves the error metrics: with
``errors.tolerance=all`` it skips records and keeps running; with ``none`` its
task fails.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample
from support.kafka import Broker, free_port, free_port_pair, wait_for
from support.workers import WorkerProcess

SEQ = "SequenceSourceConnector"
GROUP = 50  # commit.every.records: every committed transaction holds this many records
INTEGER = "org.apache.kafka.connect.converters.IntegerConverter"


def scrape(worker: WorkerProcess, timeout: float = 10) -> list[Sample]:
    response = httpx.get(f"{worker.url}/metrics", timeout=timeout)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return [s for family in text_string_to_metric_families(response.text)
            for s in family.samples]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    """The one sample named ``name`` whose labels include ``labels``."""
    found = [s.value for s in samples
             if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]


def seq_config(topic: str, **extra: str) -> dict[str, str]:
    return {"connector.class": SEQ, "tasks.max": "2", "partitions": "2", "topic": topic,
            "batch.size": "100", "rate.per.sec": "2000", "transaction.boundary": "connector",
            "commit.every.records": str(GROUP), "abort.every.transactions": "4",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "2", **extra}


@pytest.fixture
def worker(kafka_bootstrap: str, tmp_path: Path,
           unique_name: Callable[[str], str]) -> Iterator[WorkerProcess]:
    # A browser dashboard elsewhere may read this worker (Connect's CORS keys).
    worker = WorkerProcess(kafka_bootstrap, unique_name("metrics"), free_port(), tmp_path,
                           {"spark.master": "local[4]",
                            "access.control.allow.origin": "https://grafana.example.com"}).start()
    try:
        yield worker
    finally:
        worker.stop()


def test_metrics_carry_connects_names_with_plausible_values(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    seq, skipping, failing = unique_name("seq"), unique_name("skip"), unique_name("fail")
    for name, config in ((seq, seq_config(unique_name("out"))),
                         (skipping, seq_config(unique_name("skipped"), **{
                             "tasks.max": "1", "value.converter": INTEGER,
                             "errors.tolerance": "all"})),
                         (failing, seq_config(unique_name("failed"), **{
                             "tasks.max": "1", "value.converter": INTEGER}))):
        created = worker.rest("POST", "/connectors", json={"name": name, "config": config})
        assert created.status_code == 201, created.text
    worker.wait_tasks(seq, "RUNNING", 2)
    worker.wait_tasks(failing, "FAILED", 1)
    cors = worker.rest("GET", "/connectors", headers={"Origin": "https://grafana.example.com"})
    assert cors.headers["access-control-allow-origin"] == "https://grafana.example.com"

    def reported() -> list[Sample] | None:
        samples = scrape(worker)
        tasks = {(s.labels["connector"], s.labels["task"]) for s in samples
                 if s.name == "kafka_connect_source_task_source_record_poll_total"}
        wanted = {(seq, "0"), (seq, "1"), (skipping, "0"), (failing, "0")}
        if not wanted <= tasks:
            return None
        # Wait for a scrape where both sequence tasks have committed and aborted.
        done = all(value(samples, "kafka_connect_source_task_transactions_aborted_total",
                         connector=seq, task=t) > 0 for t in "01")
        return samples if done else None

    first: list[Sample] = wait_for(reported, 60, "every task's metrics", interval=1)
    moving = [("kafka_connect_task_error_total_records_skipped", skipping, "0")] + [
        (f"kafka_connect_source_task_{name}", seq, task) for task in "01"
        for name in ("source_record_poll_total", "source_record_write_total",
                     "transactions_committed_total", "records_committed_total")]

    def moved() -> list[Sample] | None:
        # Slots report every keepalive interval (3 s), later on a loaded machine.
        samples = scrape(worker)
        return samples if all(
            value(samples, name, connector=c, task=t) > value(first, name, connector=c, task=t)
            for name, c, t in moving) else None

    later: list[Sample] = wait_for(moved, 30, "the counters to move", interval=1)
    worker_id = f"127.0.0.1:{worker.port}"

    for task in ("0", "1"):
        labels = {"connector": seq, "task": task, "worker": worker_id}
        # Connector-defined boundaries: every committed transaction is one group.
        for stat in ("min", "max", "avg"):
            assert value(later, f"kafka_connect_source_task_transaction_size_{stat}",
                         **labels) == GROUP
        for name in ("source_record_poll_total", "source_record_write_total",
                     "transactions_committed_total", "records_committed_total"):
            before = value(first, f"kafka_connect_source_task_{name}", **labels)
            after = value(later, f"kafka_connect_source_task_{name}", **labels)
            assert after > before > 0, f"{name} of task {task}: {before} -> {after}"
        assert value(later, "kafka_connect_source_task_source_record_poll_rate", **labels) > 0
        assert value(later, "kafka_connect_source_task_source_record_write_rate", **labels) > 0
        assert value(later, "kafka_connect_source_task_records_committed_rate", **labels) > 0
        assert value(later, "kafka_connect_source_task_transactions_aborted_total", **labels) > 0
        # Aborted groups are polled but never committed: fewer committed than written.
        assert value(later, "kafka_connect_source_task_records_committed_total", **labels) < \
            value(later, "kafka_connect_source_task_source_record_write_total", **labels)
        p50 = value(later, "kafka_connect_source_task_commit_latency_ms", **labels,
                    quantile="0.5")
        p99 = value(later, "kafka_connect_source_task_commit_latency_ms", **labels,
                    quantile="0.99")
        assert 0 < p50 <= p99 < 30_000
        assert 0 <= value(later, "kafka_connect_source_task_time_since_last_commit_ms",
                          **labels) < 15_000
        assert value(later, "kafka_connect_source_task_poll_batch_avg_time_ms", **labels) >= 0
        # One source partition per task (partitions=2, tasks.max=2); a group's offset
        # points past its last record, so it is a multiple of the group size.
        offsets = [s for s in later if s.name == "kafka_connect_source_task_committed_offset"
                   and s.labels["connector"] == seq and s.labels["task"] == task]
        assert [s.labels["field"] for s in offsets] == ["seq"]
        assert offsets[0].labels["source_partition"] == f'{{"sequence.partition":{task}}}'
        assert offsets[0].value > 0 and offsets[0].value % GROUP == 0
        assert value(later, "kafka_connect_source_task_source_partition_commits_total",
                     **labels, source_partition=f'{{"sequence.partition":{task}}}') > 0
        assert value(later, "kafka_connect_task_error_total_record_errors", **labels) == 0

    # Errors: skipped records keep counting while that task runs; the other failed.
    assert worker.task_states(skipping) == ["RUNNING"], worker.status(skipping)
    skip = {"connector": skipping, "task": "0"}
    assert value(later, "kafka_connect_task_error_total_records_skipped", **skip) > \
        value(first, "kafka_connect_task_error_total_records_skipped", **skip) > 0
    assert value(later, "kafka_connect_task_error_total_record_errors", **skip) == \
        value(later, "kafka_connect_task_error_total_records_skipped", **skip)
    assert value(later, "kafka_connect_source_task_source_record_write_total", **skip) == 0
    fail = {"connector": failing, "task": "0"}
    assert value(later, "kafka_connect_task_error_total_record_failures", **fail) == 1
    assert value(later, "kafka_connect_task_error_total_record_errors", **fail) == 1
    assert value(later, "kafka_connect_task_error_total_errors_logged", **fail) == 0
    assert value(later, "kafka_connect_connector_task_status", **fail, status="failed") == 1

    # The worker: it leads, hosts all four tasks, and counted what it did.
    w = {"worker": worker_id}
    assert value(later, "kafka_connect_worker_is_leader", **w) == 1
    assert value(later, "kafka_connect_worker_connector_count", **w) == 3
    assert value(later, "kafka_connect_worker_task_count", **w) == 4
    assert value(later, "kafka_connect_worker_tasks_by_state", **w, state="RUNNING") == 3
    assert value(later, "kafka_connect_worker_tasks_by_state", **w, state="FAILED") == 1
    assert value(later, "kafka_connect_worker_connectors_by_state", **w, state="RUNNING") == 3
    assert value(later, "kafka_connect_worker_connector_running_task_count", **w,
                 connector=seq) == 2
    assert value(later, "kafka_connect_worker_connector_failed_task_count", **w,
                 connector=failing) == 1
    assert value(later, "kafka_connect_worker_connector_startup_attempts_total", **w) == 3
    assert value(later, "kafka_connect_worker_connector_startup_success_total", **w) == 3
    assert value(later, "kafka_connect_worker_task_startup_attempts_total", **w) == 4
    assert value(later, "kafka_connect_worker_task_startup_failure_total", **w) == 0
    assert value(later, "kafka_connect_worker_rebalance_completed_rebalances_total", **w) >= 1
    assert value(later, "kafka_connect_worker_leadership_changes_total", **w) == 1
    assert value(later, "kafka_connect_worker_time_since_last_leadership_change_ms", **w) > 0
    assert value(later, "kafka_connect_worker_rebalance_leader", **w,
                 leader_name=worker.url) == 1
    assert value(later, "kafka_connect_connector_status", connector=seq, status="running") == 1


def test_a_scrape_answers_while_the_broker_is_stopped_and_during_a_rebalance(
        tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """The metrics come from memory: no scrape waits on Kafka."""
    broker = Broker(tmp_path / "kafka", free_port_pair())
    broker.start()
    group = unique_name("outage")
    first = WorkerProcess(broker.bootstrap, group, free_port(), tmp_path,
                          {"spark.master": "local[2]"})
    second = WorkerProcess(broker.bootstrap, group, free_port(), tmp_path,
                           {"spark.master": "local[2]"})
    stopped = False
    try:
        first.start()
        name = unique_name("seq")
        created = first.rest("POST", "/connectors", json={"name": name, "config": seq_config(
            unique_name("out"), **{"tasks.max": "1", "partitions": "1"})})
        assert created.status_code == 201, created.text
        first.wait_tasks(name, "RUNNING", 1)

        # A rebalance: a second worker joins while the first is scraped non-stop.
        failures: list[str] = []
        done = threading.Event()

        def keep_scraping() -> None:
            while not done.is_set():
                try:
                    scrape(first, timeout=5)
                except (AssertionError, httpx.HTTPError) as e:
                    failures.append(repr(e))
                time.sleep(0.1)

        scraper = threading.Thread(target=keep_scraping, daemon=True)
        scraper.start()
        second.start()
        wait_for(lambda: value(scrape(second), "kafka_connect_worker_rebalance_leader",
                               worker=f"127.0.0.1:{second.port}", leader_name=first.url) == 1,
                 60, "the second worker to know the leader", interval=1)
        done.set()
        scraper.join(10)
        assert not failures, failures[:3]

        # A broker outage: every scrape still answers at once, with what was known.
        os.kill(broker.pid(), signal.SIGSTOP)
        stopped = True
        for w in (first, second):
            started = time.monotonic()
            samples = scrape(w, timeout=5)
            assert time.monotonic() - started < 5
            assert value(samples, "kafka_connect_connector_status", connector=name,
                         status="running") == 1
        assert value(scrape(first), "kafka_connect_source_task_source_record_poll_total",
                     connector=name, task="0") > 0
    finally:
        if stopped:
            os.kill(broker.pid(), signal.SIGCONT)
        second.stop()
        first.stop()
        broker.stop()
