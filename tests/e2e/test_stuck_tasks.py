"""A task whose ``poll()`` blocks is reported stuck, with the line it blocks on.

Kafka Connect shows such a task RUNNING forever. Here, past
``task.stall.threshold.ms`` (2 s, set on the connector), its status (still
RUNNING) carries a trace naming the call, how long and the task thread's stack
taken on the executor; ``/metrics`` has how long, ``/ui`` a badge, the worker's
log a ``task_stalled`` line. When the call returns, all of it clears. The task's
``poll()`` blocks for real, on a socket read from a server this test runs and
releases.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from support.kafka import wait_for
from support.workers import TEST_CONNECTORS, WorkerProcess

STALLED = "kafka_connect_worker_task_stalled_seconds"


def _blocking_line() -> int:
    """The line of BlockingTask.poll's socket read, as the executor's stack names it."""
    lines = (TEST_CONNECTORS / "testconnectors.py").read_text().splitlines()
    found = [n for n, line in enumerate(lines, 1) if "# BLOCKING-RECV" in line]
    assert len(found) == 1, found
    return found[0]


class Server:
    """Accepts the task's connection and says nothing until :meth:`release`."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def release(self) -> None:
        for conn in self.accepted:
            conn.sendall(b"!")

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def _task_status(worker: WorkerProcess, name: str) -> dict[str, Any]:
    response = worker.rest("GET", f"/connectors/{name}/tasks/0/status")
    assert response.status_code == 200, response.text
    return dict(response.json())


def _stalled_seconds(worker: WorkerProcess, name: str) -> float:
    text = httpx.get(f"{worker.url}/metrics", timeout=10).text
    found = [s.value for family in text_string_to_metric_families(text)
             for s in family.samples
             if s.name == STALLED and s.labels.get("connector") == name
             and s.labels.get("task") == "0"]
    assert len(found) == 1, f"{STALLED} of {name}: {found}"
    return found[0]


def _view_task(worker: WorkerProcess, name: str) -> dict[str, Any]:
    view = httpx.get(f"{worker.url}/ui/view.json", timeout=30).json()
    connector = next(c for c in view["connectors"] if c["name"] == name)
    return dict(connector["tasks"][0])


def test_a_blocked_poll_is_reported_with_its_line_and_clears_when_it_returns(
        worker: WorkerProcess, server: Server, unique_name: Callable[[str], str]) -> None:
    name = unique_name("stuck")
    response = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": "testconnectors.BlockingSourceConnector",
        "blocking.port": str(server.port), "task.stall.threshold.ms": "2000"}})
    assert response.status_code == 201, response.text
    try:
        # The status says so, and the task stays RUNNING (Connect's shape).
        def stuck() -> dict[str, Any] | None:
            tasks = worker.status(name).get("tasks") or [{}]  # none until configs are written
            return _task_status(worker, name) if "is stuck" in (
                tasks[0].get("trace") or "") else None
        status = wait_for(stuck, 60, f"task {name}-0 to be reported stuck")
        trace = status["trace"]
        assert status["state"] == "RUNNING"
        assert trace.startswith(f"Task {name}-0 is stuck: poll() has not returned for ")
        assert "task.stall.threshold.ms=2000" in trace
        # The stack is the executor's, live: it names the blocking line and function.
        assert f'testconnectors.py", line {_blocking_line()}, in poll' in trace, trace
        assert "self._sock.recv(1)" in trace
        # From the task loop's run() on: PySpark's and the slot's frames are left out.
        stack = trace.split("(most recent call last):\n", 1)[1].splitlines()
        assert stack[0].endswith("in run") and "connect_runtime/task/loop.py" in stack[0]
        assert "self.task.poll()" in stack[1]
        assert trace.rstrip().splitlines()[-1].strip().startswith("self._sock.recv(1)")
        connector_status = worker.status(name)
        assert connector_status["tasks"][0]["trace"] == trace
        assert connector_status["tasks"][0]["state"] == "RUNNING"

        # /metrics: how long, growing; /ui: the badge, with the call.
        assert _stalled_seconds(worker, name) >= 2.0
        stall = _view_task(worker, name)["stall"]
        assert stall is not None and stall["call"] == "poll()"
        assert stall["threshold_ms"] == 2000 and stall["stalled_s"] >= 2.0
        page = httpx.get(f"{worker.url}/ui", timeout=30).text
        assert "stuck in poll()" in page

        # The call returns: the stuck report clears everywhere.
        server.release()
        wait_for(lambda: _task_status(worker, name).get("trace") is None, 30,
                 f"the stuck report of {name}-0 to clear")
        assert _task_status(worker, name)["state"] == "RUNNING"
        assert _stalled_seconds(worker, name) == 0.0
        assert _view_task(worker, name)["stall"] is None

        # The log says both, once each.
        log = Path(worker.log_path).read_text(errors="replace")
        stalled = [line for line in log.splitlines()
                   if f"task {name}-0 is stuck: poll()" in line]
        cleared = [line for line in log.splitlines()
                   if f"task {name}-0 is no longer stuck" in line]
        assert len(stalled) == 1 and len(cleared) == 1, (stalled, cleared)
        assert f"line {_blocking_line()}, in poll" in stalled[0]
    finally:
        worker.rest("DELETE", f"/connectors/{name}")
