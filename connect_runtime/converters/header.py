"""Connect's SimpleHeaderConverter: a header value as UTF-8 text, the way
``Values.convertToString`` writes it (Connect's default ``header.converter``).

* A ``str`` is itself; ``int`` and ``float`` are Java's number text
  (``Double.toString``: ``1.0E10``; ``Float.toString`` with a FLOAT32 schema), a
  Decimal ``BigDecimal.toString`` at its scale; ``bool`` is ``true``/``false``.
* A list ``[1,"two",null]``, a dict ``{"k":1,2:"x"}``, a Struct
  ``{"name":value,...}`` (every field, defaults applied): strings inside are
  quoted, with only ``\\`` and ``"`` escaped; bytes inside are base64.
* A date, time or datetime as Connect formats a ``java.util.Date``, in UTC:
  ``2024-01-02`` for a whole day, ``12:34:56.789Z`` for any instant before
  1970-01-02 (Connect decides by the number alone, so 1970-01-01 prints as a
  time), else ``2024-01-02T03:04:05.678Z``.

Project rule: a header value that is already ``bytes`` is written as it is
(the record sender does not even call the converter; Connect would write a
byte[] as base64 text). Java writes ``?`` for a lone surrogate; this raises
DataException.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config_def import ConfigDef
from connect_runtime.api.schema import Schema, Struct, infer
from connect_runtime.converters import java
from connect_runtime.converters.base import BYTES_LIKE, as_bytes
from connect_runtime.converters.string import number_text
from connect_runtime.errors import DataException


class SimpleHeaderConverter:
    """Connect's SimpleHeaderConverter (see the module docstring)."""

    @staticmethod
    def config_def() -> ConfigDef:
        """No keys, as in Connect."""
        return ConfigDef()

    def configure(self, configs: dict[str, str], is_key: bool = False) -> None:
        pass

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        if value is None:
            return None
        if type(value) is str:
            text = value
        elif isinstance(value, BYTES_LIKE):
            return as_bytes(value)
        else:
            try:
                text = values_text(schema, value, embedded=False)
            except DataException as e:
                raise DataException(f"Cannot convert header {header_key!r} for topic "
                                    f"{topic!r}: {e}") from None
        try:
            return text.encode()
        except UnicodeEncodeError as e:
            raise DataException(f"Cannot convert header {header_key!r} for topic {topic!r} "
                                f"to UTF-8: {e}") from None


def values_text(schema: Schema | None, value: Any, embedded: bool) -> str:
    """``Values.convertToString``'s text for ``value``; ``embedded`` inside a container."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if embedded \
            else str(value)
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        return number_text(schema, value)
    if isinstance(value, BYTES_LIKE):
        text = base64.b64encode(value).decode("ascii")
        return f'"{text}"' if embedded else text
    if isinstance(value, datetime.date | datetime.time):
        return java.values_date_text(java.date_millis(value))
    if isinstance(value, list | tuple):
        items = schema.value_schema if schema is not None else None
        return "[" + ",".join(values_text(items, v, True) for v in value) + "]"
    if isinstance(value, Mapping):
        keys, values = ((schema.key_schema, schema.value_schema) if schema is not None
                        else (None, None))
        return "{" + ",".join(f"{values_text(keys, k, True)}:{values_text(values, v, True)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        return "{" + ",".join(f"{values_text(None, f.name, True)}:"
                              f"{values_text(f.schema, value.get(f.name), True)}"
                              for f in value.schema.fields) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        found, struct = infer(value)
        return values_text(found, struct, embedded)
    raise DataException(f"Failed to serialize unexpected value type {type(value).__name__}: "
                        f"{value!r}")
