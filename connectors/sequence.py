"""A source of numbered records, for tests, demos and benchmarks.

The connector splits ``partitions`` source partitions ``{"sequence.partition": k}``
(k = 0..P-1; P = ``partitions``, or ``tasks.max`` when 0) round-robin over at most
``tasks.max`` tasks. Each task emits, per partition, the records seq = 0, 1, 2, ...:

* key ``str(k)``; value ``{"partition": k, "seq": n, "task": task_id, "pad": "x..."}``
  with the pad sized so the JSON value is about ``record.size.bytes``;
* source offset ``{"seq": n + 1}``: it points at the next record, so a restarted
  task resumes exactly after the last committed record;
* timestamp: when the batch was created (epoch ms).

A poll returns :class:`~connect_runtime.api.record.RecordBatch` columns, one per
run of one partition's records, each with the seq after its last row as its
offset; with ``emit.batches=false``, one ``SourceRecord`` per record, each with
its own offset (the same records reach Kafka; the benchmarks compare the two).

A verifier reading the topic with ``read_committed`` can therefore check that
every seq of every partition appears exactly once (up to ``max.records``).

Connector-defined transactions (``transaction.boundary=connector``): records of
partition k are grouped by ``g = seq // commit.every.records``. Each group is one
transaction holding only that partition's records; after the group's last record
(or the record at ``max.records - 1``) the task asks to commit it, or to abort it
when ``abort.every.transactions = M > 0`` and ``(g + 1) % M == 0``. With
``empty.commits=true`` the poll after each such request returns nothing and asks
to commit again: a commit with nothing written, which the framework drops. So whether a
seq is visible is a pure function of the seq: :func:`expected_aborted`. This
relies on the framework not committing a half-finished connector-defined
transaction when the task stops (Kafka Connect discards it), so a restart
resumes at a group boundary.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from connect_runtime import (
    ConfigDef,
    ConfigException,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    Importance,
    InvalidOffsetException,
    NonEmptyString,
    Range,
    RecordBatch,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TransactionContext,
    Type,
    __version__,
)

TOPIC = "topic"
PARTITIONS = "partitions"
BATCH_SIZE = "batch.size"
RECORD_SIZE_BYTES = "record.size.bytes"
RATE_PER_SEC = "rate.per.sec"
MAX_RECORDS = "max.records"
COMMIT_EVERY_RECORDS = "commit.every.records"
ABORT_EVERY_TRANSACTIONS = "abort.every.transactions"
POLL_IDLE_MS = "poll.idle.ms"
EMIT_BATCHES = "emit.batches"
EMPTY_COMMITS = "empty.commits"

TASK_PARTITIONS = "sequence.partitions"
TASK_ID = "task.id"
PARTITION_FIELD = "sequence.partition"
OFFSET_FIELD = "seq"

CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC, Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            documentation="Topic to write the records to.")
    .define(PARTITIONS, Type.INT, 0, Range.at_least(0), Importance.MEDIUM,
            "Number of source partitions; 0 means one per task (tasks.max).")
    .define(BATCH_SIZE, Type.INT, 1000, Range.at_least(1), Importance.MEDIUM,
            "Maximum records returned by one poll.")
    .define(RECORD_SIZE_BYTES, Type.INT, 100, Range.at_least(0), Importance.LOW,
            "Approximate size of a record value as JSON, reached with a padding string.")
    .define(RATE_PER_SEC, Type.DOUBLE, 0.0, Range.at_least(0), Importance.MEDIUM,
            "Maximum records per second per task; 0 means unlimited.")
    .define(MAX_RECORDS, Type.LONG, 0, Range.at_least(0), Importance.MEDIUM,
            "Records per source partition after which it stops; 0 means unlimited.")
    .define(COMMIT_EVERY_RECORDS, Type.INT, 1000, Range.at_least(1), Importance.LOW,
            "With transaction.boundary=connector: records per partition per transaction.")
    .define(ABORT_EVERY_TRANSACTIONS, Type.INT, 0, Range.at_least(0), Importance.LOW,
            "With transaction.boundary=connector: abort every M-th transaction of each "
            "partition; 0 means never.")
    .define(POLL_IDLE_MS, Type.INT, 100, Range.at_least(1), Importance.LOW,
            "Longest a poll blocks when there is nothing to emit (rate limit or max.records).")
    .define(EMIT_BATCHES, Type.BOOLEAN, True, importance=Importance.LOW,
            documentation="Return RecordBatch columns (true) or one SourceRecord per record "
            "(false, each with its own offset); the same records reach Kafka either way.")
    .define(EMPTY_COMMITS, Type.BOOLEAN, False, importance=Importance.LOW,
            documentation="With transaction.boundary=connector: after each transaction the "
            "task ends, one poll returns nothing and calls commit_transaction() (a commit with "
            "nothing written, which the framework drops).")
)

_TASK_CONFIG_DEF = CONFIG_DEF.merged(
    ConfigDef()
    .define(TASK_PARTITIONS, Type.LIST, documentation="Source partitions of this task.")
    .define(TASK_ID, Type.INT, validator=Range.at_least(0), documentation="Task number.")
)


def expected_aborted(seq: int, commit_every: int, abort_every: int) -> bool:
    """Whether record ``seq`` of a partition is in an aborted transaction.

    True iff ``abort_every > 0`` and ``(seq // commit_every + 1) % abort_every == 0``.
    Only meaningful with ``transaction.boundary=connector``.
    """
    return abort_every > 0 and (seq // commit_every + 1) % abort_every == 0


def source_partition(k: int) -> dict[str, int]:
    return {PARTITION_FIELD: k}


def assign_partitions(num_partitions: int, max_tasks: int) -> list[list[int]]:
    """Round-robin: task i gets k = i, i + T, i + 2T, ... with T = min(max_tasks, P).

    No task is created without a partition.
    """
    tasks = min(max_tasks, num_partitions)
    return [list(range(i, num_partitions, tasks)) for i in range(tasks)]


class SequenceSourceConnector(SourceConnector):
    """Hands out source partitions of a numbered sequence (see the module docstring)."""

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._partitions = 0

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        self._partitions = CONFIG_DEF.parse(config)[PARTITIONS]
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return SequenceSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One config per task: the connector config plus its partitions and task id."""
        assignment = assign_partitions(self._partitions or max_tasks, max_tasks)
        return [
            {**self._config, TASK_PARTITIONS: ",".join(map(str, ks)), TASK_ID: str(i)}
            for i, ks in enumerate(assignment)
        ]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED

    def alter_offsets(self, config: dict[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                      ) -> bool:
        """Accept ``{"sequence.partition": k}`` -> ``{"seq": next seq >= 0}`` (or None).

        The next seq lives only in Kafka, so the change is complete: True.
        """
        for partition, offset in offsets:
            k = partition.get(PARTITION_FIELD)
            if isinstance(k, bool) or not isinstance(k, int) or k < 0:
                raise ConfigException(f"The partition {dict(partition)} must contain the key "
                                      f"'{PARTITION_FIELD}' with an integer >= 0")
            seq = None if offset is None else offset.get(OFFSET_FIELD)
            if offset is not None and (isinstance(seq, bool) or not isinstance(seq, int)
                                       or seq < 0):
                raise ConfigException(f"The offset {dict(offset)} of partition {k} must contain "
                                      f"the key '{OFFSET_FIELD}' with an integer >= 0")
        return True


class _Partition:
    """Per-partition state; ``next`` is the seq of the next record to emit."""

    __slots__ = ("k", "key", "next", "source_partition")

    def __init__(self, k: int, next_seq: int) -> None:
        self.k = k
        self.key = str(k)
        self.source_partition = source_partition(k)
        self.next = next_seq


class SequenceSourceTask(SourceTask):
    """Emits the sequence of its partitions; ``stop`` may come from another thread."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._parts: list[_Partition] = []
        self._cursor = 0
        self._txn: TransactionContext | None = None

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        values = _TASK_CONFIG_DEF.parse(config)
        self._topic: str = values[TOPIC]
        self._batch_size: int = values[BATCH_SIZE]
        self._rate: float = values[RATE_PER_SEC]
        self._max_records: int = values[MAX_RECORDS]
        self._commit_every: int = values[COMMIT_EVERY_RECORDS]
        self._abort_every: int = values[ABORT_EVERY_TRANSACTIONS]
        self._idle_s: float = values[POLL_IDLE_MS] / 1000
        self._batches: bool = values[EMIT_BATCHES]
        self._empty_commits: bool = values[EMPTY_COMMITS]
        self._ended = False  # a transaction request was made since the last empty commit
        self._task_id: int = values[TASK_ID]
        self._parts = self._resume(_partition_numbers(values[TASK_PARTITIONS]))
        self._pad = "x" * max(0, values[RECORD_SIZE_BYTES] - self._value_overhead())
        self._txn = self.context.transaction_context()
        self._cursor = 0
        self._rate_t = time.monotonic()

    def _value_overhead(self) -> int:
        # Compact JSON of a value with an empty pad, at seq 0: what the pad must add to.
        k = max((p.k for p in self._parts), default=0)
        return len(f'{{"partition":{k},"seq":0,"task":{self._task_id},"pad":""}}')

    def _resume(self, numbers: list[int]) -> list[_Partition]:
        """Partition states starting at the committed offsets (missing -> seq 0)."""
        reader = self.context.offset_storage_reader
        committed: dict[Any, Any] = {}
        for part, offset in reader.offsets([source_partition(k) for k in numbers]):
            committed[part.get(PARTITION_FIELD)] = offset
        states = []
        for k in numbers:
            offset = committed.get(k)
            seq = 0 if offset is None else offset.get(OFFSET_FIELD)
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
                raise InvalidOffsetException(
                    f"Source partition {source_partition(k)} has committed offset {offset!r}; "
                    f"expected {{{OFFSET_FIELD!r}: <int >= 0>}}")
            states.append(_Partition(k, seq))
        return states

    def poll(self) -> list[SourceRecord | RecordBatch] | None:
        if self._stopping.is_set():
            return None
        if self._ended and self._txn is not None:
            self._ended = False
            self._txn.commit_transaction()  # nothing written since the last request
            return None
        if self._current() is None:  # every partition reached max.records
            self._stopping.wait(self._idle_s)
            return None
        budget = self._budget()
        if budget < 1:
            return None
        batch: list[SourceRecord | RecordBatch] = []
        emitted = 0
        now_ms = time.time_ns() // 1_000_000
        while emitted < budget:
            part = self._current()
            if part is None:
                break
            before = part.next
            boundary = self._emit(part, budget - emitted, batch, now_ms)
            if boundary or self._txn is None:
                self._cursor = (self._cursor + 1) % len(self._parts)
            if part.next == before:
                break
            emitted += part.next - before
            # Only when the batch's last record ended a transaction is nothing open
            # after this poll: an empty commit then commits nothing.
            self._ended = boundary and self._empty_commits
        if self._rate > 0:
            self._rate_t += emitted / self._rate
        return batch or None

    def _current(self) -> _Partition | None:
        """The partition at the cursor, skipping exhausted ones (moves the cursor)."""
        for _ in range(len(self._parts)):
            part = self._parts[self._cursor]
            if not self._max_records or part.next < self._max_records:
                return part
            self._cursor = (self._cursor + 1) % len(self._parts)
        return None

    def _budget(self) -> int:
        """Records this poll may emit: ``batch.size``, or fewer under ``rate.per.sec``.

        Waits (interruptibly) for a full batch's worth of time, at most
        ``poll.idle.ms``; catch-up after a stall is capped at one second's worth.
        """
        if self._rate <= 0:
            return self._batch_size
        now = time.monotonic()
        self._rate_t = max(self._rate_t, now - 1.0)
        allowed = (now - self._rate_t) * self._rate
        if allowed < self._batch_size:
            wait = (self._batch_size - allowed) / self._rate
            if self._stopping.wait(min(wait, self._idle_s)):
                return 0
            allowed = (time.monotonic() - self._rate_t) * self._rate
        # The epsilon keeps float error from turning "exactly one token" into zero.
        return min(self._batch_size, int(allowed + 1e-9))

    def _emit(self, part: _Partition, n: int, batch: list[SourceRecord | RecordBatch],
              ts: int) -> bool:
        """Append up to ``n`` records of ``part`` as one RecordBatch (its offset: the
        seq after its last row); True if they end a connector transaction.

        With a transaction context a run never crosses a group boundary, so each
        transaction holds exactly one group of one partition.
        """
        start = part.next
        end = start + n
        if self._max_records and end > self._max_records:
            end = self._max_records
        txn = self._txn
        if txn is not None:
            end = min(end, (start // self._commit_every + 1) * self._commit_every)
        if end <= start:
            return False
        k, task, pad, n = part.k, self._task_id, self._pad, end - start
        last: SourceRecord | RecordBatch
        if self._batches:
            last = RecordBatch(self._topic,
                               [{"partition": k, "seq": seq, "task": task, "pad": pad}
                                for seq in range(start, end)],
                               keys=[part.key] * n, source_partition=part.source_partition,
                               source_offset={OFFSET_FIELD: end}, timestamps=[ts] * n)
            batch.append(last)
        else:
            topic, key, spart = self._topic, part.key, part.source_partition
            # Positional: partition, offset, topic, value, key, partition, headers, timestamp.
            batch.extend([SourceRecord(spart, {OFFSET_FIELD: seq + 1}, topic,
                                       {"partition": k, "seq": seq, "task": task, "pad": pad},
                                       key, None, None, ts)
                          for seq in range(start, end)])
            last = batch[-1]
        part.next = end
        if txn is None or (end % self._commit_every and end != self._max_records):
            return False
        if expected_aborted(end - 1, self._commit_every, self._abort_every):
            txn.abort_transaction(last)
        else:
            txn.commit_transaction(last)
        return True

    def stop(self) -> None:
        self._stopping.set()


def _partition_numbers(items: list[str]) -> list[int]:
    try:
        numbers = [int(item) for item in items]
    except ValueError:
        raise ConfigException("Expected a comma separated list of partition numbers",
                              name=TASK_PARTITIONS, value=",".join(items)) from None
    if any(k < 0 for k in numbers):
        raise ConfigException("Partition numbers must be >= 0", name=TASK_PARTITIONS,
                              value=",".join(items))
    return numbers
