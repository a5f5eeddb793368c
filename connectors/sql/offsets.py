"""Source partitions and offsets, in Confluent JDBC source's shapes (pure).

* Partition of a table: ``{"protocol": "1", "table": "<table>"}``, the table
  schema-qualified as Confluent's offset protocol 1 writes it (``public.orders``
  on PostgreSQL, ``orders`` on SQLite). Of the query: ``{"query": "query"}``
  (Confluent's constant: the partition does not change when the text does).
* Offset: ``{"incrementing": <int>}``, ``{"timestamp": <ms since the epoch>,
  "timestamp_nanos": <ns within the second>}``, or all three for
  timestamp+incrementing. ``{}`` means "from the beginning" (Confluent writes
  the same for an offset with neither part).
* An offset is a *resume point*: the task reads what comes strictly after it.
  Every record carries the resume point in effect if the transaction ended
  right after it (see ``progress.py`` for timestamp mode, where that is not
  always the record's own position).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime import ConfigException, InvalidOffsetException

from .dialect import epoch_ms_and_nanos, from_epoch

PROTOCOL_KEY = "protocol"
PROTOCOL_V1 = "1"
TABLE_KEY = "table"
QUERY_KEY = "query"
QUERY_VALUE = "query"
INCREMENTING = "incrementing"
TIMESTAMP = "timestamp"
TIMESTAMP_NANOS = "timestamp_nanos"
_OFFSET_KEYS = frozenset({INCREMENTING, TIMESTAMP, TIMESTAMP_NANOS})


def table_partition(table: str) -> dict[str, str]:
    return {PROTOCOL_KEY: PROTOCOL_V1, TABLE_KEY: table}


def query_partition() -> dict[str, str]:
    return {QUERY_KEY: QUERY_VALUE}


@dataclass(frozen=True)
class Offset:
    """A resume point: the last timestamp (naive UTC) and/or incrementing value read."""

    timestamp: datetime.datetime | None = None
    incrementing: int | None = None

    def to_map(self) -> dict[str, int]:
        out: dict[str, int] = {}
        if self.incrementing is not None:
            out[INCREMENTING] = self.incrementing
        if self.timestamp is not None:
            out[TIMESTAMP], out[TIMESTAMP_NANOS] = epoch_ms_and_nanos(self.timestamp)
        return out

    @classmethod
    def from_map(cls, offset: Mapping[str, Any] | None, where: str) -> Offset:
        """Parse a committed offset; InvalidOffsetException naming ``where`` if malformed."""
        problem = offset_problem(offset)
        if problem:
            raise InvalidOffsetException(f"{where}: committed offset {dict(offset or {})!r} "
                                         f"{problem}")
        if not offset:
            return cls()
        ms = offset.get(TIMESTAMP)
        return cls(None if ms is None else from_epoch(ms, offset.get(TIMESTAMP_NANOS)),
                   offset.get(INCREMENTING))


def offset_problem(offset: Mapping[str, Any] | None) -> str | None:
    """Why ``offset`` is not one this connector wrote, or None if it is fine."""
    if offset is None:
        return None
    unknown = set(offset) - _OFFSET_KEYS
    if unknown:
        return (f"has unknown keys {sorted(unknown)}; expected {INCREMENTING!r}, "
                f"{TIMESTAMP!r} and {TIMESTAMP_NANOS!r}")
    for key in _OFFSET_KEYS & set(offset):
        value = offset[key]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"has {key}={value!r}; expected an integer"
    if TIMESTAMP_NANOS in offset and TIMESTAMP not in offset:
        return f"has {TIMESTAMP_NANOS!r} without {TIMESTAMP!r}"
    nanos = offset.get(TIMESTAMP_NANOS)
    if nanos is not None and not 0 <= nanos < 1_000_000_000:
        return f"has {TIMESTAMP_NANOS}={nanos}; expected 0..999999999"
    return None


def check_altered_offsets(pairs: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                          ) -> None:
    """KIP-875: refuse partitions or offsets this connector could not resume from."""
    for partition, offset in pairs:
        if dict(partition) != query_partition() and not (
                partition.get(PROTOCOL_KEY) == PROTOCOL_V1
                and isinstance(partition.get(TABLE_KEY), str) and len(partition) == 2):
            raise ConfigException(
                f"The partition {dict(partition)} is not one of this connector's: expected "
                f'{{"protocol": "1", "table": "<table>"}} or {{"query": "query"}}')
        problem = offset_problem(offset)
        if problem:
            raise ConfigException(f"The offset {dict(offset or {})} of {dict(partition)} "
                                  f"{problem}")
