"""A cluster of real worker processes: election, failover, zombies and fencing (KIP-618).

Every test ends by reading the output with read_committed and requiring each
source partition's sequence numbers to be exactly 0..n-1: no gap, no duplicate.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import KafkaException, Producer
from support.cluster import Cluster
from support.kafka import create_topic, free_port, read_topic, sequences, wait_for
from support.offsets import committed
from support.workers import WorkerProcess
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from connect_runtime.protocol.slot_channel import (
    CLOSE_BAD_REQUEST,
    SlotHello,
    channel_url,
)

SEQ = "SequenceSourceConnector"


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(kafka_bootstrap, tmp_path, 3).start()
    try:
        yield c
    finally:
        c.stop()  # resumes a worker a test left SIGSTOPped


def assert_exactly_once(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    seqs = sequences(read_topic(bootstrap, topic))
    assert sorted(seqs) == list(range(partitions)), sorted(seqs)
    for partition, values in seqs.items():
        assert values == list(range(len(values))), (
            f"source partition {partition}: not exactly 0..{len(values) - 1}; "
            f"duplicates or gaps near {first_problem(values)}")
    return {p: len(v) for p, v in seqs.items()}


def first_problem(values: list[int]) -> int | None:
    for i, v in enumerate(values):
        if v != i:
            return i
    return None


def stop_and_wait(worker: WorkerProcess, name: str) -> None:
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name).get("connector", {}).get("state") == "STOPPED", 60,
             f"{name} to stop")


def test_three_workers_elect_one_leader_and_followers_forward(
        cluster: Cluster, unique_name: Callable[[str], str]) -> None:
    views = [w.rest("GET", "/internal/leader").json() for w in cluster.workers]
    leaders = [v for v in views if v["is_leader"]]
    assert len(leaders) == 1
    leader_url = leaders[0]["worker_url"]
    assert all(v["leader_url"] == leader_url for v in views)
    follower = next(w for w in cluster.workers if w.url != leader_url)
    name = unique_name("fwd")
    r = follower.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": unique_name("t")}})
    assert r.status_code == 201, r.text  # forwarded to the leader
    assert follower.rest("GET", f"/connectors/{name}").status_code == 200  # own view


def test_leader_sigkill_elects_another_and_tasks_resume_exactly_once(
        cluster: Cluster, unique_name: Callable[[str], str], kafka_bootstrap: str) -> None:
    topic, name = unique_name("seq"), unique_name("failover")
    create_topic(kafka_bootstrap, topic, 3)
    leader = cluster.wait_leader()
    r = leader.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "tasks.max": "3", "topic": topic, "batch.size": "20",
        "rate.per.sec": "150"}})
    assert r.status_code == 201, r.text
    leader.wait_tasks(name, "RUNNING", 3)
    wait_for(lambda: committed(kafka_bootstrap, topic) >= 300, 60, "records before the kill")

    killed_at = time.monotonic()
    os.killpg(leader.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
    new_leader = cluster.wait_leader(other_than=leader, timeout=40)
    elected_after = time.monotonic() - killed_at
    assert elected_after < 6 + 10, f"new leader after {elected_after:.1f}s"
    new_leader.wait_tasks(name, "RUNNING", 3, timeout=90)
    before = committed(kafka_bootstrap, topic)
    wait_for(lambda: committed(kafka_bootstrap, topic) > before + 100, 60,
             "records committed under the new leader")
    stop_and_wait(new_leader, name)
    assert_exactly_once(kafka_bootstrap, topic, 3)


def test_a_resumed_zombie_leader_cannot_write_and_its_tasks_cannot_commit(
        cluster: Cluster, unique_name: Callable[[str], str], kafka_bootstrap: str) -> None:
    topic, name = unique_name("seq"), unique_name("zombie")
    create_topic(kafka_bootstrap, topic, 4)
    zombie = cluster.wait_leader()
    config = {"connector.class": SEQ, "tasks.max": "2", "partitions": "4", "topic": topic,
              "batch.size": "10", "rate.per.sec": "100", "transaction.boundary": "interval",
              "transaction.boundary.interval.ms": "500"}
    assert zombie.rest("POST", "/connectors", json={"name": name, "config": config}) \
        .status_code == 201
    zombie.wait_tasks(name, "RUNNING", 2)
    wait_for(lambda: committed(kafka_bootstrap, topic) >= 100, 60, "records before the stall")

    # The whole process group stalls: worker, Spark JVM and the tasks' Python workers.
    assert zombie.proc is not None
    os.killpg(zombie.proc.pid, signal.SIGSTOP)
    leader = cluster.wait_leader(other_than=zombie, timeout=40)
    leader.wait_tasks(name, "RUNNING", 2, timeout=90)
    reconfigured = {**config, "tasks.max": "3"}
    r = leader.rest("PUT", f"/connectors/{name}/config", json=reconfigured)
    assert r.status_code == 200, r.text
    wait_for(lambda: len(leader.rest("GET", f"/connectors/{name}/tasks").json()) == 3, 60,
             "the new generation of task configs")
    leader.wait_tasks(name, "RUNNING", 3, timeout=90)

    os.killpg(zombie.proc.pid, signal.SIGCONT)
    # Asked directly (no forwarding), the resumed zombie must not write.
    attempt = zombie.rest("PUT", f"/connectors/{name}/config", params={"forward": "false"},
                          json={**config, "tasks.max": "1"})
    assert attempt.status_code == 409, attempt.text
    wait_for(lambda: not zombie.rest("GET", "/internal/leader").json()["is_leader"], 30,
             "the zombie to step down")
    time.sleep(2)
    assert leader.rest("GET", f"/connectors/{name}/config").json()["tasks.max"] == "3"
    assert len(leader.rest("GET", f"/connectors/{name}/tasks").json()) == 3
    before = committed(kafka_bootstrap, topic)
    wait_for(lambda: committed(kafka_bootstrap, topic) > before + 100, 60,
             "records committed by the new generation")
    stop_and_wait(leader, name)
    assert_exactly_once(kafka_bootstrap, topic, 4)


def running_generation(worker: WorkerProcess, name: str, count: int,
                       after: int = -1, timeout: float = 90) -> int:
    """Wait until ``count`` slots of one generation newer than ``after`` all run."""
    def current() -> int | None:
        slots = [s for s in worker.slots() if s["connector"] == name]
        generations = {s["generation"] for s in slots}
        if (len(slots) == count and len(generations) == 1 and min(generations) > after
                and all(s["state"] == "RUNNING" for s in slots)):
            return int(min(generations))
        return None
    result: int = wait_for(current, timeout, f"{count} running tasks of a generation > {after}")
    return result


def open_zombie_transaction(bootstrap: str, transactional_id: str, topic: str,
                            key: bytes | None = None) -> Producer:
    """A producer posing as a task of the current generation, with an open transaction."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b'{"partition": 99, "seq": 0}', key)
    producer.flush(10)
    return producer


def test_reconfiguring_3_5_1_5_3_fences_each_previous_generation(
        worker: WorkerProcess, unique_name: Callable[[str], str], kafka_bootstrap: str) -> None:
    topic, name = unique_name("seq"), unique_name("reconf")
    create_topic(kafka_bootstrap, topic, 5)
    config = {"connector.class": SEQ, "tasks.max": "3", "partitions": "5", "topic": topic,
              "batch.size": "10", "rate.per.sec": "100"}
    assert worker.rest("POST", "/connectors", json={"name": name, "config": config}) \
        .status_code == 201
    worker.wait_tasks(name, "RUNNING", 3)
    group = worker.props["group.id"]
    zombie_topic = unique_name("zombie-out")
    create_topic(kafka_bootstrap, zombie_topic)
    fenced: list[str] = []
    generation = running_generation(worker, name, 3)
    for old, new in [(3, 5), (5, 1), (1, 5), (5, 3)]:
        txn_id = f"{group}-{name}-{old - 1}"
        zombie = open_zombie_transaction(kafka_bootstrap, txn_id, zombie_topic)
        r = worker.rest("PUT", f"/connectors/{name}/config",
                        json={**config, "tasks.max": str(new)})
        assert r.status_code == 200, r.text
        generation = running_generation(worker, name, new, after=generation)
        with pytest.raises(KafkaException) as error:
            zombie.commit_transaction(10)
        assert "fenced" in str(error.value).lower() or "epoch" in str(error.value).lower()
        fenced.append(txn_id)
    assert len(fenced) == 4
    assert read_topic(kafka_bootstrap, zombie_topic) == []  # no zombie write ever committed
    wait_for(lambda: committed(kafka_bootstrap, topic) >= 500, 60, "records after the changes")
    stop_and_wait(worker, name)
    counts = assert_exactly_once(kafka_bootstrap, topic, 5)
    assert all(n > 0 for n in counts.values())


def test_internal_requests_need_a_valid_signature(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("signed")
    assert worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": unique_name("t")}}).status_code == 201
    unsigned = worker.rest("PUT", f"/connectors/{name}/fence")
    assert unsigned.status_code == 400 and "signature" in unsigned.json()["message"].lower()
    forged = worker.rest("PUT", f"/connectors/{name}/fence", headers={
        "X-Connect-Authorization": "bm90IGEgcmVhbCBzaWduYXR1cmU=",
        "X-Connect-Request-Signature-Algorithm": "HmacSHA256"})
    assert forged.status_code == 403
    unknown_algorithm = worker.rest("PUT", f"/connectors/{name}/fence", headers={
        "X-Connect-Authorization": "bm90IGEgcmVhbCBzaWduYXR1cmU=",
        "X-Connect-Request-Signature-Algorithm": "HmacMD5"})
    assert unknown_algorithm.status_code == 400
    hello = SlotHello(connector=name, task=0, run_id="r", generation=0, attempt=0, pid=1,
                      host="h")
    with connect(channel_url(worker.url, name, 0), proxy=None) as channel:
        challenge = channel.recv(timeout=10)
        channel.send(hello.answer(challenge, None, "HmacSHA256"))
        with pytest.raises(ConnectionClosed):
            channel.recv(timeout=10)
        assert channel.close_code == CLOSE_BAD_REQUEST  # an unsigned slot channel
    docs: Any = httpx.get(f"{worker.url}/openapi.json", timeout=10).json()
    assert not [p for p in docs["paths"] if "fence" in p or p.startswith("/internal")]


def assert_no_gaps(bootstrap: str, topic: str, partitions: int) -> None:
    """At-least-once phases may duplicate, never lose: every seq up to the max is there."""
    seqs = sequences(read_topic(bootstrap, topic))
    assert sorted(seqs) == list(range(partitions))
    for partition, values in seqs.items():
        missing = set(range(max(values) + 1)) - set(values)
        assert not missing, f"source partition {partition} lost {sorted(missing)[:10]}"


def start_slow_sequence(leader: WorkerProcess, bootstrap: str, topic: str, name: str,
                        **config: str) -> None:
    """A two-task sequence source at 100 records/s into a new two-partition
    topic, both tasks RUNNING."""
    create_topic(bootstrap, topic, 2)
    assert leader.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "tasks.max": "2", "topic": topic, "batch.size": "10",
        "rate.per.sec": "100", **config}}).status_code == 201
    leader.wait_tasks(name, "RUNNING", 2)


def test_rolling_upgrade_and_soft_downgrade_keep_connectors_running(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    cluster = Cluster(kafka_bootstrap, tmp_path, 3,
                      {"exactly.once.source.support": "disabled"}).start()
    try:
        topic, name = unique_name("seq"), unique_name("upgrade")
        start_slow_sequence(cluster.wait_leader(), kafka_bootstrap, topic, name)
        # KIP-618's two-step upgrade, then its soft downgrade, one worker at a time.
        for mode in ("preparing", "enabled", "disabled"):
            for worker in cluster.workers:  # one at a time, as an operator would
                worker.stop()
                worker.props["exactly.once.source.support"] = mode
                worker.start()
                current = cluster.wait_leader()
                current.wait_tasks(name, "RUNNING", 2, timeout=120)
                before = committed(kafka_bootstrap, topic)
                wait_for(lambda b=before: committed(kafka_bootstrap, topic) > b + 50, 60,
                         f"records flowing after restarting a worker into {mode}")
        leader = cluster.wait_leader()
        stop_and_wait(leader, name)
        assert_no_gaps(kafka_bootstrap, topic, 2)
    finally:
        cluster.stop()


def leader_records(bootstrap: str, group: str) -> list[str]:
    """The URL of every ``leader`` record of the cluster's config topic, oldest
    first: each election writes one."""
    return [r["value"]["url"] for r in read_topic(bootstrap, f"{group}-configs")
            if r["key"] == b"leader"]


# A session long enough for a worker's restart (about 10 s here).
SETTINGS = {"session.timeout.ms": "30000", "heartbeat.interval.ms": "1500",
            "spark.master": "local[6]"}


def test_static_members_keep_their_roles_across_restarts(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """Under ``group.instance.id`` (KIP-345) a restarted follower moves nothing
    and a restarted leader is the leader again: no other worker is elected in
    between (the config topic's ``leader`` records), the tasks resume on it,
    exactly once. A second worker joining under a live worker's instance id
    fences it for good: that worker's /health turns unhealthy and names
    ``group.instance.id``."""
    cluster = Cluster(kafka_bootstrap, tmp_path, 3, SETTINGS)
    for i, worker in enumerate(cluster.workers):
        worker.props["group.instance.id"] = f"worker-{i}"
    cluster.start()
    try:
        topic, name = unique_name("seq"), unique_name("static")
        leader = cluster.wait_agreed_leader()
        start_slow_sequence(leader, kafka_bootstrap, topic, name)
        elections = leader_records(kafka_bootstrap, cluster.workers[0].group)
        assert elections[-1] == leader.url, elections

        follower = next(w for w in cluster.workers if w is not leader)
        follower.stop()
        follower.start()
        assert cluster.wait_agreed_leader() is leader

        leader.stop()
        time.sleep(3)  # unlike a worker that leaves the group, its place waits for it
        assert cluster.leader() is None
        leader.start()
        assert cluster.wait_agreed_leader() is leader
        leader.wait_tasks(name, "RUNNING", 2, timeout=120)
        before = committed(kafka_bootstrap, topic)
        wait_for(lambda: committed(kafka_bootstrap, topic) > before + 50, 60,
                 "records flowing after the leader's restart")
        after = leader_records(kafka_bootstrap, cluster.workers[0].group)
        # One more election, the restarted leader's own, and nobody else's.
        assert after == [*elections, leader.url], after

        # Killed and restarted in place (a container restart): the same again,
        # even with a dead task's transaction open on the offsets topic (a kill
        # between its offsets write and its commit), which only the task's next
        # instance ends (fencing): the restarted worker must rejoin, and lead,
        # without reading the offsets topic to its end first.
        group = leader.props["group.id"]
        leader.signal_tree(signal.SIGKILL)
        leader.stop()
        zombie = open_zombie_transaction(kafka_bootstrap, f"{group}-{name}-0", f"{group}-offsets",
                                         key=b"a key: the offsets topic is compacted")
        leader.start()
        assert cluster.wait_agreed_leader() is leader
        leader.wait_tasks(name, "RUNNING", 2, timeout=120)
        after = leader_records(kafka_bootstrap, cluster.workers[0].group)
        assert after == [*elections, leader.url, leader.url], after
        before = committed(kafka_bootstrap, topic)
        wait_for(lambda: committed(kafka_bootstrap, topic) > before + 50, 60,
                 "records flowing after the leader's kill and restart")
        # The task's new instance fenced it before reading its offsets.
        with pytest.raises(KafkaException):
            zombie.commit_transaction(10)

        instance = follower.props["group.instance.id"]
        twin = WorkerProcess(kafka_bootstrap, follower.group, free_port(), tmp_path,
                             {**SETTINGS, "group.instance.id": instance})
        twin.start()
        try:
            def fenced() -> str | None:
                answer = httpx.get(f"{follower.url}/health", timeout=3)
                return answer.text if answer.status_code == 500 else None
            message = wait_for(fenced, 60, "the fenced worker to report itself unhealthy")
            assert "group.instance.id" in message and repr(instance) in message, message
        finally:
            twin.stop()
        stop_and_wait(leader, name)
        assert_exactly_once(kafka_bootstrap, topic, 2)
    finally:
        cluster.stop()


def test_a_killed_leaders_tasks_read_unassigned_on_the_new_leader_until_they_run(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """Before, the tasks of a SIGKILLed leader read RUNNING with its worker id, on
    every worker, until their new instances reported (5-6 s after the election).

    What is guaranteed (docs/rest.md, "Connectors and status"): between the kill
    and the election, the dead leader's statuses are all anyone knows and are
    shown as they are; from the moment a worker says it leads
    (``GET /internal/leader``), its status answer names no instance of its
    predecessor: the connector and each task are UNASSIGNED on the new leader,
    then RUNNING on it once their new instances report."""
    cluster = Cluster(kafka_bootstrap, tmp_path, 2).start()
    try:
        topic, name = unique_name("seq"), unique_name("takeover")
        leader = cluster.wait_agreed_leader()
        survivor = next(w for w in cluster.workers if w is not leader)
        start_slow_sequence(leader, kafka_bootstrap, topic, name)
        dead_id, new_id = (w.url.split("://", 1)[1] for w in (leader, survivor))
        assert {t["worker_id"] for t in leader.status(name)["tasks"]} == {dead_id}

        def entries(status: dict[str, Any]) -> list[tuple[str, str]]:
            return [(e["state"], e["worker_id"]) for e in [status["connector"],
                                                          *status["tasks"]]]

        os.killpg(leader.proc.pid, signal.SIGKILL)  # type: ignore[union-attr]
        samples: list[tuple[bool, list[tuple[str, str]]]] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:  # "it leads" first: the status read after it must already agree
                leads = httpx.get(f"{survivor.url}/internal/leader", timeout=5).json()[
                    "is_leader"]
                status = survivor.rest("GET", f"/connectors/{name}/status").json()
            except httpx.HTTPError:
                continue
            samples.append((leads, entries(status)))
            if leads and entries(status) == [("RUNNING", new_id)] * 3:
                break
            time.sleep(0.05)
        taken_over = [seen for leads, seen in samples if leads]
        assert taken_over and taken_over[-1] == [("RUNNING", new_id)] * 3, samples[-5:]
        wrong = [seen for seen in taken_over
                 if any(entry not in {("UNASSIGNED", new_id), ("RUNNING", new_id)}
                        for entry in seen)]
        assert not wrong, f"after the takeover: {wrong[:3]} (dead leader {dead_id})"
        # The window was seen, and it said what was true.
        assert any(("UNASSIGNED", new_id) in seen[1:] for seen in taken_over), taken_over[:3]
        # The new instances have just started: let them commit before the stop, so
        # the check below covers what they wrote too (and sees both partitions).
        before = committed(kafka_bootstrap, topic)
        wait_for(lambda: committed(kafka_bootstrap, topic) > before + 50, 60,
                 "records committed under the new leader")
        stop_and_wait(survivor, name)
        assert_exactly_once(kafka_bootstrap, topic, 2)
    finally:
        cluster.stop()
