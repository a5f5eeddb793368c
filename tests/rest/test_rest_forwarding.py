"""Followers forward leader-only requests over real HTTP, at most two hops.

Leaders run as real uvicorn servers on free loopback ports in background threads;
the follower under test runs in-process. A recording middleware on each server
shows exactly what arrived (method, raw path, query, headers, body).
"""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fake_herder import SEQUENCE_CLASS, FakeHerder
from fastapi import APIRouter, FastAPI, Request
from rest_checks import AppClient, assert_connect_error
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connect_runtime.errors import NotLeaderException, RequestSignatureException
from connect_runtime.protocol import signing
from connect_runtime.rest import create_app
from connect_runtime.rest.errors import HttpError
from connect_runtime.rest.routes.forwarding import CONNECT_TIMEOUT_S

CONFIG = {"connector.class": SEQUENCE_CLASS, "topic": "out"}
KEY = b"s" * 32
KEY_B64 = base64.b64encode(KEY).decode("ascii")


@dataclass
class Arrival:
    method: str
    raw_path: str
    query: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Recorder:
    """ASGI middleware noting every HTTP request that reaches the wrapped app."""

    app: ASGIApp
    arrivals: list[Arrival] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        self.arrivals.append(Arrival(
            scope["method"], scope["raw_path"].decode("latin-1"),
            scope["query_string"].decode("latin-1"),
            {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}, body))
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return {"type": "http.disconnect"}
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


@contextmanager
def serving(app: ASGIApp) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a free 127.0.0.1 port; yields its base URL."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@dataclass
class Worker:
    herder: FakeHerder
    recorder: Recorder
    url: str


@pytest.fixture
def start_worker() -> Iterator[Callable[..., Worker]]:
    """``start_worker(is_leader=..., leader_url=..., verifier=...)`` serves a worker."""
    stack: list[Any] = []

    def start(*, is_leader: bool = True, leader_url: str | None = None,
              verifier: Callable[[Request, bytes], None] | None = None) -> Worker:
        herder = FakeHerder(is_leader=is_leader, leader_url=leader_url)
        herder.add("conn")
        recorder = Recorder(create_app(herder, internal_request_verifier=verifier))
        cm = serving(recorder)
        url = cm.__enter__()
        stack.append(cm)
        return Worker(herder, recorder, url)

    yield start
    for cm in reversed(stack):
        cm.__exit__(None, None, None)


def follower_of(leader_url: str | None, **kwargs: Any) -> tuple[FakeHerder, AppClient]:
    herder = FakeHerder(is_leader=False, leader_url=leader_url)
    herder.add("conn")
    return herder, AppClient(create_app(herder, **kwargs))


# -- one hop ------------------------------------------------------------------------


def test_follower_relays_the_leaders_create(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    herder, client = follower_of(leader.url)
    with client:
        response = client.post("/connectors", json={"name": "new", "config": CONFIG},
                               headers={"Authorization": "Basic dXNlcjpwdw=="})
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/new"
    assert response.json()["config"] == {**CONFIG, "name": "new"}
    assert "new" in leader.herder.connectors() and "new" not in herder.connectors()
    [arrival] = leader.recorder.arrivals
    assert (arrival.method, arrival.raw_path, arrival.query) == ("POST", "/connectors",
                                                                 "forward=true")
    assert arrival.headers["authorization"] == "Basic dXNlcjpwdw=="
    assert arrival.headers["content-type"] == "application/json"


def test_follower_forwards_a_create_with_initial_offsets_byte_for_byte(
        start_worker: Callable[..., Worker]) -> None:
    """KIP-995's ``initial_offsets`` are the leader's to check and write."""
    leader = start_worker()
    herder, client = follower_of(leader.url)
    body = (b'{"name": "new", "config": {"connector.class": "Seq", "topic": "t"}, '
            b'"initial_offsets": [{"partition": {"k": 0}, "offset": {"seq": 10}}]}')
    with client:
        response = client.post("/connectors", content=body,
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 201, response.text
    [arrival] = leader.recorder.arrivals
    assert arrival.body == body
    assert leader.herder.calls[-1][1][3] == [({"k": 0}, {"seq": 10})]
    assert "new" in leader.herder.connectors() and "new" not in herder.connectors()


@pytest.mark.parametrize(("method", "path", "body", "status"), [
    ("PUT", "/connectors/conn/config", CONFIG, 200),
    ("PUT", "/connectors/fresh/config", CONFIG, 201),
    ("PATCH", "/connectors/conn/config", {"topic": "t2"}, 200),
    ("DELETE", "/connectors/conn", None, 204),
    ("PUT", "/connectors/conn/pause", None, 202),
    ("PUT", "/connectors/conn/stop", None, 204),
    ("POST", "/connectors/conn/restart", None, 204),
    ("POST", "/connectors/conn/tasks/1/restart", None, 204),
])
def test_follower_relays_status_and_body(start_worker: Callable[..., Worker], method: str,
                                         path: str, body: dict[str, str] | None,
                                         status: int) -> None:
    leader = start_worker()
    _, client = follower_of(leader.url)
    with client:
        response = client.request(method, path, json=body)
    direct = leader.herder.calls[-1]
    assert response.status_code == status, response.text
    assert leader.recorder.arrivals[0].method == method
    assert direct[1][0] in ("conn", "fresh")
    if status == 201:
        assert response.headers["location"] == "/connectors/fresh"


def test_query_parameters_travel_with_the_forward(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    _, client = follower_of(leader.url)
    with client:
        response = client.post("/connectors/conn/restart?includeTasks=true&onlyFailed=false")
    assert response.status_code == 202
    assert response.json()["tasks"][0]["state"] == "RESTARTING"
    query = leader.recorder.arrivals[0].query
    assert sorted(query.split("&")) == ["forward=true", "includeTasks=true", "onlyFailed=false"]
    assert leader.herder.calls[-1] == ("restart_connector", ("conn", True, False))


def test_path_is_forwarded_as_received(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    leader.herder.add("a b")
    _, client = follower_of(leader.url)
    with client:
        response = client.put("/connectors/a%20b/pause")
    assert response.status_code == 202
    assert leader.recorder.arrivals[0].raw_path == "/connectors/a%20b/pause"
    assert leader.herder.calls[-1] == ("pause_connector", ("a b",))


def test_leader_errors_are_relayed(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    _, client = follower_of(leader.url)
    with client:
        response = client.post("/connectors", json={"name": "conn", "config": CONFIG})
        assert_connect_error(response, 409, "Connector conn already exists")
        response = client.put("/connectors/missing/pause")
        assert_connect_error(response, 404, "missing")


def test_raw_body_is_forwarded_unchanged(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    _, client = follower_of(leader.url)
    raw = b'{"topic": 5, "x": "1e3"}'
    with client:
        response = client.patch("/connectors/conn/config", content=raw,
                                headers={"content-type": "application/json"})
    assert response.status_code == 200
    assert leader.recorder.arrivals[0].body == raw


# -- the two-hop rule ---------------------------------------------------------------


def test_forward_false_is_never_forwarded_again(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    herder, client = follower_of(leader.url)
    with client:
        response = client.put("/connectors/conn/pause?forward=false")
    assert_connect_error(response, 409,
                         "Cannot complete request because of a conflicting operation")
    assert leader.recorder.arrivals == []
    assert herder.calls[-1] == ("pause_connector", ("conn",))


def test_second_hop_is_allowed_and_marked_final(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker()
    stale = start_worker(is_leader=False, leader_url=leader.url)
    _, client = follower_of(stale.url)
    with client:
        response = client.put("/connectors/conn/pause")
    assert response.status_code == 202
    assert stale.recorder.arrivals[0].query == "forward=true"
    assert leader.recorder.arrivals[0].query == "forward=false"
    assert leader.herder.calls[-1] == ("pause_connector", ("conn",))


def test_third_hop_is_refused_with_409(start_worker: Callable[..., Worker]) -> None:
    also_stale = start_worker(is_leader=False, leader_url="http://127.0.0.1:9")
    stale = start_worker(is_leader=False, leader_url=also_stale.url)
    _, client = follower_of(stale.url)
    with client:
        response = client.delete("/connectors/conn")
    assert_connect_error(response, 409,
                         "Cannot complete request because of a conflicting operation")
    assert also_stale.recorder.arrivals[0].query == "forward=false"


def test_unknown_leader_is_409(start_worker: Callable[..., Worker]) -> None:
    _, client = follower_of(None)
    with client:
        response = client.put("/connectors/conn/resume")
    assert_connect_error(response, 409, "no known leader URL")


# -- failures talking to the leader --------------------------------------------------


def test_unreachable_leader_is_500_naming_it() -> None:
    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
        _, client = follower_of(dead)
        with client:
            response = client.put("/connectors/conn/pause")
    message = assert_connect_error(response, 500, "IO Error trying to forward REST request")
    assert dead in message and "ConnectError" in message


@contextmanager
def _silent_leader() -> Iterator[str]:
    """A socket that accepts connections (via the backlog) and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_leader_timeout_is_500_naming_it() -> None:
    with _silent_leader() as silent:
        _, client = follower_of(silent, forward_timeout_s=0.3)
        with client:
            started = time.monotonic()
            response = client.put("/connectors/conn/pause")
            elapsed = time.monotonic() - started
    message = assert_connect_error(response, 500, silent)
    assert "ReadTimeout" in message
    assert elapsed < 5


@contextmanager
def _unreachable_leader() -> Iterator[str]:
    """A listener whose accept queue is full: the kernel drops every further SYN,
    so a connection attempt hangs as it does to a partitioned host."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        with socket.create_connection(sock.getsockname()):  # the one queued connection
            yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_a_leader_that_accepts_no_connection_is_500_after_the_connect_timeout() -> None:
    # The request timeout is an hour: only the connect timeout can answer.
    with _unreachable_leader() as unreachable:
        _, client = follower_of(unreachable, forward_timeout_s=3600)
        with client:
            response = client.put("/connectors/conn/pause")
    message = assert_connect_error(response, 500, unreachable)
    assert (f"ConnectTimeout: the leader did not accept a connection within "
            f"{CONNECT_TIMEOUT_S:g} s") in message, message


def test_forwarding_does_not_block_the_event_loop() -> None:
    with _silent_leader() as silent:
        _, client = follower_of(silent, forward_timeout_s=3)
        with client:
            pending = threading.Thread(target=client.put, args=("/connectors/conn/pause",))
            pending.start()
            time.sleep(0.2)  # let the forward reach the silent leader
            started = time.monotonic()
            assert client.get("/connectors/conn/status").status_code == 200
            assert time.monotonic() - started < 1
            assert pending.is_alive()
            pending.join(10)


def _odd_leader(response: Response) -> FastAPI:
    app = FastAPI()

    @app.api_route("/{path:path}", methods=["GET", "PUT", "POST", "DELETE", "PATCH"])
    async def anything(path: str) -> Response:
        return response

    return app


@pytest.mark.parametrize(("answer", "message"), [
    (PlainTextResponse("Bad Gateway", 502), "answered HTTP 502 without a Connect error body"),
    (Response(status_code=307, headers={"location": "/elsewhere"}),
     "Unexpected status code when handling forwarded request"),
])
def test_non_connect_answers_from_the_leader_are_500(answer: Response, message: str) -> None:
    with serving(_odd_leader(answer)) as odd:
        _, client = follower_of(odd)
        with client:
            response = client.put("/connectors/conn/pause")
    assert_connect_error(response, 500, message)


def _slot_router(leader_url: str | None) -> APIRouter:
    """A lead-style internal router: only the leader knows task slots."""
    router = APIRouter()

    @router.post("/internal/slots/{slot}")
    def claim(slot: str) -> dict[str, str]:
        if leader_url is not None:
            raise NotLeaderException("Only the leader assigns slots", leader_url)
        return {"claimed": slot}

    return router


def test_extra_routers_forward_by_raising_not_leader() -> None:
    with serving(create_app(FakeHerder(), extra_routers=[_slot_router(None)])) as leader_url:
        follower = create_app(FakeHerder(), extra_routers=[_slot_router(leader_url)])
        with AppClient(follower) as client:
            response = client.post("/internal/slots/4")
    assert response.status_code == 200
    assert response.json() == {"claimed": "4"}


# -- internal requests --------------------------------------------------------------


def _verifier(request: Request, raw_body: bytes) -> None:
    try:
        signing.verify(KEY, ["HmacSHA256"], dict(request.headers), raw_body)
    except RequestSignatureException as exc:
        raise HttpError(exc.status, str(exc)) from exc


def test_signed_fence_is_forwarded_with_its_signature(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker(verifier=_verifier)
    _, client = follower_of(leader.url, internal_request_verifier=_verifier)
    body = b'{"ignored": true}'
    headers = signing.sign_headers(KEY_B64, "HmacSHA256", body)
    with client:
        response = client.put("/connectors/conn/fence", content=body, headers=headers)
    assert response.status_code == 200, response.text
    assert response.content == b""
    arrival = leader.recorder.arrivals[0]
    assert arrival.body == body
    assert arrival.headers["x-connect-authorization"] == headers[signing.AUTH_HEADER]
    assert leader.herder.calls[-1] == ("fence_zombies", ("conn",))


def test_forged_fence_is_refused_before_forwarding(start_worker: Callable[..., Worker]) -> None:
    leader = start_worker(verifier=_verifier)
    _, client = follower_of(leader.url, internal_request_verifier=_verifier)
    headers = {signing.AUTH_HEADER: "Zm9yZ2Vk", signing.ALGORITHM_HEADER: "HmacSHA256"}
    with client:
        response = client.put("/connectors/conn/fence", headers=headers)
    assert_connect_error(response, 403, "does not match")
    assert leader.recorder.arrivals == []
