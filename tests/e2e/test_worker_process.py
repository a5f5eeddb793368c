"""The worker as a process and a REST server: forced stops, every route, bad input."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from support.kafka import create_topic, free_port, wait_for
from support.processes import alive, process_tree
from support.workers import WorkerProcess

from connect_runtime import __version__

SEQ = "SequenceSourceConnector"
REPO = Path(__file__).resolve().parents[2]


def test_a_task_that_ignores_stop_is_cancelled_after_the_graceful_timeout(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("stuck")
    r = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.StuckSourceConnector"}})
    assert r.status_code == 201, r.text
    worker.wait_tasks(name, "RUNNING", 1)
    pid = next(s["pid"] for s in worker.slots() if s["connector"] == name)
    started = time.monotonic()
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    # task.shutdown.graceful.timeout.ms is 5 s: then Spark cancels the job and the
    # Python worker running the task is killed.
    wait_for(lambda: not alive(pid), 60, f"the stuck task's process {pid} to be killed")
    elapsed = time.monotonic() - started
    assert elapsed >= 4.5, f"killed after {elapsed:.1f}s, before the graceful timeout"
    assert all(s["connector"] != name for s in worker.slots())


def test_every_route_answers_with_connects_shapes(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("routes")
    create_topic(worker.bootstrap, topic)
    config = {"connector.class": SEQ, "topic": topic, "batch.size": "10",
              "rate.per.sec": "50"}
    root = worker.rest("GET", "/").json()
    assert set(root) == {"version", "commit", "kafka_cluster_id"}
    assert worker.rest("GET", "/health").json()["status"] == "healthy"
    created = worker.rest("PUT", f"/connectors/{name}/config", json=config)
    assert created.status_code == 201 and created.headers["location"] == f"/connectors/{name}"
    worker.wait_tasks(name, "RUNNING", 1)
    updated = worker.rest("PUT", f"/connectors/{name}/config", json={**config,
                                                                      "batch.size": "20"})
    assert updated.status_code == 200 and updated.json()["config"]["batch.size"] == "20"
    patched = worker.rest("PATCH", f"/connectors/{name}/config", json={"rate.per.sec": "60"})
    assert patched.status_code == 200 and patched.json()["config"]["rate.per.sec"] == "60"
    assert worker.rest("GET", f"/connectors/{name}/config").json()["rate.per.sec"] == "60"
    wait_for(lambda: worker.rest("GET", f"/connectors/{name}/tasks").json()[0]["config"]
             .get("rate.per.sec") == "60", 60, "task configs of the patched config")
    worker.wait_tasks(name, "RUNNING", 1)
    expanded = worker.rest("GET", "/connectors", params=[("expand", "status"),
                                                         ("expand", "info")]).json()
    assert set(expanded[name]) == {"status", "info"}
    assert expanded[name]["info"]["name"] == name
    task = worker.rest("GET", f"/connectors/{name}/tasks/0/status")
    assert task.status_code == 200 and task.json()["id"] == 0
    assert worker.rest("GET", f"/connectors/{name}/tasks/7/status").status_code == 404
    assert worker.rest("POST", f"/connectors/{name}/restart").status_code == 204
    plugins = worker.rest("GET", "/connector-plugins").json()
    bundled = "connect_runtime.connectors.sequence.SequenceSourceConnector"
    assert {"class": bundled, "type": "source"}.items() \
        <= next(p for p in plugins if p["class"].endswith("SequenceSourceConnector")).items()
    keys = {k["name"] for k in worker.rest("GET", f"/connector-plugins/{SEQ}/config").json()}
    assert {"topic", "batch.size", "transaction.boundary", "tasks.max"} <= keys
    missing = worker.rest("GET", "/connectors/does-not-exist/status")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_root_reports_the_commit_of_the_checkout_the_worker_runs_from(
        worker: WorkerProcess) -> None:
    """The test worker runs this checkout's code (an editable install): GET / names its
    HEAD, as ``git rev-parse HEAD`` does. An installed wheel reports the commit baked
    into it instead (test_packaging.py)."""
    if not (REPO / ".git").exists():
        pytest.skip("not run from a git checkout")
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout.strip()
    root = worker.rest("GET", "/").json()
    assert root["commit"] == head
    assert root["version"] == __version__


def test_the_cli_rejects_bad_worker_configs_naming_the_key(tmp_path: Path) -> None:
    props = tmp_path / "bad.properties"
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     "offset.storage.topic=o\nstatus.storage.topic=s\n"
                     "offset.flush.interval.ms=often\n")
    result = subprocess.run([sys.executable, "-m", "connect_runtime.cli", str(props)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "offset.flush.interval.ms" in result.stderr
    env = dict(os.environ, CONNECT_GROUP_ID="")
    props.write_text("bootstrap.servers=127.0.0.1:1\n")
    result = subprocess.run([sys.executable, "-m", "connect_runtime.cli", str(props)],
                            capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 2 and "group.id" in result.stderr
    props.write_text("bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\n"
                     "offset.storage.topic=o\nstatus.storage.topic=s\n"
                     "spark.task.maxFailures=1\n")
    result = subprocess.run([sys.executable, "-m", "connect_runtime.cli", str(props)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "spark.task.maxFailures" in result.stderr
    missing = subprocess.run([sys.executable, "-m", "connect_runtime.cli",
                              str(tmp_path / "nope.properties")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "nope.properties" in missing.stderr


def test_tasks_keep_working_across_session_key_rotations(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    import uuid

    w = WorkerProcess(kafka_bootstrap, f"ttl-{uuid.uuid4().hex[:8]}", free_port(), tmp_path,
                      {"inter.worker.key.ttl.ms": "2000"}).start()
    try:
        topic, name = unique_name("seq"), unique_name("ttl")
        create_topic(kafka_bootstrap, topic)
        assert w.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": SEQ, "topic": topic, "batch.size": "10",
            "rate.per.sec": "50"}}).status_code == 201
        w.wait_tasks(name, "RUNNING", 1)
        time.sleep(7)  # three rotations: slots must follow the key or be refused
        # A restart needs a pushed command and a signed fence request (startup).
        assert w.rest("POST", f"/connectors/{name}/tasks/0/restart").status_code == 204
        w.wait_tasks(name, "RUNNING", 1, timeout=60)
        slot = next(s for s in w.slots() if s["connector"] == name)
        assert slot["restart_seq"] == 1 and slot["connected"] and not slot["lost"]
    finally:
        assert w.stop() == 0


def test_tasks_spark_has_no_slot_for_say_so_in_their_status(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    import uuid

    w = WorkerProcess(kafka_bootstrap, f"short-{uuid.uuid4().hex[:8]}", free_port(), tmp_path,
                      {"spark.master": "local[2]"}).start()
    try:
        topic, name = unique_name("seq"), unique_name("short")
        create_topic(kafka_bootstrap, topic, partitions=3)
        assert w.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": SEQ, "topic": topic, "tasks.max": "3",
            "sequence.partitions": "3", "rate.per.sec": "10",
            # A process each: auto would fit all three in Spark's two slots.
            "tasks.per.process": "1"}}).status_code == 201

        def waiting() -> list[dict[str, str]]:
            tasks = w.status(name)["tasks"]
            return [t for t in tasks if t["state"] == "UNASSIGNED" and "trace" in t]
        wait_for(lambda: len(waiting()) == 1, 60, "the task without a slot to say why")
        trace = waiting()[0]["trace"]
        assert "need 3 slot(s) and Spark has 2" in trace and "local[N]" in trace
        assert sorted(t["state"] for t in w.status(name)["tasks"]) == [
            "RUNNING", "RUNNING", "UNASSIGNED"]
    finally:
        assert w.stop() == 0


def test_a_killed_workers_task_processes_die_with_it(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """SIGKILL of the worker process (what the OOM killer does): the Python
    processes running its tasks die with it, even though they sit in a process
    group of their own (PySpark's daemon's) and whatever the rest of the tree
    does. Before, they learnt of it only once the Spark JVM exited and then the
    daemon: here both are stopped (SIGSTOP, a JVM slow in its shutdown hooks), so
    the tasks went on polling and producing for as long as that lasted.
    docs/operations.md, "When a worker is killed"."""
    import uuid

    w = WorkerProcess(kafka_bootstrap, f"pdeath-{uuid.uuid4().hex[:8]}", free_port(), tmp_path,
                      {"spark.master": "local[2]"}).start()
    assert w.proc is not None
    tree: list[int] = []
    try:
        topic, name = unique_name("seq"), unique_name("pdeath")
        create_topic(kafka_bootstrap, topic, partitions=2)
        assert w.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": SEQ, "topic": topic, "tasks.max": "2",
            "rate.per.sec": "100"}}).status_code == 201
        w.wait_tasks(name, "RUNNING", 2)
        tasks = [s["pid"] for s in w.slots() if s["connector"] == name]
        tree = process_tree(w.proc.pid)
        assert len(tasks) == 2 and set(tasks) <= set(tree), (tasks, tree)
        # The premise: a kill of the worker's process group would miss them.
        assert all(os.getpgid(pid) != w.proc.pid for pid in tasks)
        for pid in tree:
            if pid not in (w.proc.pid, *tasks):
                os.kill(pid, signal.SIGSTOP)  # the JVM, PySpark's daemon
        w.signal(signal.SIGKILL)
        w.proc.wait(10)
        wait_for(lambda: not any(alive(pid) for pid in tasks), 30,
                 f"the task processes {tasks} to die with their worker")
    finally:
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        w.stop()
