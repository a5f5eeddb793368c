"""Day-2 operations on the chart's workers, as an operator does them with
``helm`` and ``kubectl`` only, on the real single-node cluster (kube_cluster.py).

* Two releases of one name in two namespaces are two Connect clusters:
  different ``group.id`` and internal topics, each running its own connector
  (first, so that its releases are gone before the next one is installed).

Then one release of three workers (a unique release name, so that a pod
selector on ``app.kubernetes.io/instance`` matches only its pods on the shared
node) serves three tests, in order:

1. ``helm upgrade`` of ``exactly.once.source.support`` from ``preparing`` to
   ``enabled`` while a connector runs: every pod replacement of the rolling
   update is observed, the committed records progress after each, and the
   output is exactly once;
2. a plain config-change ``helm upgrade`` (a worker key in ``connect.config``),
   with the same measurements;
3. ``kubectl drain`` of the node: the PodDisruptionBudget lets exactly one
   worker go (its replacement cannot be scheduled on the cordoned node) and
   refuses the others; after ``kubectl uncordon`` the worker is back and the
   connector has written exactly once.

Each upgrade prints how often leadership (and with it every task) moved, the
longest stretch without committed progress, and how long the roll took, and
requires one leader election at most: under the chart's static membership a
replaced follower moves nothing and a replaced leader takes its place back
(without it a StatefulSet's roll, highest ordinal first, moved the tasks once
or twice; docs/kubernetes.md, "Upgrade").

The workers request 250m CPU instead of the default 500m: the 2-CPU node is
shared with other tests, and a replacement pod left Pending for CPU would
distort the measurements.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import httpx
import pytest
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from kube_cluster import (
    CHART,
    Kube,
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

from connect_runtime.tools.verify import Report

pytestmark = [pytest.mark.kubernetes, pytest.mark.timeout(1200)]

WORKERS = "app.kubernetes.io/component=worker"
NODE = "crk-node"
PARTITIONS = 2
# The connectors run until stopped (no max.records): at 500 records/s a test
# leaves a few tens of thousands of records for the verifier.
RATE = "500"


@dataclass
class Release:
    namespace: str
    name: str
    url: str        # the client Service, from the host

    @property
    def fullname(self) -> str:
        return f"{self.name}-connect-runtime"

    @property
    def selector(self) -> str:
        return f"app.kubernetes.io/instance={self.name},{WORKERS}"


def install(kube: Kube, namespace: str, name: str, *values: str) -> None:
    sets = [f"kafka.bootstrapServers={kube.kafka}", "connect.replicationFactor=1",
            "image.pullPolicy=Never", *values]
    kube.helm("install", name, str(CHART), "--namespace", namespace,
              *[arg for value in sets for arg in ("--set", value)])


def worker_properties(kube: Kube, release: Release) -> dict[str, str]:
    return release_properties(kube, release.namespace, release.fullname)


@pytest.fixture(scope="module")
def release(kube: Kube) -> Iterator[Release]:
    """Three workers under ``exactly.once.source.support=preparing`` (test 1
    turns it to ``enabled``)."""
    suffix = uuid.uuid4().hex[:6]
    namespace, name = f"ops-{suffix}", f"ops-{suffix}"
    kube.create_namespace(namespace, {"pod-security.kubernetes.io/enforce": "restricted",
                                      "pod-security.kubernetes.io/enforce-version": "latest"})
    try:
        started = time.monotonic()
        install(kube, namespace, name, "connect.exactlyOnceSourceSupport=preparing",
                "resources.requests.cpu=250m")
        kube.wait_ready(namespace, f"app.kubernetes.io/instance={name},{WORKERS}", 3, 600)
        print(f"\n[install] helm install to 3 Ready workers: {time.monotonic() - started:.1f}s")
        yield Release(namespace, name, kube.service_url(namespace, f"{name}-connect-runtime"))
    finally:
        kube.helm("uninstall", name, "--namespace", namespace, "--wait", "--timeout", "180s",
                  check=False)
        kube.delete_namespace(namespace)


def create_sequence(url: str, name: str, topic: str, **config: str) -> None:
    body = {"name": name, "config": {
        "connector.class": "SequenceSourceConnector", "topic": topic, "tasks.max": "1",
        "partitions": str(PARTITIONS), "batch.size": "100", "rate.per.sec": RATE,
        "topic.creation.default.replication.factor": "1",
        "topic.creation.default.partitions": str(PARTITIONS), **config}}
    created = rest("POST", f"{url}/connectors", json=body)
    assert created.status_code == 201, created.text


def stop_and_verify(kube: Kube, url: str, name: str, topic: str) -> str:
    """PUT /stop (204: the tasks commit and stop), then the verifier over the
    whole topic; returns the verifier's figures, printable."""
    stopped = rest("PUT", f"{url}/connectors/{name}/stop")
    assert stopped.status_code == 204, stopped.text
    wait_for(lambda: rest("GET", f"{url}/connectors/{name}/status").json()["connector"]["state"]
             == "STOPPED", 120, f"{name} STOPPED", interval=1)
    report = verify_exactly_once(kube.kafka, topic, PARTITIONS)
    groups = [(g.label, g.count, len(g.duplicates), len(g.missing)) for g in report.groups]
    assert rest("DELETE", f"{url}/connectors/{name}").status_code == 204
    return (f"verifier (partition, records, duplicates, gaps): {groups}, "
            f"aborted records skipped {report.aborted}")


def wait_records(kube: Kube, topic: str, per_partition: int, timeout: float) -> Report:
    """The verifier's report once every partition holds ``per_partition``
    records. Committed ends alone cannot tell: they count the transactions'
    commit markers too."""
    wait_progress(kube.kafka, topic, PARTITIONS, per_partition - 1, timeout)

    def complete() -> Report | None:
        report = verify_exactly_once(kube.kafka, topic, PARTITIONS)
        return report if all(g.count == per_partition for g in report.groups) else None
    found: Report = wait_for(complete, 60, f"{per_partition} records in each partition of "
                             f"{topic}", interval=1)
    return found


def group_members(kafka: str, group_id: str) -> list[tuple[str, list[int]]]:
    """The workers' consumer group as the broker has it: each member id (under
    static membership the worker's ``group.instance.id``, its pod's name, and a
    suffix) with the config topic partitions it holds, sorted by member id.
    Holding partition 0 is leading."""
    admin = AdminClient({"bootstrap.servers": kafka})
    group = admin.describe_consumer_groups([group_id], request_timeout=15)[group_id].result()
    return sorted((m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                  for m in group.members)


# -- what happens while pods come and go ------------------------------------------------


@dataclass
class Sampler:
    """Samples in two threads: every ``period`` seconds the topic's committed
    ends (progress), and every second the leader as the client Service answers
    ``GET /internal/leader`` and the worker that holds the connector's task.

    The ends come from one AdminClient kept for the whole run: a new client per
    sample (``committed_ends``) now and then takes 3 s to answer, which would
    show up here as downtime that is not the task's. The REST calls have their
    own thread, so one that waits on a departing pod delays no progress sample.
    """

    kafka: str
    topic: str
    url: str
    connector: str
    period: float = 0.25
    started: float = field(default_factory=time.monotonic)
    leaders: list[tuple[float, str]] = field(default_factory=list)
    task_workers: list[tuple[float, str]] = field(default_factory=list)
    # Every stretch between two samples that each saw committed progress:
    # (from, seconds), times relative to ``started``.
    stalls: list[tuple[float, float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _last_advance: float = 0.0
    _ends: list[int] = field(default_factory=list)
    _threads: list[threading.Thread] = field(default_factory=list)

    def __enter__(self) -> Sampler:
        self._admin = AdminClient({"bootstrap.servers": self.kafka})
        self._ends, self._last_advance = self._committed_ends(), time.monotonic()
        self._threads = [threading.Thread(target=self._progress, name="progress", daemon=True),
                         threading.Thread(target=self._rest, name="rest", daemon=True)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        # A stall still open counts too.
        self.stalls.append((self._last_advance - self.started,
                            time.monotonic() - self._last_advance))

    def at(self) -> float:
        return time.monotonic() - self.started

    def ends(self) -> list[int]:
        return list(self._ends)

    def _committed_ends(self) -> list[int]:
        requests = {TopicPartition(self.topic, p): OffsetSpec.latest() for p in range(PARTITIONS)}
        futures = self._admin.list_offsets(
            requests, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=10)
        return [futures[tp].result(timeout=15).offset for tp in requests]

    def _progress(self) -> None:
        while not self._stop.wait(self.period):
            ends, now = self._committed_ends(), time.monotonic()
            if any(end > before for end, before in zip(ends, self._ends, strict=True)):
                self.stalls.append((self._last_advance - self.started, now - self._last_advance))
                self._last_advance = now
            self._ends = [max(a, b) for a, b in zip(ends, self._ends, strict=True)]

    def _rest(self) -> None:
        with httpx.Client(timeout=2) as client:
            while not self._stop.wait(1):
                try:
                    leader = pod_of(client.get(f"{self.url}/internal/leader").json()
                                    .get("leader_url"))
                    tasks = client.get(f"{self.url}/connectors/{self.connector}/status"
                                       ).json()["tasks"]
                except (httpx.HTTPError, ValueError, KeyError):
                    continue
                if leader and (not self.leaders or self.leaders[-1][1] != leader):
                    self.leaders.append((self.at(), leader))
                if tasks:
                    holder = f"{pod_of(tasks[0].get('worker_id'))} {tasks[0]['state']}"
                    if not self.task_workers or self.task_workers[-1][1] != holder:
                        self.task_workers.append((self.at(), holder))

    def longest_stall(self) -> float:
        return max((seconds for _, seconds in self.stalls), default=0.0)


@dataclass
class Rollout:
    """A StatefulSet's rolling update as observed from pod UIDs: when each pod
    began terminating, when its replacement (a new UID) was Ready, and how long
    after that the committed records moved past where they were."""

    seconds: float = 0.0
    order: list[str] = field(default_factory=list)
    terminating: dict[str, float] = field(default_factory=dict)
    ready: dict[str, float] = field(default_factory=dict)
    progress_after: dict[str, float] = field(default_factory=dict)


def watch_rollout(kube: Kube, release: Release, sampler: Sampler, timeout: float) -> Rollout:
    """Polls the pods and the StatefulSet until every pod was replaced and the
    StatefulSet reports the update done; checks the topic's committed records
    progress after each replaced pod is Ready."""
    before = {p["metadata"]["name"]: p["metadata"]["uid"]
              for p in kube.pods(release.namespace, release.selector)}
    rollout, waiting = Rollout(), {}  # waiting: pod -> (ends when Ready, at)
    started, deadline = time.monotonic(), time.monotonic() + timeout
    while True:
        assert time.monotonic() < deadline, (
            f"rollout not done in {timeout:.0f}s: {rollout}\n"
            f"{kube.describe(release.namespace, release.selector)}")
        for pod in kube.pods(release.namespace, release.selector):
            name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
            if uid == before.get(name):
                if pod["metadata"].get("deletionTimestamp") and name not in rollout.terminating:
                    rollout.terminating[name] = sampler.at()
                    rollout.order.append(name)
                    print(f"  t={sampler.at():6.1f}s {name} terminating")
                continue
            if name not in rollout.terminating:  # gone between two polls
                rollout.terminating[name] = sampler.at()
                rollout.order.append(name)
            ready = pod["metadata"].get("deletionTimestamp") is None and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in pod.get("status", {}).get("conditions", []))
            if ready and name not in rollout.ready:
                rollout.ready[name] = sampler.at()
                waiting[name] = (sampler.ends(), sampler.at())
                print(f"  t={sampler.at():6.1f}s {name} replaced and Ready "
                      f"(committed ends {sampler.ends()})")
        for name, (ends, at) in list(waiting.items()):
            if all(now > then for now, then in zip(sampler.ends(), ends, strict=True)):
                rollout.progress_after[name] = sampler.at() - at
                del waiting[name]
        status = kube.get("statefulset", "-n", release.namespace, release.fullname)["status"]
        if (len(rollout.ready) == len(before) and not waiting
                and status.get("updateRevision") == status.get("currentRevision")
                and status.get("readyReplicas") == len(before)):
            rollout.seconds = time.monotonic() - started
            return rollout
        time.sleep(1)


def report_upgrade(label: str, kube: Kube, release: Release, sampler: Sampler,
                   rollout: Rollout, wall_start: float, wall_end: float) -> int:
    """Prints the upgrade's figures; returns the number of leader elections
    during it (the ``leader`` records the config topic got)."""
    config_topic = worker_properties(kube, release)["config.storage.topic"]
    elections = [e for e in leader_elections(kube.kafka, config_topic)
                 if wall_start <= e["timestamp"] <= wall_end]
    print(f"[{label}] pods rolled, in order: {rollout.order}")
    for pod in rollout.order:
        print(f"[{label}]   {pod}: terminating t={rollout.terminating[pod]:.1f}s, replacement "
              f"Ready t={rollout.ready.get(pod, float('nan')):.1f}s, committed progress "
              f"{rollout.progress_after.get(pod, float('nan')):.1f}s after Ready")
    print(f"[{label}] leader elections (config topic 'leader' records): {len(elections)}: "
          f"{[(round(e['timestamp'] - wall_start, 1), pod_of(e['url'])) for e in elections]}")
    print(f"[{label}] leader as seen through the Service: "
          f"{[(round(t, 1), p) for t, p in sampler.leaders]} "
          f"({len(sampler.leaders) - 1} changes)")
    print(f"[{label}] task holder (status): {[(round(t, 1), h) for t, h in sampler.task_workers]}")
    print(f"[{label}] longest stretch without committed progress (task downtime): "
          f"{sampler.longest_stall():.1f}s; stretches over 1.5s (from t, seconds): "
          f"{[(round(s, 1), round(d, 1)) for s, d in sampler.stalls if d > 1.5]}")
    print(f"[{label}] total upgrade time (helm upgrade to every pod replaced and Ready, "
          f"StatefulSet at its update revision): {rollout.seconds:.1f}s")
    return len(elections)


def upgrade_and_watch(label: str, kube: Kube, release: Release, connector: str, topic: str,
                      *sets: str) -> tuple[int, float]:
    """``helm upgrade --reuse-values`` with ``sets`` while the connector runs;
    returns (leader elections, longest stall)."""
    group = worker_properties(kube, release)["group.id"]
    print(f"[{label}] the group before (member id, config partitions held): "
          f"{group_members(kube.kafka, group)}")
    with Sampler(kube.kafka, topic, release.url, connector) as sampler:
        time.sleep(2)
        wall_start = time.time()
        print(f"  t={sampler.at():6.1f}s helm upgrade --reuse-values {' '.join(sets)}")
        kube.helm("upgrade", release.name, str(CHART), "--namespace", release.namespace,
                  "--reuse-values", *[arg for value in sets for arg in ("--set", value)])
        rollout = watch_rollout(kube, release, sampler, 900)
        wall_end = time.time()
        # Past the last roll: the tasks keep committing.
        wait_progress(kube.kafka, topic, PARTITIONS, sampler.ends(), 120)
    for pod in rollout.order:
        assert pod in rollout.progress_after, f"no committed progress after {pod} rolled"
    assert sorted(rollout.order) == sorted(rollout.ready), rollout
    elections = report_upgrade(label, kube, release, sampler, rollout, wall_start, wall_end)
    return elections, sampler.longest_stall()


# -- the tests ----------------------------------------------------------------------------


def test_two_releases_of_one_name_in_two_namespaces_are_two_clusters(kube: Kube) -> None:
    """The same release name in two namespaces (default values, one worker
    each): the ``group.id`` and the internal topics differ (the ConfigMaps, and
    the broker's topic list), each cluster knows only its own connector
    although both connectors have the same name, and each writes exactly once."""
    suffix = uuid.uuid4().hex[:6]
    name = f"twin-{suffix}"
    releases = [Release(f"twin-a-{suffix}", name, ""), Release(f"twin-b-{suffix}", name, "")]
    try:
        started = time.monotonic()
        for release in releases:
            kube.create_namespace(release.namespace)
            install(kube, release.namespace, name, "replicaCount=1")
        for release in releases:
            kube.wait_ready(release.namespace, release.selector, 1, 600)
            release.url = kube.service_url(release.namespace, release.fullname)
        print(f"\n[two namespaces] both releases Ready: {time.monotonic() - started:.1f}s")

        properties = [worker_properties(kube, release) for release in releases]
        groups = [p["group.id"] for p in properties]
        internal = [[p[f"{kind}.storage.topic"] for kind in ("config", "offset", "status")]
                    for p in properties]
        assert groups == [f"{r.namespace}.{r.fullname}" for r in releases], groups
        assert not set(internal[0]) & set(internal[1]), internal
        listed = set(AdminClient({"bootstrap.servers": kube.kafka})
                     .list_topics(timeout=15).topics)
        assert set(internal[0]) | set(internal[1]) <= listed, (internal, sorted(listed))
        roots = [rest("GET", f"{r.url}/").json() for r in releases]
        # One Kafka cluster, two Connect clusters on it.
        assert roots[0]["kafka_cluster_id"] == roots[1]["kafka_cluster_id"], roots
        print(f"[two namespaces] group.id: {groups}")
        print(f"[two namespaces] internal topics (all on the broker): {internal}")

        topics = [f"twin-{i}-{uuid.uuid4().hex[:6]}" for i in range(2)]
        for release, topic in zip(releases, topics, strict=True):
            create_sequence(release.url, "seq", topic, **{"max.records": "2000"})
        for release, topic in zip(releases, topics, strict=True):
            assert rest("GET", f"{release.url}/connectors").json() == ["seq"]
            config = rest("GET", f"{release.url}/connectors/seq/config").json()
            assert config["topic"] == topic, config
            status = wait_task_running(release.url, "seq", 180)
            assert pod_of(status["tasks"][0]["worker_id"]) == f"{release.fullname}-0"
            assert release.namespace in status["tasks"][0]["worker_id"], status
        for release, topic in zip(releases, topics, strict=True):
            report = wait_records(kube, topic, 2000, 240)
            figures = [(g.label, g.count, len(g.duplicates), len(g.missing))
                       for g in report.groups]
            print(f"[two namespaces] {release.namespace}: connector seq -> {topic}: {figures} "
                  "(partition, records, duplicates, gaps)")
    finally:
        for release in releases:
            kube.helm("uninstall", name, "--namespace", release.namespace, "--wait",
                      "--timeout", "180s", check=False)
            kube.delete_namespace(release.namespace)


def test_upgrade_from_preparing_to_enabled_with_a_connector_running(
        kube: Kube, release: Release) -> None:
    """``helm upgrade --reuse-values --set connect.exactlyOnceSourceSupport=enabled``
    on a release installed under ``preparing``, with a connector running: the
    StatefulSet replaces every pod (highest ordinal first), the committed
    records progress after each replacement, the workers come up ``enabled``
    (``exactly.once.support=required`` validates, which ``preparing`` refused),
    and the output has no duplicate and no gap (graceful pod deletions flush
    the at-least-once tasks' offsets, so even the ``preparing`` part of the
    run writes each record once). Prints the leader moves, the task downtime
    and the upgrade's duration."""
    url = release.url
    assert worker_properties(kube, release)["exactly.once.source.support"] == "preparing"
    validate_body = {"connector.class": "SequenceSourceConnector", "name": "eos-check",
                     "topic": "unused", "exactly.once.support": "required"}

    def eos_errors() -> list[str]:
        answer = rest("PUT", f"{url}/connector-plugins/SequenceSourceConnector/config/validate",
                      json=validate_body)
        assert answer.status_code == 200, answer.text
        return [error for c in answer.json()["configs"]
                if c["value"]["name"] == "exactly.once.support"
                for error in c["value"]["errors"]]

    refused = eos_errors()
    assert refused and "exactly.once.source.support=preparing" in refused[0], refused

    name, topic = "eos-upgrade", f"eos-upgrade-{uuid.uuid4().hex[:6]}"
    create_sequence(url, name, topic)
    wait_task_running(url, name, 180)
    wait_progress(kube.kafka, topic, PARTITIONS, 500, 180)
    print(f"\n[preparing -> enabled] leader before: "
          f"{leader_pod(kube, release.namespace, release.selector)}")

    elections, stall = upgrade_and_watch(
        "preparing -> enabled", kube, release, name, topic,
        "connect.exactlyOnceSourceSupport=enabled")

    assert worker_properties(kube, release)["exactly.once.source.support"] == "enabled"
    assert eos_errors() == []
    wait_task_running(url, name, 120)
    print(f"[preparing -> enabled] {stop_and_verify(kube, url, name, topic)}")
    print(f"[preparing -> enabled] SUMMARY: leader moves {elections}, longest task downtime "
          f"{stall:.1f}s")
    assert elections <= 1, f"{elections} leader elections in one upgrade"


def test_config_change_upgrade_leader_moves(kube: Kube, release: Release) -> None:
    """A plain config change (``connect.config.offset.flush.interval.ms``)
    rolls every worker through the ConfigMap's checksum; the connector keeps
    committing after each replacement and writes exactly once; leadership
    moves once at most (the leader's own replacement). Prints the leader
    moves and the task downtime."""
    url = release.url
    mode = worker_properties(kube, release)["exactly.once.source.support"]
    name, topic = "roll", f"roll-{uuid.uuid4().hex[:6]}"
    create_sequence(url, name, topic)
    wait_task_running(url, name, 180)
    wait_progress(kube.kafka, topic, PARTITIONS, 500, 180)
    print(f"\n[config change] exactly.once.source.support={mode}, leader before: "
          f"{leader_pod(kube, release.namespace, release.selector)}")

    elections, stall = upgrade_and_watch(
        "config change", kube, release, name, topic,
        f"connect.config.offset\\.flush\\.interval\\.ms={30000 + int(time.time()) % 1000}")

    wait_task_running(url, name, 120)
    print(f"[config change] {stop_and_verify(kube, url, name, topic)}")
    print(f"[config change] SUMMARY: leader moves {elections}, longest task downtime "
          f"{stall:.1f}s")
    assert elections <= 1, f"{elections} leader elections in one upgrade"


def test_drain_is_held_to_one_worker_by_the_disruption_budget(
        kube: Kube, release: Release) -> None:
    """``kubectl drain`` of the only node, limited to this release's pods: the
    PodDisruptionBudget (``maxUnavailable: 1``) allows one eviction; the
    evicted worker's replacement cannot be scheduled on the cordoned node, so
    every other eviction is refused for the budget until drain gives up at its
    timeout (non-zero exit). After ``kubectl uncordon`` (always, in a finally:
    the node is shared) the worker is back Ready, and the connector, which ran
    throughout, has written every record exactly once."""
    url, namespace = release.url, release.namespace
    name, topic = "drain", f"drain-{uuid.uuid4().hex[:6]}"
    create_sequence(url, name, topic)
    wait_task_running(url, name, 180)
    wait_progress(kube.kafka, topic, PARTITIONS, 500, 180)
    kube.wait_ready(namespace, release.selector, 3, 300)
    leader = leader_pod(kube, release.namespace, release.selector)
    before = {p["metadata"]["name"]: p["metadata"]["uid"]
              for p in kube.pods(namespace, release.selector)}
    # The budget's controller counts the pods a moment after they are Ready.
    budget = wait_for(lambda: (status := kube.get("pdb", "-n", namespace,
                                                  release.fullname)["status"])
                      .get("disruptionsAllowed") == 1 and status, 60,
                      "the budget to allow one disruption", interval=1)
    print(f"\n[drain] leader {leader}; budget before: disruptionsAllowed "
          f"{budget.get('disruptionsAllowed')}, currentHealthy {budget.get('currentHealthy')}")

    with Sampler(kube.kafka, topic, url, name) as sampler:
        time.sleep(2)
        cordoned = time.monotonic()
        try:
            drained = kube.kubectl(
                "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data",
                "--pod-selector", f"app.kubernetes.io/instance={release.name}",
                "--timeout=20s", check=False, timeout=150)
            drain_seconds = time.monotonic() - cordoned
            # While still cordoned: the evicted worker's replacement is Pending.
            pending = [p for p in kube.pods(namespace, release.selector)
                       if p["status"].get("phase") == "Pending"]
            node = kube.get("node", NODE)["spec"]
        finally:
            uncordon = kube.kubectl("uncordon", NODE, check=False)
            if uncordon.returncode != 0:  # once more: everyone's pods depend on it
                uncordon = kube.kubectl("uncordon", NODE, check=False)
            cordon_window = time.monotonic() - cordoned
        assert uncordon.returncode == 0, uncordon.stderr
        assert node.get("unschedulable") is True, node
        print(f"[drain] kubectl drain exited {drained.returncode} after {drain_seconds:.1f}s; "
              f"node cordoned for {cordon_window:.1f}s")
        output = drained.stdout + drained.stderr
        evicted = sorted(set(re.findall(r"pod/(\S+) evicted", output)))
        refused = sorted(set(re.findall(
            r'error when evicting pods/"([^"]+)".*Cannot evict pod as it would violate '
            r"the pod's disruption budget", output)))
        print(f"[drain] evicted (allowed): {evicted}; refused by the budget: {refused} "
              f"({output.count('violate the pod')} refusals in all)")
        refusal = next((line for line in output.splitlines() if "disruption budget" in line), "")
        tail = "\n  ".join(output.strip().splitlines()[-4:])
        print(f"[drain] a refusal: {refusal}\n[drain] kubectl drain's last lines:\n  {tail}")
        assert drained.returncode != 0, output
        assert len(evicted) == 1, output
        assert sorted(evicted + refused) == sorted(before), (evicted, refused, output)
        [gone] = evicted
        assert [p["metadata"]["name"] for p in pending] == [gone], pending
        conditions = {c["type"]: c for c in pending[0]["status"].get("conditions", [])}
        print(f"[drain] {gone}'s replacement while cordoned: Pending, "
              f"{conditions.get('PodScheduled', {}).get('reason')}: "
              f"{conditions.get('PodScheduled', {}).get('message')}")

        back = kube.wait_ready(namespace, release.selector, 3, 300)
        replaced = kube.get("pod", "-n", namespace, gone)["metadata"]["uid"]
        assert replaced != before[gone]
        print(f"[drain] {gone} back Ready {back:.1f}s after uncordon")
        resumed_at = sampler.ends()
        wait_progress(kube.kafka, topic, PARTITIONS, resumed_at, 120)
    print(f"[drain] leader as seen through the Service: "
          f"{[(round(t, 1), p) for t, p in sampler.leaders]}; task holder: "
          f"{[(round(t, 1), h) for t, h in sampler.task_workers]}")
    print(f"[drain] evicted the leader: {gone == leader}; longest stretch without committed "
          f"progress: {sampler.longest_stall():.1f}s; stretches over 1.5s (from t, seconds): "
          f"{[(round(s, 1), round(d, 1)) for s, d in sampler.stalls if d > 1.5]}")
    wait_task_running(url, name, 120)
    print(f"[drain] {stop_and_verify(kube, url, name, topic)}")
