"""The task side of a source connector: :class:`SourceTask` and its contexts.

Lifecycle, driven by the framework inside one Spark task::

    initialize(context) -> start(config) -> poll()* -> [commit_record()* commit()]* -> stop()

Threading contract:

* ``start``, ``poll``, ``commit_record`` and ``commit`` are called from one
  thread, in that order, never concurrently.
* ``stop`` may be called from *another* thread while ``poll`` blocks; it should
  make ``poll`` return promptly (``None`` is fine). After ``stop`` the framework
  makes one last commit of what was already polled, then discards the task.

A task that rewinds its transaction (``TransactionContext.rewind_transaction``)
is stopped and discarded, and a new instance of its class runs the whole
lifecycle again in the same Spark task, from the last committed offsets.

Task configs travel from the driver to a Spark executor, so they are plain
``dict[str, str]`` (picklable by construction).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from connect_runtime.api.record import (
        RecordBatch,
        RecordMetadata,
        SourcePartition,
        SourceRecord,
    )


class OffsetStorageReader(Protocol):
    """Reads committed source offsets of this connector.

    The view is read with ``isolation.level=read_committed`` up to the end
    offsets listed *uncommitted*, so an open transaction makes the read wait
    rather than return stale data. With a per-connector ``offsets.storage.topic``
    it is the combined view: the connector's topic wins over the global one.
    """

    def offset(self, partition: SourcePartition) -> dict[str, object] | None:
        """The last committed offset for ``partition``, or None if there is none."""
        ...

    def offsets(
        self, partitions: Iterable[SourcePartition]
    ) -> list[tuple[SourcePartition, dict[str, object] | None]]:
        """Committed offsets for several partitions, in the order given."""
        ...


class TransactionContext(Protocol):
    """Lets a task define its own transaction boundaries.

    Only available when the connector runs with ``transaction.boundary=connector``
    on a worker with ``exactly.once.source.support=enabled``
    (``SourceTaskContext.transaction_context()`` returns None otherwise). Call it
    from the task's thread, inside ``poll`` as a rule.

    Rules (docs/connector-api.md#transaction-rules; each has a test in
    tests/task/test_transaction_rules.py):

    1. **A request without a record ends the open transaction after a poll.**
       ``commit_transaction()`` / ``abort_transaction()`` made inside ``poll``
       act once the list that poll returns has been sent. They end the *open
       transaction*: every record sent since the last boundary, from earlier
       polls too, not only this poll's. If the poll returns nothing, they end
       what earlier polls left open. Made in ``commit_record`` or ``commit``,
       they act at the next end of a poll's list. If no transaction is open at
       that point, the request is dropped; it never carries over to later records.
    2. **A record request names a record of the same poll.**
       ``commit_transaction(record)`` / ``abort_transaction(record)`` make
       ``record`` the last of its transaction. ``record`` is, by identity, a
       :class:`~connect_runtime.api.record.SourceRecord` or a
       :class:`~connect_runtime.api.record.RecordBatch` (the transaction then
       ends after the batch's last row; a batch is never split) that the *same*
       ``poll`` returns. A record of an earlier poll was already sent, with
       others after it in the same transaction, so the transaction can no
       longer end right after it: once the poll's list is sent, a request that
       matched none of its items fails the task with
       :class:`~connect_runtime.errors.ConnectError` naming the record (Kafka
       Connect ignores it, leaving the transaction open until it times out).
    3. **Several requests in one poll act in the order of the records.** A
       record request acts right after its record, a request without a record
       after the whole list; each ends whatever transaction is open at that
       point, so one poll can end several transactions. So a record request on
       a poll's last record wins over the opposite request without a record
       (that one finds nothing open), as in Kafka Connect. Asking the same thing
       twice is one request. Asking to commit and to abort after the same record,
       or both without a record before the same boundary, raises
       :class:`~connect_runtime.errors.ConnectError` from the second call, and
       fails the task at that boundary even if the task catches the error.
    4. **An aborted transaction's offsets advance.** Its records are never
       visible to ``read_committed`` consumers, but their source offsets are
       committed at once, in a transaction of their own, so neither this task
       nor a later instance is handed those records again (Kafka Connect's
       rule; ``connect-runtime verify`` counts them as aborted, not lost).
       ``commit_record(record, None)`` is called for each. To read them again,
       rewind instead (rule 5).
    5. **Rewinding gives up the open transaction and reads it again**
       (:meth:`rewind_transaction`). It wins over every other request of the
       same poll: they are dropped with the list that poll returns.
    6. **An idle open transaction is rewound before it times out.** The broker
       aborts a transaction open longer than the producer's
       ``transaction.timeout.ms`` (60 s by default;
       ``producer.override.transaction.timeout.ms``), and in Kafka Connect the
       task then fails. Here, when ``poll`` returns nothing while a transaction
       has been open for 3/4 of that timeout, the framework rewinds it as in
       rule 5 and logs a WARN naming the task and the timeout. A task that keeps
       returning records without committing is not rescued: it fails, saying so.

    On stop, an open transaction the task did not ask to end is aborted and not
    its offsets (its records are polled again after a restart); on pause it is
    left open. Both as in Kafka Connect.
    """

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Commit the open transaction after this poll (rule 1), or right after
        ``record``, returned by this poll (rule 2)."""
        ...

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Abort the open transaction after this poll (rule 1), or right after
        ``record``, returned by this poll (rule 2); its offsets still commit (rule 4)."""
        ...

    def rewind_transaction(self) -> None:
        """Give up the open transaction and read its records again.

        After the current ``poll()`` returns, the framework aborts the open
        transaction (records already sent in it, and the list this poll returns,
        which is not sent at all, never become visible to ``read_committed``
        consumers), commits none of their offsets, stops the task (``stop()``)
        and starts a NEW instance of the task class (``initialize(context)`` then
        ``start(config)``), whose ``context.offset_storage_reader`` returns the
        last committed offsets, so it reads those records again.

        * Every other request of the same poll is dropped (rule 5): a
          ``commit_transaction(record)`` for a record of this poll commits nothing.
          Transactions that ended before stay as they ended.
        * ``commit_record`` and ``commit`` are not called for the abandoned
          records: they are not done, the new instance reads them again.
        * The old instance is not used again; the new one gets a new context.
          The task's status stays RUNNING. If the task is being stopped, no new
          instance starts; the next start reads the same offsets.
        * Called from ``commit_record`` or ``commit``, it acts at the end of the
          poll being handled.
        """
        ...


class SourceTaskContext(Protocol):
    """What the framework gives a running task."""

    @property
    def config(self) -> dict[str, str]:
        """This task's configuration (as produced by ``SourceConnector.task_configs``)."""
        ...

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        """Committed source offsets, to resume from in ``start``."""
        ...

    def transaction_context(self) -> TransactionContext | None:
        """The transaction context, or None unless ``transaction.boundary=connector``
        and the worker runs tasks exactly-once."""
        ...


class SourceTask(ABC):
    """Reads from a source system and returns :class:`SourceRecord` batches.

    Subclasses must have a no-argument constructor: the framework instantiates
    the class on the executor that runs the task, and once on the leader when
    the connector starts, only to ask :meth:`version` for the task's status.
    So the constructor must be cheap and open nothing; ``start`` does that.
    """

    context: SourceTaskContext

    def initialize(self, context: SourceTaskContext) -> None:
        """Called by the framework before ``start``; keeps ``context``."""
        self.context = context

    def version(self) -> str:
        """The task's version, shown in its status; by convention the same as its
        connector's. Connect's tasks must say; here the default is "unknown"."""
        return "unknown"

    @abstractmethod
    def start(self, config: dict[str, str]) -> None:
        """Open resources. Read ``self.context.offset_storage_reader`` to resume."""

    @abstractmethod
    def poll(self) -> Sequence[SourceRecord | RecordBatch] | None:
        """Return the next batch, or None/empty when nothing is ready.

        Items are :class:`~connect_runtime.api.record.SourceRecord` objects or
        :class:`~connect_runtime.api.record.RecordBatch` columns, in any mix; the
        framework sends them in order, and a batch is never split across
        transactions. A task producing many records per poll returns batches:
        they skip the per-record objects and are encoded column by column.

        Should block briefly (not spin) when idle. An exception fails the task;
        records of the open transaction are then aborted, never made visible.
        """

    def commit(self) -> None:  # noqa: B027 - optional hook, empty by design
        """Called after each successful transaction commit, after ``commit_record``s.

        At-least-once (worker ``exactly.once.source.support`` disabled or
        preparing): called after each successful offset flush instead, every
        ``offset.flush.interval.ms`` even when there was nothing to flush.
        Not guaranteed to run after every commit (the process may die in
        between): never track offsets here, use source offsets.
        """

    def commit_record(  # noqa: B027 - optional hook, empty by design
        self, record: SourceRecord, metadata: RecordMetadata | None
    ) -> None:
        """Called once per record, in order, after the transaction holding it committed.

        ``metadata`` is None for a record whose transaction was aborted on the
        connector's request, or that a transform dropped.

        At-least-once (worker ``exactly.once.source.support`` disabled or
        preparing): called once the broker acknowledged the record, before its
        offset is flushed, in acknowledgement order (poll order within a Kafka
        partition, not across partitions); never for a record that failed.
        """

    @abstractmethod
    def stop(self) -> None:
        """Signal the task to stop; may be called from another thread (see module doc)."""
