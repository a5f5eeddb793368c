"""When a task's transaction ends: the three KIP-618 ``transaction.boundary`` kinds.

* ``poll``: after every ``SourceTask.poll`` that returned something.
* ``interval``: once ``transaction.boundary.interval.ms`` has passed since the
  transaction began (checked after each poll, so a poll that blocks delays it).
* ``connector``: when the task asks, through :class:`TaskTransactionContext`.

This module holds no Kafka code; the task loop asks it "commit or abort now?".
"""

from __future__ import annotations

import time
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING

from connect_runtime.errors import ConnectError

if TYPE_CHECKING:
    from connect_runtime.api.record import RecordBatch, SourceRecord


class Decision(Enum):
    NONE = 0
    COMMIT = 1
    ABORT = 2


class TaskTransactionContext:
    """The :class:`~connect_runtime.api.task.TransactionContext` handed to tasks.

    Record-level requests are keyed by the record's identity: the record must be
    one the task returns from ``poll`` (records compare by identity), or a
    :class:`~connect_runtime.api.record.RecordBatch` it returns, which ends the
    transaction after the batch's last row. Requests without a record apply
    after what ``poll`` is returning, or returns next, is sent.
    """

    def __init__(self) -> None:
        self._after_poll: Decision = Decision.NONE
        # id(record) -> (record, decision); the record is kept so its id stays unique.
        self._records: dict[int, tuple[SourceRecord | RecordBatch, Decision]] = {}

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self._request(record, Decision.COMMIT)

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self._request(record, Decision.ABORT)

    def _request(self, record: SourceRecord | RecordBatch | None, decision: Decision) -> None:
        if record is None:
            if self._after_poll not in (Decision.NONE, decision):
                raise ConnectError(
                    "The task asked both to commit and to abort the transaction after the "
                    "same batch; TransactionContext allows one or the other"
                )
            self._after_poll = decision
            return
        previous = self._records.get(id(record))
        if previous is not None and previous[1] is not decision:
            raise ConnectError(
                f"The task asked both to commit and to abort the transaction after the same "
                f"record (topic {record.topic!r}, offset {_offset_of(record)!r})"
            )
        self._records[id(record)] = (record, decision)

    @property
    def has_record_requests(self) -> bool:
        return bool(self._records)

    def take_record_decision(self, record: SourceRecord | RecordBatch) -> Decision:
        """The decision requested after ``record`` (consumed), or NONE."""
        entry = self._records.pop(id(record), None)
        return Decision.NONE if entry is None else entry[1]

    def take_poll_decision(self) -> Decision:
        """The decision requested without a record (consumed), or NONE."""
        decision, self._after_poll = self._after_poll, Decision.NONE
        return decision


class BoundaryPolicy:
    """Decides when to end the open transaction, for one ``transaction.boundary`` kind.

    ``clock`` (seconds, monotonic) times the ``interval`` kind: the task loop uses
    the real one; the test kit (:mod:`connect_runtime.testing`) lets a test pass
    its own, so that the same rule decides there without sleeping.
    """

    def __init__(self, kind: str, interval_ms: int, context: TaskTransactionContext | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if kind not in ("poll", "interval", "connector"):
            raise ValueError(f"unknown transaction.boundary {kind!r}")
        if kind == "connector" and context is None:
            raise ValueError("transaction.boundary=connector needs a transaction context")
        self.kind = kind
        self.interval_s = interval_ms / 1000.0
        self.context = context
        self._clock = clock
        self._deadline = clock() + self.interval_s

    def transaction_began(self) -> None:
        self._deadline = self._clock() + self.interval_s

    def after_record(self, record: SourceRecord | RecordBatch) -> Decision:
        """Called after each record (or batch) is sent; only connector boundaries end
        a transaction in the middle of what a poll returned."""
        ctx = self.context
        if ctx is None or not ctx.has_record_requests:
            return Decision.NONE
        return ctx.take_record_decision(record)

    def after_poll(self, size: int, transaction_open: bool) -> Decision:
        """Called after each ``poll`` (also empty ones, so intervals elapse while idle),
        ``size`` records sent."""
        if self.kind == "poll":
            return Decision.COMMIT if size and transaction_open else Decision.NONE
        if self.kind == "interval":
            if transaction_open and self._clock() >= self._deadline:
                return Decision.COMMIT
            return Decision.NONE
        assert self.context is not None
        decision = self.context.take_poll_decision()
        return decision if transaction_open else Decision.NONE

    def on_stop(self) -> Decision:
        """What to do with the open transaction when the task stops or pauses.

        ``poll`` and ``interval`` commit what was polled. A connector-defined
        transaction ends only as the connector asked (Kafka Connect's rule); with no
        request it is left to be aborted, so its records are polled again later.
        """
        if self.context is None:
            return Decision.COMMIT
        return self.context.take_poll_decision()


def _offset_of(record: SourceRecord | RecordBatch) -> object:
    return getattr(record, "last_offset", None) or record.source_offset
