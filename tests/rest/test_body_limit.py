"""Request bodies: a size limit and a deadline, before any route or credential check
reads them (connect_runtime.rest.body_limit). The real worker's memory under a
300 MB body is measured in tests/e2e/test_oversized_input.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from fake_herder import SEQUENCE_CLASS, FakeHerder
from fastapi import Request
from rest_checks import AppClient, assert_connect_error
from starlette.types import Message

from connect_runtime.rest import create_app
from connect_runtime.rest.body_limit import BodyLimitMiddleware

LIMIT = 4096
JSON_HEADERS = {"content-type": "application/json"}


@pytest.fixture
def verified() -> list[int]:
    """Sizes of the bodies the internal-request verifier was handed."""
    return []


@pytest.fixture
def small(herder: FakeHerder, verified: list[int]) -> Iterator[AppClient]:
    def verify(request: Request, body: bytes) -> None:
        verified.append(len(body))

    app = create_app(herder, internal_request_verifier=verify, max_body_bytes=LIMIT,
                     basic_auth={"user": "pw"})
    with AppClient(app) as client:
        yield client


def big_config(size: int) -> bytes:
    return json.dumps({"name": "big", "config": {
        "connector.class": SEQUENCE_CLASS, "padding": "x" * size}}).encode()


def test_a_content_length_over_the_limit_is_413_before_anything_reads_it(
        small: AppClient, herder: FakeHerder, verified: list[int]) -> None:
    body = big_config(2 * LIMIT)
    answer = small.post("/connectors", content=body, headers={
        **JSON_HEADERS, "authorization": "Basic dXNlcjpwdw=="})
    message = assert_connect_error(answer, 413, f"more than the {LIMIT} bytes")
    assert str(len(body)) in message and answer.headers["connection"] == "close"
    # Unauthenticated, on the signed route that reads its body before any check.
    assert_connect_error(small.put("/connectors/conn/fence", content=body), 413)
    assert verified == [] and not any(c[0] == "create_connector" for c in herder.calls)


def test_a_chunked_body_is_cut_off_once_it_passes_the_limit(
        small: AppClient, verified: list[int]) -> None:
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        for _ in range(100):  # 100 KB offered
            sent += 1024
            yield b"x" * 1024

    answer = small.put("/connectors/conn/fence", content=chunks())
    assert_connect_error(answer, 413, "is over")
    assert verified == [] and sent < 100 * 1024


def test_a_body_within_the_limit_is_served(small: AppClient, herder: FakeHerder) -> None:
    answer = small.post("/connectors", content=big_config(LIMIT // 2), headers={
        **JSON_HEADERS, "authorization": "Basic dXNlcjpwdw=="})
    assert answer.status_code == 201, answer.text


async def call(middleware: BodyLimitMiddleware, headers: list[tuple[bytes, bytes]],
               messages: list[Message]) -> tuple[int, dict[str, Any]]:
    """Run ``middleware`` on one request whose receive() hands out ``messages``
    and then never returns; the status and JSON body it answered."""
    queue = list(messages)

    async def receive() -> Message:
        if queue:
            return queue.pop(0)
        await asyncio.Event().wait()  # a client that sends nothing more
        raise AssertionError("unreachable")

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "PUT", "path": "/x", "headers": headers,
             "query_string": b""}
    await middleware(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body)


async def read_all(scope: Any, receive: Any, send: Any) -> None:
    """An app that reads its whole body, then answers 200 (a route, roughly)."""
    while (await receive()).get("more_body", False):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def test_a_body_that_stops_arriving_is_408_after_the_idle_timeout() -> None:
    middleware = BodyLimitMiddleware(read_all, max_bytes=LIMIT, idle_timeout_s=0.2)
    status, body = asyncio.run(call(middleware, [(b"content-length", b"1000")], [
        {"type": "http.request", "body": b"x" * 100, "more_body": True}]))
    assert (status, body["error_code"]) == (408, 408), body
    assert "sent nothing for 0.2 s" in body["message"]


def test_a_content_length_that_is_not_a_number_is_400() -> None:
    middleware = BodyLimitMiddleware(read_all, max_bytes=LIMIT)
    status, body = asyncio.run(call(middleware, [(b"content-length", b"lots")], []))
    assert (status, body["error_code"]) == (400, 400) and "not a number" in body["message"]


def test_a_follower_forwarding_an_endless_body_answers_413_not_500(
        caplog: pytest.LogCaptureFixture) -> None:
    """A follower that forwards a request reads its body only then, in the
    forwarding handler: the limit's refusal raised there must still be a 413."""
    follower = FakeHerder(is_leader=False, leader_url="http://127.0.0.1:9")
    follower.add("conn")

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(100):
            yield b"x" * 1024

    with AppClient(create_app(follower, max_body_bytes=LIMIT)) as client:
        answer = client.put("/connectors/conn/pause", content=chunks())
    assert_connect_error(answer, 413, "is over")
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.records
