"""Path, query and dependency helpers shared by the route modules.

Parameters are parsed here rather than by FastAPI's typed parameters, because a
typed parameter that fails to parse answers 422, and Connect answers differently:
a bad path parameter is a 404 (JAX-RS), a bad boolean query parameter is simply
``false`` (Java's ``Boolean.valueOf``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, cast
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request

from connect_runtime.cluster.herder_api import Herder
from connect_runtime.errors import BadRequestException

__all__ = [
    "CONNECTOR_NAME_SCHEMA",
    "CONNECTOR_PATH_NAME_SCHEMA",
    "HerderDep",
    "check_connector_name",
    "connector_location",
    "java_bool",
    "task_id",
]

# Java's Integer range: Jersey cannot bind anything outside it to an Integer.
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")

# Characters RFC 3986 allows unescaped inside one path segment, apart from the
# unreserved ones quote() always keeps. "/" is deliberately absent: a connector
# named "a/b" must come back as one segment.
_SEGMENT_SAFE = "!$&'()*+,;=:@"

# What check_connector_name accepts, for the OpenAPI document. A name in a body is
# trimmed first (Java's String.trim: characters up to U+0020 at either end), so
# there the pattern allows such characters around a core that starts and ends
# with none of them and holds no ISO control character and no '/'.
_CONTROL = "\\u0000-\\u001f\\u007f-\\u009f/"
_CONTROL_OR_SPACE = "\\u0000-\\u0020\\u007f-\\u009f/"
CONNECTOR_NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "pattern": (f"^[\\u0000-\\u0020]*[^{_CONTROL_OR_SPACE}]"
                f"(?:[^{_CONTROL}]*[^{_CONTROL_OR_SPACE}])?[\\u0000-\\u0020]*$"),
    "description": "Trimmed of whitespace and control characters (up to U+0020) at both "
                   "ends, as Kafka Connect trims it; what remains must not be empty and must "
                   "hold no ISO control character (U+0000-U+001F, U+007F-U+009F).",
}
"""A connector name in a request body (``POST /connectors``)."""
CONNECTOR_PATH_NAME_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "pattern": f"^[^{_CONTROL}]+$",
    "description": "No ISO control character (U+0000-U+001F, U+007F-U+009F).",
}
"""The name of a connector a request creates from its path (``PUT .../config``)."""


def get_herder(request: Request) -> Herder:
    """The herder ``create_app`` stored on the application."""
    return cast(Herder, request.app.state.herder)


HerderDep = Annotated[Herder, Depends(get_herder)]


def java_bool(value: str | None, default: bool) -> bool:
    """Java ``Boolean.valueOf`` semantics: only "true" (any case) is true; absent -> default."""
    if value is None:
        return default
    return value.lower() == "true"


def task_id(raw: str) -> int:
    """A task number from the path; anything Java's Integer cannot hold is a 404, as in Jersey."""
    if not _JAVA_INTEGER.fullmatch(raw):
        raise HTTPException(status_code=404)
    number = int(raw)
    if not _INT_MIN <= number <= _INT_MAX:
        raise HTTPException(status_code=404)
    return number


def connector_location(name: str) -> str:
    """The ``Location`` header value for a connector: ``/connectors/<url-encoded name>``."""
    return "/connectors/" + quote(name, safe=_SEGMENT_SAFE)


def _is_iso_control(char: str) -> bool:
    # Java's Character.isISOControl: C0 controls, DEL and C1 controls.
    code = ord(char)
    return code <= 0x1F or 0x7F <= code <= 0x9F


def check_connector_name(name: str) -> None:
    """Raise 400 if ``name`` is empty, contains ISO control characters (as Connect
    does) or a ``/``: beyond Connect, whose Jetty then refuses every path naming
    the connector, a ``/`` would make a connector no route can address (GET,
    DELETE, stop: all 404), so it is refused at its creation."""
    if not name:
        raise BadRequestException("Connector name may not be empty")
    if any(_is_iso_control(c) for c in name):
        raise BadRequestException("Connector name should not contain ISO control characters")
    if "/" in name:
        raise BadRequestException(
            f"Connector name may not contain '/': no REST path could name the connector "
            f"(got {name[:100]!r})")
