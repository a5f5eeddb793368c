"""The at-least-once source task loop, run inside one Spark task.

Used when the worker has ``exactly.once.source.support=disabled`` or
``preparing`` (KIP-618: in ``preparing`` only the leader's config-topic writes
are transactional; tasks behave exactly as in ``disabled``). It follows Kafka
Connect's ``WorkerSourceTask``:

* Records are produced as they are polled, by an idempotent, *non-transactional*
  producer: consumers (``read_committed`` ones too) see a record as soon as the
  broker has it, before its offset is written.
* Source offsets are written separately, every ``offset.flush.interval.ms``, on
  pause and on graceful stop, and only for records the broker acknowledged
  (:mod:`~connect_runtime.task.submitted_records`). After a crash the task
  resumes from the last flushed offsets, so records produced since then are
  produced again: at least once, never lost.

The offset flush path, in order; steps 2-6 share one deadline
(``offset.flush.timeout.ms``)::

    1. produce      each record as polled (no transaction); its delivery report
                    marks it acknowledged, and commit_record(record, metadata)
                    runs once the loop has seen the ack
    2. collect      per source partition, the offset of the latest record that is
                    acknowledged along with every earlier record of that partition;
                    merged over what an unfinished flush left behind (newer wins)
    3. tombstones   with a per-connector offsets topic, tombstones are written to
                    the global offsets topic first (KAFKA-15018)
    4. write        the offset records, with the task's own producer, to the
                    connector's offsets topic (or the global one)
    5. await        the broker's ack of every offset record of step 4
    6. mirror       with a per-connector offsets topic, the offsets are copied to
                    the global one in the background (GlobalOffsetMirror)
    7. commit()     once per successful flush, also when there was nothing to
                    write (as Kafka Connect does)

A flush that times out or whose offset records fail is logged as a warning and
retried at the next interval with the newest offsets; the task keeps running
(Connect's rule). On pause and on stop, the loop first waits up to
``offset.flush.timeout.ms`` for the records in flight, then flushes, so
everything acknowledged by then is covered.

Threading: Kafka Connect calls ``commitRecord`` from the producer's callback
thread. Here delivery reports only mark records; ``commit_record`` runs on the
loop's own thread right after the loop serves them (``producer.poll``), so a
task never sees ``commit_record`` concurrently with ``poll`` and the
:mod:`~connect_runtime.api.task` threading contract holds in both modes. The
order is the ack order: poll order within a Kafka partition, not across them.

Failure rules: a record the broker rejects or never acknowledges (its delivery
report carries an error), or an exception from the task, a converter or the
producer, fails the task (``run`` raises). Before the error propagates, the
offsets of acknowledged records are flushed once more, as Connect's
``finalOffsetCommit(true)`` does; a failed record is never acknowledged, so no
offset of its source partition at or after it is written, and the task's hooks
are not called again.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Self

from confluent_kafka import KafkaException

from connect_runtime.api.record import RecordBatch
from connect_runtime.errors import ConnectError, translate_kafka_error
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.storage.offsets.format import serialize_value
from connect_runtime.task.batches import dispatch, expand
from connect_runtime.task.loop import LoopDeps, Outcome, TaskLoop
from connect_runtime.task.stall_watch import COMMIT
from connect_runtime.task.submitted_records import SubmittedRecords

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

    from connect_runtime.api.record import SourceOffset, SourcePartition, SourceRecord
    from connect_runtime.task.startup import StartedTask

log = logging.getLogger(__name__)

# How long one wait for acks blocks before the flags are checked again; short
# enough that stop and pause feel immediate.
_ACK_WAIT_S = 0.1


class AtLeastOnceTaskLoop(TaskLoop):
    """Drives a started :class:`SourceTask` until stopped or failed (see the module doc).

    The caller owns startup (a non-transactional producer, offsets, ``task.start``)
    and cleanup; this class owns steps 1-7, in the hooks of
    :class:`~connect_runtime.task.loop.TaskLoop`'s skeleton. ``run`` returns
    ``Outcome.STOPPED`` after a graceful stop and raises on failure; it never
    returns ``FENCED`` (there is no transactional id to fence).
    """

    mode = TaskMode.AT_LEAST_ONCE

    def __init__(self, deps: LoopDeps, *, offset_flush_interval_s: float,
                 offset_flush_timeout_s: float) -> None:
        super().__init__(deps)
        self.offset_flush_interval_s = offset_flush_interval_s
        self.offset_flush_timeout_s = offset_flush_timeout_s
        self._submitted = SubmittedRecords(self.connector, keep_metadata=self._wants_metadata)
        # Committable offsets not yet written (a flush timed out or failed, or not due).
        self._unflushed: dict[bytes, tuple[SourcePartition, SourceOffset | None]] = {}
        self._next_flush = time.monotonic() + offset_flush_interval_s
        self._flush_id = 0
        self._offset_acks_pending = 0
        self._offset_error: KafkaError | None = None
        self._failing = False
        self._flushed_offsets: list[tuple[bytes, bytes | None]] = []  # by the last flush
        self._acked_at_flush = 0  # records acknowledged when the last flush succeeded

    @classmethod
    def for_started(cls, deps: LoopDeps, started: StartedTask) -> Self:
        return cls(deps, offset_flush_interval_s=started.offset_flush_interval_s,
                   offset_flush_timeout_s=started.offset_flush_timeout_s)

    # ------------------------------------------------------------------ loop

    def run(self) -> Outcome:
        """Poll, send and flush offsets until a stop is requested.

        Returns STOPPED after the final flush; raises the error that failed the task.
        """
        self._next_flush = time.monotonic() + self.offset_flush_interval_s
        return super().run()

    def _after_poll(self, size: int) -> None:
        self._serve_then_flush_when_due()

    def _final_commit(self) -> None:
        self._await_then_flush("stop")

    def _on_failure(self, error: BaseException) -> Outcome | None:
        if isinstance(error, Exception):  # not on KeyboardInterrupt and the like
            self._flush_after_failure()
        return None

    def _before_pause(self) -> None:
        """Flush what was polled before ``on_paused(True)``."""
        self._await_then_flush("pause")

    def _while_paused(self) -> None:
        # Connect's offset committer runs while a task is paused.
        self._serve_then_flush_when_due()

    def _serve_then_flush_when_due(self) -> None:
        self._serve_deliveries(0)
        if time.monotonic() >= self._next_flush:
            self._flush()

    # --------------------------------------------------------------- sending

    def _send_polled(self, polled: Sequence[Any]) -> int:
        """Step 1 for one polled list. Stops at once if an earlier record already failed."""
        self._raise_if_delivery_failed()
        return dispatch(polled, self.label, records=self._send_records,
                        record_batch=self._send_record_batch)

    def _send_record_batch(self, batch: RecordBatch) -> int:
        """A checked batch, row by row, each row tracked for delivery; with a
        per-batch offset only its last row carries the offset, so it becomes
        committable only once every row of the batch is acknowledged."""
        rows = expand(batch)
        return self._send_records(rows, carries_from=(
            0 if batch.source_offsets is not None else len(rows) - 1))

    def _send_records(self, records: Sequence[SourceRecord], carries_from: int = 0) -> int:
        """Track and send each record; only records from index ``carries_from`` on
        carry their offset (the rows of a per-batch-offset RecordBatch before its
        last one do not). Returns how many records it was given."""
        track, send = self._submitted.track, self._sender.send
        for index, record in enumerate(records):
            tracker = track(record, index >= carries_from)
            try:
                sent = send(record, tracker)
            except BaseException:
                self._submitted.untrack(tracker)
                raise
            if not sent:  # dropped by a transform or error tolerance: done at once
                tracker.dropped()
            elif self.metrics is not None:
                self.metrics.written += 1
        if self.metrics is not None:
            self.metrics.set_active(self._submitted.in_flight)
        return len(records)

    def _serve_deliveries(self, timeout: float) -> None:
        """Serve delivery reports, hand acked records to ``commit_record``, advance the
        committable offsets, and fail on the first record the broker rejected."""
        self.producer.poll(timeout)
        submitted = self._submitted
        if self._active_topics is not None:  # KIP-558: acknowledged records' topics
            self._active_topics.durable(submitted.acked_topics)
        if self._failing:  # the task is failing: no more task calls, no second error
            submitted.take_acknowledged()
            submitted.advance()
            return
        if self._wants_metadata:
            commit_record = self.task.commit_record
            for acked in submitted.take_acknowledged():
                commit_record(acked.record, acked.metadata)
        submitted.advance()
        self._raise_if_delivery_failed()

    def _raise_if_delivery_failed(self) -> None:
        failure = self._submitted.failure
        if failure is None:
            return
        record, err = failure.record, failure.error
        where = f"topic {record.topic!r}"
        if failure.partition is not None and failure.partition >= 0:
            where += f" partition {failure.partition}"
        raise ConnectError(
            f"Task {self.label}: the broker did not acknowledge a record for {where}: "
            f"{err.name()}: {err.str()}. Its source offset {record.source_offset!r} (source "
            f"partition {record.source_partition!r}) and every later offset of that source "
            "partition are not committed; after a restart the task resumes before this record."
        ) from translate_kafka_error(KafkaException(err),
                                     f"delivery to {where} for task {self.label}")

    def _await_in_flight(self, deadline: float) -> None:
        """Serve acks until every record handed to the producer is acknowledged or
        ``deadline`` passes (Connect's ``awaitAllMessages``)."""
        while self._submitted.in_flight:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.warning("Task %s: %d records still unacknowledged after "
                            "offset.flush.timeout.ms (%.1fs); their offsets are not written yet",
                            self.label, self._submitted.in_flight, self.offset_flush_timeout_s)
                return
            self._serve_deliveries(min(remaining, _ACK_WAIT_S))

    # -------------------------------------------------------- flushing offsets

    def _await_then_flush(self, reason: str) -> bool:
        """On pause and stop: wait for the records in flight, then flush (steps 2-7)."""
        self._await_in_flight(time.monotonic() + self.offset_flush_timeout_s)
        log.debug("Task %s: flushing offsets on %s", self.label, reason)
        return self._flush()

    def _flush(self) -> bool:
        """Steps 2-7. False (after a warning) if the offsets were not all written."""
        calls = self.call_watch
        calls.current = (COMMIT, time.perf_counter())  # the stall watchdog's view
        try:
            return self._flush_steps()
        finally:
            calls.current = None

    def _flush_steps(self) -> bool:
        started = time.monotonic()
        self._next_flush = started + self.offset_flush_interval_s
        if not self._write_offsets(started + self.offset_flush_timeout_s):
            return False
        acked = self._submitted.acknowledged
        if self.metrics is not None and (self._flushed_offsets or acked > self._acked_at_flush):
            # A flush that wrote something is this mode's commit; idle ones are not counted.
            self.metrics.committed(acked - self._acked_at_flush, time.monotonic() - started,
                                   self._flushed_offsets)
            self.metrics.set_active(self._submitted.in_flight)
        self._acked_at_flush = acked
        self.task.commit()  # step 7
        return True

    def _write_offsets(self, deadline: float) -> bool:
        """Steps 2-6. InvalidOffsetException (a bad offset from the task) propagates."""
        self._unflushed.update(self._submitted.take_committable())  # step 2
        self._flushed_offsets = []
        if not self._unflushed:
            return True
        written = [(key, serialize_value(offset))
                   for key, (_, offset) in self._unflushed.items()]
        if not self._tombstones_mirrored(written, deadline):  # step 3
            log.warning("Task %s: offset tombstones were not written to the global offsets "
                        "topic within offset.flush.timeout.ms (%.1fs); not writing offsets, "
                        "will try again at the next flush interval",
                        self.label, self.offset_flush_timeout_s)
            return False
        self._flush_id += 1
        self._offset_acks_pending, self._offset_error = len(written), None
        self._sender.produce_offsets(  # step 4
            self.offsets_topic, written,
            functools.partial(self._offset_delivered, self._flush_id))
        while self._offset_acks_pending and self._offset_error is None:  # step 5
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self._serve_deliveries(min(remaining, _ACK_WAIT_S))
        if self._offset_error is not None or self._offset_acks_pending:
            why = (f"{self._offset_error.name()}: {self._offset_error.str()}"
                   if self._offset_error is not None else
                   f"not acknowledged within offset.flush.timeout.ms "
                   f"({self.offset_flush_timeout_s:.1f}s)")
            log.warning("Task %s: writing %d offsets to %s failed (%s); will try again at the "
                        "next flush interval with the latest offsets",
                        self.label, len(written), self.offsets_topic, why)
            return False
        # Only this thread adds to _unflushed (step 2), so what was written is all of it.
        self._unflushed.clear()
        self._flushed_offsets = written
        if self.offset_mirror is not None:  # step 6
            self.offset_mirror.submit([(k, v) for k, v in written if v is not None])
        return True

    def _offset_delivered(self, flush_id: int, err: KafkaError | None, _msg: Any) -> None:
        # A report from an earlier, timed-out flush: its offsets are older than, or
        # the same as, the ones being written now, and land before them (same key,
        # same Kafka partition, same idempotent producer), so it changes nothing.
        if flush_id != self._flush_id:
            return
        if err is not None:
            if self._offset_error is None:
                self._offset_error = err
            return
        self._offset_acks_pending -= 1

    def _flush_after_failure(self) -> None:
        """Connect's ``finalOffsetCommit(true)``: the offsets of acknowledged records
        are still right, so write them. Never raises; never calls the task again."""
        self._failing = True
        try:
            self._await_in_flight(time.monotonic() + self.offset_flush_timeout_s)
            self._write_offsets(time.monotonic() + self.offset_flush_timeout_s)
        except Exception:  # the original error is what the task's trace must show
            log.warning("Task %s: flushing offsets after a failure did not complete",
                        self.label, exc_info=True)
