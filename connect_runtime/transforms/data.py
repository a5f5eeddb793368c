"""Helpers on Connect data the transforms share: schema caches, struct copies, time values.

Python values of Connect's logical types (see :mod:`connect_runtime.api.schema`):
Date is ``datetime.date``, Time ``datetime.time``, Timestamp
``datetime.datetime`` (naive means UTC). Connect computes with epoch
milliseconds; :func:`to_millis` and :func:`from_millis` convert, always in UTC
and truncating below the millisecond, as Connect's ``java.util.Date`` does.
Timestamps the transforms make are timezone-aware (UTC).
"""

from __future__ import annotations

import datetime
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

from connect_runtime.api.schema import DATE, TIME, TIMESTAMP, Field, Schema, Struct

MILLIS_PER_DAY = 86_400_000
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_EPOCH_DATE = EPOCH.date()

# Connect keeps 16 updated schemas per transform (an LRU cache): a source emits a
# handful of schemas, and an unbounded cache would grow with every schema change.
SCHEMA_CACHE_SIZE = 16


class SchemaCache:
    """Connect's per-transform ``LRUCache<Schema, Schema>`` of updated schemas.

    ``get(schema, build)`` returns the schema built for an equal ``schema`` before,
    or builds, keeps and returns a new one. The last schema asked for is
    remembered by identity, so a task that reuses one Schema object (the usual
    case) pays no hashing per record.
    """

    def __init__(self, size: int = SCHEMA_CACHE_SIZE) -> None:
        self._size = size
        self._entries: OrderedDict[Schema, Schema] = OrderedDict()
        self._last: tuple[Schema, Schema] | None = None

    def get(self, schema: Schema, build: Callable[[Schema], Schema]) -> Schema:
        last = self._last
        if last is not None and last[0] is schema:
            return last[1]
        found = self._entries.get(schema)
        if found is None:
            found = build(schema)
            self._entries[schema] = found
            if len(self._entries) > self._size:
                self._entries.popitem(last=False)
        else:
            self._entries.move_to_end(schema)
        self._last = (schema, found)
        return found

    def clear(self) -> None:
        self._entries.clear()
        self._last = None


def struct_like(schema: Schema, fields: Iterable[tuple[str, Schema]]) -> Schema:
    """A new STRUCT schema with ``fields`` and the name, version, doc and parameters
    of ``schema`` (Connect's ``SchemaUtil.copySchemaBasics``: neither optional nor
    a default is copied)."""
    return Schema.struct(list(fields), name=schema.name, version=schema.version,
                         doc=schema.doc, parameters=schema.parameters)


def field_value(struct: Struct, name: str, with_default: bool) -> Any:
    """``struct``'s value for ``name``; with ``with_default``, a null value reads as the
    field's default (Connect's ``replace.null.with.default``)."""
    return struct.get(name) if with_default else struct[name]


def values_of(struct: Struct, fields: Iterable[Field], with_default: bool) -> dict[str, Any]:
    """Name -> value of ``fields`` of ``struct`` (see :func:`field_value`)."""
    return {f.name: field_value(struct, f.name, with_default) for f in fields}


def to_millis(value: datetime.date | datetime.time) -> int:
    """Epoch ms of a Date (midnight UTC), a Time (ms since midnight) or a Timestamp."""
    if isinstance(value, datetime.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=datetime.UTC)
        delta = moment - EPOCH
        return delta.days * MILLIS_PER_DAY + delta.seconds * 1000 + delta.microseconds // 1000
    if isinstance(value, datetime.date):
        return (value - _EPOCH_DATE).days * MILLIS_PER_DAY
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 \
        + value.microsecond // 1000


def from_millis(millis: int, logical: str) -> datetime.date | datetime.time:
    """The Python value of logical type ``logical`` (DATE, TIME, TIMESTAMP) at ``millis``.

    Like Connect's translators: a Date is the UTC day of the instant, a Time its
    time of day in UTC, a Timestamp the instant (timezone-aware, UTC).
    """
    moment = EPOCH + datetime.timedelta(milliseconds=millis)
    if logical == DATE:
        return moment.date()
    if logical == TIME:
        return moment.time().replace(tzinfo=None)
    if logical == TIMESTAMP:
        return moment
    raise ValueError(f"not a time logical type: {logical}")
