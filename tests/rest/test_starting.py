"""The REST listener's stand-in while the worker starts (connect_runtime.rest.starting)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fake_herder import FakeHerder
from rest_checks import assert_connect_error

from connect_runtime.rest import create_app
from connect_runtime.rest.starting import StartupGate


def call(gate: StartupGate, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=gate),
                                     base_url="http://testserver") as client:
            return await client.request(method, path, **kwargs)
    return asyncio.run(send())


def test_health_answers_503_saying_what_the_worker_waits_for() -> None:
    progress = ["connecting to Kafka at bootstrap.servers=kafka:9092"]
    gate = StartupGate(lambda: progress[0])
    assert_connect_error(call(gate, "GET", "/health"), 503,
                         "the worker is starting: connecting to Kafka at "
                         "bootstrap.servers=kafka:9092")
    progress[0] = "cannot reach Kafka at bootstrap.servers=kafka:9092: refused; retrying"
    for path in ("/health", "/health/"):
        message = assert_connect_error(call(gate, "GET", path), 503)
        assert message == f"the worker is starting: {progress[0]}"


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/"), ("GET", "/connectors"), ("POST", "/connectors"),
    ("PUT", "/connectors/c/config"), ("DELETE", "/connectors/c"), ("GET", "/metrics"),
    ("POST", "/health"), ("GET", "/no/such/route")])
def test_every_other_request_answers_503_starting(method: str, path: str) -> None:
    gate = StartupGate(lambda: "connecting to Kafka at bootstrap.servers=kafka:9092")
    message = assert_connect_error(call(gate, method, path, json={}), 503,
                                   "the worker is starting")
    assert "bootstrap.servers" not in message  # what it waits for is /health's to say


def test_once_opened_the_real_app_answers_every_request(herder: FakeHerder) -> None:
    gate = StartupGate(lambda: "reading the status and offsets topics")
    gate.open(create_app(herder))
    health = call(gate, "GET", "/health")
    assert health.status_code == 200
    assert health.json() == {"status": "healthy", "message": "Worker has completed startup"}
    assert call(gate, "GET", "/connectors").json() == ["conn"]
    with pytest.raises(RuntimeError):
        gate.open(create_app(herder))
