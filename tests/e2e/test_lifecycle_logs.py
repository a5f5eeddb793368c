"""Lifecycle log lines (docs/operations.md, "Logs") from a real worker: one line
per event, naming the connector and task, as JSON lines on request or Connect-like
text by default; and the CLI refusing an unknown log format."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support.kafka import create_topic, free_port, read_topic, wait_for
from support.offsets import committed
from support.workers import WorkerProcess

SEQ = "SequenceSourceConnector"
FAILING = "testconnectors.FailingSourceConnector"
# A line in the text format: what JSON mode must never write for the worker's own logs.
TEXT_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] [A-Z]+ ")


def json_lines(worker: WorkerProcess) -> list[dict[str, Any]]:
    """The worker's JSON log lines, parsed (Spark's JVM writes text lines of its own
    to the same output)."""
    text = worker.log_path.read_text(errors="replace")
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def events(worker: WorkerProcess, event: str, /, **fields: Any) -> list[dict[str, Any]]:
    return [line for line in json_lines(worker) if line.get("event") == event
            and all(line.get(k) == v for k, v in fields.items())]


def wait_event(worker: WorkerProcess, event: str, count: int = 1, /,
               **fields: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wait_for(
        lambda: (lines := events(worker, event, **fields)) and len(lines) >= count and lines,
        60, f"{count} {event} line(s) with {fields} in {worker.log_path}")
    return found


def test_lifecycle_events_are_json_lines_naming_connector_and_task(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    worker = WorkerProcess(kafka_bootstrap, unique_name("logs"), free_port(), tmp_path,
                           env={"CONNECT_LOG_FORMAT": "json"})
    topic, seq, failing = unique_name("out"), unique_name("seq"), unique_name("failing")
    create_topic(kafka_bootstrap, topic)
    worker.start()
    try:
        [elected] = wait_event(worker, "leader_elected")
        assert elected["worker"] == f"127.0.0.1:{worker.port}" and elected["epoch"] >= 0
        assert elected["level"] == "INFO" and elected["logger"] == "connect_runtime.cluster.herder"
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", elected["ts"])

        # Created with one task, then reconfigured to two: new task configs, and the
        # first generation's producer fenced for the second (KIP-618).
        config = {"connector.class": SEQ, "topic": topic, "rate.per.sec": "20",
                  "tasks.max": "1"}
        assert worker.rest("PUT", f"/connectors/{seq}/config", json=config).status_code == 201
        worker.wait_tasks(seq, "RUNNING", 1)
        wait_event(worker, "connector_created", connector=seq)
        wait_event(worker, "connector_started", connector=seq)
        [first] = wait_event(worker, "task_configs_written", connector=seq)
        assert first["tasks"] == 1
        [started] = wait_event(worker, "task_started", connector=seq, task=0)
        assert started["generation"] == first["generation"] and started["restart"] == 0
        assert started["pid"] > 0 and started["host"] and started["attempt"] == 0
        assert f"task {seq}-0 started on host " in started["message"]

        r = worker.rest("PUT", f"/connectors/{seq}/config", json={**config, "tasks.max": "2"})
        assert r.status_code == 200, r.text
        worker.wait_tasks(seq, "RUNNING", 2)
        [reconfigured] = wait_event(worker, "connector_reconfigured", connector=seq)
        assert reconfigured["message"] == f"connector {seq} reconfigured: changed tasks.max"
        [_, second] = wait_event(worker, "task_configs_written", 2, connector=seq)
        assert second["tasks"] == 2 and second["generation"] > first["generation"]
        [fenced] = wait_event(worker, "producers_fenced", connector=seq)
        assert fenced["generation"] == second["generation"] and fenced["producers"] == 1
        assert fenced["message"].startswith(
            f"fenced 1 producer(s) of connector {seq} for generation {second['generation']}")
        wait_event(worker, "task_started", connector=seq, task=1,
                   generation=second["generation"])

        # A task that fails, is restarted through REST, and fails again.
        r = worker.rest("POST", "/connectors", json={"name": failing, "config": {
            "connector.class": FAILING, "topic": topic, "fail.after": "5"}})
        assert r.status_code == 201, r.text
        worker.wait_tasks(failing, "FAILED", 1)
        [failed] = wait_event(worker, "task_failed", connector=failing, task=0)
        assert failed["level"] == "ERROR" and "\n" not in failed["message"]
        assert failed["message"].endswith(
            "RuntimeError: boom: failing task gave up at seq 5"), failed["message"]
        assert "exc" not in failed  # the whole trace is in the task's status, not here
        r = worker.rest("POST", f"/connectors/{failing}/tasks/0/restart")
        assert r.status_code == 204, r.text
        [restart] = wait_event(worker, "task_restart_requested", connector=failing, task=0)
        assert restart["restart"] == 1, restart
        # The restarted instance fails again at once (its slot may report FAILED
        # without a RUNNING in between: a slot reports its latest state).
        [_, again] = wait_event(worker, "task_failed", 2, connector=failing, task=0)
        assert again["restart"] == 1, again

        assert worker.rest("DELETE", f"/connectors/{failing}").status_code == 204
        wait_event(worker, "connector_deleted", connector=failing)
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
    assert events(worker, "leadership_lost", worker=f"127.0.0.1:{worker.port}")
    # One line per event: the second generation's task 0 started once, for example.
    assert len(events(worker, "task_started", connector=seq, task=0,
                      generation=second["generation"])) == 1
    assert len(events(worker, "connector_created")) == 2
    # Every line of the worker's own logging is JSON, from the first (config warnings
    # are logged before the worker starts) to the last.
    text = worker.log_path.read_text(errors="replace").splitlines()
    assert not [line for line in text if TEXT_LINE.match(line)], worker.tail()


def run_briefly(worker: WorkerProcess, name: str, topic: str) -> None:
    """A sequence connector into a new topic, until its task runs; then deleted."""
    create_topic(worker.bootstrap, topic)
    r = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": topic, "rate.per.sec": "20"}})
    assert r.status_code == 201, r.text
    worker.wait_tasks(name, "RUNNING", 1)
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_the_default_text_format_is_unchanged(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("text")
    run_briefly(worker, name, unique_name("out"))
    created = re.compile(rf"^\[[\d:, -]+\] INFO connector {re.escape(name)} created "
                         r"\(SequenceSourceConnector, target state STARTED\) "
                         r"\(connect_runtime\.cluster\.herder\)$", re.MULTILINE)
    started = re.compile(rf"^\[[\d:, -]+\] INFO task {re.escape(name)}-0 started on host \S+, "
                         r"pid \d+, Spark attempt 0 \(generation \d+, restart 0\) "
                         r"\(connect_runtime\.cluster\.slot_registry\)$", re.MULTILINE)
    wait_for(lambda: created.search(worker.log_path.read_text(errors="replace"))
             and started.search(worker.log_path.read_text(errors="replace")),
             30, "the text lines of the connector's creation and its task's start")


def test_the_cli_rejects_an_unknown_log_format_naming_the_option_or_variable(
        tmp_path: Path) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     "offset.storage.topic=o\nstatus.storage.topic=s\n")
    cli = [sys.executable, "-m", "connect_runtime.cli"]
    result = subprocess.run([*cli, "worker", "--log-format", "xml", str(props)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "--log-format" in result.stderr, result.stderr
    env = dict(os.environ, CONNECT_LOG_FORMAT="xml")
    result = subprocess.run([*cli, str(props)], capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 2, result.stderr
    assert "CONNECT_LOG_FORMAT='xml' is not a log format" in result.stderr


def test_spark_says_nothing_per_connector_or_about_its_start(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    """Each connector's Spark job runs in a FAIR pool defined beforehand, so
    Spark logs no "pool ... has not been configured" warning per connector;
    and the driver's log configuration keeps Spark's start-up chatter (its
    log4j profile banner, the native-hadoop warning, the loopback warning) out
    of the worker's log."""
    for i in range(2):
        run_briefly(worker, unique_name(f"pool{i}"), unique_name("out"))
    text = worker.log_path.read_text(errors="replace")
    for noise in ("scheduler pool", "log4j profile", "Setting default log level",
                  "native-hadoop", "resolves to a loopback address"):
        assert noise not in text, [line for line in text.splitlines() if noise in line]


PID_RETRY = "Failed to acquire transactional PID"


def wait_for_line(worker: WorkerProcess, pattern: str, what: str) -> None:
    wait_for(lambda: re.search(pattern, worker.log_path.read_text(errors="replace")), 60, what)


def uncommitted(worker: WorkerProcess, topic: str) -> int:
    return len(read_topic(worker.bootstrap, topic, "read_uncommitted"))


def wait_for_more_records(worker: WorkerProcess, topic: str, what: str) -> None:
    """Until 100 more records are in ``topic``, committed or not."""
    produced = uncommitted(worker, topic)
    wait_for(lambda: uncommitted(worker, topic) >= produced + 100, 60, what)


def test_restarts_and_fencing_leave_no_unexplained_warnings(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """docs/operations.md, "What the log says": a new user's worker whose
    exactly-once task is restarted through REST (after its process died inside a
    transaction, then gracefully) and reconfigured (fencing) logs neither
    librdkafka's "Failed to acquire transactional PID ... retrying" nor Spark's
    "resolves to a loopback address", and the task keeps working.

    The retry does happen: the killed task leaves its transaction open, and the
    transaction coordinator answers the restarted task's InitProducerId with
    CONCURRENT_TRANSACTIONS while it aborts that transaction (always, for an
    ongoing one: Kafka's TransactionCoordinator.handleInitProducerId). The
    graceful restarts and the fencing retry whenever the previous transaction's
    commit markers are still being written."""
    worker = WorkerProcess(kafka_bootstrap, unique_name("noise"), free_port(), tmp_path)
    name, topic = unique_name("seq"), unique_name("out")
    create_topic(kafka_bootstrap, topic)
    worker.start()
    try:
        # A 10-minute interval: records stay in one open transaction until the task stops.
        config = {"connector.class": SEQ, "topic": topic, "rate.per.sec": "200",
                  "batch.size": "20", "tasks.max": "1", "transaction.boundary": "interval",
                  "transaction.boundary.interval.ms": "600000"}
        assert worker.rest("PUT", f"/connectors/{name}/config", json=config).status_code == 201
        worker.wait_tasks(name, "RUNNING", 1)
        wait_for(lambda: uncommitted(worker, topic) >= 100, 60, "records in the open transaction")
        assert committed(worker.bootstrap, topic) == 0
        slot = next(s for s in worker.slots() if s["connector"] == name)
        os.kill(slot["pid"], signal.SIGKILL)
        worker.wait_tasks(name, "FAILED", 1)

        for restart in (1, 2, 3):
            r = worker.rest("POST", f"/connectors/{name}/tasks/0/restart")
            assert r.status_code == 204, r.text
            wait_for_line(worker, rf"INFO task {re.escape(name)}-0 started on host \S+, "
                          rf"pid \d+, Spark attempt \d+ \(generation \d+, restart {restart}\)",
                          f"task {name}-0 started (restart {restart})")
            wait_for_more_records(worker, topic, f"records of restart {restart}")
        # The graceful stops committed: the restarted task's records are readable.
        assert committed(worker.bootstrap, topic) > 0

        # Two tasks: the leader fences the first generation's producer (KIP-618).
        before = committed(worker.bootstrap, topic)
        r = worker.rest("PUT", f"/connectors/{name}/config", json={**config, "tasks.max": "2"})
        assert r.status_code == 200, r.text
        wait_for_line(worker, rf"INFO fenced 1 producer\(s\) of connector {re.escape(name)} ",
                      "the first generation's producer fenced")
        worker.wait_tasks(name, "RUNNING", 2)
        assert committed(worker.bootstrap, topic) > before  # the stop before fencing committed
        wait_for_more_records(worker, topic, "records of the reconfigured tasks")
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
    text = worker.log_path.read_text(errors="replace")
    unexplained = [line for line in text.splitlines()
                   if "resolves to a loopback address" in line or PID_RETRY in line]
    assert not unexplained, "\n".join(unexplained)
