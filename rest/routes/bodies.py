"""Parse request bodies the way Kafka Connect's Jackson binding accepts them.

Contract: every function here either returns a well-typed value or raises
:class:`~connect_runtime.errors.BadRequestException` (400) whose message names what
is wrong. None of them ever lets a malformed body become a 500 or a 422.

Connect binds config bodies to ``Map<String, String>``; Jackson turns JSON numbers
and booleans into their JSON text (``5`` -> ``"5"``, ``1e3`` -> ``"1e3"``,
``true`` -> ``"true"``) and refuses objects and arrays. We do the same: numbers
are parsed as their original text, so no float rounding sneaks into a config.
"""

from __future__ import annotations

import json
from typing import Any, cast

from fastapi import Request

from connect_runtime.errors import BadRequestException
from connect_runtime.rest.routes.media import unsupported_media_type

__all__ = [
    "CONFIG_MAP_SCHEMA",
    "CONNECTOR_CONFIG_SCHEMA",
    "config_map",
    "config_patch",
    "openapi_body",
    "optional_string",
    "read_json",
    "read_json_object",
    "with_numbers",
]

CONFIG_MAP_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
CONNECTOR_CONFIG_SCHEMA: dict[str, Any] = {
    **CONFIG_MAP_SCHEMA,
    "required": ["connector.class"],
    "properties": {"connector.class": {"type": "string", "minLength": 1}},
    "description": "A connector's configuration: every key the connector and the framework "
                   "define, as strings. Without connector.class it is refused (400), as in "
                   "Kafka Connect; whether the rest is valid is the plugin's to say "
                   "(PUT /connector-plugins/{plugin}/config/validate).",
}
"""The config of a connector a request creates or replaces."""


def openapi_body(schema: dict[str, Any]) -> dict[str, Any]:
    """``openapi_extra`` documenting a JSON body that the route parses itself."""
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}
    }


# Deeper nesting than any body of the API needs; Jackson's own limit is 1,000.
MAX_JSON_DEPTH = 64


class _JsonNumber(str):
    """A JSON number kept as its source text, so error messages can still call it a number."""


def _reject_constant(token: str) -> Any:
    # Python's json accepts NaN and Infinity; JSON (and Jackson) do not.
    raise ValueError(f"{token} is not valid JSON")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, _JsonNumber):
        return "a number"
    return "a string"


async def read_json(request: Request) -> Any:
    """The request body as JSON, numbers kept as their JSON text (see module docstring).

    A body sent without a ``Content-Type`` is a 415, as in Connect (see
    :mod:`connect_runtime.rest.routes.media`).
    """
    raw = await request.body()
    if raw and "content-type" not in request.headers:
        raise unsupported_media_type()
    if not raw.strip():
        raise BadRequestException("Request body is missing; expected a JSON document")
    try:
        # utf-8-sig: Jackson tolerates a byte-order mark, so we do too.
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise BadRequestException(f"Request body is not valid UTF-8: {exc}") from exc
    try:
        value = json.loads(text, parse_int=_JsonNumber, parse_float=_JsonNumber,
                           parse_constant=_reject_constant)
    except ValueError as exc:
        raise BadRequestException(f"Request body is not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise BadRequestException(
            f"Request body is nested deeper than {MAX_JSON_DEPTH} levels") from exc
    _check_shape(value)
    return value


def _check_shape(value: Any) -> None:
    """Refuse what JSON allows but nothing downstream can hold: nesting deeper
    than :data:`MAX_JSON_DEPTH` (recursive code further on would fail) and
    strings with a lone surrogate (``"\\ud800"`` parses, but is no text: Kafka,
    the config topic and every encoder refuse it). Iterative, so no depth
    breaks it."""
    todo: list[tuple[Any, int, str]] = [(value, 1, "$")]
    while todo:
        item, depth, where = todo.pop()
        if isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                raise BadRequestException(
                    f"Request body is nested deeper than {MAX_JSON_DEPTH} levels (at {where})")
            pairs = item.items() if isinstance(item, dict) else enumerate(item)
            for key, child in pairs:
                if isinstance(key, str):
                    _check_text(key, f"a key in {where}")
                todo.append((child, depth + 1, f"{where}.{key}" if isinstance(key, str)
                             else f"{where}[{key}]"))
        elif isinstance(item, str) and not isinstance(item, _JsonNumber):
            _check_text(item, where)


def _check_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise BadRequestException(
            f"Request body holds a string that is not valid Unicode at {where[:200]}: "
            f"{exc.reason} (a lone surrogate escape such as \\ud800)") from exc


async def read_json_object(request: Request) -> dict[str, Any]:
    """The request body, which must be a JSON object."""
    body = await read_json(request)
    if not isinstance(body, dict):
        raise BadRequestException(f"Request body must be a JSON object, got {_json_type(body)}")
    return body


def _scalar_text(value: Any) -> str | None:
    """Jackson's String coercion: text stays, booleans become "true"/"false"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        # str() drops the _JsonNumber subclass: callers and the herder see plain text.
        return str(value)
    return None


def optional_string(body: dict[str, Any], field: str) -> str | None:
    """``body[field]`` as text; None when absent or null; 400 for objects and arrays."""
    value = body.get(field)
    if value is None:
        return None
    text = _scalar_text(value)
    if text is None:
        raise BadRequestException(
            f"Invalid value for field '{field}': expected a string, got {_json_type(value)}")
    return text


def config_patch(value: Any, context: str) -> dict[str, str | None]:
    """A PATCH body: a ``Map<String, String>`` whose null values mean "remove this key".

    ``context`` starts every error message, e.g. "Invalid request body".
    """
    return _string_map(value, context, allow_null=True)


def config_map(value: Any, context: str) -> dict[str, str]:
    """A ``Map<String, String>`` body or field; a null value is refused (400).

    ``context`` starts every error message, e.g. "Invalid value for field 'config'".
    """
    # No None can be left: _string_map refused them with allow_null=False.
    return cast(dict[str, str], _string_map(value, context, allow_null=False))


def _string_map(value: Any, context: str, *, allow_null: bool) -> dict[str, str | None]:
    if not isinstance(value, dict):
        raise BadRequestException(
            f"{context}: expected an object of strings, got {_json_type(value)}")
    out: dict[str, str | None] = {}
    for key, item in value.items():
        if item is None and allow_null:
            out[key] = None
            continue
        text = _scalar_text(item)
        if text is None:
            raise BadRequestException(
                f"{context}: expected an object of strings, "
                f"but key '{key}' has {_json_type(item)} value")
        out[key] = text
    return out


def with_numbers(value: Any) -> Any:
    """``value`` with the JSON numbers :func:`read_json` kept as text turned into numbers.

    For bodies whose numbers are data, not config text (KIP-875 offsets): integers
    stay exact ints, anything with a fraction or exponent becomes a float.
    """
    if isinstance(value, _JsonNumber):
        text = str(value)
        try:
            return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError as exc:  # over Python's 4,300 digits for an int
            raise BadRequestException(
                f"Request body holds a number of {len(text)} digits ({text[:20]}...): "
                "too long for an offset") from exc
    if isinstance(value, dict):
        return {key: with_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [with_numbers(item) for item in value]
    return value
