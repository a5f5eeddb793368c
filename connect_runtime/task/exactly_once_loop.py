"""The exactly-once source task loop (KIP-618), run inside one Spark task.

The commit path, in order; every step of one transaction shares one deadline
(``transaction.timeout.ms`` of the task producer)::

    1. begin        producer.begin_transaction(), lazily, before the first write
    2. produce      each converted record, in poll order
    3. offsets      the latest source offset per source partition, to the
                    connector's offsets topic, with the same producer
    4. commit       producer.commit_transaction()
    5. commit_record(record, metadata) for each record of the transaction, in order
    6. commit()     once per transaction

Records and their offsets become visible to ``read_committed`` consumers
together or not at all. When the connector asks to abort (``transaction.boundary
=connector``), the records are aborted and, as in Kafka Connect, their offsets
are committed at once in an offsets-only transaction, so the task is not handed
those records again.

On stop (and pause), ``poll`` and ``interval`` boundaries commit what was
polled; a connector-defined transaction is committed only if the connector
asked, otherwise it is aborted on stop (left open on pause) and its records are
polled again after a restart, since their offsets never committed.

Rewinding (``transaction.boundary=connector`` only): when the task calls
``TransactionContext.rewind_transaction()``, or when a poll returns nothing while
a transaction has been open for ``IDLE_REWIND_FRACTION`` of
``transaction.timeout.ms`` (the broker would abort it at the full timeout and
the task would fail), the loop aborts the open transaction without sending what
that poll returned, commits none of its offsets, calls neither ``commit_record``
nor ``commit`` for its records, and returns REWOUND. The slot then stops the
task and starts a new instance, which reads the last committed offsets
(:func:`connect_runtime.task.slot.run_task`).

Failure rules: an exception from the task, a converter or the producer aborts
the open transaction and fails the task; a fenced producer means a newer
generation owns this task, so the loop stops quietly (outcome FENCED).

The authors' test kit (:class:`connect_runtime.testing.TaskRunner`) follows
this sequencing without Kafka; change both together
(``tests/task/test_testing_kit_vs_loop.py`` compares them).
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self

from connect_runtime.api.record import RecordBatch
from connect_runtime.errors import (
    ConnectError,
    KafkaClientError,
    ProducerFencedError,
    translate_kafka_error,
)
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.storage.offsets.format import (
    serialize_key,
    serialize_value,
    validate_partition_or_offset,
)
from connect_runtime.task.batches import dispatch, expand, offset_carrier, record_count
from connect_runtime.task.boundaries import BoundaryPolicy, Decision
from connect_runtime.task.loop import LoopDeps, Outcome, TaskLoop
from connect_runtime.task.stall_watch import COMMIT

if TYPE_CHECKING:
    from connect_runtime.api.record import RecordMetadata, SourceRecord
    from connect_runtime.task.startup import StartedTask

log = logging.getLogger(__name__)
_source_partition = operator.attrgetter("source_partition")


def _as_fenced(error: BaseException) -> ProducerFencedError | None:
    """librdkafka reports fencing from whichever call meets it first (``poll``,
    ``produce``, ``commit_transaction``); recognise it wherever it surfaces."""
    from confluent_kafka import KafkaException

    if isinstance(error, KafkaException):
        translated = translate_kafka_error(error, "task producer")
        if isinstance(translated, ProducerFencedError):
            return translated
    return None


class ExactlyOnceTaskLoop(TaskLoop):
    """Drives a started :class:`SourceTask` until stopped, failed or fenced.

    The caller owns startup (fencing, producer ``init_transactions``, offsets,
    ``task.start``) and cleanup; this class owns steps 1-6 above, in the hooks of
    :class:`~connect_runtime.task.loop.TaskLoop`'s skeleton. ``run`` never raises
    for a fenced producer (it returns FENCED) and re-raises every other error
    after aborting the open transaction.
    """

    mode = TaskMode.EXACTLY_ONCE

    def __init__(self, deps: LoopDeps, *, boundary: BoundaryPolicy,
                 transaction_timeout_s: float) -> None:
        super().__init__(deps)
        self.boundary = boundary
        self.transaction_timeout_s = transaction_timeout_s
        self._in_txn = False
        self._txn_began = 0.0  # monotonic time of the open transaction's begin
        self._txn_records: list[SourceRecord] = []
        self._txn_metadata: list[RecordMetadata | None] = []
        self._txn_size = 0
        # id(partition dict) -> the record with its latest offset, in order of
        # those records; deduplicated by serialized key only at commit time. The
        # record keeps the dict alive, so its id cannot be reused meanwhile.
        self._pending_offsets: dict[int, SourceRecord] = {}

    @classmethod
    def for_started(cls, deps: LoopDeps, started: StartedTask) -> Self:
        if started.boundary is None:
            raise ValueError(f"Task {deps.label} was started {started.mode.value}, "
                             "without a transaction boundary")
        return cls(deps, boundary=started.boundary,
                   transaction_timeout_s=started.transaction_timeout_s)

    # ------------------------------------------------------------------ loop

    def _after_poll(self, size: int) -> None:
        # Also after an empty poll: an interval boundary ends a transaction on time
        # while the task idles, and an idle connector-defined one is rewound in time.
        boundary = self.boundary
        if not boundary.rewind_requested:  # a rewind wins over the poll's requests
            decision = boundary.after_poll(size, self._in_txn)
            if decision is not Decision.NONE:
                self._end_transaction(decision)
        if boundary.rewind_requested:  # asked in poll, or in commit_record/commit just now
            self._rewind(idle_for_s=None)
        elif boundary.idle_too_long(size, self._open_for(), self.transaction_timeout_s):
            self._rewind(idle_for_s=self._open_for())
        self.producer.poll(0)

    def _open_for(self) -> float | None:
        """How long the open transaction has been open (seconds), or None."""
        return time.monotonic() - self._txn_began if self._in_txn else None

    def _final_commit(self) -> None:
        # KIP-618: "including the end-of-life offset commit that takes place during
        # task shutdown".
        decision = self.boundary.on_stop()
        if decision is Decision.NONE:
            self._abort_quietly()
        else:
            self._end_transaction(decision)

    def _on_failure(self, error: BaseException) -> Outcome | None:
        age = time.monotonic() - self._txn_began if self._in_txn else 0.0
        if isinstance(error, ProducerFencedError) or _as_fenced(error) is not None:
            self._in_txn = False
            self._raise_if_timed_out(error, age)
            return self._fenced()
        abort_error = self._abort_quietly()
        # librdkafka may report fencing to produce() as a bare _FATAL error; the
        # abort then names the real cause.
        if abort_error is not None and _as_fenced(abort_error) is not None:
            self._raise_if_timed_out(abort_error, age)
            return self._fenced()
        return None

    def _raise_if_timed_out(self, error: BaseException, age: float) -> None:
        """A transaction open longer than ``transaction.timeout.ms`` (``age`` seconds,
        0 if none was open) was aborted by the broker, which bumps the producer's
        epoch: librdkafka then reports fencing, though no other producer exists.
        That is the task's failure, not a zombie's quiet end: say what happened
        and how to fix it."""
        if age < self.transaction_timeout_s:
            return
        raise ConnectError(
            f"Task {self.label}: its transaction stayed open {age:.0f}s, longer than "
            f"transaction.timeout.ms ({self.transaction_timeout_s:.0f}s), so the broker "
            "aborted it and fenced the task's producer; nothing of it was committed. "
            + ("The task must end its transactions sooner (TransactionContext."
               "commit_transaction), or raise producer.override.transaction.timeout.ms. "
               "(A transaction is rewound in time only while poll() returns nothing; "
               "this one kept receiving records, or a poll() blocked too long.)"
               if self.boundary.context is not None else
               "Shorten transaction.boundary.interval.ms or raise "
               "producer.override.transaction.timeout.ms")) from error

    def _fenced(self) -> Outcome:
        # A newer generation of the task, or the same task run again elsewhere (a
        # restart after its slot was declared lost), owns its transactional.id now.
        log.info("Task %s was fenced by a newer instance with its transactional.id; stopping "
                 "quietly", self.label)
        self._in_txn = False
        return Outcome.FENCED

    def _before_pause(self) -> None:
        """End what is open as the boundary allows (a connector-defined transaction
        the connector has not ended stays open until resumed)."""
        decision = self.boundary.on_stop()
        if decision is not Decision.NONE:
            self._end_transaction(decision)

    # --------------------------------------------------------------- sending

    def _send_polled(self, polled: Sequence[Any]) -> int:
        """Step 2 for one polled list, inside the open transaction (begun lazily,
        step 1): runs of records and each batch as :func:`dispatch` hands them.
        Nothing is sent if the task asked to rewind: ``_after_poll`` gives up the
        transaction, and this list with it."""
        if self.boundary.rewind_requested:
            return record_count(polled)
        count = dispatch(polled, self.label, records=self._send_records,
                         record_batch=self._send_record_batch)
        if self.metrics is not None:
            self.metrics.set_active(self._txn_size)
        return count

    def _send_records(self, records: Sequence[SourceRecord]) -> int:
        """A run of records: whole through the sender's records path in the common
        case; record by record for connector-defined boundaries (asked after each
        record) and for tasks that want each record's metadata."""
        if self.boundary.context is None and not self._wants_metadata:
            if not self._in_txn:
                self._begin()  # step 1
            sent = self._sender.send_records(records)  # step 2
            self._txn_size += sent
            self._track_offsets(records)
            if self.metrics is not None:
                self.metrics.written += sent
            return len(records)
        after_record = self.boundary.after_record
        connector_boundary = self.boundary.context is not None
        for record in records:
            self._send_one(record)
            if connector_boundary:
                decision = after_record(record)
                if decision is not Decision.NONE:
                    self._end_transaction(decision)
        return len(records)

    def _send_record_batch(self, batch: RecordBatch) -> int:
        """One checked batch, never split: whole through the sender's column path,
        or row by row when the task wants each row's metadata; then a
        connector-defined boundary is asked about it after its last row (the task
        names the batch itself in ``commit_transaction(batch)``)."""
        if not len(batch.values):  # nothing to send, but it may end a transaction
            self._after_named(batch)
            return 0
        if not self._in_txn:
            self._begin()  # step 1
        if self._wants_metadata:
            for record in expand(batch):
                self._send_one(record)
        else:
            sent = self._sender.send_record_batch(batch)  # step 2
            self._txn_size += sent
            if self.metrics is not None:
                self.metrics.written += sent
            if batch.source_partition is not None:
                self._latest(offset_carrier(batch))
        self._after_named(batch)
        return len(batch.values)

    def _after_named(self, batch: RecordBatch) -> None:
        """A connector-defined boundary the task asked for after ``batch``."""
        if self.boundary.context is not None:
            decision = self.boundary.after_record(batch)
            if decision is not Decision.NONE:
                self._end_transaction(decision)

    def _send_one(self, record: SourceRecord) -> None:
        """One record, for connector-defined boundaries and tasks that want metadata."""
        if not self._in_txn:
            self._begin()  # step 1
        callback = self._delivery_callback(len(self._txn_records)) if self._wants_metadata else None
        if self._sender.send(record, callback):  # step 2
            self._txn_size += 1
            if self.metrics is not None:
                self.metrics.written += 1
        if self._wants_metadata:  # a dropped record's metadata stays None
            self._txn_records.append(record)
            self._txn_metadata.append(None)
        if record.source_partition is not None:
            self._latest(record)

    def _track_offsets(self, records: Sequence[SourceRecord]) -> None:
        """Remember the last record of each source partition object in ``records``.

        Done per run with C-level builtins rather than per record: the run's
        partitions, then the position of the last record of each, then one update
        per distinct partition in the order of those last records.
        """
        partitions = list(map(_source_partition, records))
        first = partitions[0]
        if partitions.count(first) == len(partitions):
            # One source partition (the usual poll): equal dicts serialize to one key,
            # so the run's last record carries the offset that wins.
            if first is not None:
                self._latest(records[-1])
            return
        last = dict(zip(map(id, partitions), range(len(partitions)), strict=True))
        for i in sorted(last.values()):
            if partitions[i] is not None:
                self._latest(records[i])

    def _latest(self, record: SourceRecord) -> None:
        """``record`` now carries the latest offset of its source partition object;
        re-inserted so the map stays in order of latest writes (which decides the
        winner when distinct but equal partition dicts serialize to one key)."""
        key = id(record.source_partition)
        pending = self._pending_offsets
        pending.pop(key, None)
        pending[key] = record

    def _delivery_callback(self, index: int) -> Callable[[Any, Any], None]:
        def delivered(err: Any, msg: Any) -> None:
            if err is None and index < len(self._txn_metadata):
                from connect_runtime.api.record import RecordMetadata

                ts = msg.timestamp()
                self._txn_metadata[index] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), ts[1] if ts[0] else None)
        return delivered

    # ------------------------------------------------------------ committing

    def _begin(self) -> None:
        try:
            self.producer.begin_transaction()
        except Exception as e:
            raise translate_kafka_error(e, f"begin_transaction for task {self.label}") from e
        self._in_txn = True
        self._txn_began = time.monotonic()
        self.boundary.transaction_began()

    def _end_transaction(self, decision: Decision) -> None:
        """Steps 3-6. An abort drops the records, then commits their offsets alone."""
        if decision is Decision.ABORT:
            self._abort()
        if not self._in_txn and not self._pending_offsets:
            return
        calls = self.call_watch
        calls.current = (COMMIT, time.perf_counter())  # the stall watchdog's view
        try:
            self._commit_steps()
        finally:
            calls.current = None

    def _commit_steps(self) -> None:
        """Steps 3-6 of the open transaction (begun here if only offsets are pending)."""
        if not self._in_txn:
            self._begin()  # an offsets-only transaction, after an abort
        began = time.monotonic()
        deadline = began + self.transaction_timeout_s
        written = self._write_offsets()  # step 3
        self._mirror_tombstones_first(written, deadline)
        self._commit(deadline)  # step 4
        if self._active_topics is not None:  # KIP-558: the records' topics are now durable
            self._active_topics.durable(self._sender.used_topics)
        size = self._txn_size
        if self.metrics is not None:
            self.metrics.committed(size, time.monotonic() - began, written)
            self.metrics.set_active(0)
        self._finish_records()  # steps 5 and 6
        self._pending_offsets.clear()
        if written and self.offset_mirror is not None:
            self.offset_mirror.submit([(k, v) for k, v in written if v is not None])

    def _mirror_tombstones_first(self, written: list[tuple[bytes, bytes | None]],
                                 deadline: float) -> None:
        """Tombstones reach the global topic before the transaction commits."""
        if not self._tombstones_mirrored(written, deadline):
            raise ConnectError(f"Task {self.label}: could not write offset tombstones to the "
                               "global offsets topic before committing; not committing")

    def _write_offsets(self) -> list[tuple[bytes, bytes | None]]:
        """Step 3: one offset record per distinct source partition, latest wins."""
        latest: dict[bytes, bytes | None] = {}
        for record in self._pending_offsets.values():
            partition, offset = record.source_partition, record.source_offset
            assert partition is not None  # records without one are not tracked
            validate_partition_or_offset(partition, "partition")
            if offset is not None:
                validate_partition_or_offset(offset, "offset")
            latest[serialize_key(self.connector, partition)] = serialize_value(offset)
        self._sender.produce_offsets(self.offsets_topic, latest.items())
        return list(latest.items())

    def _commit(self, deadline: float) -> None:
        """Step 4. Retriable errors are retried until the deadline (librdkafka allows it)."""
        while True:
            remaining = max(deadline - time.monotonic(), 0.1)
            try:
                self.producer.commit_transaction(remaining)
                self._in_txn = False
                return
            except Exception as e:
                err = translate_kafka_error(e, f"commit_transaction for task {self.label}")
                if isinstance(err, ProducerFencedError):
                    # The transaction stays "open" for _on_failure, which needs its age
                    # to tell a broker timeout (the task fails) from a newer generation.
                    raise err from e
                if err.retriable and time.monotonic() < deadline:
                    continue
                if isinstance(err, KafkaClientError) and err.retriable:
                    raise ConnectError(
                        f"{err}. The transaction did not commit within transaction.timeout.ms "
                        f"({self.transaction_timeout_s:.0f}s). Remedies (KIP-618): tune the "
                        "producer for throughput, raise producer.override.transaction.timeout.ms"
                        ", shorten transaction.boundary.interval.ms, or use "
                        "transaction.boundary=poll") from e
                raise err from e

    def _finish_records(self) -> None:
        """Steps 5 and 6: tell the task what is now durable."""
        if self._wants_metadata:
            records, metadata = self._txn_records, self._txn_metadata
            self._txn_records, self._txn_metadata = [], []
            for record, meta in zip(records, metadata, strict=True):
                self.task.commit_record(record, meta)
        self._txn_size = 0
        self.task.commit()

    def _rewind(self, idle_for_s: float | None) -> None:
        """Give up the open transaction (``idle_for_s``: the loop does so for an idle
        one, else the task asked): abort it, keep none of its offsets, tell the task
        nothing of its records (they are not done: a new instance reads them
        again), and end the loop with REWOUND."""
        if idle_for_s is not None:
            log.warning(
                "Task %s (connector %s): its transaction has been open %.1fs and poll() "
                "returned nothing; the broker aborts a transaction open longer than "
                "transaction.timeout.ms (%d ms), and the task would then fail. Rewinding it "
                "instead: the transaction is aborted, none of its offsets committed, and a "
                "new instance of the task reads its records again from the last committed "
                "offsets. Commit sooner (TransactionContext.commit_transaction) or raise "
                "producer.override.transaction.timeout.ms to avoid this", self.label,
                self.connector, idle_for_s, round(self.transaction_timeout_s * 1000))
        else:
            log.info("Task %s (connector %s) asked to rewind (TransactionContext."
                     "rewind_transaction): aborting its open transaction (%d records) and "
                     "restarting from the last committed offsets", self.label, self.connector,
                     self._txn_size)
        self._abort(tell_task=False)
        self._pending_offsets.clear()
        self.rewound = True

    def _abort(self, tell_task: bool = True) -> None:
        """Abort the open transaction: its records vanish. Connector-requested
        (``tell_task``): ``commit_record(record, None)`` for each, and the caller
        commits their offsets; a rewind does neither."""
        if not self._in_txn:
            return
        try:
            # librdkafka can fail an abort with INVALID_TXN_STATE while the
            # transaction's partitions are still being registered with the
            # coordinator (librdkafka issue #4849); sending everything first avoids it.
            self.producer.flush(self.transaction_timeout_s)
            self.producer.abort_transaction(self.transaction_timeout_s)
        except Exception as e:
            raise translate_kafka_error(e, f"abort_transaction for task {self.label}") from e
        self._in_txn = False
        if self.metrics is not None:
            self.metrics.aborted()
            self.metrics.set_active(0)
        # The aborted records' topics are not active; a topic reported before is
        # collected again when a record goes to it.
        self._sender.used_topics.clear()
        if self._wants_metadata:
            records = self._txn_records
            self._txn_records, self._txn_metadata = [], []
            for record in records if tell_task else ():
                self.task.commit_record(record, None)
        self._txn_size = 0

    def _abort_quietly(self) -> BaseException | None:
        """On failure: abort so nothing of the failed transaction becomes visible.

        Returns the error the abort itself raised, if any.
        """
        if not self._in_txn:
            return None
        try:
            self.producer.flush(min(self.transaction_timeout_s, 10.0))  # see _abort
            self.producer.abort_transaction(min(self.transaction_timeout_s, 30.0))
        except Exception as e:  # the task is failing anyway; the broker aborts on timeout
            self._in_txn = False
            if _as_fenced(e) is None:
                log.warning("Task %s: abort after failure did not complete", self.label,
                            exc_info=True)
            return e
        self._in_txn = False
        return None
