"""The task side of a source connector: :class:`SourceTask` and its contexts.

Lifecycle, driven by the framework inside one Spark task::

    initialize(context) -> start(config) -> poll()* -> [commit_record()* commit()]* -> stop()

Threading contract:

* ``start``, ``poll``, ``commit_record`` and ``commit`` are called from one
  thread, in that order, never concurrently.
* ``stop`` may be called from *another* thread while ``poll`` blocks; it should
  make ``poll`` return promptly (``None`` is fine). After ``stop`` the framework
  makes one last commit of what was already polled, then discards the task.

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
    (``SourceTaskContext.transaction_context()`` returns None otherwise).

    * ``commit_transaction()`` / ``abort_transaction()`` act after the *next*
      batch returned by ``poll`` has been sent.
    * ``commit_transaction(record)`` / ``abort_transaction(record)`` act right
      after that record is sent: it is the last record of the transaction.
      ``record`` may be a :class:`~connect_runtime.api.record.RecordBatch` the
      task returns: the transaction then ends after the batch's last row (a
      batch is never split across transactions).
    * Records of an aborted transaction are never visible to ``read_committed``
      consumers, but their source offsets are committed with the next
      transaction so the task is not handed them again (Kafka Connect's rule).
    * Asking to commit and abort the same batch, or the same record, raises
      :class:`~connect_runtime.errors.ConnectError`.
    """

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Commit after the next batch, or right after ``record`` (see above)."""
        ...

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Abort after the next batch, or right after ``record`` (see above)."""
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
