"""Request media types, checked the way Kafka Connect's JAX-RS resources check them.

Connect's REST resources (connectors, offsets, lifecycle, plugins, loggers)
declare ``@Consumes(application/json)``. Measured on Connect 4.1.1:

* a ``Content-Type`` that is not ``application/json`` answers 415
  ``HTTP 415 Unsupported Media Type`` on *every* route of those resources, GETs
  and body-less PUTs included. The type is case-insensitive and parameters are
  ignored (``application/json; charset=utf-8`` is fine); ``application/*``,
  ``*/*`` and ``application/vnd.x+json`` are refused.
* without a ``Content-Type``, routes that take no body accept the request
  whatever it carries; a route that reads a body answers 415 when a body was
  sent (JAX-RS takes it for ``application/octet-stream``). That half is
  checked where bodies are read (:func:`~connect_runtime.rest.routes.bodies.read_json`).
* a ``Content-Type`` that does not parse as a media type (``garbage``,
  ``application/``, an empty value, a parameter without ``=``) is a 400. Jetty
  answers that one with an HTML page; we keep Connect's JSON error body.

``GET /``, ``GET /health`` and the internal routes (``PUT /connectors/<c>/fence``,
the slot channel) declare nothing in Connect and accept any media type here too:
executors send their fence request without a ``Content-Type``.
"""

from __future__ import annotations

import re

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam

from connect_runtime.errors import BadRequestException
from connect_runtime.rest.errors import HttpError

__all__ = [
    "JSON_MEDIA_TYPE",
    "JSON_REQUESTS",
    "UNSUPPORTED_MEDIA_TYPE_MESSAGE",
    "media_type",
    "require_json_content_type",
    "unsupported_media_type",
]

JSON_MEDIA_TYPE = "application/json"
# Jersey's message, which Connect's error mapper passes through unchanged.
UNSUPPORTED_MEDIA_TYPE_MESSAGE = "HTTP 415 Unsupported Media Type"

# RFC 9110 token and quoted-string: what a media type and its parameters are made of.
_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_PARAMETER = rf'{_TOKEN}\s*=\s*(?:{_TOKEN}|"(?:[^"\\]|\\.)*")'
# Empty parameters are tolerated ("application/json;;"), as Jersey does.
# No two adjacent \s* may compete for the same blanks: that backtracks quadratically.
_MEDIA_TYPE = re.compile(rf"\s*({_TOKEN}/{_TOKEN})\s*(?:;\s*(?:{_PARAMETER}\s*)?)*")


def unsupported_media_type() -> HttpError:
    """Connect's 415 error."""
    return HttpError(415, UNSUPPORTED_MEDIA_TYPE_MESSAGE)


def media_type(header: str) -> str:
    """The ``type/subtype`` of a ``Content-Type`` value, lower-cased, parameters dropped.

    Raises :class:`BadRequestException` (400) if ``header`` is not a media type.
    """
    match = _MEDIA_TYPE.fullmatch(header)
    if match is None:
        raise BadRequestException(f"Malformed Content-Type header: {header!r}")
    return match.group(1).lower()


def require_json_content_type(request: Request) -> None:
    """Route dependency: 415 unless the ``Content-Type``, if any, is ``application/json``."""
    header = request.headers.get("content-type")
    if header is not None and media_type(header) != JSON_MEDIA_TYPE:
        raise unsupported_media_type()


JSON_REQUESTS: DependsParam = Depends(require_json_content_type)
"""``dependencies=[JSON_REQUESTS]`` for routers of Connect's ``@Consumes(application/json)``
resources."""
