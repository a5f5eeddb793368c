"""Connectors declared in files: standalone mode, and ``declared.connectors.dir`` on a cluster.

Standalone mode is driven as a user runs it (``connect-runtime standalone
worker.properties seq.properties``); the exactly-once claim is checked the way
the chaos suite checks it: a SIGKILL of the whole process tree while tasks are
mid-transaction, a restart, and ``connect-runtime verify`` finding every
sequence number exactly once. The directory is driven as GitOps drives it:
files added, changed and removed under three running workers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster
from support.kafka import create_topic, free_port, wait_for
from support.offsets import committed_offsets
from support.workers import WorkerProcess

SEQ = "SequenceSourceConnector"
PARTITIONS = 2


def next_seqs(worker: WorkerProcess, name: str) -> dict[int, int]:
    """Source partition -> committed next seq, as GET .../offsets reports it."""
    offsets = committed_offsets(worker, name, "sequence.partition") or {}
    return {partition: offset["seq"] for partition, offset in offsets.items()}


def verify(bootstrap: str, topic: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "connect_runtime.cli", "verify", "--bootstrap-server", bootstrap,
         "--topic", topic, "--expect-groups", ",".join(map(str, range(PARTITIONS))),
         "--timeout", "60"], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0 and result.stdout.rstrip().endswith("OK"), result.stdout
    return result.stdout


def properties(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


# ------------------------------------------------------------------ standalone mode


def test_standalone_survives_sigkill_mid_transaction_exactly_once_and_applies_a_changed_file(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("standalone"), unique_name("seq")
    create_topic(kafka_bootstrap, topic)
    last = 30000
    seq = {"name": name, "connector.class": SEQ, "topic": topic, "tasks.max": "2",
           "partitions": str(PARTITIONS), "batch.size": "100", "commit.every.records": "700",
           "max.records": str(last), "rate.per.sec": "3000"}
    connector_file = tmp_path / "seq.properties"
    connector_file.write_text(properties(seq))
    group = f"standalone-{uuid.uuid4().hex[:8]}"
    worker = WorkerProcess(kafka_bootstrap, group, free_port(), tmp_path,
                           standalone=[connector_file])
    worker.start()
    try:
        worker.wait_tasks(name, "RUNNING", 2)
        status = worker.status(name)
        assert status["declared_by"] == str(connector_file), status
        # Mid-run: transactions of 700 records at 3,000 records/s are open most of the time.
        wait_for(lambda: min(next_seqs(worker, name).values(), default=0) >= 2000, 90,
                 f"{name} to commit 2,000 records per partition")
        worker.signal_tree(signal.SIGKILL)
        assert worker.proc is not None and worker.proc.wait(30) == -signal.SIGKILL
        # Changed between runs: applied as a reconfiguration on restart.
        connector_file.write_text(properties({**seq, "rate.per.sec": "0", "batch.size": "200"}))
        worker.start()
        # The leader applies its files once elected, moments after /health says 200.
        wait_for(lambda: worker.rest("GET", f"/connectors/{name}/config").json()
                 .get("batch.size") == "200", 60, f"{name}'s changed file to be applied")
        assert worker.rest("GET", f"/connectors/{name}/config").json()["rate.per.sec"] == "0"
        wait_for(lambda: next_seqs(worker, name) == {k: last for k in range(PARTITIONS)}, 180,
                 f"{name} to commit all {last} records of each partition", interval=1)
        verify(kafka_bootstrap, topic)
    finally:
        worker.stop()


def run_standalone(tmp_path: Path, files: list[Path]) -> subprocess.CompletedProcess[str]:
    """A standalone worker that must refuse to start: no broker is ever reached."""
    props = tmp_path / "worker.properties"
    props.write_text(properties({"bootstrap.servers": f"127.0.0.1:{free_port()}",
                                 "listeners": f"http://127.0.0.1:{free_port()}"}))
    return subprocess.run(
        [sys.executable, "-m", "connect_runtime.cli", "standalone", str(props),
         *map(str, files)], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)})


@pytest.mark.parametrize(("content", "suffix", "expected"), [
    ({"name": "bad", "connector.class": SEQ, "topic": "t", "tasks.max": "many"},
     ".properties", "tasks.max"),
    ('{"name": "bad", "config": {"connector.class": "' + SEQ + '", "topic": "t"},\n "stat": 1}',
     ".json", "'stat'"),
    ('{"name": "bad", "config": {"connector.class": "' + SEQ + '",\n "topic": }}',
     ".json", ":2:"),
    ({"connector.class": SEQ, "topic": "t"}, ".properties", "'name'"),
], ids=["invalid-value", "unknown-key", "not-json", "no-name"])
def test_standalone_refuses_a_bad_connector_file_naming_file_and_key(
        tmp_path: Path, content: dict[str, str] | str, suffix: str, expected: str) -> None:
    bad = tmp_path / f"connector{suffix}"
    bad.write_text(content if isinstance(content, str) else properties(content))
    result = run_standalone(tmp_path, [bad])
    assert result.returncode == 2, result.stderr
    assert str(bad) in result.stderr and expected in result.stderr, result.stderr


# ---------------------------------------------------------- a directory, on a cluster


@pytest.fixture
def declared_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "connectors"
    directory.mkdir()
    return directory


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path, declared_dir: Path) -> Iterator[Cluster]:
    c = Cluster(kafka_bootstrap, tmp_path, 3, {
        "declared.connectors.dir": str(declared_dir),
        "declared.connectors.poll.interval.ms": "500"}).start()
    try:
        yield c
    finally:
        c.stop()


def report(worker: WorkerProcess) -> dict[str, dict[str, Any]]:
    """File -> its entry in GET /declared-connectors (asked of any worker: it forwards)."""
    r = worker.rest("GET", "/declared-connectors")
    assert r.status_code == 200, r.text
    return {f["file"]: f for f in r.json()["files"]}


def write_json(path: Path, body: dict[str, Any]) -> None:
    # Written beside, then renamed: a reader never sees half a file (as with a ConfigMap).
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(body))
    partial.rename(path)


def test_a_directory_of_connector_files_is_reconciled_on_a_three_worker_cluster(
        cluster: Cluster, declared_dir: Path, kafka_bootstrap: str,
        unique_name: Callable[[str], str]) -> None:
    topic = unique_name("declared")
    create_topic(kafka_bootstrap, topic)
    leader = cluster.wait_agreed_leader()
    follower = next(w for w in cluster.workers if w is not leader)
    seq = {"connector.class": SEQ, "topic": topic, "rate.per.sec": "20", "batch.size": "10"}
    # A connector created by REST: the files never touch it.
    manual = unique_name("rest")
    r = follower.rest("POST", "/connectors", json={"name": manual, "config": seq})
    assert r.status_code == 201, r.text

    # Added: created and running, owned by its file.
    name = unique_name("file")
    write_json(declared_dir / "a.json", {"name": name, "config": seq})
    wait_for(lambda: follower.task_states(name) == ["RUNNING"], 90, f"{name} to run")
    assert follower.status(name)["declared_by"] == "a.json"
    assert "declared_by" not in follower.status(manual)
    assert report(follower)["a.json"] == {"file": "a.json", "connector": name,
                                          "status": "APPLIED", "error": None}
    refused = follower.rest("PUT", f"/connectors/{name}/config", json=seq)
    assert refused.status_code == 409 and "a.json" in refused.json()["message"], refused.text

    # Changed: the new config and the declared state are applied.
    write_json(declared_dir / "a.json", {"name": name, "config": {**seq, "batch.size": "5"},
                                         "state": "PAUSED"})
    wait_for(lambda: follower.rest("GET", f"/connectors/{name}/config").json()
             .get("batch.size") == "5", 60, f"{name}'s new config")
    wait_for(lambda: follower.status(name)["connector"]["state"] == "PAUSED", 60,
             f"{name} to pause as its file says")
    assert follower.rest("PUT", f"/connectors/{name}/resume").status_code == 409

    # Bad files: each reported with the file and the key; nothing running changes.
    before = {n: follower.rest("GET", f"/connectors/{n}/config").json() for n in (name, manual)}
    write_json(declared_dir / "b.json", {"name": unique_name("bad"),
                                         "config": {**seq, "tasks.max": "many"}})
    (declared_dir / "a.json").write_text('{"name": "' + name + '",\n "config": ')
    wait_for(lambda: {f: e["status"] for f, e in report(follower).items()}
             == {"a.json": "INVALID", "b.json": "INVALID"}, 60, "both files to be refused")
    errors = report(follower)
    assert "tasks.max" in errors["b.json"]["error"] and "b.json" in errors["b.json"]["error"]
    assert "a.json:2:" in errors["a.json"]["error"], errors["a.json"]
    assert set(follower.rest("GET", "/connectors").json()) == {name, manual}
    for n, config in before.items():
        assert follower.rest("GET", f"/connectors/{n}/config").json() == config
    assert follower.status(name)["connector"]["state"] == "PAUSED"
    assert follower.task_states(manual) == ["RUNNING"]

    # Removed: its connector is deleted; the REST one stays.
    (declared_dir / "a.json").unlink()
    (declared_dir / "b.json").unlink()
    wait_for(lambda: follower.rest("GET", f"/connectors/{name}").status_code == 404, 60,
             f"{name} to be deleted with its file")
    assert follower.rest("GET", "/connectors").json() == [manual]
    assert follower.task_states(manual) == ["RUNNING"]
    assert report(follower) == {}
