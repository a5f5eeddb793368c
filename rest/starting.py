"""What the REST listener serves while its worker starts.

The worker listens before it starts (``connect_runtime.worker.run_worker``), so
probes and clients get an answer rather than a refused connection, and
``GET /health`` says what the worker is waiting for. Until the worker has
started, :class:`StartupGate` answers every request itself, in Kafka Connect's
error body (``{"error_code": 503, "message": ...}``):

* ``GET /health``: 503, the message is ``the worker is starting: `` and the
  worker's progress (``cannot reach Kafka at bootstrap.servers=...: <error>;
  retrying ...``);
* any other HTTP request: 503, the worker is starting;
* a WebSocket (a slot's channel): accepted, then closed with
  :data:`~connect_runtime.protocol.slot_channel.CLOSE_UNAVAILABLE`, which a slot
  already treats as "try again shortly".

Once the worker has started, the gate hands every request to the real app
(:func:`connect_runtime.rest.create_app`), whose ``/health`` answers as it always
has: the herder's ``{"status": ..., "message": ...}``.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from connect_runtime.protocol.slot_channel import CLOSE_UNAVAILABLE
from connect_runtime.rest.errors import error_response

__all__ = ["StartupGate"]

_STARTING = "the worker is starting"


class StartupGate:
    """The one ASGI app the listener serves, for the whole life of the process.

    ``progress()`` tells what the worker is doing or waiting for; it is called
    for each ``GET /health`` until :meth:`open`, so it must be cheap and must not
    block (the event loop calls it).

    Ownership: :meth:`open` is called once, by the thread that starts the worker;
    the event loop only reads ``_app``. Replacing one reference is atomic, so a
    request sees the stand-in or the real app, never a mix, and every request
    that arrives after :meth:`open` returned goes to the real app.
    """

    def __init__(self, progress: Callable[[], str]) -> None:
        self._progress = progress
        self._app: ASGIApp | None = None

    def open(self, app: ASGIApp) -> None:
        """From now on, ``app`` serves every request. Call it once."""
        if self._app is not None:
            raise RuntimeError("the REST startup gate was opened twice")
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is not None:
            await app(scope, receive, send)
        elif scope["type"] == "http":
            await self._answer_starting(scope, receive, send)
        elif scope["type"] == "websocket":
            websocket = WebSocket(scope, receive, send)
            await websocket.accept()
            await websocket.close(code=CLOSE_UNAVAILABLE, reason=_STARTING)
        # "lifespan": the worker runs uvicorn with lifespan="off"; nothing to do.

    async def _answer_starting(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", "")).rstrip("/")
        if scope.get("method") == "GET" and path == "/health":
            message = f"{_STARTING}: {self._progress()}"
        else:
            message = (f"{_STARTING} and cannot serve requests yet; GET /health says what "
                       f"it is waiting for")
        await error_response(503, message)(scope, receive, send)
