"""Connect's one-value converters (``org.apache.kafka.connect.converters``): numbers,
booleans and raw bytes, written as Kafka's own serializers write them.

* ``ShortConverter``, ``IntegerConverter``, ``LongConverter``: big-endian two's
  complement of 2, 4, 8 bytes; an ``int`` (not a ``bool``) in range.
* ``FloatConverter``, ``DoubleConverter``: big-endian IEEE 754 of 4, 8 bytes; a
  ``float`` or ``int`` (a NaN is Java's canonical one).
* ``BooleanConverter``: one byte, 1 or 0; a ``bool``, and a BOOLEAN schema if any.
* ``ByteArrayConverter``: the bytes as they are; a BYTES schema if any.

Like Connect's, the number converters ignore the schema. A ``bytes`` value
passes through every one of them unchanged (the package invariant).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any, ClassVar

from connect_runtime.api.config_def import ConfigDef
from connect_runtime.api.schema import SchemaType
from connect_runtime.converters.base import BYTES_LIKE, as_bytes
from connect_runtime.errors import DataException

if TYPE_CHECKING:
    from connect_runtime.api.schema import Schema


class _OneValueConverter:
    """What Connect's one-value converters share: no keys of their own (Connect's
    only key, ``converter.type``, is set by the worker), and the same bytes as a
    header converter as for a key or value."""

    @staticmethod
    def config_def() -> ConfigDef:
        """No keys."""
        return ConfigDef()

    def configure(self, configs: dict[str, str], is_key: bool = False) -> None:
        pass

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        return self.from_connect(topic, schema, value)


class _NumberConverter(_OneValueConverter):
    """Connect's NumberConverter: one Kafka serializer, the schema ignored."""

    _type_name: ClassVar[str]
    _format: ClassVar[struct.Struct]
    _floating: ClassVar[bool] = False

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, BYTES_LIKE):
            return as_bytes(value)
        accepted = (float, int) if self._floating else (int,)
        if isinstance(value, bool) or not isinstance(value, accepted):
            raise DataException(f"Failed to serialize to {self._type_name} (was "
                                f"{type(value).__name__}) for topic {topic!r}")
        try:
            return self._format.pack(value)
        except (struct.error, OverflowError) as e:
            raise DataException(f"Failed to serialize {value!r} to {self._type_name} for topic "
                                f"{topic!r}: {e}") from None


class ShortConverter(_NumberConverter):
    """Connect's ShortConverter: 2 bytes, big-endian."""

    _type_name = "short"
    _format = struct.Struct(">h")


class IntegerConverter(_NumberConverter):
    """Connect's IntegerConverter: 4 bytes, big-endian."""

    _type_name = "integer"
    _format = struct.Struct(">i")


class LongConverter(_NumberConverter):
    """Connect's LongConverter: 8 bytes, big-endian."""

    _type_name = "long"
    _format = struct.Struct(">q")


class FloatConverter(_NumberConverter):
    """Connect's FloatConverter: IEEE 754 single precision, big-endian."""

    _type_name = "float"
    _format = struct.Struct(">f")
    _floating = True


class DoubleConverter(_NumberConverter):
    """Connect's DoubleConverter: IEEE 754 double precision, big-endian."""

    _type_name = "double"
    _format = struct.Struct(">d")
    _floating = True


class BooleanConverter(_OneValueConverter):
    """Connect's BooleanConverter: one byte, 1 for true and 0 for false."""

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BOOLEAN:
            raise DataException(f"Invalid schema type for BooleanConverter: "
                                f"{schema.type.name} (topic {topic!r})")
        if value is None:
            return None
        if value is True or value is False:
            return b"\x01" if value else b"\x00"
        if isinstance(value, BYTES_LIKE):
            return as_bytes(value)
        raise DataException(f"BooleanConverter is not compatible with objects of type "
                            f"{type(value).__name__} (topic {topic!r})")


class ByteArrayConverter(_OneValueConverter):
    """Connect's ByteArrayConverter: bytes, bytearray or memoryview as they are."""

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not SchemaType.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: "
                                f"{schema.type.name} (topic {topic!r})")
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, BYTES_LIKE):
            return bytes(value)
        raise DataException(f"ByteArrayConverter is not compatible with objects of type "
                            f"{type(value).__name__} (topic {topic!r})")
