"""The real single-node Kubernetes cluster of deploy/kubernetes/cluster.sh, for
the tests that run the chart's pods on a kubelet (marker ``kubernetes``).

One cluster per pytest session (``kube`` fixture, tests/deploy/conftest.py):
``cluster.sh up`` (control plane, kubelet on containerd, CoreDNS, a Kafka
broker on the bridge), the project's image and a plugin image imported into the
node, ``cluster.sh down`` at the end, which must leave nothing behind. The
tests act as an operator does, through ``helm`` and ``kubectl`` only; they read
Kafka from the host, where the broker listens on the bridge's address, and
reach Services from the host through kube-proxy's rules. Which worker leads is
what the worker pods agree on (:func:`leader_pod`, support.cluster's
``agreed_leader``), each asked at its pod IP on the bridge: their advertised
names resolve only inside the cluster.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from confluent_kafka import Consumer, IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support import REPO
from support.cluster import LeaderView, agreed_leader
from support.kafka import wait_for
from support.kube_script import cluster_module

from connect_runtime.java_properties import parse_properties
from connect_runtime.tools.verify import Report, verify_topics

CLUSTER_SH = REPO / "deploy" / "kubernetes" / "cluster.sh"
CHART = REPO / "deploy" / "helm" / "connect-runtime"
PLUGIN_IMAGE = "localhost/connect-runtime-test/plugins:1"
PLUGIN_CLASS = "k8s_test_plugins.PluginSequenceConnector"
WORKERS = "app.kubernetes.io/component=worker"  # the chart's worker pods
REST_PORT = 8083  # the chart's connect.restPort
PLUGIN_SOURCE = '''\
"""A connector package brought into the workers by the chart's plugins.images."""
from connect_runtime.connectors.sequence import SequenceSourceConnector


class PluginSequenceConnector(SequenceSourceConnector):
    """The bundled sequence connector, found through plugin.path."""
'''


def cluster_sh(*args: str, env: dict[str, str] | None = None,
               timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", str(CLUSTER_SH), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, check=False)
    if done.returncode != 0:
        raise AssertionError(f"cluster.sh {' '.join(args)} exited {done.returncode}:\n"
                             f"{done.stdout}\n{done.stderr[-6000:]}")
    return done


@dataclass
class Kube:
    """The cluster, as kubectl and helm see it."""

    kubeconfig: Path
    kubectl_path: str
    helm_path: str
    kafka: str
    crictl: list[str]

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 180) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.kubectl_path, "--kubeconfig", str(self.kubeconfig), *args],
                              input=input, capture_output=True, text=True, timeout=timeout,
                              check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def helm(self, *args: str, check: bool = True,
             timeout: float = 600) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([self.helm_path, "--kubeconfig", str(self.kubeconfig), *args],
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n"
                                 f"{done.stdout}\n{done.stderr}")
        return done

    def get(self, *args: str) -> dict[str, Any]:
        out = self.kubectl("get", *args, "-o", "json").stdout
        got: dict[str, Any] = json.loads(out)
        return got

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels or {}}}))

    def delete_namespace(self, name: str) -> None:
        """Delete ``name`` and wait until its pods are gone (the CPU and memory a
        next test would share), not for the namespace controller to finalize
        the object itself: that takes seconds more, costs nothing meanwhile,
        and ``cluster.sh down`` removes whatever is left of it."""
        self.kubectl("delete", "namespace", name, "--wait=false", check=False)
        wait_for(lambda: not self.kubectl("get", "pods", "-n", name, "-o", "name",
                                          check=False).stdout.strip(),
                 240, f"the pods of namespace {name} to be gone", interval=0.5)

    def pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.get("pods", "-n", namespace, "-l", selector)["items"]
        return items

    def ready_pods(self, namespace: str, selector: str) -> list[str]:
        return [p["metadata"]["name"] for p in self.pods(namespace, selector)
                if p["metadata"].get("deletionTimestamp") is None and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", []))]

    def wait_ready(self, namespace: str, selector: str, count: int, timeout: float) -> float:
        """Seconds until ``count`` pods of ``selector`` are Ready (and not terminating)."""
        started = time.monotonic()
        wait_for(lambda: len(self.ready_pods(namespace, selector)) >= count, timeout,
                 f"{count} ready pods of {selector} in {namespace}:\n"
                 f"{self.describe(namespace, selector)}", interval=1)
        return time.monotonic() - started

    def describe(self, namespace: str, selector: str) -> str:
        """What an operator looks at when pods do not come up: the pods, their
        events and the last lines of their logs."""
        out = self.kubectl("get", "pods", "-n", namespace, "-o", "wide", check=False).stdout
        out += self.kubectl("get", "events", "-n", namespace, "--sort-by=.lastTimestamp",
                            check=False).stdout[-4000:]
        for name in [p["metadata"]["name"] for p in self.pods(namespace, selector)]:
            out += f"\n--- logs of {name}\n" + self.kubectl(
                "logs", "-n", namespace, name, "--all-containers", "--tail=40",
                check=False).stdout
        return out

    def service_url(self, namespace: str, name: str, scheme: str = "http",
                    timeout: float = 60) -> str:
        """The Service's cluster IP, reached from the host through kube-proxy, once
        it takes connections: a pod is Ready before kube-proxy has programmed the
        Service's new endpoints, and until then it rejects connections (refused)."""
        spec = self.get("service", "-n", namespace, name)["spec"]
        host, port = spec["clusterIP"], int(spec["ports"][0]["port"])

        def connects() -> bool:
            try:
                socket.create_connection((host, port), timeout=2).close()
                return True
            except OSError:
                return False

        wait_for(connects, timeout, f"Service {namespace}/{name} ({host}:{port}) taking "
                 "connections", interval=0.5)
        return f"{scheme}://{host}:{port}"

    def container_pid(self, namespace: str, pod: str, container: str = "worker") -> int:
        """The host pid of a container's first process (tini), from the CRI."""
        status = self.get("pod", "-n", namespace, pod)["status"]
        [cid] = [c["containerID"].split("://", 1)[1] for c in status["containerStatuses"]
                 if c["name"] == container]
        info = json.loads(subprocess.run([*self.crictl, "inspect", cid], capture_output=True,
                                         text=True, check=True, timeout=60).stdout)
        return int(info["info"]["pid"])


@contextlib.contextmanager
def running_cluster(engine_env: dict[str, str], image: str,
                    workdir: Path) -> Iterator[Kube]:
    """``cluster.sh up``, the images loaded, ``cluster.sh down`` after; fails
    if anything of the cluster is left on the machine."""
    cluster = cluster_module()
    started = time.monotonic()
    # While iterating on these tests: CONNECT_TEST_KUBE=reuse uses (or starts)
    # a cluster and leaves it up, so several runs share one (namespaces are
    # unique per test). CI always starts and stops its own.
    reuse = os.environ.get("CONNECT_TEST_KUBE") == "reuse"
    if not (reuse and cluster.State.load(cluster.STATE).pids):
        cluster_sh("up")
    try:
        plugin_archive = workdir / "plugins.tar"
        busybox = Path(cluster.tool("busybox"))  # the plugin image's cp
        plugin_archive.write_bytes(cluster.oci_archive(
            PLUGIN_IMAGE,
            {"bin/cp": (busybox.read_bytes(), 0o755),
             "plugins/k8s_test_plugins/__init__.py": (PLUGIN_SOURCE.encode(), 0o644)},
            ["/bin/cp"], env=["PATH=/bin"]))
        state = cluster.State.load(cluster.STATE)
        cluster.import_archive(state, plugin_archive)
        cluster_sh("load-image", image, env=engine_env)
        kube = Kube(kubeconfig=state.kubeconfig, kubectl_path=cluster.tool("kubectl"),
                    helm_path=cluster.tool("helm"), kafka=state.kafka,
                    crictl=[cluster.tool("crictl"), "--runtime-endpoint",
                            f"unix://{state.containerd_sock}"])
        print(f"cluster up with the images in {time.monotonic() - started:.0f}s")
        yield kube
    finally:
        if not reuse:
            cluster_sh("down", timeout=600)
            left = cluster.leftovers()
            assert not left, f"cluster.sh down left: {left}"


# -- Kafka, read from the host -------------------------------------------------------


def committed_ends(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Each partition's last stable offset (what read_committed sees); -1s
    while the topic does not exist yet."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    requests = {TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)}
    try:
        futures = admin.list_offsets(requests, isolation_level=IsolationLevel.READ_COMMITTED,
                                     request_timeout=10)
        return [futures[tp].result(timeout=15).offset for tp in requests]
    except Exception:  # the topic may not exist yet
        return [-1] * partitions


def wait_progress(bootstrap: str, topic: str, partitions: int, beyond: list[int] | int,
                  timeout: float) -> float:
    """Seconds until every partition's committed end passes ``beyond`` (one
    offset for all, or one per partition): each task has made progress."""
    floor = beyond if isinstance(beyond, list) else [beyond] * partitions
    started = time.monotonic()
    wait_for(lambda: all(end > low for end, low in
                         zip(committed_ends(bootstrap, topic, partitions), floor, strict=True)),
             timeout, f"committed records in every partition of {topic} beyond {floor}",
             interval=0.25)
    return time.monotonic() - started


def verify_exactly_once(bootstrap: str, topic: str, partitions: int) -> Report:
    """The project's verifier over the whole topic: every group from 0, no
    duplicate, no gap, nothing left incomplete."""
    report = verify_topics(bootstrap, [topic], expect_groups=[str(p) for p in range(partitions)],
                           timeout=60)
    assert report.ok, report.violations()
    for group in report.groups:
        assert group.first == 0 and group.count == (group.last or 0) + 1, group
    return report


def leader_elections(bootstrap: str, config_topic: str) -> list[dict[str, Any]]:
    """Every ``leader`` record of a Connect cluster's config topic, oldest first:
    each takeover writes one (docs/cluster.md, "Taking over"), so they count
    the elections. Each: ``offset``, ``timestamp`` (seconds since the epoch:
    the record's CreateTime, the electing worker's clock), ``url`` and
    ``worker_id``; read_committed, to the end."""
    consumer = Consumer({"bootstrap.servers": bootstrap,
                         "group.id": f"elections-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest"})
    elections: list[dict[str, Any]] = []
    try:
        _, high = consumer.get_watermark_offsets(TopicPartition(config_topic, 0), timeout=15)
        consumer.assign([TopicPartition(config_topic, 0, 0)])
        deadline = time.monotonic() + 60
        while consumer.position([TopicPartition(config_topic, 0)])[0].offset < high:
            assert time.monotonic() < deadline, f"{config_topic} not read up to {high}"
            message = consumer.poll(0.5)
            if message is None or message.error() or message.key() != b"leader":
                continue
            value = json.loads(message.value() or b"{}")
            elections.append({"offset": message.offset(),
                              "timestamp": message.timestamp()[1] / 1000,
                              "url": value.get("url"), "worker_id": value.get("worker_id")})
    finally:
        consumer.close()
    return elections


# -- the REST API through the client Service --------------------------------------------


def rest(method: str, url: str, client: httpx.Client | None = None,
         **kwargs: Any) -> httpx.Response:
    if client is not None:
        return client.request(method, url, timeout=30, **kwargs)
    return httpx.request(method, url, timeout=30, **kwargs)


def wait_task_running(url: str, connector: str, timeout: float,
                      not_on: str = "", client: httpx.Client | None = None) -> dict[str, Any]:
    """The connector's status once every task is RUNNING (on a worker other
    than ``not_on`` when given)."""
    def running() -> dict[str, Any] | None:
        try:
            status: dict[str, Any] = rest("GET", f"{url}/connectors/{connector}/status",
                                          client).json()
        except (httpx.HTTPError, ValueError):
            return None
        tasks = status.get("tasks", [])
        if tasks and all(t["state"] == "RUNNING" and not (not_on and not_on in t["worker_id"])
                         for t in tasks):
            return status
        return None
    result: dict[str, Any] = wait_for(running, timeout, f"{connector}'s tasks RUNNING",
                                      interval=0.25)
    return result


def pod_of(worker: str | None) -> str | None:
    """A pod name from a worker URL or worker id (its advertised host)."""
    if not worker:
        return None
    return worker.split("://", 1)[-1].split(".", 1)[0].split(":", 1)[0]


def release_properties(kube: Kube, namespace: str, fullname: str) -> dict[str, str]:
    """A release's worker.properties, from its ConfigMap, read as the worker reads it."""
    data = kube.get("configmap", "-n", namespace, fullname)["data"]
    return parse_properties(data["worker.properties"], f"{namespace}/{fullname}")


def worker_pods(kube: Kube, namespace: str, selector: str) -> dict[str, str]:
    """Name -> pod IP of the pods of ``selector`` that run and are not being deleted."""
    return {p["metadata"]["name"]: p["status"]["podIP"] for p in kube.pods(namespace, selector)
            if p["metadata"].get("deletionTimestamp") is None
            and p.get("status", {}).get("phase") == "Running" and p["status"].get("podIP")}


def pod_leader_view(client: httpx.Client, url: str) -> tuple[str, LeaderView | None]:
    """A worker's own URL (the one it advertises, which others name) and its
    view of the leader, asked at ``url``; ``url`` and None if it did not answer."""
    try:
        body = client.get(f"{url}/internal/leader", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return url, None
    return str(body.get("worker_url")), LeaderView(body.get("leader_url"),
                                                   bool(body.get("is_leader")))


def leader_pod(kube: Kube, namespace: str, selector: str = WORKERS, scheme: str = "http",
               port: int = REST_PORT,
               client: Callable[[str], httpx.Client] = lambda pod: httpx.Client(),
               timeout: float = 120) -> str:
    """The leading worker's pod name, once the worker pods agree on it
    (support.cluster's ``agreed_leader``): every running pod of ``selector``,
    asked at its own IP on the bridge (its advertised name resolves only inside
    the cluster), names the same worker, and that worker says it leads.
    ``client(pod)`` makes the client a pod is asked with (TLS naming the pod,
    credentials)."""
    def agreed() -> str | None:
        views: dict[str, LeaderView | None] = {}
        for pod, ip in worker_pods(kube, namespace, selector).items():
            with client(pod) as asking:
                url, view = pod_leader_view(asking, f"{scheme}://{ip}:{port}")
            views[url] = view
        return pod_of(agreed_leader(views))
    found: str = wait_for(agreed, timeout, f"the worker pods of {selector} in {namespace} "
                          "to agree on a leader", interval=1)
    return found


def timed(what: str, action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    elapsed = time.monotonic() - started
    print(f"{what}: {elapsed:.1f}s")
    return result, elapsed
