"""Tasks on a real Spark standalone cluster: a master and two workers started from
PySpark's own jars on loopback (tests/support/spark_standalone.py), executors in JVMs of
their own, a connector that only ``plugin.path`` holds (tests/e2e/user_plugins.py),
and the faults a cluster brings: an executor JVM killed, a task's Python worker
killed mid-transaction, the leader (the Spark driver) killed. After each, the
output is checked exactly once with ``connect-runtime verify``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster
from support.kafka import create_topic, free_port, read_topic, wait_for
from support.offsets import committed
from support.spark_standalone import (  # noqa: F401 (fixture)
    SparkStandaloneCluster,
    spark_cluster_module_fixture,
)
from support.workers import WorkerProcess
from user_plugins import write_plugin

from connect_runtime.protocol.slot_channel import LIVENESS_TIMEOUT_S

pytestmark = pytest.mark.spark_cluster

TASKS = 3


def worker_settings(spark: SparkStandaloneCluster, plugin_dir: Path) -> dict[str, str]:
    # One core per executor: every task runs in an executor JVM of its own, and
    # the fourth executor is where Spark re-runs a slot whose executor died.
    return {**spark.driver_conf(), "plugin.path": str(plugin_dir),
            "spark.executor.cores": "1", "spark.cores.max": "4",
            "spark.executor.memory": "512m", "spark.driver.memory": "512m"}


def user_plugin(tmp_path: Path) -> tuple[Path, str]:
    package = f"clusterplugin_{uuid.uuid4().hex[:12]}"
    write_plugin(tmp_path / "plugins", package)
    return tmp_path / "plugins", package


def create_counting(worker: WorkerProcess, name: str, topic: str) -> None:
    create_topic(worker.bootstrap, topic, partitions=TASKS)
    r = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "UserCountingSource", "tasks.max": str(TASKS), "topic": topic,
        "records.per.task": "0", "poll.interval.ms": "20",
        # Transactions stay open for a while, so a kill lands inside one.
        "transaction.boundary": "interval", "transaction.boundary.interval.ms": "700"}})
    assert r.status_code == 201, r.text


def grows(bootstrap: str, topic: str, beyond: int, timeout: float = 120) -> int:
    count: int = wait_for(lambda: (n := committed(bootstrap, topic)) > beyond and n, timeout,
                          f"committed records in {topic} beyond {beyond}", interval=1)
    return count


def stop_and_verify(worker: WorkerProcess, name: str, topic: str) -> None:
    """Stop the connector (a final commit), then: every task's records exactly once,
    and its committed offset is exactly the number of records it wrote."""
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name).get("connector", {}).get("state") == "STOPPED", 120,
             f"{name} to stop")
    result = subprocess.run(
        [sys.executable, "-m", "connect_runtime.cli", "verify", "--bootstrap-server",
         worker.bootstrap, "--topic", topic, "--seq-field", "n", "--group-field", "task",
         "--expect-groups", ",".join(map(str, range(TASKS))), "--timeout", "60"],
        capture_output=True, text=True, timeout=300)
    print(result.stdout)
    assert result.returncode == 0 and result.stdout.rstrip().endswith("OK"), result.stdout
    per_task: dict[int, int] = {}
    for record in read_topic(worker.bootstrap, topic):
        per_task[record["value"]["task"]] = per_task.get(record["value"]["task"], 0) + 1
    offsets = worker.rest("GET", f"/connectors/{name}/offsets").json()["offsets"]
    assert {o["partition"]["task"]: o["offset"]["n"] for o in offsets} == per_task


def task_state(worker: WorkerProcess, name: str, task: int) -> dict[str, Any]:
    tasks = worker.status(name).get("tasks", [])
    return next((t for t in tasks if t["id"] == task), {})


def slot_of(worker: WorkerProcess, name: str, task: int) -> dict[str, Any]:
    return next(s for s in worker.slots() if s["connector"] == name and s["task"] == task)


def executor_running(spark: SparkStandaloneCluster, python_pid: int) -> int:
    """The executor JVM whose Python worker is ``python_pid``."""
    found: int = wait_for(lambda: next((e.pid for e in spark.executors()
                                        if python_pid in spark.python_workers(e.pid)), None),
                          30, f"the executor JVM of Python worker {python_pid}")
    return found


def test_a_plugin_path_connector_survives_executor_and_python_worker_kills(
        spark_cluster_module: SparkStandaloneCluster, kafka_bootstrap: str, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    spark = spark_cluster_module
    plugin_dir, _ = user_plugin(tmp_path)
    worker = WorkerProcess(kafka_bootstrap, unique_name("standalone"), free_port(), tmp_path,
                           worker_settings(spark, plugin_dir), env=spark.driver_env())
    worker.start()
    try:
        name, topic = unique_name("user"), unique_name("out")
        create_counting(worker, name, topic)
        worker.wait_tasks(name, "RUNNING", TASKS, timeout=180)
        executors = {t: executor_running(spark, slot_of(worker, name, t)["pid"])
                     for t in range(TASKS)}
        assert len(set(executors.values())) == TASKS  # each task in a JVM of its own
        grows(kafka_bootstrap, topic, 0)

        # 1. An executor JVM dies (SIGKILL): its task's status leaves RUNNING
        # within the liveness timeout, long before Spark's own detection.
        killed_at = time.monotonic()
        os.kill(executors[0], signal.SIGKILL)
        wait_for(lambda: task_state(worker, name, 0).get("state") != "RUNNING",
                 LIVENESS_TIMEOUT_S, "task 0 to leave RUNNING after its executor died")
        left_running_s = time.monotonic() - killed_at
        state = task_state(worker, name, 0)
        assert state["state"] == "FAILED" and "lost" in state["trace"], state
        print(f"status left RUNNING {left_running_s:.2f} s after the executor kill")
        assert [task_state(worker, name, t)["state"] for t in (1, 2)] == ["RUNNING"] * 2
        r = worker.rest("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
        assert r.status_code == 202, r.text
        worker.wait_tasks(name, "RUNNING", TASKS, timeout=240)
        before = grows(kafka_bootstrap, topic, committed(kafka_bootstrap, topic))

        # 2. A task's Python worker dies mid-transaction (SIGKILL).
        os.kill(slot_of(worker, name, 1)["pid"], signal.SIGKILL)
        wait_for(lambda: task_state(worker, name, 1).get("state") == "FAILED",
                 LIVENESS_TIMEOUT_S, "task 1 to fail after its Python worker died")
        assert worker.rest("POST", f"/connectors/{name}/tasks/1/restart").status_code == 204
        worker.wait_tasks(name, "RUNNING", TASKS, timeout=240)
        grows(kafka_bootstrap, topic, before)

        stop_and_verify(worker, name, topic)
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()


def test_a_new_leader_runs_the_tasks_on_the_cluster_after_the_leader_is_killed(
        spark_cluster_module: SparkStandaloneCluster, kafka_bootstrap: str, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    spark = spark_cluster_module
    plugin_dir, _ = user_plugin(tmp_path)
    cluster = Cluster(kafka_bootstrap, tmp_path, 3, worker_settings(spark, plugin_dir),
                      env=spark.driver_env()).start()
    try:
        leader = cluster.wait_agreed_leader()
        app = f"connect-runtime-{leader.group}"
        name, topic = unique_name("failover"), unique_name("out")
        create_counting(leader, name, topic)
        leader.wait_tasks(name, "RUNNING", TASKS, timeout=180)
        # Only the leader holds a Spark application: standbys would hold cores.
        assert [a["name"] for a in spark.applications()].count(app) == 1
        first_app = {a["id"] for a in spark.applications() if a["name"] == app}
        before = grows(kafka_bootstrap, topic, 0)

        leader.signal_tree(signal.SIGKILL)  # the whole pod: worker, driver JVM, all
        new = cluster.wait_leader(timeout=120, other_than=leader)
        # RUNNING as the new leader reports it: the old leader's RUNNING stays in
        # the status topic until the new one resubmits the tasks.
        wait_for(lambda: [(t["state"], t["worker_id"]) for t in new.status(name)["tasks"]]
                 == [("RUNNING", f"127.0.0.1:{new.port}")] * TASKS, 300,
                 "the new leader's tasks to run")
        apps = {a["id"] for a in spark.applications() if a["name"] == app}
        assert len(apps) == 1 and apps != first_app  # the new leader's application
        grows(kafka_bootstrap, topic, before)
        stop_and_verify(new, name, topic)
    finally:
        cluster.stop()
