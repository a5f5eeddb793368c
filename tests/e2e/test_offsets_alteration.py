"""KIP-875 on a real worker: alter and reset a stopped connector's offsets, then resume.

The sequence connector makes every outcome checkable: each source partition emits
seq = offset, offset + 1, ... up to ``max.records``. After an alter to 1000 the next
run must hold exactly 1000..max-1 per partition, after a reset exactly 0..max-1,
each once (``connect-runtime verify`` and the exact lists). The connector keeps its
own offsets topic, so the combined view (own topic over the global one) is what the
tasks resume from, and the global topic must hold the same offsets.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, Producer
from support.kafka import create_topic, read_topic, sequences, wait_for
from support.workers import WorkerProcess

from connect_runtime.storage.offsets.views import OffsetSource

SEQ = "SequenceSourceConnector"
PARTITIONS = 2
NOT_STOPPED = ("Connectors must be in the STOPPED state before their offsets can be modified. "
               "This can be done for the specified connector by issuing a 'PUT' request to the "
               "'/connectors/{}/stop' endpoint")


def offsets_of(worker: WorkerProcess, name: str) -> dict[int, Any]:
    r = worker.rest("GET", f"/connectors/{name}/offsets")
    assert r.status_code == 200, r.text
    return {o["partition"]["sequence.partition"]: o["offset"] for o in r.json()["offsets"]}


def run_to_end(worker: WorkerProcess, name: str, config: dict[str, str], last: int) -> None:
    """Write ``config`` (the connector is STOPPED), resume, wait until every partition
    committed ``last`` (``max.records``), stop again."""
    r = worker.rest("PUT", f"/connectors/{name}/config", json=config)
    assert r.status_code == 200, r.text
    assert worker.rest("PUT", f"/connectors/{name}/resume").status_code == 202
    wait_for(lambda: offsets_of(worker, name) == {k: {"seq": last} for k in range(PARTITIONS)},
             120, f"{name} to commit seq {last} on every partition", interval=1)
    stop(worker, name)


def stop(worker: WorkerProcess, name: str) -> None:
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name)["connector"]["state"] == "STOPPED"
             and worker.status(name)["tasks"] == [], 120, f"{name} to stop")


def verify(bootstrap: str, topic: str, start: int) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "connect_runtime.cli", "verify", "--bootstrap-server", bootstrap,
         "--topic", topic, "--start", str(start),
         "--expect-groups", ",".join(map(str, range(PARTITIONS))), "--timeout", "60"],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.rstrip().endswith("OK"), result.stdout


def global_offsets(worker: WorkerProcess, name: str) -> dict[int, Any]:
    from confluent_kafka.admin import AdminClient

    source = OffsetSource({"bootstrap.servers": worker.bootstrap},
                          AdminClient({"bootstrap.servers": worker.bootstrap}),
                          worker.props["offset.storage.topic"])
    return {entry.partition["sequence.partition"]: entry.offset
            for entry in source.read(name, 30).values()}


def zombie(worker: WorkerProcess, name: str, task: int, topic: str) -> Producer:
    """A task producer of the previous generation that is still alive, mid-transaction."""
    producer = Producer({"bootstrap.servers": worker.bootstrap,
                         "transactional.id": f"{worker.group}-{name}-{task}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, key=b"1", value=b'{"partition": 1, "seq": 5, "task": 1}')
    producer.flush(10)
    return producer


def test_alter_then_reset_resume_exactly_from_the_written_offsets(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("kip875")
    first, altered, reset = unique_name("first"), unique_name("altered"), unique_name("reset")
    for topic in (first, altered, reset):
        create_topic(worker.bootstrap, topic, partitions=PARTITIONS)
    config = {"connector.class": SEQ, "tasks.max": "2", "partitions": str(PARTITIONS),
              "topic": first, "max.records": "300", "batch.size": "50",
              "offsets.storage.topic": unique_name("own-offsets"),
              "exactly.once.support": "required"}
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text
    worker.wait_tasks(name, "RUNNING", 2)

    # Running: refused with Connect's message, nothing written.
    body = {"offsets": [{"partition": {"sequence.partition": 0}, "offset": {"seq": 1000}}]}
    r = worker.rest("PATCH", f"/connectors/{name}/offsets", json=body)
    assert (r.status_code, r.json()) == (400, {"error_code": 400,
                                               "message": NOT_STOPPED.format(name)})
    assert worker.rest("DELETE", f"/connectors/{name}/offsets").status_code == 400
    wait_for(lambda: offsets_of(worker, name) == {0: {"seq": 300}, 1: {"seq": 300}}, 120,
             "the first run to finish", interval=1)
    stop(worker, name)
    verify(worker.bootstrap, first, 0)
    # A zombie of task 1 (stopped as far as the leader knows, yet alive) holds a
    # transaction open: the first alter request must fence it.
    ghost = zombie(worker, name, 1, altered)

    # Bad input on the stopped connector: 400 naming the problem, nothing changed.
    for bad, says in [
            ({"offsets": []}, "Partitions / offsets need to be provided"),
            ({"offsets": [{"partition": {"sequence.partition": 0}, "offset": {"seq": -1}}]},
             "'seq' with an integer >= 0"),
            ({"offsets": [{"partition": {"sequence.partition": 0},
                           "offset": {"seq": {"nested": 1}}}]}, "may only hold"),
            ({"offsets": [{"partition": {"file": "x"}, "offset": {"seq": 1}}]},
             "'sequence.partition'")]:
        r = worker.rest("PATCH", f"/connectors/{name}/offsets", json=bad)
        assert r.status_code == 400 and says in r.json()["message"], (bad, r.text)
    assert offsets_of(worker, name) == {0: {"seq": 300}, 1: {"seq": 300}}

    alter = {"offsets": [{"partition": {"sequence.partition": k}, "offset": {"seq": 1000}}
                         for k in range(PARTITIONS)]}
    r = worker.rest("PATCH", f"/connectors/{name}/offsets", json=alter)
    assert (r.status_code, r.json()) == (200, {
        "message": "The offsets for this connector have been altered successfully"})
    with pytest.raises(KafkaException, match=r"(?i)fenc"):
        ghost.commit_transaction(30)
    assert offsets_of(worker, name) == {0: {"seq": 1000}, 1: {"seq": 1000}}
    assert global_offsets(worker, name) == {0: {"seq": 1000}, 1: {"seq": 1000}}

    run_to_end(worker, name, {**config, "topic": altered, "max.records": "1300"}, 1300)
    assert sequences(read_topic(worker.bootstrap, altered)) == {
        k: list(range(1000, 1300)) for k in range(PARTITIONS)}
    verify(worker.bootstrap, altered, 1000)

    r = worker.rest("DELETE", f"/connectors/{name}/offsets")
    assert (r.status_code, r.json()) == (200, {
        "message": "The offsets for this connector have been reset successfully"})
    assert offsets_of(worker, name) == {}
    assert global_offsets(worker, name) == {}
    run_to_end(worker, name, {**config, "topic": reset, "max.records": "200"}, 200)
    assert sequences(read_topic(worker.bootstrap, reset)) == {
        k: list(range(200)) for k in range(PARTITIONS)}
    verify(worker.bootstrap, reset, 0)

    # A reset with nothing left to reset still succeeds, as in Connect.
    assert worker.rest("DELETE", f"/connectors/{name}/offsets").status_code == 200
    r = worker.rest("DELETE", f"/connectors/{name}/offsets")
    assert r.status_code == 200
    assert offsets_of(worker, name) == {}
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_unknown_connector_is_404(worker: WorkerProcess) -> None:
    for method, kwargs in [("PATCH", {"json": {"offsets": [
            {"partition": {"a": 1}, "offset": {"b": 2}}]}}), ("DELETE", {})]:
        r = worker.rest(method, "/connectors/no-such-connector/offsets", **kwargs)
        assert (r.status_code, r.json()) == (404, {
            "error_code": 404, "message": "Connector no-such-connector not found"})
