"""What every converter is: the two protocols, the fast-encoder hook, shared helpers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from connect_runtime.api.schema import Schema

BYTES_LIKE = (bytes, bytearray, memoryview)

Encoder = Callable[[Any], bytes]


@runtime_checkable
class Converter(Protocol):
    """Serializes record keys or values. Must have a no-argument constructor."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        """``configs`` is the converter's sub-config, e.g. ``schemas.enable``."""
        ...

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Bytes for Kafka, or None for a null key/value. ``schema`` is the record's
        key or value schema (None: schemaless); ``value`` is valid for it."""
        ...


@runtime_checkable
class HeaderConverter(Protocol):
    """Serializes record header values (Connect's ``HeaderConverter``). Must have a
    no-argument constructor.

    The built-in converters are header converters too (as in Connect); their
    ``configure`` takes ``is_key`` with a default, so it serves both protocols.
    """

    def configure(self, configs: dict[str, str]) -> None:
        """``configs`` is the ``header.converter.`` sub-config, prefix stripped."""
        ...

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        """The header value's bytes, or None for a null header value."""
        ...


def fast_encoder(converter: Any) -> Encoder | None:
    """A function equal to ``converter.from_connect`` for the schemaless values it accepts.

    Internal to the task loop's hot path, where a Python call per record costs
    as much as the encoding itself; built-in converters offer one. It returns
    what ``from_connect(topic, None, value)`` would for every non-None value it
    accepts and raises for every value it does not (bytes to pass through, a
    dataclass to derive a schema for, a value to reject), so the caller falls
    back to ``from_connect``. None for converters without one.
    """
    offer = getattr(converter, "_fast_encoder", None)
    return offer() if callable(offer) else None


def as_bytes(value: Any) -> bytes:
    """A bytes-like value as ``bytes`` (the same object if it already is)."""
    return value if type(value) is bytes else bytes(value)
