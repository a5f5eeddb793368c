"""Creating a connector at given source offsets, in one call (KIP-995; not in Connect 4.1).

``POST /connectors`` with ``initial_offsets`` (the shapes of ``PATCH
/connectors/<name>/offsets``) on a real worker, with exactly-once support enabled,
so the offsets are written in one transaction under task 0's ``transactional.id``.
The sequence connector makes the outcome checkable: a partition whose offset is
``{"seq": n}`` emits n, n + 1, ... up to ``max.records``, so the records on the
topic show where each task started. The connector keeps its own offsets topic, so
the combined view (own topic over the global one) is what the tasks resume from.

Bad input (an unknown key in an entry, offsets the connector refuses, an invalid
config) is a 400 naming the problem, the connector does not exist afterwards, and
nothing reached Kafka: no offsets in the global topic, and the connector's own
offsets topic (which the write would create) does not exist.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka.admin import AdminClient
from support.kafka import create_topic, read_topic, sequences, wait_for
from support.workers import WorkerProcess

from connect_runtime.storage.offsets.views import OffsetSource

SEQ = "SequenceSourceConnector"
PARTITIONS = 2
MAX_RECORDS = 1200


def offsets_of(worker: WorkerProcess, name: str) -> dict[int, Any]:
    r = worker.rest("GET", f"/connectors/{name}/offsets")
    assert r.status_code == 200, r.text
    return {o["partition"]["sequence.partition"]: o["offset"] for o in r.json()["offsets"]}


def global_offsets(worker: WorkerProcess, name: str) -> dict[Any, Any]:
    """``name``'s offsets in the worker's global offsets topic, read directly."""
    source = OffsetSource({"bootstrap.servers": worker.bootstrap},
                          AdminClient({"bootstrap.servers": worker.bootstrap}),
                          worker.props["offset.storage.topic"])
    return {entry.partition["sequence.partition"]: entry.offset
            for entry in source.read(name, 30).values()}


def initial(offsets: dict[int, int]) -> list[dict[str, Any]]:
    return [{"partition": {"sequence.partition": k}, "offset": {"seq": seq}}
            for k, seq in offsets.items()]


def sequence_config(topic: str, own_offsets: str) -> dict[str, str]:
    return {"connector.class": SEQ, "tasks.max": str(PARTITIONS),
            "partitions": str(PARTITIONS), "topic": topic, "max.records": str(MAX_RECORDS),
            "batch.size": "50", "offsets.storage.topic": own_offsets,
            "exactly.once.support": "required"}


def run_to_end(worker: WorkerProcess, name: str) -> None:
    wait_for(lambda: offsets_of(worker, name) == {k: {"seq": MAX_RECORDS}
                                                  for k in range(PARTITIONS)},
             120, f"{name} to commit seq {MAX_RECORDS} on every partition", interval=1)


def test_a_connector_created_with_initial_offsets_starts_from_them(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name, topic = unique_name("kip995"), unique_name("kip995-out")
    create_topic(worker.bootstrap, topic, partitions=PARTITIONS)
    start = {0: 1000, 1: 250}
    r = worker.rest("POST", "/connectors", json={
        "name": name, "config": sequence_config(topic, unique_name("own-offsets")),
        "initial_offsets": initial(start)})
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/connectors/{name}"

    run_to_end(worker, name)
    # The first record of each partition is the one its initial offset points at:
    # the tasks started from the offsets, not from 0.
    assert sequences(read_topic(worker.bootstrap, topic)) == {
        k: list(range(seq, MAX_RECORDS)) for k, seq in start.items()}
    assert global_offsets(worker, name) == {k: {"seq": MAX_RECORDS} for k in range(PARTITIONS)}
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_initial_offsets_with_initial_state_stopped_are_there_before_any_task(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name, topic = unique_name("kip995-stopped"), unique_name("kip995-stopped-out")
    create_topic(worker.bootstrap, topic, partitions=PARTITIONS)
    start = {0: 1100, 1: 1150}
    r = worker.rest("POST", "/connectors", json={
        "name": name, "config": sequence_config(topic, unique_name("own-offsets")),
        "initial_state": "STOPPED", "initial_offsets": initial(start)})
    assert r.status_code == 201, r.text
    wait_for(lambda: worker.status(name)["connector"]["state"] == "STOPPED", 60,
             f"{name} to be STOPPED")
    assert worker.status(name)["tasks"] == []
    # Both topics hold them: the connector's own (the combined view) and the global one.
    assert offsets_of(worker, name) == {k: {"seq": seq} for k, seq in start.items()}
    assert global_offsets(worker, name) == {k: {"seq": seq} for k, seq in start.items()}

    assert worker.rest("PUT", f"/connectors/{name}/resume").status_code == 202
    run_to_end(worker, name)
    assert sequences(read_topic(worker.bootstrap, topic)) == {
        k: list(range(seq, MAX_RECORDS)) for k, seq in start.items()}
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_bad_initial_offsets_create_nothing_and_write_nothing(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name, topic = unique_name("kip995-bad"), unique_name("kip995-bad-out")
    own_offsets = unique_name("own-offsets")
    create_topic(worker.bootstrap, topic, partitions=PARTITIONS)
    config = sequence_config(topic, own_offsets)
    good = initial({0: 900})
    cases: list[tuple[dict[str, Any], int, str]] = [
            # An unknown key inside an entry: the REST layer's 400, naming key and entry.
            ({"initial_offsets": [{"partition": {"sequence.partition": 0},
                                   "offset": {"seq": 5}, "position": 5}]}, 400,
             "Unrecognized field(s) 'position' in 'initial_offsets[0]'; expected partition, "
             "offset"),
            ({"initial_offsets": [{"partition": {"sequence.partition": 0}, "offset": 5}]}, 400,
             "Invalid value for field 'initial_offsets[0].offset'"),
            ({"initial_offsets": []}, 400, "Invalid value for field 'initial_offsets'"),
            # Offsets the connector's alter_offsets refuses: checked before any write.
            ({"initial_offsets": initial({0: -1})}, 400,
             f"Invalid value for field 'initial_offsets': connector {name} cannot take "
             "initial offsets: the connector refused them: "),
            ({"initial_offsets": [{"partition": {"file": "x"}, "offset": {"seq": 1}}]}, 400,
             "'sequence.partition'"),
            ({"initial_offsets": [{"partition": {"sequence.partition": 0},
                                   "offset": {"seq": {"nested": 1}}}]}, 400,
             "Invalid initial_offsets[0]"),
            # Good offsets, but a config the connector refuses: nothing written either.
            ({"initial_offsets": good, "config": {**config, "batch.size": "0"}}, 400,
             "batch.size")]
    for body, status, says in cases:
        r = worker.rest("POST", "/connectors", json={"name": name, "config": config, **body})
        assert r.status_code == status and says in r.json()["message"], (body, r.text)
        assert set(r.json()) == {"error_code", "message"}
        missing = worker.rest("GET", f"/connectors/{name}")
        assert missing.status_code == 404, (body, missing.text)
    # Nothing reached Kafka: no offsets in the global topic, and the connector's own
    # offsets topic, which the first write would have created, does not exist.
    assert global_offsets(worker, name) == {}
    assert not topic_exists(worker, own_offsets)

    # A create of a name that exists leaves that connector's offsets alone (409).
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config,
                                                 "initial_state": "STOPPED"})
    assert r.status_code == 201, r.text
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config,
                                                 "initial_offsets": good})
    assert r.status_code == 409, r.text
    assert global_offsets(worker, name) == {}
    assert not topic_exists(worker, own_offsets)
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def topic_exists(worker: WorkerProcess, topic: str) -> bool:
    admin = AdminClient({"bootstrap.servers": worker.bootstrap})
    return topic in admin.list_topics(timeout=30).topics
