"""One real worker (Spark local[8]) shared by the end-to-end tests of a session.

Tests create connectors with unique names and topics, so they do not see each
other's data, and the connectors a test created on the shared worker are
deleted after it: a connector left running would hold its Spark task slots
(8) and its CPU for the rest of the session. A test that needs its own worker
(for instance to kill it) starts one with :class:`support.workers.WorkerProcess`.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.kafka import free_port
from support.workers import WorkerProcess


@pytest.fixture(scope="session")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[WorkerProcess]:
    workdir: Path = tmp_path_factory.mktemp("worker")
    proc = WorkerProcess(kafka_bootstrap, f"e2e-{uuid.uuid4().hex[:8]}", free_port(), workdir)
    proc.start()
    try:
        yield proc
    finally:
        code = proc.stop()
        # A clean SIGTERM shutdown is part of the contract.
        assert code == 0, f"worker exited with {code} on SIGTERM:\n{proc.tail()}"


@pytest.fixture(autouse=True)
def _delete_the_tests_connectors(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the shared worker, delete the connectors it created."""
    if "worker" not in request.fixturenames:
        yield
        return
    shared: WorkerProcess = request.getfixturevalue("worker")
    before = connectors(shared)
    yield
    if before is None or shared.proc is None or shared.proc.poll() is not None:
        return  # not the open shared worker; or it died, and its fixture says so
    for name in (connectors(shared) or set()) - before:
        shared.rest("DELETE", f"/connectors/{name}")


def connectors(worker: WorkerProcess) -> set[str] | None:
    """The worker's connectors; None where it refuses to list them: a module's
    own ``worker`` (one with basic auth, say) is not the shared one."""
    listed = worker.rest("GET", "/connectors")
    return set(listed.json()) if listed.status_code == 200 else None
