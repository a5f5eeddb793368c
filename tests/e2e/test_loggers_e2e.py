"""``/admin/loggers`` on a real two-worker cluster: worker scope stays on one worker,
cluster scope (KIP-976) reaches both through the config topic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster
from support.kafka import read_topic, wait_for
from support.workers import WorkerProcess

# Loggers every worker creates at import; their parent namespaces are only
# PlaceHolders until the API sets them.
STORE_LOGGER = "connect_runtime.storage.config_store"
HERDER_LOGGER = "connect_runtime.cluster.herder"


@pytest.fixture
def cluster(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(kafka_bootstrap, tmp_path, 2).start()
    try:
        yield c
    finally:
        c.stop()


def level_of(worker: WorkerProcess, logger: str) -> dict[str, Any]:
    response = worker.rest("GET", f"/admin/loggers/{logger}")
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def wait_level(worker: WorkerProcess, logger: str, level: str, timeout: float = 30) -> None:
    def reached() -> bool:
        return level_of(worker, logger)["level"] == level
    wait_for(reached, timeout, f"{logger} at {level} on {worker.url}")


def test_worker_scope_changes_one_worker_and_cluster_scope_every_worker(
    cluster: Cluster, kafka_bootstrap: str,
) -> None:
    leader = cluster.wait_agreed_leader()
    follower = next(w for w in cluster.workers if w is not leader)
    assert level_of(leader, STORE_LOGGER) == {"level": "INFO", "last_modified": None}

    # Worker scope (the default): only the worker asked.
    response = follower.rest("PUT", "/admin/loggers/connect_runtime.storage",
                             json={"level": "WARN"})
    assert response.status_code == 200, response.text
    changed = response.json()
    assert "connect_runtime.storage" in changed and STORE_LOGGER in changed
    assert changed == sorted(changed)
    on_follower = level_of(follower, STORE_LOGGER)
    assert on_follower["level"] == "WARN" and isinstance(on_follower["last_modified"], int)
    assert level_of(leader, STORE_LOGGER) == {"level": "INFO", "last_modified": None}
    assert follower.rest("GET", "/admin/loggers").json()[STORE_LOGGER]["level"] == "WARN"

    # Cluster scope, asked of the follower: forwarded to the leader, which writes the
    # record; each worker applies it when it reads it.
    response = follower.rest("PUT", "/admin/loggers/connect_runtime.cluster?scope=cluster",
                             json={"level": "error"})
    assert response.status_code == 204, response.text
    for worker in (leader, follower):
        wait_level(worker, HERDER_LOGGER, "ERROR")
        stamped = level_of(worker, "connect_runtime.cluster")
        assert stamped["level"] == "ERROR" and isinstance(stamped["last_modified"], int)
    # The worker-scope change stayed where it was made.
    assert level_of(leader, STORE_LOGGER)["level"] == "INFO"
    assert level_of(follower, STORE_LOGGER)["level"] == "WARN"

    # Connect's record, in Connect's format (canonical level name), committed.
    records = [r for r in read_topic(kafka_bootstrap, f"{leader.group}-configs")
               if r["key"] == b"logger-cluster-connect_runtime.cluster"]
    assert [r["value"] for r in records] == [{"level": "ERROR"}]

    # A bad level is refused before anything is written.
    bad = follower.rest("PUT", "/admin/loggers/connect_runtime.cluster?scope=cluster",
                        json={"level": "WARNING"})
    assert bad.status_code == 404
    assert bad.json() == {"error_code": 404, "message": "invalid log level 'WARNING'."}
