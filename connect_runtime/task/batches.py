"""What a poll returned, as the task loops consume it: records and record batches.

``SourceTask.poll`` returns a list (here: the *polled* list) whose items are
:class:`~connect_runtime.api.record.SourceRecord` or
:class:`~connect_runtime.api.record.RecordBatch`, in any mix. "Batch" means a
``RecordBatch`` and nothing else. Both loops hand a polled list to
:func:`dispatch`, which gives each run of records and each checked batch to
the loop's own sender for it, in order; where a loop needs one object per row
it expands a batch (:func:`expand`). Everything here is pure: no Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from connect_runtime.api.record import RecordBatch, SourceRecord
from connect_runtime.errors import DataException

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceOffset

Item = SourceRecord | RecordBatch
Segment = list[SourceRecord] | RecordBatch


def has_batches(items: Sequence[Any]) -> bool:
    """True if ``items`` holds anything but ``SourceRecord`` objects (a C-level scan:
    this runs once per poll on the records path too)."""
    return len(set(map(type, items))) != 1 or type(items[0]) is not SourceRecord


def dispatch(polled: Sequence[Any], label: str, *,
             records: Callable[[Sequence[SourceRecord]], int],
             record_batch: Callable[[RecordBatch], int]) -> int:
    """Send one non-empty polled list, in order: ``records(run)`` for each run of
    consecutive records (the whole list when it holds only records: the usual
    case, found by one C-level scan), ``record_batch(batch)`` for each batch once
    it passed :func:`check`. Returns the sum of what they return: the records
    sent, a batch counting its rows.

    Raises DataException before anything is sent if an item is neither a record
    nor a batch, and when its turn comes for a batch that fails :func:`check`
    (what came before it was sent).
    """
    if not has_batches(polled):
        return records(polled)
    count = 0
    for segment in segments(polled, label):
        if isinstance(segment, RecordBatch):
            check(segment, label)
            count += record_batch(segment)
        else:
            count += records(segment)
    return count


def segments(items: Sequence[Any], label: str) -> list[Segment]:
    """``items`` as runs of consecutive records and single batches, in order.

    Raises DataException naming the item if one is neither a record nor a batch.
    """
    out: list[Segment] = []
    run: list[SourceRecord] = []
    for index, item in enumerate(items):
        if isinstance(item, SourceRecord):
            run.append(item)
            continue
        if not isinstance(item, RecordBatch):
            raise DataException(
                f"Task {label}: poll() returned a {type(item).__name__} at index {index} of "
                "its list; poll returns SourceRecord and RecordBatch items")
        if run:
            out.append(run)
            run = []
        out.append(item)
    if run:
        out.append(run)
    return out


def record_count(items: Sequence[Any]) -> int:
    """Records in a polled list: a batch counts its rows."""
    return sum(len(item) if type(item) is RecordBatch else 1 for item in items)


def check(batch: RecordBatch, label: str) -> None:
    """The invariants of :class:`RecordBatch` that sending relies on; DataException
    naming the task, the topic and the column otherwise."""
    topic = batch.topic
    values = batch.values
    if not isinstance(values, Sequence) or isinstance(values, str | bytes | bytearray):
        raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} whose "
                            f"values are a {type(values).__name__}; a column is a list (one "
                            "payload is RecordBatch(topic, [payload]))")
    n = len(values)
    for name in ("keys", "source_offsets", "timestamps", "headers"):
        column = getattr(batch, name)
        if column is None:
            continue
        if not isinstance(column, Sequence) or isinstance(column, str | bytes | bytearray):
            raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} whose "
                                f"{name} are a {type(column).__name__}; a column is a list")
        if len(column) != n:
            raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} with "
                                f"{n} values but {len(column)} {name}; every column has one "
                                "entry per row")
    if batch.source_offset is not None and batch.source_offsets is not None:
        raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} with both "
                            "source_offset (per batch) and source_offsets (per row); give one")
    if batch.source_partition is None and (batch.source_offset is not None
                                           or batch.source_offsets is not None):
        raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} with "
                            "source offsets but no source_partition; an offset belongs to a "
                            "source partition")
    if batch.partition is not None and (type(batch.partition) is not int or batch.partition < 0):
        raise DataException(f"Task {label} returned a RecordBatch for topic {topic!r} with "
                            f"Kafka partition {batch.partition!r}; a partition is an int >= 0 "
                            "or None")


def expand(batch: RecordBatch) -> list[SourceRecord]:
    """One :class:`SourceRecord` per row of a checked ``batch`` (see its docstring):
    row ``i`` carries ``source_offsets[i]``, or the per-batch ``source_offset``."""
    n = len(batch.values)
    keys = batch.keys if batch.keys is not None else [None] * n
    offsets: Sequence[SourceOffset | None] = (batch.source_offsets
                                              if batch.source_offsets is not None
                                              else [batch.source_offset] * n)
    timestamps = batch.timestamps if batch.timestamps is not None else [None] * n
    headers = batch.headers if batch.headers is not None else [None] * n
    part, topic, partition = batch.source_partition, batch.topic, batch.partition
    key_schema, value_schema = batch.key_schema, batch.value_schema
    return [SourceRecord(part, offset, topic, value, key, partition, header, ts,
                         key_schema, value_schema)
            for value, key, offset, ts, header in zip(batch.values, keys, offsets, timestamps,
                                                     headers, strict=True)]


def row(batch: RecordBatch, i: int) -> SourceRecord:
    """Row ``i`` of a checked ``batch`` as :func:`expand` makes it, alone."""
    return SourceRecord(
        batch.source_partition,
        batch.source_offsets[i] if batch.source_offsets is not None else batch.source_offset,
        batch.topic, batch.values[i], None if batch.keys is None else batch.keys[i],
        batch.partition, None if batch.headers is None else batch.headers[i],
        None if batch.timestamps is None else batch.timestamps[i],
        batch.key_schema, batch.value_schema)


def offset_carrier(batch: RecordBatch) -> SourceRecord:
    """A value-less record carrying the batch's source partition and last offset:
    what offset tracking needs of a batch that is sent whole."""
    return SourceRecord(batch.source_partition, batch.last_offset, batch.topic)
