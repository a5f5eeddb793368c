"""Request bodies have a size limit and a deadline, checked before a route reads them.

Every route reads its body whole (``await request.body()``), and some before
any credential is checked: the signed internal routes (``PUT
/connectors/<name>/fence``) need no password, and their signature covers the
body. Without a limit, one unauthenticated request could make the worker hold
any amount of memory (300 MB took a worker from 90 MB to 629 MB), and one that
announced a large ``Content-Length`` and then sent nothing held its
connection open for ever.

:class:`BodyLimitMiddleware`, the outermost layer of the app:

* answers ``413`` (Connect's error body) to a ``Content-Length`` over the
  limit without reading a byte of the body, and to a chunked body as soon as
  what arrived passes the limit;
* answers ``400`` to a ``Content-Length`` that is not a number;
* answers ``408`` when a body that is not complete sends nothing for
  ``idle_timeout_s``.

Kafka Connect has neither (Jetty's defaults bound headers, not bodies).
"""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connect_runtime.rest.errors import HttpError, StartedSend, error_response

# rest.request.max.bytes's default: a connector config must fit in one
# config-topic record (1 MB by default) anyway; offsets of many partitions and
# validate bodies stay far below this.
DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024
DEFAULT_BODY_IDLE_TIMEOUT_S = 30.0


class BodyLimitMiddleware:
    """See the module docstring. ``max_bytes``: the largest body accepted."""

    def __init__(self, app: ASGIApp, max_bytes: int = DEFAULT_MAX_BODY_BYTES,
                 idle_timeout_s: float = DEFAULT_BODY_IDLE_TIMEOUT_S) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.idle_timeout_s = idle_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        announced = dict(scope["headers"]).get(b"content-length")
        if announced is not None:
            try:
                length = int(announced)
            except ValueError:
                await self._answer(scope, receive, send, 400,
                                   f"Content-Length {announced[:40]!r} is not a number")
                return
            if length > self.max_bytes:
                await self._answer(scope, receive, send, 413, self._too_large(length))
                return
        received = 0
        complete = False

        async def limited_receive() -> Message:
            nonlocal received, complete
            if complete:  # only http.disconnect is left to wait for: no deadline
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.idle_timeout_s)
            except TimeoutError:
                raise HttpError(408, f"The request body sent nothing for "
                                    f"{self.idle_timeout_s:g} s") from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise HttpError(413, self._too_large(received, at_least=True))
                complete = not message.get("more_body", False)
            return message

        tracking_send = StartedSend(send)
        try:
            await self.app(scope, limited_receive, tracking_send)
        except HttpError as refused:
            if tracking_send.started:
                raise  # too late for an answer: the server drops the connection
            await self._answer(scope, receive, send, refused.status, refused.message)

    def _too_large(self, size: int, at_least: bool = False) -> str:
        return (f"The request body is {'over ' if at_least else ''}{size} bytes, more than "
                f"the {self.max_bytes} bytes this worker accepts (rest.request.max.bytes)")

    @staticmethod
    async def _answer(scope: Scope, receive: Receive, send: Send, status: int,
                      message: str) -> None:
        # The body is left unread: the server closes the connection after the answer.
        await error_response(status, message, {"connection": "close"})(scope, receive, send)
