"""Build the worker's REST application: Kafka Connect's API over a :class:`Herder`.

The application only talks to the herder, never to Kafka or Spark. Herder calls
block, so every route runs them in the thread pool and the event loop stays free
for other requests, including forwarded ones.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence

from fastapi import APIRouter, FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from connect_runtime.cluster.herder_api import Herder
from connect_runtime.errors import NotLeaderException
from connect_runtime.rest.basic_auth import BasicAuthMiddleware
from connect_runtime.rest.body_limit import DEFAULT_MAX_BODY_BYTES, BodyLimitMiddleware
from connect_runtime.rest.cross_site import AllowedOrigins, CrossSiteRequestMiddleware
from connect_runtime.rest.errors import UnhandledErrorMiddleware, install_error_handlers
from connect_runtime.rest.openapi import errors, install_openapi
from connect_runtime.rest.routes import (
    connectors,
    declared,
    internal,
    lifecycle,
    loggers,
    metrics,
    offsets,
    plugins,
    root,
    topics,
    ui,
)
from connect_runtime.rest.routes.forwarding import Forwarder
from connect_runtime.rest.routes.internal import InternalRequestVerifier
from connect_runtime.rest.routes.media import JSON_REQUESTS

__all__ = ["add_cors", "create_app"]

# Connect's default timeout for a REST request, forwarded ones included: 90 s.
DEFAULT_FORWARD_TIMEOUT_S = 90.0


class _IgnoreTrailingSlash:
    """Route ``/connectors/`` like ``/connectors``, as JAX-RS matching does.

    Starlette would answer a 307 redirect instead, which clients that do not
    follow redirects (or that would resend a body) see as a failure.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] == "http" and len(path) > 1 and path.endswith("/"):
            scope = dict(scope, path=path.rstrip("/") or "/")
            raw_path = scope.get("raw_path")
            if raw_path:
                scope["raw_path"] = raw_path.rstrip(b"/") or b"/"
        await self.app(scope, receive, send)


# Jetty's cross-origin defaults, which Kafka Connect keeps: the methods when
# access.control.allow.methods is empty, and the request headers a preflight may name.
_CORS_METHODS = ("GET", "POST", "HEAD")
_CORS_HEADERS = ("X-Requested-With", "Content-Type", "Accept", "Origin")


def add_cors(app: FastAPI, allow_origin: str, allow_methods: str) -> None:
    """Cross-origin requests as Kafka Connect allows them: none unless
    ``allow_origin`` is set to a comma-separated list of origins (``*``: any; a
    ``*`` inside an entry, as in ``https://*.example.com``, matches any text
    there, as Jetty's filter does) and then only ``allow_methods`` (default
    GET, POST, HEAD). Preflight requests are answered by the middleware."""
    origins = AllowedOrigins.parse(allow_origin)
    if not origins:
        return
    methods = [m.strip().upper() for m in allow_methods.split(",") if m.strip()]
    app.add_middleware(CORSMiddleware, allow_origins=list(origins.exact),
                       allow_origin_regex=origins.regex,
                       allow_methods=methods or list(_CORS_METHODS),
                       allow_headers=list(_CORS_HEADERS))


def create_app(
    herder: Herder,
    *,
    extra_routers: Sequence[APIRouter] = (),
    internal_request_verifier: InternalRequestVerifier | None = None,
    forward_timeout_s: float = DEFAULT_FORWARD_TIMEOUT_S,
    allow_origin: str = "",
    allow_methods: str = "",
    basic_auth: Mapping[str, str] | None = None,
    forward_tls: ssl.SSLContext | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> FastAPI:
    """A FastAPI app serving Kafka Connect's REST API backed by ``herder``.

    * ``extra_routers`` are worker-internal routes (e.g. task control for Spark
      executors). Like ``PUT /connectors/<name>/fence`` they are left out of
      ``/openapi.json``; they get the same error mapping and forwarding as every
      other route (raise :class:`NotLeaderException` to forward).
    * ``internal_request_verifier(request, raw_body)`` checks the signature of
      internal requests and raises to refuse one; None accepts every request.
    * ``forward_timeout_s`` bounds each request forwarded to the leader.
    * ``allow_origin`` / ``allow_methods``: Connect's ``access.control.allow.origin``
      and ``access.control.allow.methods`` (:func:`add_cors`); empty: no CORS.
      Beyond Connect, a POST, PUT, PATCH or DELETE that a browser sends from an
      origin that is neither this worker's nor allowed there gets 403
      (:mod:`connect_runtime.rest.cross_site`).
    * ``basic_auth``: the users and passwords of Connect's basic-auth extension
      (:mod:`connect_runtime.rest.basic_auth`); None: no authentication.
    * ``forward_tls``: the client context for requests forwarded to an ``https://``
      leader (:meth:`connect_runtime.security.tls.ClientTls.context`).
    * ``max_body_bytes``: the largest request body (``rest.request.max.bytes``),
      checked before any route or credential check reads it
      (:mod:`connect_runtime.rest.body_limit`).

    Every error answers ``{"error_code": <status>, "message": <text>}``; see
    :mod:`connect_runtime.rest.errors` for the mapping and
    :mod:`connect_runtime.rest.routes.forwarding` for the two-hop forwarding rule.
    """
    # No /docs or /redoc: FastAPI's pages load Swagger UI and ReDoc from a public
    # CDN (no integrity check) into the worker's origin, where the browser's saved
    # credentials apply, and break on a machine without internet. /openapi.json
    # stays: any local Swagger UI or client generator reads it (docs/rest.md).
    app = FastAPI(
        title="connect-runtime",
        summary="Kafka Connect's REST API, for exactly-once source connectors on Spark",
        docs_url=None, redoc_url=None,
    )
    app.state.herder = herder
    app.state.internal_request_verifier = internal_request_verifier

    install_error_handlers(app)
    app.add_exception_handler(NotLeaderException, Forwarder(forward_timeout_s, forward_tls).handle)
    app.add_middleware(UnhandledErrorMiddleware)
    if basic_auth is not None:
        app.add_middleware(BasicAuthMiddleware, credentials=basic_auth)
    app.add_middleware(_IgnoreTrailingSlash)
    # Before credentials are even looked at: a forged request from another site's
    # page carries the browser's credentials too (rest/cross_site.py).
    app.add_middleware(CrossSiteRequestMiddleware, allowed=AllowedOrigins.parse(allow_origin))
    # A browser's preflight carries no credentials and must still be answered.
    add_cors(app, allow_origin, allow_methods)
    # Outermost: no layer or route may read a body past the limit.
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)

    app.include_router(root.router)
    # Connect's resources behind these declare @Consumes(application/json): 415
    # otherwise, and 400 for a Content-Type that is not a media type at all.
    for public in (connectors.router, offsets.router, lifecycle.router, topics.router,
                   plugins.router, loggers.router):
        app.include_router(public, dependencies=[JSON_REQUESTS], responses=errors(400, 415))
    # The dashboard is not Connect's API: hidden, and browsers send no Content-Type.
    for hidden in (internal.router, metrics.router, ui.router, declared.router,
                   *extra_routers):
        app.include_router(hidden, include_in_schema=False)
    install_openapi(app)
    return app
