"""Refuse state-changing requests that a browser sends on behalf of another site.

The dashboard (``/ui``) changes the cluster through the REST API with the
browser's credentials, so any page the same browser opens could try the same:
a cross-site request forgery. CORS alone does not stop it: a ``POST`` without
a body, or with a ``text/plain`` one, is a "simple" request that the browser
sends without asking first (``POST /connectors/<c>/restart`` changes the
cluster and needs no body). Kafka Connect has no defence here; this worker
adds one, on the server, for every route:

* only ``POST``, ``PUT``, ``PATCH`` and ``DELETE`` are checked; reads pass;
* a request with an ``Origin`` header passes when that origin's host and port
  are the request's own ``Host`` (the dashboard on this worker) or when
  ``access.control.allow.origin`` allows it (same rules as CORS:
  :class:`AllowedOrigins`); any other origin, ``null`` included, gets 403
  with Connect's error body;
* without ``Origin``, a ``Sec-Fetch-Site`` of ``cross-site`` or ``same-site``
  (a browser telling us the request comes from another origin) gets 403;
* without either header the request passes: ``curl``, Java and Python clients
  and workers forwarding to the leader send neither.

Behind a proxy that rewrites ``Host``, the dashboard's origin is not the
request's host: add it to ``access.control.allow.origin``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from connect_runtime.rest.errors import error_response

__all__ = ["AllowedOrigins", "CrossSiteRequestMiddleware", "cross_site_refusal"]

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# What a browser's Sec-Fetch-Site says about a request from another origin;
# "same-origin" and "none" (typed in the address bar) are this origin's own.
_OTHER_ORIGIN_SITES = frozenset({"cross-site", "same-site"})
_DEFAULT_PORTS = {"http": "80", "https": "443"}


@dataclass(frozen=True)
class AllowedOrigins:
    """The origins ``access.control.allow.origin`` lets in, as Jetty's filter reads it:
    comma-separated; ``*`` is any origin; a ``*`` inside an entry
    (``https://*.example.com``) matches any text there."""

    exact: tuple[str, ...] = ()
    regex: str | None = None

    @classmethod
    def parse(cls, allow_origin: str) -> AllowedOrigins:
        origins = [o.strip() for o in allow_origin.split(",") if o.strip()]
        exact = tuple(o for o in origins if o == "*" or "*" not in o)
        patterns = [re.escape(o).replace(r"\*", ".*") for o in origins if o != "*" and "*" in o]
        return cls(exact, "|".join(f"(?:{p})" for p in patterns) or None)

    def __bool__(self) -> bool:
        return bool(self.exact) or self.regex is not None

    def allows(self, origin: str) -> bool:
        if "*" in self.exact or origin in self.exact:
            return True
        return self.regex is not None and re.fullmatch(self.regex, origin) is not None


def _authority(netloc: str, scheme: str) -> str:
    """``host[:port]`` lower-cased, without the scheme's default port."""
    netloc = netloc.strip().lower()
    default = _DEFAULT_PORTS.get(scheme)
    if default and netloc.endswith(f":{default}"):
        netloc = netloc[: -len(default) - 1]
    return netloc


def cross_site_refusal(method: str, host: str | None, origin: str | None,
                       fetch_site: str | None, allowed: AllowedOrigins) -> str | None:
    """Why this request must be refused (the 403's message), or None to let it pass.

    Pure: ``host`` is the request's ``Host`` header, ``origin`` and ``fetch_site``
    its ``Origin`` and ``Sec-Fetch-Site`` headers (None when absent); the rules
    are in the module docstring.
    """
    if method.upper() not in STATE_CHANGING:
        return None
    if origin is None:
        if fetch_site is not None and fetch_site.strip().lower() in _OTHER_ORIGIN_SITES:
            return (f"Cross-origin request refused: the browser says it comes from a "
                    f"{fetch_site.strip().lower()} page (Sec-Fetch-Site) and it names no Origin")
        return None
    if allowed.allows(origin):
        return None
    parts = urlsplit(origin) if origin != "null" else None
    if parts is not None and parts.scheme and host is not None \
            and _authority(parts.netloc, parts.scheme) == _authority(host, parts.scheme):
        return None
    return (f"Cross-origin request refused: Origin {origin} is not this worker's "
            f"({host or 'no Host header'}) and access.control.allow.origin does not allow it")


class CrossSiteRequestMiddleware:
    """Answers 403 with Connect's error body to what :func:`cross_site_refusal` refuses."""

    def __init__(self, app: ASGIApp, allowed: AllowedOrigins) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1")
                       for k, v in scope.get("headers", [])}
            refusal = cross_site_refusal(scope.get("method", ""), headers.get("host"),
                                         headers.get("origin"), headers.get("sec-fetch-site"),
                                         self.allowed)
            if refusal is not None:
                await error_response(403, refusal)(scope, receive, send)
                return
        await self.app(scope, receive, send)
