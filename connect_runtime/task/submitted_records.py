"""Which source offsets an at-least-once task may commit: records handed to the
producer, tracked until the broker acknowledges them.

Kafka Connect's ``SubmittedRecords``, reshaped for confluent-kafka. Invariants:

* Records are tracked per *source partition*, in the order the task polled
  them. A source partition's offset is committable only once every record of
  that partition up to and including the one carrying it is acknowledged: acks
  arrive in produce order within a Kafka partition but in any order across
  Kafka partitions, so a later record may be acknowledged before an earlier one.
* Source partitions are grouped by value (their canonical serialized key, see
  :func:`~connect_runtime.storage.offsets.format.serialize_key`), not by identity: a
  connector that builds a new, equal partition dict for every record still has
  one queue per source partition.
* Each :class:`SubmittedRecord` *is* the delivery callback of its record: one
  small slotted object per record, no closure. The callback only marks state; it
  runs on whichever thread calls ``producer.poll``/``flush`` (the task loop), and
  task code is never called from inside it.
* A delivery failure is kept (the first one) and the failed record is never
  acknowledged, so no offset of its source partition at or after it is ever
  committable. The caller fails the task.
* Records without a source partition are tracked for delivery only (they carry
  no offset to commit).

Not thread-safe: every method is called from the task loop's thread.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_runtime.api.record import RecordMetadata
from connect_runtime.storage.offsets.format import serialize_key

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

    from connect_runtime.api.record import SourceOffset, SourcePartition, SourceRecord

# Keys of partition dicts are cached by object identity (the dict is held, so its
# id cannot be reused); connectors that build a dict per record would otherwise
# grow the cache without bound, so it is dropped when it gets this big.
_KEY_CACHE_MAX = 4096


class SubmittedRecord:
    """One record handed to the producer; called as its ``on_delivery`` callback."""

    __slots__ = ("_owner", "acked", "carries", "key", "metadata", "record")

    def __init__(self, owner: SubmittedRecords, record: SourceRecord, key: bytes | None,
                 carries: bool = True) -> None:
        self._owner = owner
        self.record = record
        self.key = key  # the source partition's serialized key; None: no source partition
        # False for a row of a RecordBatch with a per-batch offset, but its last:
        # it holds its partition's queue back without making an offset committable.
        self.carries = carries
        self.acked = False
        self.metadata: RecordMetadata | None = None

    def __call__(self, err: KafkaError | None, msg: Any) -> None:
        # Runs once per record: the common case is inlined here.
        owner = self._owner
        owner.in_flight -= 1
        if err is not None:
            owner._failed(self, err, msg)
            return
        self.acked = True
        owner.acknowledged += 1
        owner.acked_topics.add(self.record.topic)
        if self.key is not None:
            owner._dirty.add(self.key)
        if owner.keep_metadata:
            owner._keep_metadata(self, msg)

    def dropped(self) -> None:
        """The record was dropped before ``produce`` (by a transform, or skipped by
        error tolerance): it counts as done, with no topic and no metadata, so its
        source offset becomes committable in order like an acknowledged one's."""
        owner = self._owner
        owner.in_flight -= 1
        self.acked = True
        if self.key is not None:
            owner._dirty.add(self.key)
        if owner.keep_metadata:
            owner._acked_for_task.append(self)


@dataclass(frozen=True)
class DeliveryFailure:
    """The first record the broker did not acknowledge, and why."""

    record: SourceRecord
    error: KafkaError
    partition: int | None  # the Kafka partition, if the producer had chosen one


class SubmittedRecords:
    """Tracks in-flight records of one task and the offsets they make committable.

    Use: :meth:`track` before ``produce``, passing the returned object as
    ``on_delivery`` (or :meth:`untrack` it if ``produce`` raises); then, after
    serving delivery reports, :meth:`advance` and :meth:`take_committable`.
    """

    def __init__(self, connector: str, keep_metadata: bool) -> None:
        self.connector = connector
        self.keep_metadata = keep_metadata
        self.in_flight = 0
        self.acknowledged = 0
        # Topics of acknowledged records since the owner last cleared the set
        # (KIP-558 active topics); the owner may clear it on the loop's thread.
        self.acked_topics: set[str] = set()
        self.failure: DeliveryFailure | None = None
        self._queues: dict[bytes, deque[SubmittedRecord]] = {}
        self._dirty: set[bytes] = set()  # queues that got an ack since the last advance()
        self._committable: dict[bytes, tuple[SourcePartition, SourceOffset | None]] = {}
        self._acked_for_task: list[SubmittedRecord] = []
        self._keys: dict[int, tuple[SourcePartition, bytes]] = {}
        # The last partition object seen, its key and queue: connectors that reuse one
        # dict per partition and emit runs of it skip every lookup.
        self._last: tuple[SourcePartition, bytes, deque[SubmittedRecord]] | None = None

    def track(self, record: SourceRecord, carries: bool = True) -> SubmittedRecord:
        """Track ``record`` as in flight and return its delivery callback.

        ``carries=False``: the record's offset is not committable on its own (a
        row of a per-batch-offset RecordBatch before the last one); it still
        holds back the offsets of its partition behind it until acknowledged.

        InvalidOffsetException (nothing tracked) if its source partition is not a
        flat dict of primitives: checked here, before anything is produced.
        """
        partition = record.source_partition
        if partition is None:
            submitted = SubmittedRecord(self, record, None)
        else:
            last = self._last
            if last is not None and last[0] is partition:
                _, key, queue = last
            else:
                key = self._key(partition)
                found = self._queues.get(key)
                queue = found if found is not None else self._queues.setdefault(key, deque())
                self._last = (partition, key, queue)
            submitted = SubmittedRecord(self, record, key, carries)
            queue.append(submitted)
        self.in_flight += 1
        return submitted

    def untrack(self, submitted: SubmittedRecord) -> None:
        """``produce`` refused the record just tracked: forget it (it will get no report)."""
        self.in_flight -= 1
        if submitted.key is not None:
            queue = self._queues.get(submitted.key)
            if queue and queue[-1] is submitted:
                queue.pop()

    def advance(self) -> None:
        """Move the acknowledged head of every queue that got acks into the committable
        offsets (latest wins); the tail behind an unacknowledged record stays."""
        if not self._dirty:
            return
        for key in self._dirty:
            queue = self._queues.get(key)
            if queue is None:
                continue
            head = None
            while queue and queue[0].acked:
                popped = queue.popleft()
                if popped.carries:
                    head = popped
            if head is not None:
                record = head.record
                assert record.source_partition is not None
                self._committable[key] = (record.source_partition, record.source_offset)
            if not queue:  # drop empty queues, or they pile up with the partitions seen
                del self._queues[key]
                if self._last is not None and self._last[2] is queue:
                    self._last = None
        self._dirty.clear()

    def take_committable(self) -> dict[bytes, tuple[SourcePartition, SourceOffset | None]]:
        """Offsets made committable since the last call: ``{key: (partition, offset)}``."""
        self.advance()
        out, self._committable = self._committable, {}
        return out

    def take_acknowledged(self) -> list[SubmittedRecord]:
        """Records acknowledged since the last call, in ack order (only with
        ``keep_metadata``; each has its :class:`RecordMetadata`)."""
        out, self._acked_for_task = self._acked_for_task, []
        return out

    def pending(self) -> int:
        """Records not yet committable: in flight, or behind one that is."""
        return sum(len(q) for q in self._queues.values())

    def _key(self, partition: SourcePartition) -> bytes:
        entry = self._keys.get(id(partition))
        if entry is not None and entry[0] is partition:
            return entry[1]
        key = serialize_key(self.connector, partition)
        if len(self._keys) >= _KEY_CACHE_MAX:
            self._keys.clear()
        self._keys[id(partition)] = (partition, key)
        return key

    def _failed(self, submitted: SubmittedRecord, err: KafkaError, msg: Any) -> None:
        if self.failure is None:
            self.failure = DeliveryFailure(
                submitted.record, err, msg.partition() if msg is not None else None)

    def _keep_metadata(self, submitted: SubmittedRecord, msg: Any) -> None:
        ts = msg.timestamp()
        submitted.metadata = RecordMetadata(
            msg.topic(), msg.partition(), msg.offset(), ts[1] if ts[0] else None)
        self._acked_for_task.append(submitted)
