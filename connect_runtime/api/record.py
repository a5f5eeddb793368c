"""Records a source task hands to the framework, and what it gets back after commit.

Invariants a connector author must keep (the framework checks them when it
writes offsets and fails the task with :class:`InvalidOffsetException` if not):

* ``source_partition`` and ``source_offset`` are flat ``dict[str, primitive]``
  where primitive is ``str | int | float | bool | None``. They are stored as JSON
  in the offsets topic, keyed by ``[connector, source_partition]``.
* ``source_offset`` points at the *next* thing to read: after a restart the task
  is handed back exactly this dict and must resume from it without re-emitting the
  record it came with.
* Do not mutate a record, its partition or its offset after returning it from
  ``poll()``: the framework holds references until the transaction commits.
* ``partition`` is the Kafka partition (None lets the producer choose); ``timestamp``
  is epoch milliseconds (None: the producer's time).
* ``key_schema`` / ``value_schema`` are optional Connect schemas
  (:mod:`~connect_runtime.api.schema`); when set, the key or value must be a
  valid value of it. A value that is a dataclass instance needs no schema: the
  framework derives one with :func:`~connect_runtime.api.schema.schema_of`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from connect_runtime.api.schema import Schema

Primitive = str | int | float | bool | None
SourcePartition = Mapping[str, Primitive]
SourceOffset = Mapping[str, Primitive]
Headers = list[tuple[str, Any]]
"""(key, value) pairs. ``bytes`` and None are written as is; any other value goes
through the connector's header converter (default: Connect's SimpleHeaderConverter,
which writes a ``str`` as its UTF-8 bytes)."""


@dataclass(slots=True, eq=False)
class SourceRecord:
    """One record for Kafka, tagged with where it came from in the source system.

    ``eq=False``: records compare by identity, because ``TransactionContext``
    boundaries name a specific record, not an equal one.
    """

    source_partition: SourcePartition | None
    source_offset: SourceOffset | None
    topic: str
    value: Any = None
    key: Any = None
    partition: int | None = None
    headers: Headers | None = None
    timestamp: int | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None


@dataclass(slots=True, frozen=True)
class RecordMetadata:
    """Where a committed record landed in Kafka."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
