"""Helpers shared by the REST tests: an in-process client and Connect error assertions."""

from __future__ import annotations

from contextlib import AbstractContextManager
from functools import partial
from typing import Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI


class AppClient:
    """A synchronous client for an ASGI app, in-process, through ``httpx.ASGITransport``.

    Starlette's TestClient does the same but is deprecated over plain httpx; this keeps
    the tests on the project's own dependency. One event loop (in a portal thread)
    serves every request of a client, as a real server's would. Use as a context
    manager so the loop thread stops.
    """

    def __init__(self, app: FastAPI) -> None:
        self._portal_cm: AbstractContextManager[BlockingPortal] = start_blocking_portal()
        self._portal = self._portal_cm.__enter__()
        transport = httpx.ASGITransport(app=app)
        self._client = httpx.AsyncClient(transport=transport, base_url="http://testserver")

    def request(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        return self._portal.call(partial(self._client.request, method, url, **kwargs))

    def get(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", url, **kwargs)

    def post(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", url, **kwargs)

    def put(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PUT", url, **kwargs)

    def patch(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", url, **kwargs)

    def delete(self, url: str, **kwargs: Any) -> httpx.Response:
        return self.request("DELETE", url, **kwargs)

    def close(self) -> None:
        self._portal.call(self._client.aclose)
        self._portal_cm.__exit__(None, None, None)

    def __enter__(self) -> AppClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def assert_connect_error(response: httpx.Response, status: int, message: str | None = None) -> str:
    """``response`` is Connect's error body for ``status``; returns its message.

    ``message`` must appear in the body's message when given.
    """
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == status
    assert isinstance(body["message"], str)
    if message is not None:
        assert message in body["message"], body["message"]
    return str(body["message"])
