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

from collections.abc import Mapping, Sequence
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


@dataclass(slots=True, eq=False)
class RecordBatch:
    """Many records for one topic, in columns: the bulk form of :class:`SourceRecord`.

    ``poll()`` may return ``RecordBatch`` items among its ``SourceRecord`` items,
    in any mix; the framework sends them in the order returned. Row ``i`` is the
    record with value ``values[i]``, key ``keys[i]`` (None: every key is None),
    timestamp ``timestamps[i]`` and headers ``headers[i]``; ``partition``,
    ``key_schema`` and ``value_schema`` apply to every row. Keys and values are
    Connect data as in a ``SourceRecord``, or ``bytes`` already serialized (which
    the built-in converters pass through); the converters encode each column in
    one call where they can, and the rows reach ``produce`` with no per-row
    object in between. That is what makes it faster.

    Invariants (checked when the batch is sent; a violation fails the task with
    a :class:`~connect_runtime.errors.DataException` naming the topic):

    * Every column given has ``len(values)`` entries.
    * One source partition per batch (``source_partition``), or None for rows
      that carry no offset. A poll with rows of several source partitions
      returns one batch per partition.
    * Offsets per batch *or* per row, not both: ``source_offset`` is where to
      resume after the batch's last row; ``source_offsets[i]`` is where to resume
      after row ``i``. Either needs ``source_partition``.
    * A batch is never split across transactions: the ``poll`` and ``interval``
      boundaries fall between polls, and a connector-defined boundary names the
      whole batch (``TransactionContext.commit_transaction(batch)``). So the
      offset committed with it is always that of its last row.
    * An empty batch (no values) sends nothing and commits no offset; naming it
      in ``commit_transaction`` ends the transaction after the items before it.
    * Do not mutate a batch or its columns after returning it from ``poll()``.

    Where the framework needs one object per row (transforms, ``errors.*``
    other than the defaults, a task overriding ``commit_record``, the
    at-least-once loop's delivery tracking), it expands the batch into
    ``SourceRecord`` objects: row ``i`` carries ``source_offsets[i]``, or, with a
    per-batch offset, ``source_offset`` on every row (a per-batch offset becomes
    committable only with the batch's last row). Those paths cost what
    ``SourceRecord`` objects cost.
    """

    topic: str
    values: Sequence[Any]
    keys: Sequence[Any] | None = None
    source_partition: SourcePartition | None = None
    source_offset: SourceOffset | None = None
    source_offsets: Sequence[SourceOffset | None] | None = None
    partition: int | None = None
    timestamps: Sequence[int | None] | None = None
    headers: Sequence[Headers | None] | None = None
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    def __len__(self) -> int:
        return len(self.values)

    @property
    def last_offset(self) -> SourceOffset | None:
        """The offset after the batch's last row: what committing the batch stores."""
        if self.source_offsets is not None:
            return self.source_offsets[-1] if self.source_offsets else None
        return self.source_offset


@dataclass(slots=True, frozen=True)
class RecordMetadata:
    """Where a committed record landed in Kafka."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
