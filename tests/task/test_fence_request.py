"""Step 1 of task startup: the fence request to the leader, and how its failures read."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.kafka import free_port

from connect_runtime.errors import StartupFailed
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.task.startup import request_fencing


class Leader(ThreadingHTTPServer):
    """Answers PUT /connectors/<c>/fence with ``status`` and ``body``; records requests."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        leader = self

        class Handler(BaseHTTPRequestHandler):
            def do_PUT(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                leader.seen.append((self.command, self.path, dict(self.headers)))
                self.send_response(leader.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(leader.body)))
                self.end_headers()
                self.wfile.write(leader.body)

            def log_message(self, *args: object) -> None:
                pass

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.fixture
def leader(request: pytest.FixtureRequest) -> Iterator[Leader]:
    status, body = request.param
    server = Leader(status, body)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def spec(url: str) -> TaskSpec:
    return TaskSpec(
        connector="orders/eu", task=0, generation=1, task_config={}, connector_config={},
        bootstrap_servers="127.0.0.1:9", group_id="g", config_topic="c", status_topic="s",
        global_offsets_topic="o", worker_url=url, worker_id="w", eos_support="enabled",
        offset_flush_interval_ms=1000, session_key="c2VjcmV0LWtleS0xMjM0NTY3OA==")


@pytest.mark.parametrize("leader", [(200, b"")], indirect=True)
def test_a_200_fences_and_the_request_is_signed(leader: Leader) -> None:
    request_fencing(spec(f"http://127.0.0.1:{leader.server_port}"))
    [(method, path, headers)] = leader.seen
    assert (method, path) == ("PUT", "/connectors/orders%2Feu/fence")
    assert "X-Connect-Authorization" in headers


@pytest.mark.parametrize("leader", [(409, json.dumps({
    "error_code": 409, "message": "Cannot complete request because of a conflicting "
    "operation (e.g. worker rebalance)"}).encode())], indirect=True)
def test_a_refusal_quotes_the_leaders_message(leader: Leader) -> None:
    with pytest.raises(StartupFailed) as info:
        request_fencing(spec(f"http://127.0.0.1:{leader.server_port}"))
    text = str(info.value)
    assert "failed with HTTP 409; task startup aborted. Leader said:\n" in text
    assert text.endswith("conflicting operation (e.g. worker rebalance)")


@pytest.mark.parametrize("leader", [(500, b"<html>oops</html>")], indirect=True)
def test_a_body_that_is_not_json_is_quoted_as_it_is(leader: Leader) -> None:
    with pytest.raises(StartupFailed, match=r"HTTP 500; .*Leader said:\n<html>oops</html>$"):
        request_fencing(spec(f"http://127.0.0.1:{leader.server_port}"))


def test_an_unreachable_leader_is_named() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StartupFailed, match=r"Zombie fencing request to the leader at "
                       + url.replace(".", r"\.") + r"/connectors/orders%2Feu/fence failed: "):
        request_fencing(spec(url))
