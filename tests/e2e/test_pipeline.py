"""End to end: a real worker process, tasks on Spark executors, the real broker.

Every claim is checked the way a downstream user would see it: by reading the
output with ``isolation.level=read_committed`` and by the REST API.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
from support.kafka import create_topic, read_topic, sequences, transaction_sizes, wait_for
from support.offsets import wait_committed
from support.workers import WorkerProcess

from connect_runtime.connectors.sequence import expected_aborted

SEQ = "SequenceSourceConnector"


def create(worker: WorkerProcess, name: str, config: dict[str, str]) -> dict[str, Any]:
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text
    assert r.headers["location"] == f"/connectors/{name}"
    return dict(r.json())


def test_poll_boundary_delivers_each_record_once_with_rest_shapes(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("poll")
    create_topic(worker.bootstrap, topic, partitions=2)
    info = create(worker, name, {"connector.class": SEQ, "tasks.max": "2", "topic": topic,
                                 "max.records": "400", "batch.size": "50",
                                 "exactly.once.support": "required"})
    assert info == {"name": name, "type": "source", "tasks": [], "config": {
        "connector.class": SEQ, "tasks.max": "2", "topic": topic, "max.records": "400",
        "batch.size": "50", "exactly.once.support": "required", "name": name}}
    duplicate = worker.rest("POST", "/connectors", json={"name": name, "config": info["config"]})
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error_code": 409, "message": f"Connector {name} already exists"}

    worker.wait_tasks(name, "RUNNING", 2)
    seqs = sequences(wait_committed(worker, topic, 800, 90))
    assert seqs == {0: list(range(400)), 1: list(range(400))}

    status = worker.status(name)
    assert status["connector"]["state"] == "RUNNING" and status["type"] == "source"
    tasks = worker.rest("GET", f"/connectors/{name}/tasks").json()
    assert [t["id"] for t in tasks] == [{"connector": name, "task": 0},
                                        {"connector": name, "task": 1}]
    assert tasks[0]["config"]["task.class"] == \
        "connect_runtime.connectors.sequence.SequenceSourceTask"
    offsets = worker.rest("GET", f"/connectors/{name}/offsets").json()
    assert sorted(offsets["offsets"], key=lambda o: o["partition"]["sequence.partition"]) == [
        {"partition": {"sequence.partition": 0}, "offset": {"seq": 400}},
        {"partition": {"sequence.partition": 1}, "offset": {"seq": 400}}]

    # Poll boundary: one transaction per batch of 50, visible as commit markers.
    records = read_topic(worker.bootstrap, topic)
    for partition in (0, 1):
        offs = [r["offset"] for r in records if r["value"]["partition"] == partition]
        assert transaction_sizes(offs) == [50] * 8

    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    wait_for(lambda: worker.rest("GET", f"/connectors/{name}").status_code == 404, 30,
             "the deleted connector to disappear")


def test_interval_boundary_commits_by_time(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("interval")
    # No topic is created up front: KIP-158 topic creation makes it on first write.
    create(worker, name, {"connector.class": SEQ, "topic": topic, "max.records": "600",
                          "topic.creation.default.replication.factor": "1",
                          "topic.creation.default.partitions": "1",
                          "batch.size": "10", "rate.per.sec": "300",
                          "transaction.boundary": "interval",
                          "transaction.boundary.interval.ms": "500"})
    seqs = sequences(wait_committed(worker, topic, 600, 90))
    assert seqs == {0: list(range(600))}
    sizes = transaction_sizes([r["offset"] for r in read_topic(worker.bootstrap, topic)])
    # ~2 s of records at 300/s cut every 500 ms: a handful of ~150-record transactions,
    # where a poll boundary would have made 60 transactions of 10.
    assert 3 <= len(sizes) <= 8, sizes
    assert sorted(sizes)[len(sizes) // 2] >= 50, sizes


def test_connector_defined_aborts_are_invisible_and_their_offsets_commit(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("aborts")
    create_topic(worker.bootstrap, topic)
    # Rate-limited so that most records of a transaction are sent before the
    # connector's abort: librdkafka purges what is still queued when it aborts.
    create(worker, name, {"connector.class": SEQ, "topic": topic, "max.records": "300",
                          "batch.size": "7", "rate.per.sec": "300",
                          "transaction.boundary": "connector",
                          "commit.every.records": "10", "abort.every.transactions": "3"})
    expected = [s for s in range(300) if not expected_aborted(s, 10, 3)]
    assert len(expected) == 200
    seqs = sequences(wait_committed(worker, topic, 200, 90))
    assert seqs == {0: expected}
    # Aborted records did reach the broker, in transactions that never committed.
    uncommitted = set(sequences(read_topic(worker.bootstrap, topic, "read_uncommitted"))[0])
    aborted_on_broker = uncommitted - set(expected)
    assert len(aborted_on_broker) >= 30, sorted(aborted_on_broker)
    assert all(expected_aborted(s, 10, 3) for s in aborted_on_broker)
    # ...and their offsets were committed, so the task moved on past them.
    wait_for(lambda: worker.rest("GET", f"/connectors/{name}/offsets").json()["offsets"]
             == [{"partition": {"sequence.partition": 0}, "offset": {"seq": 300}}], 30,
             "offsets to reach 300")


def test_sigkill_of_the_executor_mid_transaction_loses_and_duplicates_nothing(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("kill")
    create_topic(worker.bootstrap, topic)
    # A 10-minute interval keeps every record in one open transaction.
    create(worker, name, {"connector.class": SEQ, "topic": topic, "max.records": "300",
                          "batch.size": "20", "rate.per.sec": "200",
                          "transaction.boundary": "interval",
                          "transaction.boundary.interval.ms": "600000"})
    worker.wait_tasks(name, "RUNNING", 1)
    wait_for(lambda: len(read_topic(worker.bootstrap, topic, "read_uncommitted")) >= 100, 60,
             "records produced inside the open transaction")
    assert read_topic(worker.bootstrap, topic) == []
    slot = next(s for s in worker.slots() if s["connector"] == name)
    os.kill(slot["pid"], signal.SIGKILL)

    worker.wait_tasks(name, "FAILED", 1)
    trace = worker.status(name)["tasks"][0]["trace"]
    assert "died" in trace and "Restart the task" in trace
    assert read_topic(worker.bootstrap, topic) == []
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {"offsets": []}

    # The killed instance may have produced any number of records before the kill
    # (the kill follows a few slow reads): the restarted one has produced again
    # when all 300 of its records (it starts over from seq 0) are there as well.
    produced = len(read_topic(worker.bootstrap, topic, "read_uncommitted"))
    assert worker.rest("POST", f"/connectors/{name}/tasks/0/restart").status_code == 204
    worker.wait_tasks(name, "RUNNING", 1)
    wait_for(lambda: len(read_topic(worker.bootstrap, topic, "read_uncommitted"))
             >= produced + 300, 60, "the restarted task to produce its 300 records again")
    # Stopping commits the open transaction (graceful stop, final commit).
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    assert sequences(wait_committed(worker, topic, 300, 90)) == {0: list(range(300))}
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {
        "offsets": [{"partition": {"sequence.partition": 0}, "offset": {"seq": 300}}]}


def test_per_connector_offsets_topic_is_used_and_mirrored_to_the_global_one(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name, own = unique_name("seq"), unique_name("own"), unique_name("own-offsets")
    create_topic(worker.bootstrap, topic)
    create(worker, name, {"connector.class": SEQ, "topic": topic, "max.records": "100",
                          "batch.size": "25", "offsets.storage.topic": own})
    assert sequences(wait_committed(worker, topic, 100, 90)) == {0: list(range(100))}
    key = orjson.dumps([name, {"sequence.partition": 0}])

    def last_offset(offsets_topic: str) -> Any:
        values = [r["value"] for r in read_topic(worker.bootstrap, offsets_topic)
                  if r["key"] == key]
        return values[-1] if values else None
    assert wait_for(lambda: last_offset(own) == {"seq": 100}, 30, "offsets in the own topic")
    global_topic = worker.props["offset.storage.topic"]
    assert wait_for(lambda: last_offset(global_topic) == {"seq": 100}, 30,
                    "offsets mirrored to the global topic")
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {
        "offsets": [{"partition": {"sequence.partition": 0}, "offset": {"seq": 100}}]}


def test_a_failing_task_is_failed_with_its_trace_and_keeps_what_it_committed(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("out"), unique_name("failing")
    create_topic(worker.bootstrap, topic)
    create(worker, name, {"connector.class": "testconnectors.FailingSourceConnector",
                          "topic": topic, "fail.after": "10"})
    worker.wait_tasks(name, "FAILED", 1)
    trace = worker.status(name)["tasks"][0]["trace"]
    assert "RuntimeError: boom: failing task gave up at seq 10" in trace
    assert f"Task {name}-0" in trace
    assert sequences(wait_committed(worker, topic, 10, 90)) == {0: list(range(10))}
    # A restart resumes from the committed offset: fails again, duplicates nothing.
    assert worker.rest("POST", f"/connectors/{name}/tasks/0/restart").status_code == 204
    worker.wait_tasks(name, "FAILED", 1)
    assert "gave up at seq 10" in worker.status(name)["tasks"][0]["trace"]
    assert sequences(read_topic(worker.bootstrap, topic)) == {0: list(range(10))}


def test_a_non_primitive_offset_fails_the_task_and_commits_nothing(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("out"), unique_name("badoffset")
    create_topic(worker.bootstrap, topic)
    create(worker, name, {"connector.class": "testconnectors.BadOffsetSourceConnector",
                          "topic": topic})
    worker.wait_tasks(name, "FAILED", 1)
    trace = worker.status(name)["tasks"][0]["trace"]
    assert "InvalidOffsetException" in trace and "positions" in trace
    assert read_topic(worker.bootstrap, topic) == []
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {"offsets": []}


def test_a_task_writing_to_the_offsets_topic_is_failed(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("sneaky")
    offsets_topic = worker.props["offset.storage.topic"]
    create(worker, name, {"connector.class": SEQ, "topic": offsets_topic, "max.records": "5"})
    worker.wait_tasks(name, "FAILED", 1)
    trace = worker.status(name)["tasks"][0]["trace"]
    assert "must never produce to its own offsets topic" in trace
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {"offsets": []}


def test_pause_resume_and_restart_through_rest(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("seq"), unique_name("lifecycle")
    create_topic(worker.bootstrap, topic)
    create(worker, name, {"connector.class": SEQ, "topic": topic, "batch.size": "10",
                          "rate.per.sec": "100"})
    worker.wait_tasks(name, "RUNNING", 1)
    assert worker.rest("PUT", f"/connectors/{name}/pause").status_code == 202
    worker.wait_tasks(name, "PAUSED", 1)
    wait_for(lambda: worker.status(name)["connector"]["state"] == "PAUSED", 30, "PAUSED")
    paused_at = len(read_topic(worker.bootstrap, topic))
    wait_for(lambda: True, 1, "a moment")
    assert len(read_topic(worker.bootstrap, topic)) == paused_at  # nothing flows while paused
    assert worker.rest("PUT", f"/connectors/{name}/resume").status_code == 202
    worker.wait_tasks(name, "RUNNING", 1)
    r = worker.rest("POST", f"/connectors/{name}/restart",
                    params={"includeTasks": "true", "onlyFailed": "false"})
    assert r.status_code == 202
    assert r.json()["tasks"][0]["state"] == "RESTARTING"
    worker.wait_tasks(name, "RUNNING", 1)
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    wait_for(lambda: worker.status(name).get("connector", {}).get("state") == "STOPPED", 30,
             "STOPPED")
    seqs = sequences(read_topic(worker.bootstrap, topic))[0]
    assert seqs == list(range(len(seqs)))  # every record once, in order, through all of it


def test_bad_connector_configs_are_rejected_with_connects_errors(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    name = unique_name("bad")
    unknown = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "no.such.Connector", "topic": "t"}})
    assert unknown.status_code == 400
    assert "no.such.Connector" in unknown.json()["message"]
    missing = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ}})
    assert missing.status_code == 400
    assert "topic" in missing.json()["message"]
    bad_type = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": SEQ, "topic": "t", "tasks.max": "many"}})
    assert bad_type.status_code == 400 and "tasks.max" in bad_type.json()["message"]
    malformed = worker.rest("POST", "/connectors", content=b"{not json",
                            headers={"Content-Type": "application/json"})
    assert malformed.status_code == 400 and set(malformed.json()) == {"error_code", "message"}
    validate = worker.rest("PUT", f"/connector-plugins/{SEQ}/config/validate", json={
        "name": name, "connector.class": SEQ, "topic": "t", "transaction.boundary": "sometimes"})
    assert validate.status_code == 200
    body = validate.json()
    assert body["error_count"] == 1
    errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]
              if c["value"]["errors"]}
    assert list(errors) == ["transaction.boundary"]
    assert worker.rest("GET", "/connectors").json().count(name) == 0


def test_file_source_delivers_each_line_once_and_follows_the_file(
        worker: WorkerProcess, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic, name = unique_name("lines"), unique_name("file")
    create_topic(worker.bootstrap, topic)
    path = tmp_path / "input.txt"
    path.write_text("".join(f"line {i}\n" for i in range(1000)))
    create(worker, name, {"connector.class": "FileStreamSourceConnector", "topic": topic,
                          "file": str(path), "batch.size": "300"})

    def values(want: int) -> list[Any]:
        got = wait_for(lambda: (v := [r["value"] for r in read_topic(worker.bootstrap, topic)])
                       and len(v) >= want and v, 60, f"{want} committed lines")
        return list(got)
    assert values(1000) == [f"line {i}" for i in range(1000)]
    with path.open("a") as out:  # the task follows the file; a half line waits
        out.write("".join(f"line {i}\n" for i in range(1000, 1500)) + "partial")
    assert values(1500) == [f"line {i}" for i in range(1500)]
    assert worker.rest("PUT", f"/connectors/{name}/stop").status_code == 204
    assert worker.rest("GET", f"/connectors/{name}/offsets").json() == {"offsets": [
        {"partition": {"filename": str(path)},
         "offset": {"position": path.stat().st_size - len("partial")}}]}
