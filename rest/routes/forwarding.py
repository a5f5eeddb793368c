"""Forward a request the leader must serve, following Kafka Connect's two-hop rule.

Installed by ``create_app`` as the handler for :class:`NotLeaderException`, so any
route (including the lead's ``extra_routers``) forwards by raising it.

The hidden ``forward`` query parameter counts hops, as in Connect's
``HerderRequestHandler``:

1. A request with no ``forward`` parameter came from a client. The worker sends it
   to the leader it knows of with ``forward=true``.
2. A request with ``forward=true`` was forwarded once. If this worker is not the
   leader either (leadership moved), it may forward one last time, with
   ``forward=false``.
3. A request with ``forward=false`` (or any value other than "true", as Java's
   ``Boolean.valueOf`` reads it) is never forwarded again: 409, because the leader
   could not be found within two hops, which means a rebalance is under way.

If the leader is unknown the answer is 409 too. The method, path (as received,
still percent-encoded), other query parameters and raw body go unchanged, so the
leader applies the same validation and an internal request's signature still
matches its body. The leader's status, body, ``Content-Type`` and ``Location``
come back to the client. A leader that cannot be reached in time, or that answers
something other than a success or a Connect error body, is a 500 naming it.
"""

from __future__ import annotations

import logging
import ssl
from urllib.parse import parse_qsl, quote, urlencode

import httpx
from fastapi import Request
from starlette.responses import Response

from connect_runtime.errors import NotLeaderException
from connect_runtime.protocol.signing import ALGORITHM_HEADER, AUTH_HEADER
from connect_runtime.rest.errors import error_response

log = logging.getLogger(__name__)

__all__ = ["FORWARD_PARAM", "Forwarder"]

FORWARD_PARAM = "forward"
NO_KNOWN_LEADER = (
    "Cannot complete request momentarily due to no known leader URL, "
    "likely because a rebalance was underway."
)
NOT_FOUND_WITHIN_TWO_HOPS = (
    "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
)
# Credentials and the KIP-507 signature must survive the hop; everything else
# (Host, Content-Length, hop-by-hop headers) belongs to this connection only.
_FORWARDED_REQUEST_HEADERS = ("authorization", "content-type", AUTH_HEADER, ALGORITHM_HEADER)
_RELAYED_RESPONSE_HEADERS = ("content-type", "location")


def _forward_flag(request: Request) -> bool | None:
    """None when absent; otherwise Java ``Boolean.valueOf`` of the first value."""
    values = request.query_params.getlist(FORWARD_PARAM)
    return values[0].lower() == "true" if values else None


def _target(request: Request, leader_url: str) -> str:
    raw_path = request.scope.get("raw_path")
    # ASGI's raw_path excludes the query string, but some servers have included it.
    path = raw_path.decode("latin-1").split("?")[0] if raw_path else quote(request.url.path)
    return leader_url.rstrip("/") + path


def _is_connect_error(response: httpx.Response) -> bool:
    try:
        body = response.json()
    except ValueError:  # JSONDecodeError and UnicodeDecodeError both are
        return False
    return isinstance(body, dict) and isinstance(body.get("error_code"), int) and "message" in body


# A leader that has not accepted a connection within this is unreachable (a
# partition, a host gone): answer then, not after the whole request timeout,
# which Kafka Connect waits for (90 s) before its same 500. Connecting to a live
# leader takes milliseconds; 10 s leaves room for three lost SYNs.
CONNECT_TIMEOUT_S = 10.0


class Forwarder:
    """Exception handler that sends a request on to the leader (see module docstring).

    ``timeout_s`` bounds each forwarded request; Connect's default REST request
    timeout is 90 s, and a fence may wait that long on transaction coordinators.
    Connecting is bounded by :data:`CONNECT_TIMEOUT_S` (or ``timeout_s`` if less).
    ``tls`` is the client context for an ``https://`` leader (the worker's
    truststore and, under mutual TLS, its certificate); None: the system's CAs.
    """

    def __init__(self, timeout_s: float, tls: ssl.SSLContext | None = None) -> None:
        self.timeout_s = timeout_s
        self.verify: ssl.SSLContext | bool = tls if tls is not None else True

    async def handle(self, request: Request, exc: Exception) -> Response:
        """Starlette exception handler for :class:`NotLeaderException`."""
        assert isinstance(exc, NotLeaderException)
        forward = _forward_flag(request)
        if forward is False:
            log.error("Request '%s %s' failed because it couldn't find the leader within two "
                      "hops between workers", request.method, request.url.path)
            return error_response(409, NOT_FOUND_WITHIN_TWO_HOPS)
        if exc.leader_url is None:
            return error_response(409, NO_KNOWN_LEADER)
        return await self._forward(request, exc.leader_url, next_forward=forward is None)

    async def _forward(self, request: Request, leader_url: str, *, next_forward: bool) -> Response:
        url = _target(request, leader_url)
        query = urlencode(
            [(FORWARD_PARAM, "true" if next_forward else "false")]
            + [(k, v) for k, v in parse_qsl(request.url.query, keep_blank_values=True)
               if k != FORWARD_PARAM]
        )
        headers = {name: request.headers[name] for name in _FORWARDED_REQUEST_HEADERS
                   if name in request.headers}
        headers["accept"] = "application/json"
        body = await request.body()
        where = f"the leader at {leader_url} ({request.method} {request.url.path})"
        log.debug("Forwarding %s %s to %s", request.method, request.url.path, url)
        try:
            # A client per request, as Connect's RestClient does: forwarding is rare
            # (follower writes only), and a shared client would tie its connection
            # pool to whichever event loop first used it.
            connect_s = min(self.timeout_s, CONNECT_TIMEOUT_S)
            timeout = httpx.Timeout(self.timeout_s, connect=connect_s)
            async with httpx.AsyncClient(timeout=timeout, follow_redirects=False,
                                         verify=self.verify) as client:
                response = await client.request(request.method, f"{url}?{query}",
                                                headers=headers, content=body or None)
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            log.error("IO error forwarding REST request to %s", where, exc_info=e)
            detail = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            if isinstance(e, httpx.ConnectTimeout):
                detail = (f"{type(e).__name__}: the leader did not accept a connection within "
                          f"{connect_s:g} s")
            return error_response(500, f"IO Error trying to forward REST request to {where}: "
                                       f"{detail}")
        return _relay(response, where)


def _relay(response: httpx.Response, where: str) -> Response:
    status = response.status_code
    if 200 <= status < 300 or (status >= 400 and _is_connect_error(response)):
        headers = {name: response.headers[name] for name in _RELAYED_RESPONSE_HEADERS
                   if name in response.headers}
        return Response(response.content, status, headers=headers)
    if status >= 400:
        log.error("Leader answered a forwarded request to %s with HTTP %d and a body that is "
                  "not a Connect error: %.500s", where, status, response.text)
        return error_response(500, f"Error trying to forward REST request to {where}: it answered "
                                   f"HTTP {status} without a Connect error body")
    # follow_redirects=False: a 3xx means something other than a Connect worker answered.
    return error_response(500, f"Unexpected status code when handling forwarded request to "
                               f"{where}: {status}")
