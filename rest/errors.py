"""Every REST error leaves as Kafka Connect's error body: ``{"error_code": int, "message": str}``.

Contract: whatever goes wrong while serving a request, the client gets that JSON
shape, with ``error_code`` equal to the HTTP status. No FastAPI ``{"detail": ...}``
body and no 422 ever reaches a client.

================================================  ====  =================================
raised                                            code  message
================================================  ====  =================================
:class:`HttpError`                                its   its message
RequestSignatureException (KIP-507)               its   its message (400, 403 or 503)
NotFoundException                                 404   the exception's message
AlreadyExistsException, ConflictException         409   the exception's message
BadRequestException, ConfigException              400   the exception's message
unknown route / path parameter of the wrong type  404   ``HTTP 404 Not Found`` (as Jersey)
method not allowed on a known route               405   ``HTTP 405 Method Not Allowed``;
                                                        ``Allow`` lists the path's methods
FastAPI request validation (safety net)           400   names the offending field
NotLeaderException                                --    forwarded (``rest.routes.forwarding``)
anything else                                     500   the message; traceback logged
================================================  ====  =================================

The 500 case is caught by :class:`UnhandledErrorMiddleware`, not by an exception
handler, because Starlette re-raises from its ``Exception`` handler after answering,
which would log every error twice and crash test clients.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConfigException,
    ConflictException,
    ConnectError,
    NotFoundException,
    RequestSignatureException,
)

log = logging.getLogger(__name__)

__all__ = [
    "HttpError",
    "UnhandledErrorMiddleware",
    "error_response",
    "install_error_handlers",
    "jersey_message",
]


class HttpError(ConnectError):
    """An error with an explicit HTTP status, for cases our exception tree has no class for.

    Internal request verifiers raise it for 403 (forged signature) or 503 (no session
    key yet); ``status`` becomes both the HTTP status and ``error_code``.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_response(
    status: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    """Connect's error body for ``status``."""
    return JSONResponse({"error_code": status, "message": message}, status, headers=headers)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def jersey_message(status: int) -> str:
    """The message Jersey gives its own HTTP errors, e.g. ``HTTP 404 Not Found``."""
    return f"HTTP {status} {_phrase(status)}".rstrip()


def _message_of(exc: BaseException) -> str:
    # An exception raised without arguments has an empty str(); the class name at
    # least tells the operator what happened.
    return str(exc) or type(exc).__name__


# Most specific first is not needed: Starlette walks the exception's MRO.
_STATUS_BY_EXCEPTION: dict[type[Exception], int] = {
    NotFoundException: 404,
    AlreadyExistsException: 409,
    ConflictException: 409,
    BadRequestException: 400,
    ConfigException: 400,
}


def _mapped_handler(status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
    async def handle(request: Request, exc: Exception) -> Response:
        log.debug("REST call %s %s failed with %d", request.method, request.url.path, status,
                  exc_info=exc)
        return error_response(status, _message_of(exc))

    return handle


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HttpError)
    return error_response(exc.status, exc.message)


async def _signature_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestSignatureException)
    log.warning("rejected internal request %s %s: %s", request.method, request.url.path, exc)
    return error_response(exc.status, _message_of(exc))


async def _starlette_http_exception(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    # Routing errors carry only the default phrase as detail; Jersey words them
    # "HTTP 404 Not Found", which clients may already match on.
    if exc.detail and exc.detail != _phrase(exc.status_code):
        message = str(exc.detail)
    else:
        message = jersey_message(exc.status_code)
    headers = exc.headers
    if exc.status_code == 405:
        headers = {**(headers or {}), "Allow": _allowed_methods(request)}
    return error_response(exc.status_code, message, headers=headers)


# The methods a 405's Allow can name: every method some route of the app declares.
_HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def _allowed_methods(request: Request) -> str:
    """Every method some route serves on the request's path, for a 405's ``Allow``.

    Starlette answers a 405 from the first route whose path matches, so its ``Allow``
    lists only that route's methods even when others share the path. Each method is
    tried against the whole route table (FastAPI nests included routers, so only
    ``matches`` sees every route).
    """
    routes = request.app.router.routes
    return ", ".join(
        method for method in _HTTP_METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL
               for route in routes))


async def _request_validation(request: Request, exc: Exception) -> Response:
    # Our own routes parse bodies and parameters themselves, so this only fires for
    # routes added through ``extra_routers`` that declare typed parameters. It must
    # still answer 400 in Connect's shape, never FastAPI's 422.
    assert isinstance(exc, RequestValidationError)
    problems = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error.get("loc", ()))
        problems.append(f"{location}: {error.get('msg', 'invalid')}")
    return error_response(400, "Invalid request: " + "; ".join(problems or ["malformed request"]))


def install_error_handlers(app: FastAPI) -> None:
    """Register every mapping in the module docstring except forwarding and the 500 case.

    The 500 case needs :class:`UnhandledErrorMiddleware` added with ``app.add_middleware``.
    """
    for exc_class, status in _STATUS_BY_EXCEPTION.items():
        app.add_exception_handler(exc_class, _mapped_handler(status))
    app.add_exception_handler(HttpError, _http_error)
    app.add_exception_handler(RequestSignatureException, _signature_error)
    app.add_exception_handler(StarletteHTTPException, _starlette_http_exception)
    app.add_exception_handler(RequestValidationError, _request_validation)


class StartedSend:
    """An ASGI ``send`` that notes when the response began: after that, an error
    can no longer be answered, only make the server drop the connection."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


class UnhandledErrorMiddleware:
    """Turns any exception no handler claimed into a logged 500 with Connect's body.

    Sits between Starlette's ServerErrorMiddleware and its ExceptionMiddleware, so it
    sees exactly the exceptions that have no registered handler. If the response has
    already started there is nothing to repair and the exception propagates.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tracking_send = StartedSend(send)
        try:
            await self.app(scope, receive, tracking_send)
        except ClientDisconnect:
            # The caller hung up before its body was read (a fence or task-config
            # request from a task whose own timeout ran out, say): there is no one
            # to answer, and nothing went wrong here.
            log.info("%s %s: the client disconnected before its request was read",
                     scope.get("method"), scope.get("path"))
        except Exception as exc:
            if tracking_send.started:
                raise
            log.error("Uncaught exception in REST call to %s %s", scope.get("method"),
                      scope.get("path"), exc_info=exc)
            await error_response(500, _message_of(exc))(scope, receive, send)
