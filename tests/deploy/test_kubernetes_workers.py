"""The chart's worker pods on a real kubelet, as an operator runs them.

One release with the chart's default values (the broker's address, one
replica of the internal topics for the one broker, ``pullPolicy: Never`` since
nothing may pull, and a plugin image), installed into a namespace that
enforces Pod Security ``restricted``. Then, through ``helm``, ``kubectl`` and
the client Service only (and each worker pod's own IP, to find the leader the
pods agree on):

* three worker pods become Ready through the chart's own probes; the REST API
  answers through the Service; a connector from the plugin image (copied in by
  the chart's init container) writes exactly once;
* a source at full rate (no rate limit, 1 kB records, two tasks) for 10 s
  leaves the leader's pod within its memory limit: no OOMKilled container,
  the pod's peak memory printed against the limit;
* the leader's pod is deleted, then the leader's container is SIGKILLed: the
  StatefulSet (or the kubelet) brings the worker back, and under the chart's
  static membership it is the leader again, nobody else elected in between
  (the config topic's ``leader`` records); the tasks resume from their
  committed offsets: 0 duplicates, 0 gaps (the project's verifier), with the
  time from the fault to progress again printed.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kube_cluster import (
    CHART,
    PLUGIN_CLASS,
    PLUGIN_IMAGE,
    Kube,
    committed_ends,
    leader_elections,
    leader_pod,
    pod_of,
    release_properties,
    rest,
    verify_exactly_once,
    wait_progress,
    wait_task_running,
)
from support.kafka import wait_for

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(900)]

WORKERS = "app.kubernetes.io/component=worker"


@dataclass
class Release:
    namespace: str
    name: str
    url: str     # the client Service, from the host


@pytest.fixture(scope="module")
def release(kube: Kube) -> Iterator[Release]:
    namespace = f"workers-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(namespace, {"pod-security.kubernetes.io/enforce": "restricted",
                                      "pod-security.kubernetes.io/enforce-version": "latest"})
    started = time.monotonic()
    try:
        kube.helm("install", "connect", str(CHART), "--namespace", namespace,
                  "--set", f"kafka.bootstrapServers={kube.kafka}",
                  "--set", "connect.replicationFactor=1",
                  "--set", "image.pullPolicy=Never",
                  "--set", "plugins.images[0].name=test",
                  "--set", f"plugins.images[0].image={PLUGIN_IMAGE}",
                  "--set", "plugins.images[0].path=/plugins")
        ready = kube.wait_ready(namespace, WORKERS, 3, 300)
        print(f"helm install to 3 Ready worker pods: {time.monotonic() - started:.1f}s "
              f"(waited {ready:.1f}s after helm returned)")
        yield Release(namespace, "connect",
                      kube.service_url(namespace, "connect-connect-runtime"))
    finally:
        kube.helm("uninstall", "connect", "--namespace", namespace, "--wait",
                  "--timeout", "180s", check=False)
        kube.delete_namespace(namespace)


def create_sequence(url: str, name: str, topic: str, **config: str) -> None:
    body = {"name": name, "config": {
        "connector.class": PLUGIN_CLASS, "topic": topic, "tasks.max": "1",
        "partitions": "2", "batch.size": "100", "exactly.once.support": "required",
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": "2", **config}}
    created = rest("POST", f"{url}/connectors", json=body)
    assert created.status_code == 201, created.text


def stop_connector(url: str, name: str) -> None:
    """Kafka Connect's PUT /stop: the tasks commit and stop, so nothing is left open."""
    stopped = rest("PUT", f"{url}/connectors/{name}/stop")
    assert stopped.status_code == 204, stopped.text
    wait_for(lambda: rest("GET", f"{url}/connectors/{name}/status").json()["connector"]["state"]
             == "STOPPED", 60, f"{name} STOPPED")


def test_default_install_serves_rest_and_runs_a_plugin_connector_exactly_once(
        kube: Kube, release: Release) -> None:
    root = rest("GET", f"{release.url}/")
    assert root.status_code == 200 and root.json()["kafka_cluster_id"], root.text
    plugins = [p["class"] for p in rest("GET", f"{release.url}/connector-plugins").json()]
    assert PLUGIN_CLASS in plugins, plugins
    # Every pod passed the restricted profile's admission.
    for pod in kube.pods(release.namespace, WORKERS):
        assert pod["spec"]["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    topic = f"plugin-{uuid.uuid4().hex[:6]}"
    create_sequence(release.url, "plugin", topic, **{"max.records": "3000"})
    wait_for(lambda: sum(committed_ends(kube.kafka, topic, 2)) >= 6000, 180,
             "6000 committed records", interval=1)
    report = verify_exactly_once(kube.kafka, topic, 2)
    assert sorted(g.count for g in report.groups) == [3000, 3000]
    print(f"plugin connector: {[(g.label, g.count, g.first, g.last) for g in report.groups]}")
    assert rest("DELETE", f"{release.url}/connectors/plugin").status_code == 204


@pytest.mark.parametrize("fault", ["delete-pod", "sigkill-container"])
def test_the_leader_lost_resumes_exactly_once(kube: Kube, release: Release, fault: str) -> None:
    url = release.url
    name, topic = f"leader-{fault}", f"leader-{fault}-{uuid.uuid4().hex[:6]}"
    create_sequence(url, name, topic, **{"rate.per.sec": "2000"})
    status = wait_task_running(url, name, 120)
    leader = leader_pod(kube, release.namespace, WORKERS)
    assert leader in status["tasks"][0]["worker_id"], (leader, status)
    wait_progress(kube.kafka, topic, 2, 2000, 120)
    before = kube.get("pod", "-n", release.namespace, leader)
    restarts = before["status"]["containerStatuses"][0].get("restartCount", 0)
    config_topic = release_properties(kube, release.namespace,
                                      "connect-connect-runtime")["config.storage.topic"]
    elected_before = len(leader_elections(kube.kafka, config_topic))

    faulted = time.monotonic()
    if fault == "delete-pod":
        # A graceful stop: the tasks commit and stop, and the worker keeps its
        # place in the group (the chart's static membership), so nobody takes
        # over; the StatefulSet's new pod of the same name takes it back and
        # the tasks resume there. The replacement exists only once the old pod
        # is gone: from then on the committed records are the new tasks'.
        kube.kubectl("delete", "pod", "-n", release.namespace, leader, "--wait=false")

        def replaced() -> bool:
            return any(p["metadata"]["name"] == leader
                       and p["metadata"]["uid"] != before["metadata"]["uid"]
                       for p in kube.pods(release.namespace, WORKERS))
        wait_for(replaced, 180, f"{leader}'s replacement pod", interval=0.5)
    else:
        # Nothing is committed by a killed process: any progress after the kill
        # is the tasks' new incarnation, in the restarted container.
        os.kill(kube.container_pid(release.namespace, leader), signal.SIGKILL)
        time.sleep(1)  # a commit already on the wire lands
    resumed_at = committed_ends(kube.kafka, topic, 2)
    wait_progress(kube.kafka, topic, 2, resumed_at, 180)
    to_progress = time.monotonic() - faulted
    moved = wait_task_running(url, name, 60)
    new_leader = leader_pod(kube, release.namespace, WORKERS)
    assert new_leader in moved["tasks"][0]["worker_id"], (new_leader, moved)
    # Static membership: the leader's place waited for its own worker, and
    # nobody else was elected in between.
    elected = [pod_of(e["url"]) for e in
               leader_elections(kube.kafka, config_topic)[elected_before:]]
    assert new_leader == leader and elected == [leader], (leader, new_leader, elected)

    # The worker comes back: a new pod from the StatefulSet, or the same pod's
    # container restarted by the kubelet.
    kube.wait_ready(release.namespace, WORKERS, 3, 300)
    after = kube.get("pod", "-n", release.namespace, leader)
    if fault == "delete-pod":
        assert after["metadata"]["uid"] != before["metadata"]["uid"]
    else:
        assert after["status"]["containerStatuses"][0]["restartCount"] == restarts + 1
    back = time.monotonic() - faulted

    stop_connector(url, name)
    report = verify_exactly_once(kube.kafka, topic, 2)
    groups = [(g.label, g.count, g.first, g.last, len(g.duplicates), g.missing)
              for g in report.groups]
    print(f"{fault} of leader {leader}: tasks on {new_leader}; fault to progress again "
          f"{to_progress:.1f}s; worker back Ready after {back:.1f}s; verifier (group, count, "
          f"first, last, duplicates, missing): {groups}, "
          f"aborted={sum(g.aborted for g in report.groups)}")
    assert rest("DELETE", f"{url}/connectors/{name}").status_code == 204


def pod_memory_peak(pod: dict[str, Any]) -> int:
    """The pod's peak memory in bytes, from its cgroup (v1 here) on this node."""
    qos = pod["status"]["qosClass"].lower()
    uid = pod["metadata"]["uid"]
    folder = Path("/sys/fs/cgroup/memory/kubepods")
    folder = folder / f"pod{uid}" if qos == "guaranteed" else folder / qos / f"pod{uid}"
    return int((folder / "memory.max_usage_in_bytes").read_text())


def test_a_source_at_full_rate_stays_within_the_pods_memory(
        kube: Kube, release: Release) -> None:
    url = release.url
    name, topic = "full-rate", f"full-rate-{uuid.uuid4().hex[:6]}"
    create_sequence(url, name, topic, **{"tasks.max": "2", "batch.size": "1000",
                                         "record.size.bytes": "1000"})
    wait_task_running(url, name, 120)
    leader = leader_pod(kube, release.namespace, WORKERS)
    # The leader may be a worker an earlier test restarted (the SIGKILL above):
    # what counts is that nothing restarts during this run.
    before = kube.get("pod", "-n", release.namespace, leader)["status"]["containerStatuses"][0]
    start = committed_ends(kube.kafka, topic, 2)
    time.sleep(10)  # the buffers fill within seconds; the verifier reads it all back
    end = committed_ends(kube.kafka, topic, 2)
    stop_connector(url, name)
    pod = kube.get("pod", "-n", release.namespace, leader)
    status = pod["status"]["containerStatuses"][0]
    limit = pod["spec"]["containers"][0]["resources"]["limits"]["memory"]
    peak = pod_memory_peak(pod)
    print(f"full rate for 10 s: {sum(end) - sum(max(s, 0) for s in start)} records of 1 kB "
          f"committed; leader pod {leader} peak memory {peak / 2**20:.0f} MiB of {limit}; "
          f"restarts {status.get('restartCount', 0)}")
    assert status.get("restartCount", 0) == before.get("restartCount", 0), status
    assert status.get("lastState") == before.get("lastState"), status  # no new OOMKilled
    verify_exactly_once(kube.kafka, topic, 2)
    assert rest("DELETE", f"{url}/connectors/{name}").status_code == 204
