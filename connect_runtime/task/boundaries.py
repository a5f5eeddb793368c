"""When a task's transaction ends: the three KIP-618 ``transaction.boundary`` kinds.

* ``poll``: after every ``SourceTask.poll`` that returned something.
* ``interval``: once ``transaction.boundary.interval.ms`` has passed since the
  transaction began (checked after each poll, so a poll that blocks delays it).
* ``connector``: when the task asks, through :class:`TaskTransactionContext`,
  under the rules of :class:`~connect_runtime.api.task.TransactionContext`
  (which transaction a request ends, several requests in one poll, rewinding).

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


# A connector-defined transaction still open, with nothing polled, at this share
# of transaction.timeout.ms is rewound rather than left for the broker to abort at
# the full timeout (which bumps the producer's epoch: the task would then fail).
# The last quarter covers a poll() that blocks a little and the abort's round trip.
IDLE_REWIND_FRACTION = 0.75


class Decision(Enum):
    NONE = 0
    COMMIT = 1
    ABORT = 2


class TaskTransactionContext:
    """The :class:`~connect_runtime.api.task.TransactionContext` handed to tasks.

    It records requests; :class:`BoundaryPolicy` turns them into decisions at the
    points the rules of the API docstring name (after a record is sent, after a
    poll's list is sent). Record-level requests are keyed by the record's
    identity: the record must be one the same ``poll`` returns (records compare
    by identity), or a :class:`~connect_runtime.api.record.RecordBatch` it
    returns, which ends the transaction after the batch's last row. Requests
    without a record apply after what ``poll`` is returning, or returns next, is
    sent. A rewind request overrides both; the loop acts on it and then
    replaces the task instance and this context with new ones.

    Used only from the task's thread (``poll``, ``commit_record``, ``commit``).
    """

    def __init__(self) -> None:
        self._after_poll: Decision = Decision.NONE
        # id(record) -> (record, decision); the record is kept so its id stays unique.
        self._records: dict[int, tuple[SourceRecord | RecordBatch, Decision]] = {}
        # The message of a commit-and-abort conflict the task may have caught:
        # it still fails the task at the next boundary check (Connect's rule).
        self._conflict: str | None = None
        self._rewind = False

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self._request(record, Decision.COMMIT)

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self._request(record, Decision.ABORT)

    def rewind_transaction(self) -> None:
        self._rewind = True

    def _request(self, record: SourceRecord | RecordBatch | None, decision: Decision) -> None:
        if record is None:
            if self._after_poll not in (Decision.NONE, decision):
                self._fail("The task asked both to commit and to abort the transaction after "
                           "the same poll; TransactionContext allows one or the other")
            self._after_poll = decision
            return
        previous = self._records.get(id(record))
        if previous is not None and previous[1] is not decision:
            self._fail(f"The task asked both to commit and to abort the transaction after the "
                       f"same record ({_describe(record)})")
        self._records[id(record)] = (record, decision)

    def _fail(self, message: str) -> None:
        self._conflict = message
        raise ConnectError(message)

    @property
    def rewind_requested(self) -> bool:
        """True once the task called ``rewind_transaction``; never reset (the loop
        ends, and the next instance of the task gets a new context)."""
        return self._rewind

    @property
    def has_record_requests(self) -> bool:
        return bool(self._records)

    def take_record_decision(self, record: SourceRecord | RecordBatch) -> Decision:
        """The decision requested after ``record`` (consumed), or NONE.

        Raises ConnectError if the task asked both to commit and to abort, even
        if it caught the error its second request raised.
        """
        self._raise_conflict()
        entry = self._records.pop(id(record), None)
        return Decision.NONE if entry is None else entry[1]

    def take_poll_decision(self) -> Decision:
        """The decision requested without a record (consumed), or NONE; raises
        ConnectError on a conflict, as :meth:`take_record_decision`."""
        self._raise_conflict()
        decision, self._after_poll = self._after_poll, Decision.NONE
        return decision

    def raise_for_unmatched(self) -> None:
        """At the end of a poll, once its list is sent: a record request still
        here named no record of that list, so it can never take effect (a record
        of an earlier poll is already in Kafka, with others after it in the same
        transaction). Raises ConnectError naming the record."""
        if not self._records:
            return
        record, decision = next(iter(self._records.values()))
        call = "commit_transaction" if decision is Decision.COMMIT else "abort_transaction"
        raise ConnectError(
            f"The task called {call}(record) for a record that the poll() did not return "
            f"({_describe(record)}). A record request must name, by identity, a record or "
            "RecordBatch that the same poll() returns: a record of an earlier poll was "
            "already sent, with others after it in the same transaction, so the transaction "
            f"can no longer end right after it. Call {call}() without a record to end the "
            "open transaction after this poll")

    def _raise_conflict(self) -> None:
        if self._conflict is not None:
            raise ConnectError(self._conflict)


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
        self.context.raise_for_unmatched()
        decision = self.context.take_poll_decision()
        # Nothing open (a record request just ended it, or nothing was sent since):
        # the request is dropped, not kept for later records.
        return decision if transaction_open else Decision.NONE

    @property
    def rewind_requested(self) -> bool:
        """The task called ``TransactionContext.rewind_transaction()``."""
        return self.context is not None and self.context.rewind_requested

    def idle_too_long(self, size: int, open_for_s: float | None, timeout_s: float) -> bool:
        """After a poll that returned nothing (``size`` 0): is the open
        connector-defined transaction (open ``open_for_s`` seconds; None if none
        is open) close enough to ``transaction.timeout.ms`` (``timeout_s``) that
        the loop must rewind it before the broker aborts it? Only connector
        boundaries leave a transaction open while the task idles; a task that
        keeps returning records is not rescued (its transaction is not idle)."""
        return (self.kind == "connector" and not size and open_for_s is not None
                and open_for_s >= IDLE_REWIND_FRACTION * timeout_s)

    def on_stop(self) -> Decision:
        """What to do with the open transaction when the task stops or pauses.

        ``poll`` and ``interval`` commit what was polled. A connector-defined
        transaction ends only as the connector asked (Kafka Connect's rule); with no
        request it is left to be aborted, so its records are polled again later.
        """
        if self.context is None:
            return Decision.COMMIT
        return self.context.take_poll_decision()


def _describe(record: SourceRecord | RecordBatch) -> str:
    """Which record: its kind, topic and offset (what an author can find it by)."""
    offset = getattr(record, "last_offset", None) or record.source_offset
    return f"a {type(record).__name__} for topic {record.topic!r}, source offset {offset!r}"
