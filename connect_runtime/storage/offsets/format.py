"""The offsets topic's wire format (Kafka Connect's JSON, schemas disabled).

Key ``["<connector>", {partition}]``, value ``{offset}`` or null; partitions
and offsets are flat dicts of primitives (see the package docstring).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import orjson

from connect_runtime.errors import DataException, InvalidOffsetException

Primitive = str | int | float | bool | None
OffsetMap = dict[str, Primitive]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def validate_partition_or_offset(value: object, what: str) -> None:
    """Raise InvalidOffsetException unless ``value`` is a flat ``dict[str, primitive]``.

    ``what`` is "partition" or "offset" and leads the message, which names the
    offending key and its Python type so a connector author can find it.
    """
    if not isinstance(value, Mapping):
        raise InvalidOffsetException(
            f"Source {what} must be a dict of str to str/int/float/bool/None, "
            f"but got a {type(value).__name__}: {value!r}")
    for key, item in value.items():
        if not isinstance(key, str):
            raise InvalidOffsetException(
                f"Source {what} keys must be str, but key {key!r} is a {type(key).__name__}")
        _check_primitive(what, key, item)


def _check_primitive(what: str, key: str, item: object) -> None:
    if item is None or isinstance(item, str | bool):
        return
    if isinstance(item, int):
        if not _INT64_MIN <= item <= _INT64_MAX:
            raise InvalidOffsetException(
                f"Source {what} key {key!r} holds the int {item}, outside the 64-bit range "
                f"that JSON readers (and Kafka Connect) support")
        return
    if isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidOffsetException(
                f"Source {what} key {key!r} holds the float {item}, which JSON cannot represent")
        return
    raise InvalidOffsetException(
        f"Source {what} key {key!r} holds a {type(item).__name__} ({item!r}); source "
        f"{what}s may only hold str, int, float, bool or None values")


def serialize_key(connector: str, partition: Mapping[str, Primitive]) -> bytes:
    """``["<connector>", {partition}]`` as canonical JSON (map keys sorted)."""
    validate_partition_or_offset(partition, "partition")
    return orjson.dumps([connector, dict(partition)], option=orjson.OPT_SORT_KEYS)


def serialize_value(offset: Mapping[str, Primitive] | None) -> bytes | None:
    """``{offset}`` as JSON, or None (a tombstone) for None."""
    if offset is None:
        return None
    validate_partition_or_offset(offset, "offset")
    return orjson.dumps(dict(offset))


def deserialize_key(data: bytes | None) -> tuple[str, OffsetMap]:
    """``(connector, partition)`` from a key; DataException if it is not Connect's format."""
    if data is None:
        raise DataException("Offset key is null")
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DataException(f"Offset key is not JSON: {data[:200]!r}") from e
    if not (isinstance(decoded, list) and len(decoded) == 2 and isinstance(decoded[0], str)):
        raise DataException(f"Offset key is not [connector, partition]: {data[:200]!r}")
    connector, partition = decoded
    try:
        validate_partition_or_offset(partition, "partition")
    except InvalidOffsetException as e:
        raise DataException(f"Offset key {data[:200]!r} has an invalid partition: {e}") from e
    return connector, partition


def deserialize_value(data: bytes | None) -> OffsetMap | None:
    """The offset dict, or None for a tombstone; DataException for anything else."""
    if data is None:
        return None
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise DataException(f"Offset value is not JSON: {data[:200]!r}") from e
    try:
        validate_partition_or_offset(decoded, "offset")
    except InvalidOffsetException as e:
        raise DataException(f"Offset value {data[:200]!r} is invalid: {e}") from e
    return dict(decoded)
