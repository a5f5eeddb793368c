"""A worker on a broker that lets only SASL clients in, end to end.

The broker (``deploy/kafka.sh`` with ``KAFKA_SASL_PORT``) has a PLAINTEXT
listener, which only the test uses (to create and read topics), and a
SASL_PLAINTEXT one (PLAIN and SCRAM-SHA-512), the worker's only bootstrap. A
client of the worker or of its tasks that lacked the credentials would talk
plaintext to the SASL listener and never get an answer, so a connector that
runs, restarts and delivers exactly once proves every client got them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.kafka import Broker, free_port, free_port_pair, read_topic, wait_for
from support.offsets import committed
from support.workers import WorkerProcess

from connect_runtime.tools.verify import format_table, verify_topics

SEQ = "SequenceSourceConnector"
USERS = {"alice": "alice-secret-1", "bob": "bob-secret-2"}
WRONG_PASSWORD = "not-alices-password-42"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def jaas(module: str, user: str, password: str) -> str:
    return f'{module} required username="{user}" password="{password}";'


def connect_sasl(user: str = "alice", password: str | None = None) -> dict[str, str]:
    """Kafka Connect's keys, as a connect-distributed.properties would have them."""
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
            "sasl.jaas.config": jaas(PLAIN, user, password or USERS[user])}


@dataclass(frozen=True)
class SaslBroker:
    plaintext: str  # the test's way in
    sasl: str  # the worker's


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[SaslBroker]:
    port = free_port_pair()
    sasl_port = free_port()
    while sasl_port in (port, port + 1):
        sasl_port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="connect-test-kafka-sasl-"))
    users = ",".join(f"{u}:{p}" for u, p in USERS.items())
    broker = Broker(data_dir, port, env={"KAFKA_SASL_PORT": str(sasl_port),
                                         "KAFKA_SASL_USERS": users})
    broker.start()
    try:
        yield SaslBroker(broker.bootstrap, f"127.0.0.1:{sasl_port}")
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_worker_with_connects_sasl_keys_runs_a_connector_exactly_once(
        sasl_broker: SaslBroker, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    group = f"sasl-{uuid.uuid4().hex[:8]}"
    settings = {
        **connect_sasl("alice"),
        # Producers (the leader's config writer, task producers, the offset
        # mirror) log in as bob with SCRAM; the prefixed keys win for them.
        "producer.sasl.mechanism": "SCRAM-SHA-512",
        "producer.sasl.jaas.config": jaas(SCRAM, "bob", USERS["bob"]),
        "ssl.protocol": "TLSv1.3",  # pasted Java-only key: dropped with a warning
    }
    worker = WorkerProcess(sasl_broker.sasl, group, free_port(), tmp_path, settings).start()
    try:
        topic, name = unique_name("seq"), unique_name("sasl")
        # Every task-side client kind: its own offsets topic (an admin at startup, a
        # consumer reading offsets, the mirror's producer) and KIP-158 topic creation.
        r = worker.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": SEQ, "topic": topic, "tasks.max": "2",
            "sequence.partitions": "2", "batch.size": "20", "rate.per.sec": "400",
            "offsets.storage.topic": unique_name("own-offsets"),
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "2"}})
        assert r.status_code == 201, r.text
        worker.wait_tasks(name, "RUNNING", 2)
        wait_for(lambda: committed(sasl_broker.plaintext, topic, missing_ok=True) >= 400, 90,
                 "400 committed records")
        # Restarted tasks read their committed offsets (over SASL) and go on from there.
        before = committed(sasl_broker.plaintext, topic, missing_ok=True)
        restart = worker.rest("POST", f"/connectors/{name}/restart",
                              params={"includeTasks": "true"})
        assert restart.status_code in (202, 204), restart.text
        wait_for(lambda: committed(sasl_broker.plaintext, topic, missing_ok=True)
                 >= before + 400, 90,
                 "400 more committed records after the restart")
        assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
        wait_for(lambda: not any(s["connector"] == name for s in worker.slots()), 60,
                 "the tasks to stop")

        report = verify_topics(sasl_broker.plaintext, [topic], expect_groups=["0", "1"])
        assert report.ok, format_table(report)
        # The offset mirror's producer wrote the connector's offsets to the global topic.
        mirrored = read_topic(sasl_broker.plaintext, f"{group}-offsets")
        assert any(name.encode() in (m["key"] or b"") for m in mirrored)
    finally:
        assert worker.stop() == 0, worker.tail()
    log = worker.log_path.read_text(errors="replace")
    assert "Ignoring worker config ssl.protocol" in log
    assert not any(secret in log for secret in USERS.values())


@pytest.mark.parametrize("who, settings", [
    ("admin", connect_sasl("alice", WRONG_PASSWORD)),
    ("producer", {**connect_sasl("alice"),
                  "producer.sasl.jaas.config": jaas(PLAIN, "alice", WRONG_PASSWORD)}),
], ids=["every-client", "producers-only"])
def test_a_wrong_password_stops_the_worker_at_once_saying_so(
        sasl_broker: SaslBroker, tmp_path: Path, who: str, settings: dict[str, str]) -> None:
    worker = WorkerProcess(sasl_broker.sasl, f"sasl-bad-{uuid.uuid4().hex[:8]}", free_port(),
                           tmp_path, settings)
    started = time.monotonic()
    worker.start(wait=False)
    try:
        assert worker.proc is not None
        code = worker.proc.wait(60)
        elapsed = time.monotonic() - started
    finally:
        worker.stop()
    log = worker.log_path.read_text(errors="replace")
    assert code == 1, log
    assert elapsed < 30, f"took {elapsed:.0f}s to give up"
    assert f"authentication failed: Kafka at {sasl_broker.sasl} refused the {who} client" in log
    assert "SASL authentication error" in log
    assert WRONG_PASSWORD not in log and USERS["alice"] not in log
