"""Connect's StringConverter: the value's Java ``toString()``, encoded.

A ``str`` is itself; anything else is written as the Java object Connect holds
for it would print itself, so a Connect consumer and this runtime agree:

* ``int``: its digits; ``float``: ``Double.toString`` (``Float.toString`` with a
  FLOAT32 schema): ``1.0E10``, ``0.1``, ``NaN``; ``bool``: ``true``/``false``;
  a Decimal: ``BigDecimal.toString`` at the schema's scale (``1.50``, ``1E-20``).
* A list: ``[a, b]``; a dict: ``{k=v, k2=v2}``; a Struct:
  ``Struct{name=value,...}`` with the fields set (defaults not applied).
* A date, time or datetime: ``java.util.Date.toString`` in UTC
  (``Tue Jan 02 03:04:05 UTC 2024``; Connect uses the JVM's time zone).
* Anything else (a UUID, an Enum): Python's ``str``.

``converter.encoding`` takes Java's charset names; ``UTF-16`` writes a
big-endian byte order mark and ``UTF-32`` big-endian without one, as Java does.
Where Java would put ``?`` for a character the charset lacks, this raises
DataException instead of losing data; bytes nested in a list, map or struct
(Java prints an identity hash such as ``[B@1b6d3586``) raise too.
"""

from __future__ import annotations

import codecs
import dataclasses
import datetime
import decimal
from collections.abc import Mapping
from typing import Any

from connect_runtime.api.config_def import ConfigDef, Importance, Width
from connect_runtime.api.config_def import Type as ConfigType
from connect_runtime.api.schema import DECIMAL, Schema, SchemaType, Struct, infer
from connect_runtime.converters import java
from connect_runtime.converters.base import BYTES_LIKE, Encoder, as_bytes
from connect_runtime.errors import ConfigException, DataException

ENCODING = "converter.encoding"

# Java charsets whose Python codec of the same name writes other bytes.
_JAVA_CODECS = {"utf-16": "utf-16-be", "utf-32": "utf-32-be"}
_BOM = {"utf-16": codecs.BOM_UTF16_BE}


class StringConverter:
    """Connect's StringConverter (see the module docstring)."""

    def __init__(self) -> None:
        self._encoding = "utf-8"
        self._bom = b""

    @staticmethod
    def config_def() -> ConfigDef:
        """The one key this converter reads, as Connect's StringConverter defines it."""
        return ConfigDef().define(
            ENCODING, ConfigType.STRING, "UTF-8", importance=Importance.HIGH,
            documentation="The name of the Java character set to use for encoding strings "
            "as byte arrays.", width=Width.MEDIUM, display_name="Encoding")

    def configure(self, configs: dict[str, str], is_key: bool = False) -> None:
        encoding = configs.get(ENCODING, "UTF-8").strip()
        try:
            name = codecs.lookup(encoding).name
        except LookupError:
            raise ConfigException("Unknown encoding", name=ENCODING, value=encoding) from None
        self._encoding = _JAVA_CODECS.get(name, name)
        self._bom = _BOM.get(name, b"")

    def _fast_encoder(self) -> Encoder | None:
        # str.encode raises TypeError for anything but a str (bytes, numbers, ...).
        return str.encode if self._encoding == "utf-8" else None

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if type(value) is str:
            text = value
        elif isinstance(value, BYTES_LIKE):
            return as_bytes(value)  # already serialized by the task
        else:
            try:
                text = java_to_string(schema, value)
            except DataException as e:
                raise DataException(f"StringConverter cannot write a value for topic "
                                    f"{topic!r}: {e}") from None
        try:
            return self._bom + text.encode(self._encoding)
        except UnicodeEncodeError as e:
            raise DataException(f"Cannot encode a value for topic {topic} as "
                                f"{self._encoding}: {e}") from e

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect(topic, schema, value)


def java_to_string(schema: Schema | None, value: Any) -> str:
    """``value.toString()`` of the Java object Connect holds for ``value`` of ``schema``."""
    if value is None:
        return "null"
    if isinstance(value, str):
        return str(value)
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, int | float | decimal.Decimal):
        return number_text(schema, value)
    if isinstance(value, datetime.date | datetime.time):
        return java.date_to_string(java.date_millis(value))
    if isinstance(value, BYTES_LIKE):
        raise DataException("bytes inside a value have no text form (Java prints the "
                            "array's identity hash)")
    if isinstance(value, list | tuple):
        items = schema.value_schema if schema is not None else None
        return "[" + ", ".join(java_to_string(items, v) for v in value) + "]"
    if isinstance(value, Mapping):
        keys, values = ((schema.key_schema, schema.value_schema) if schema is not None
                        else (None, None))
        return "{" + ", ".join(f"{java_to_string(keys, k)}={java_to_string(values, v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, Struct):
        raw = value._values  # Java's Struct.toString skips unset fields, defaults unapplied
        return "Struct{" + ",".join(f"{f.name}={java_to_string(f.schema, raw[f.name])}"
                                    for f in value.schema.fields
                                    if raw.get(f.name) is not None) + "}"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return java_to_string(*infer(value))
    return str(value)


def number_text(schema: Schema | None, value: int | float | decimal.Decimal) -> str:
    """Java's text of a number: the schema says whether it is a Float, a Double, a
    BigDecimal at its scale or an integer (without one: a Python float is a Double)."""
    kind = schema.type if schema is not None else None
    try:
        if schema is not None and schema.name == DECIMAL:
            if not isinstance(value, decimal.Decimal):
                raise DataException(f"{value!r} is not a Decimal")
            return java.decimal_text(java.decimal_unscaled(value, schema.scale), schema.scale)
        if isinstance(value, decimal.Decimal):
            _, _, exponent = value.as_tuple()
            scale = -exponent if isinstance(exponent, int) else 0
            return java.decimal_text(java.decimal_unscaled(value, scale), scale)
        if kind is SchemaType.FLOAT32:
            return java.float_text(float(value))
        if kind is SchemaType.FLOAT64 or isinstance(value, float):
            return java.double_text(float(value))
    except (ValueError, OverflowError) as e:
        raise DataException(f"{value!r} cannot be written as a number: {e}") from None
    return str(int(value))
