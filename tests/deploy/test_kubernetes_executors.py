"""``spark.mode=kubernetes`` on a real kubelet: the leader's Spark driver runs
the tasks on executor pods it creates, over the pod network.

* executor pods of the chart's template run the tasks (each task's status
  names the executor pod it runs in);
* an executor pod deleted in the middle of a transaction: its task shows FAILED
  within seconds naming that pod, the driver replaces the executor, the task
  is restarted (REST, as an operator would) and resumes from its committed
  offsets, and the output is exactly once;
* the worker's container killed and restarted by the kubelet (the pod stays):
  the new driver deletes the executor pods the dead one left;
* ``helm uninstall`` leaves no executor pod behind.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kube_cluster import (
    CHART,
    Kube,
    committed_ends,
    rest,
    verify_exactly_once,
    wait_progress,
    wait_task_running,
)
from support.kafka import wait_for

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(900)]

WORKERS = "app.kubernetes.io/component=worker"
EXECUTORS = "spark-role=executor"


@pytest.fixture(scope="module")
def namespace(kube: Kube) -> Iterator[str]:
    namespace = f"executors-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(namespace, {"pod-security.kubernetes.io/enforce": "restricted",
                                      "pod-security.kubernetes.io/enforce-version": "latest"})
    try:
        yield namespace
    finally:
        kube.delete_namespace(namespace)


def task_hosts(status: dict[str, Any]) -> list[str]:
    return [str(t.get("trace", "")) for t in status["tasks"]]


def test_executor_pods_run_the_tasks_and_an_executor_lost_mid_transaction_recovers(
        kube: Kube, namespace: str) -> None:
    # A node of 2 CPUs: one worker and two executors, with requests that fit.
    started = time.monotonic()
    kube.helm("install", "connect", str(CHART), "--namespace", namespace,
              "--set", f"kafka.bootstrapServers={kube.kafka}",
              "--set", "connect.replicationFactor=1",
              "--set", "image.pullPolicy=Never",
              "--set", "replicaCount=1",
              "--set", "resources.requests.cpu=250m",
              "--set", "spark.mode=kubernetes",
              "--set", "spark.kubernetes.executor.instances=2",
              "--set", "spark.kubernetes.executor.cores=1",
              "--set", "spark.kubernetes.executor.memory=768m",
              "--set-string", "spark.kubernetes.executor.memoryOverhead=768m",
              "--set-string", "spark.conf.spark\\.kubernetes\\.executor\\.request\\.cores=250m")
    kube.wait_ready(namespace, WORKERS, 1, 300)
    executors = [p["metadata"]["name"] for p in kube.pods(namespace, EXECUTORS)]
    url = kube.service_url(namespace, "connect-connect-runtime")
    try:
        name, topic = "seq", f"exec-{uuid.uuid4().hex[:6]}"
        created = rest("POST", f"{url}/connectors", json={"name": name, "config": {
            "connector.class": "SequenceSourceConnector", "topic": topic, "tasks.max": "2",
            "partitions": "2", "batch.size": "100", "rate.per.sec": "1000",
            "exactly.once.support": "required",
            # Long transactions: a deletion lands inside one.
            "transaction.boundary": "interval", "transaction.boundary.interval.ms": "3000",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "2"}})
        assert created.status_code == 201, created.text
        wait_task_running(url, name, 240)
        print(f"helm install to tasks RUNNING on executor pods: "
              f"{time.monotonic() - started:.1f}s")
        wait_progress(kube.kafka, topic, 2, 1000, 120)

        # Each task runs in an executor pod (the slot reports its host name,
        # which is the pod's name).
        slots = rest("GET", f"{url}/internal/tasks").json()
        hosts = {s["host"] for s in slots}
        executors = [p["metadata"]["name"] for p in kube.pods(namespace, EXECUTORS)
                     if p["status"].get("phase") == "Running"]
        assert hosts <= set(executors) and hosts, (hosts, executors)

        victim = sorted(hosts)[0]
        deleted = time.monotonic()
        kube.kubectl("delete", "pod", "-n", namespace, victim, "--wait=false",
                     "--grace-period=0", "--force")

        def failed_task() -> dict[str, Any] | None:
            status = rest("GET", f"{url}/connectors/{name}/status").json()
            failed = [t for t in status["tasks"] if t["state"] == "FAILED"]
            return failed[0] if failed else None
        task = wait_for(failed_task, 60, "the task on the deleted executor to show FAILED",
                        interval=0.2)
        to_failed = time.monotonic() - deleted
        assert victim in task["trace"], task["trace"]
        print(f"executor pod {victim} deleted: task {task['id']} FAILED after {to_failed:.1f}s:"
              f" {task['trace'].splitlines()[0]}")

        # The driver replaces the executor; a restart puts the task back on it.
        wait_for(lambda: len([p for p in kube.pods(namespace, EXECUTORS)
                              if p["status"].get("phase") == "Running"
                              and p["metadata"]["name"] != victim]) == 2, 180,
                 f"a replacement executor pod:\n{kube.describe(namespace, EXECUTORS)}")
        restarted = rest("POST", f"{url}/connectors/{name}/restart",
                         params={"includeTasks": "true", "onlyFailed": "true"})
        assert restarted.status_code in (200, 202, 204), restarted.text
        wait_task_running(url, name, 180)
        resumed_at = committed_ends(kube.kafka, topic, 2)
        wait_progress(kube.kafka, topic, 2, resumed_at, 120)
        print(f"executor loss to progress again: {time.monotonic() - deleted:.1f}s")

        stopped = rest("PUT", f"{url}/connectors/{name}/stop")
        assert stopped.status_code == 204, stopped.text
        wait_for(lambda: rest("GET", f"{url}/connectors/{name}/status").json()["connector"]
                 ["state"] == "STOPPED", 60, "the connector STOPPED")
        report = verify_exactly_once(kube.kafka, topic, 2)
        groups = [(g.label, g.count, g.first, g.last, len(g.duplicates), g.missing)
                  for g in report.groups]
        print(f"verifier (group, count, first, last, duplicates, missing): {groups}, "
              f"aborted={sum(g.aborted for g in report.groups)}")
        assert sum(g.aborted for g in report.groups) > 0, \
            "the deleted executor's open transaction should have been aborted"

        # The worker's container dies (as an OOM kill would) and the kubelet
        # restarts it in the same pod: the new driver deletes the executor
        # pods the dead one left, which the pod still owns.
        worker = kube.ready_pods(namespace, WORKERS)[0]
        before = {p["metadata"]["name"] for p in kube.pods(namespace, EXECUTORS)}
        os.kill(kube.container_pid(namespace, worker), signal.SIGKILL)
        killed = time.monotonic()

        def replaced_all() -> bool:
            now = kube.pods(namespace, EXECUTORS)
            running = [p for p in now if p["status"].get("phase") == "Running"]
            return not before & {p["metadata"]["name"] for p in now} and len(running) == 2
        wait_for(replaced_all, 180, f"the dead driver's executor pods {sorted(before)} gone "
                 f"and two new ones running:\n{kube.describe(namespace, EXECUTORS)}")
        print(f"worker container killed: its executor pods replaced after "
              f"{time.monotonic() - killed:.1f}s")
        logged = kube.kubectl("logs", "-n", namespace, worker).stdout
        assert f"an earlier driver in pod {worker} left" in logged, logged[-3000:]
    finally:
        kube.helm("uninstall", "connect", "--namespace", namespace, "--wait",
                  "--timeout", "180s", check=False)
    wait_for(lambda: not kube.pods(namespace, EXECUTORS), 120,
             "no executor pod after helm uninstall")
    assert executors, "no executor pod ever ran"
