"""A test kit for connector authors: run a source task as the framework does, in plain pytest.

No Kafka, no Spark, no worker: a test of a task's own decisions (what it polls,
the offsets it stores, where it resumes, where its transactions end) runs in
milliseconds::

    from connect_runtime.testing import Outcome, TaskRunner

    with TaskRunner(MyTask, task_config, boundary="connector",
                    offsets=[({"file": "a.txt"}, {"position": 10})]) as runner:
        runner.run(until=lambda: len(runner.committed_records()) >= 100)
    assert all(t.outcome is Outcome.COMMITTED for t in runner.transactions)
    assert runner.offsets.offset({"file": "a.txt"}) == {"position": 110}

The parts, usable alone or together:

* :class:`CommittedOffsets`: an ``OffsetStorageReader`` over committed offsets
  the test seeds; the runner writes to it when a transaction commits.
* :class:`RecordingTransactionContext`: a ``TransactionContext`` that records
  every request (commit, abort, rewind), for a test that calls ``poll`` itself.
* :class:`MemoryTaskContext`: a ``SourceTaskContext`` of a task config and the two above.
* :class:`TaskRunner`: drives a task as the exactly-once task loop does and
  returns its :class:`Transaction` objects, each with an :class:`Outcome`.

Invariants (what the kit promises):

* **The transaction rules are the runtime's own code.** Where a transaction
  ends is decided by the task loop's ``BoundaryPolicy`` and its connector
  ``TaskTransactionContext`` (``transaction.boundary`` ``poll``, ``interval``
  or ``connector``); what ``poll`` returned goes through the loop's
  ``dispatch`` (the same ``RecordBatch`` checks, the same ``DataException``);
  offsets are serialized with the offsets topic's own functions (the same
  ``InvalidOffsetException``, at the same moment: when the transaction
  commits). ``tests/task/test_testing_kit_vs_loop.py`` runs tasks through the
  kit and through the real loop against a broker and compares the outcome.
* **Calls in the framework's order:** the task factory (a no-argument
  constructor, usually the class), ``initialize(context)``, ``start(config)``;
  then per round ``poll()``; when a transaction commits,
  ``commit_record(record, metadata)`` for each of its records (only if the task
  overrides ``commit_record``, as the framework does) and then ``commit()``.
  When the task asks to abort, ``commit_record(record, None)`` for each record,
  and, if those records carried offsets, ``commit()`` once the offsets commit
  alone (Kafka Connect's rule: aborted records are not handed out again).
  ``stop()``: ``task.stop()``, then the final commit the boundary allows.
* **The reader sees what committed, when it committed:** after a transaction
  commits (or an aborted one's offsets do), ``offset_storage_reader`` returns
  its offsets, read back through JSON as from the offsets topic (a fresh dict
  per call; a tombstone, offset None, removes the partition).
* **One thread:** the test's. The framework may call ``stop()`` from another
  thread while ``poll`` blocks; test that with a thread of your own.

What the kit leaves out, because it is the framework's job, not the task's:
converters, transforms and ``errors.*``, topic checks and creation, pausing, the
at-least-once mode, and the producer's timeouts (so no idle open transaction is
ever rewound, rule 6 of :class:`~connect_runtime.TransactionContext`). The
:class:`RecordMetadata` it hands ``commit_record`` says where a
one-partition-per-``partition`` topic would put the record: partition
``record.partition`` (0 when the record leaves the choice to the producer),
offsets counted as Kafka counts them (one per record, one per transaction
marker), timestamp ``record.timestamp``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

import orjson

from connect_runtime.api.record import (
    Primitive,
    RecordBatch,
    RecordMetadata,
    SourceOffset,
    SourcePartition,
    SourceRecord,
)
from connect_runtime.api.task import SourceTask
from connect_runtime.config.connector_config import TransactionBoundary
from connect_runtime.errors import ConfigException, ConnectError
from connect_runtime.storage.offsets.format import serialize_key, serialize_value
from connect_runtime.task.batches import dispatch, expand, offset_carrier, record_count
from connect_runtime.task.boundaries import BoundaryPolicy, Decision, TaskTransactionContext

__all__ = [
    "CommittedOffsets",
    "MemoryTaskContext",
    "Outcome",
    "RecordingTransactionContext",
    "TaskRunner",
    "Transaction",
]

# Offsets are keyed as in the offsets topic, ["<connector>", {partition}]; one
# connector per reader, so its name only has to be the same every time.
_CONNECTOR = "connector-under-test"
# Connect's default transaction.boundary.interval.ms: the worker's offset.flush.interval.ms.
_DEFAULT_INTERVAL_MS = 60_000

_OffsetPair = tuple[dict[str, Primitive], dict[str, Primitive] | None]
_T = TypeVar("_T", bound=SourceTask)


class CommittedOffsets:
    """An in-memory :class:`~connect_runtime.OffsetStorageReader`: one connector's
    committed source offsets.

    Seed it with ``(source partition, source offset)`` pairs, the shape
    ``offsets()`` returns and ``SourceConnector.alter_offsets`` receives; an
    offset of None means the partition has none. A partition is identified as
    the runtime identifies it (its JSON, keys sorted), and an offset is stored
    as JSON and read back as a fresh dict, so a task reads what it would read
    from the offsets topic. A partition or offset that is not a flat dict of
    primitives raises :class:`~connect_runtime.InvalidOffsetException` naming
    the key, and nothing of that write is kept.
    """

    def __init__(self, offsets: Iterable[tuple[SourcePartition, SourceOffset | None]] = (),
                 ) -> None:
        # serialized key -> serialized offset, in order of first write
        self._stored: dict[bytes, bytes] = {}
        self.write(offsets)

    def offset(self, partition: SourcePartition) -> dict[str, object] | None:
        """The last committed offset for ``partition``, or None if there is none."""
        value = self._stored.get(serialize_key(_CONNECTOR, partition))
        return None if value is None else orjson.loads(value)

    def offsets(self, partitions: Iterable[SourcePartition],
                ) -> list[tuple[SourcePartition, dict[str, object] | None]]:
        """Committed offsets for several partitions, in the order given."""
        return [(p, self.offset(p)) for p in partitions]

    def items(self) -> list[_OffsetPair]:
        """Every ``(partition, offset)`` pair held, in order of each partition's first write."""
        return [_decoded(key, value) for key, value in self._stored.items()]

    def write(self, offsets: Iterable[tuple[SourcePartition, SourceOffset | None]]) -> None:
        """Store ``offsets`` as one commit does: each pair replaces its partition's
        offset, an offset of None removes it. All are checked before any is kept."""
        self._apply(_serialized(offsets))

    def _apply(self, serialized: Iterable[tuple[bytes, bytes | None]]) -> None:
        for key, value in serialized:
            if value is None:
                self._stored.pop(key, None)
            else:
                self._stored[key] = value


class RecordingTransactionContext:
    """An in-memory :class:`~connect_runtime.TransactionContext` that records each request.

    ``requests`` lists the calls in order as ``(kind, record)``: kind
    ``"commit"``, ``"abort"`` or ``"rewind"``; record the ``SourceRecord`` or
    ``RecordBatch`` named, or None. Records compare by identity, so
    ``requests == [("commit", record)]`` names that very object.

    Handed to a task in a :class:`MemoryTaskContext`, it only records: a test
    calls ``poll`` itself and checks where the task asks transactions to end.
    A :class:`TaskRunner` makes its own, whose requests also decide, by the
    runtime's rules (see :class:`~connect_runtime.TransactionContext`); there,
    asking both to commit and to abort after the same record, batch or poll
    raises :class:`~connect_runtime.ConnectError` in the task, as it would in
    the framework.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[str, SourceRecord | RecordBatch | None]] = []
        # The runtime's decisions, when a TaskRunner owns this context.
        self._decisions: TaskTransactionContext | None = None
        self._rewind = False

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Commit after the next batch, or right after ``record``."""
        if self._decisions is not None:
            self._decisions.commit_transaction(record)
        self.requests.append(("commit", record))

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        """Abort after the next batch, or right after ``record``."""
        if self._decisions is not None:
            self._decisions.abort_transaction(record)
        self.requests.append(("abort", record))

    def rewind_transaction(self) -> None:
        """Give up the open transaction and read its records again. After the
        current poll() returns, the framework aborts the open transaction (records
        already sent in it and the batch this poll returns are never visible),
        commits none of their offsets, stops the task (stop()) and starts a NEW
        instance of the task class (initialize(context) then start(config)) whose
        offset_storage_reader() returns the last committed offsets.

        Under a :class:`TaskRunner`: the list that poll returns is not sent, and
        the poll's other requests are dropped; ``commit_record`` and ``commit``
        are not called for the given-up records. Asked from ``commit_record`` or
        ``commit``, it acts at the end of the poll being handled."""
        if self._decisions is not None:
            self._decisions.rewind_transaction()
        self._rewind = True
        self.requests.append(("rewind", None))


class MemoryTaskContext:
    """An in-memory :class:`~connect_runtime.SourceTaskContext`.

    ``offsets`` is a :class:`CommittedOffsets` or the pairs to seed one with;
    ``transactions`` is what ``transaction_context()`` returns: None, as for a
    connector that does not run with ``transaction.boundary=connector``, or a
    :class:`RecordingTransactionContext`.
    """

    def __init__(self, config: Mapping[str, str],
                 offsets: CommittedOffsets | Iterable[tuple[SourcePartition,
                                                            SourceOffset | None]] = (),
                 transactions: RecordingTransactionContext | None = None) -> None:
        self._config = dict(config)
        self._offsets = offsets if isinstance(offsets, CommittedOffsets) else CommittedOffsets(
            offsets)
        self._transactions = transactions

    @property
    def config(self) -> dict[str, str]:
        """The task's configuration."""
        return self._config

    @property
    def offset_storage_reader(self) -> CommittedOffsets:
        """The committed offsets."""
        return self._offsets

    def transaction_context(self) -> RecordingTransactionContext | None:
        """The transaction context, or None (see the class docstring)."""
        return self._transactions


class Outcome(Enum):
    """How a transaction ended.

    * ``COMMITTED``: its records are visible to ``read_committed`` consumers and
      its offsets are committed.
    * ``ABORTED``: the task asked to abort. Its records are never visible, but
      its offsets are committed (in an offsets-only transaction right after the
      abort, Kafka Connect's rule), so the task is not handed them again.
    * ``DISCARDED``: aborted by the framework; its records are never visible and
      none of its offsets commit, so a task resuming from the reader reads them
      again. That happens to a connector-defined transaction still open at
      ``stop()`` that the task did not ask to end, to the open transaction when
      the task fails, and on ``rewind_transaction()``.
    """

    COMMITTED = "committed"
    ABORTED = "aborted"
    DISCARDED = "discarded"


@dataclass(frozen=True, slots=True)
class Transaction:
    """One transaction of a task, as the framework ended it.

    * ``outcome``: see :class:`Outcome`.
    * ``items``: what ``poll`` returned into it, in order: ``SourceRecord``
      objects, and ``RecordBatch`` objects whole (a batch is never split across
      transactions; an empty one sends nothing and is left out). A rewound
      transaction also holds what the poll that asked for the rewind returned
      (never sent).
    * ``offsets``: the ``(source partition, source offset)`` pairs committed
      with it, the latest of each partition, as the reader returns them
      afterwards; empty when it is ``DISCARDED`` or its records carry no
      source partition.
    """

    outcome: Outcome
    items: tuple[SourceRecord | RecordBatch, ...]
    offsets: tuple[_OffsetPair, ...]

    @property
    def records(self) -> list[SourceRecord]:
        """``items`` with each batch expanded to one ``SourceRecord`` per row, as
        the framework expands it (row ``i`` carries ``source_offsets[i]``, or the
        batch's ``source_offset``)."""
        out: list[SourceRecord] = []
        for item in self.items:
            if isinstance(item, RecordBatch):
                out += expand(item)
            else:
                out.append(item)
        return out


class _State(Enum):
    NEW = "new"
    RUNNING = "running"
    STOPPED = "stopped"
    FAILED = "failed"


class TaskRunner(Generic[_T]):
    """Drives a source task the way the exactly-once task loop does (see the module doc).

    ``task`` makes a new instance (the task class itself, usually): once at
    :meth:`start`, and again after each ``rewind_transaction()``. ``config`` is
    the task config, as ``SourceConnector.task_configs`` returns it.
    ``boundary`` is ``transaction.boundary``: ``poll`` (one transaction per
    poll that returned records), ``interval`` (a transaction ends after the
    first poll ``interval_ms`` after it began; ``clock``, in seconds, times
    that: pass your own to run without sleeping) or ``connector`` (the task
    ends them through ``self.context.transaction_context()``, which is None
    with the other two). ``offsets`` seeds the committed offsets.

    ``transactions`` lists every transaction that ended, in order; ``offsets``
    is the reader the task is given, updated as transactions commit; ``task``
    is the running instance and ``restarts`` counts rewinds.

    An exception from the task (or a ``DataException`` or
    ``InvalidOffsetException`` the framework would raise) discards the open
    transaction, calls ``task.stop()`` and propagates: the runner is then
    failed, and ``transactions`` shows what had ended before.
    """

    def __init__(self, task: Callable[[], _T], config: Mapping[str, str], *,
                 boundary: str = "poll", interval_ms: int = _DEFAULT_INTERVAL_MS,
                 offsets: CommittedOffsets | Iterable[tuple[SourcePartition,
                                                            SourceOffset | None]] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        if isinstance(interval_ms, bool) or not isinstance(interval_ms, int) or interval_ms < 0:
            raise ConfigException("Value must be an int >= 0",
                                  name="transaction.boundary.interval.ms", value=interval_ms)
        self._factory = task
        self._config = dict(config)
        self._kind = TransactionBoundary.parse(boundary).value
        self._interval_ms = interval_ms
        self._clock = clock
        self.offsets = offsets if isinstance(offsets, CommittedOffsets) else CommittedOffsets(
            offsets)
        self.transactions: list[Transaction] = []
        self.restarts = 0
        self._state = _State.NEW
        self._instance: _T | None = None  # set once started
        self._context: MemoryTaskContext | None = None
        # Per instance, set by _start_instance.
        self._boundary: BoundaryPolicy
        self._label = ""
        self._wants_metadata = False
        # The open transaction, as the loop tracks it.
        self._in_txn = False
        self._items: list[SourceRecord | RecordBatch] = []
        self._sent: list[tuple[SourceRecord, RecordMetadata]] = []  # for commit_record
        # id(partition dict) -> the record with its latest offset (the loop's rule)
        self._pending: dict[int, SourceRecord] = {}
        self._touched: set[tuple[str, int]] = set()  # topic partitions written to
        self._next_offset: dict[tuple[str, int], int] = {}

    # ------------------------------------------------------------ lifecycle

    @property
    def task(self) -> _T:
        """The running task instance (a new one after each rewind)."""
        if self._instance is None:
            raise ConnectError("TaskRunner: the task is not started; call start() or use "
                               "`with TaskRunner(...) as runner:`")
        return self._instance

    @property
    def context(self) -> MemoryTaskContext:
        """The context the running instance was initialized with."""
        if self._context is None:
            raise ConnectError("TaskRunner: the task is not started; call start() first")
        return self._context

    def start(self) -> _T:
        """Make the task, ``initialize(context)`` it and ``start(config)`` it; returns it.
        An exception from ``start`` propagates and leaves the runner failed."""
        self._require(_State.NEW, "start()")
        try:
            self._start_instance()
        except BaseException:
            self._state = _State.FAILED
            raise
        self._state = _State.RUNNING
        return self.task

    def stop(self) -> list[Transaction]:
        """``task.stop()``, then the final commit: ``poll`` and ``interval``
        commit what is open; a connector-defined transaction ends as the task
        asked (also from within ``stop()``), or else is DISCARDED. Returns every
        transaction. Does nothing once stopped or failed. An exception from
        ``task.stop()`` is raised once the final commit is made (the framework
        logs it and makes the commit all the same)."""
        if self._state is _State.NEW:
            raise ConnectError("TaskRunner.stop(): the task was never started")
        if self._state is not _State.RUNNING:
            return self.transactions
        stop_error: Exception | None = None
        try:
            self.task.stop()
        except Exception as e:
            # The framework logs it and still makes the final commit; a test hears of it
            # once that is done.
            stop_error = e
        try:
            decision = self._boundary.on_stop()
            if decision is Decision.NONE:
                self._discard()
            else:
                self._end(decision)
        except BaseException:
            self._discard()
            self._state = _State.FAILED
            raise
        self._state = _State.STOPPED
        if stop_error is not None:
            raise stop_error
        return self.transactions

    def __enter__(self) -> TaskRunner[_T]:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -------------------------------------------------------------- driving

    def poll(self) -> int:
        """One round of the loop: ``poll()``, send what it returned, then end the
        transaction if the boundary says so. Returns how many records ``poll``
        returned (a batch counts its rows)."""
        self._require(_State.RUNNING, "poll()")
        try:
            return self._round()
        except BaseException as error:
            self._fail(error)
            raise

    def run(self, polls: int | None = None, *, until: Callable[[], bool] | None = None,
            timeout_s: float = 30.0) -> list[Transaction]:
        """Poll rounds until ``until()`` is true (checked before each round) or
        ``polls`` rounds ran, whichever comes first; returns the transactions that
        ended meanwhile. With ``until``, TimeoutError if it is still false after
        ``polls`` rounds or ``timeout_s`` seconds of real time."""
        if polls is None and until is None:
            raise ConnectError("TaskRunner.run(): give polls=<rounds>, until=<condition>, "
                               "or both")
        first = len(self.transactions)
        deadline = time.monotonic() + timeout_s
        rounds = 0
        while until is None or not until():
            if polls is not None and rounds >= polls:
                if until is None:
                    break
                raise TimeoutError(f"TaskRunner.run(): until() was still false after {rounds} "
                                   f"polls; {self._progress()}")
            if until is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"TaskRunner.run(): until() was still false after "
                                   f"{timeout_s:g}s ({rounds} polls); {self._progress()}")
            self.poll()
            rounds += 1
        return self.transactions[first:]

    def committed_records(self) -> list[SourceRecord]:
        """The records of every COMMITTED transaction, in order: what a
        ``read_committed`` consumer would see (before converters and transforms)."""
        return [record for txn in self.transactions if txn.outcome is Outcome.COMMITTED
                for record in txn.records]

    # -------------------------------------------------- the loop's decisions

    def _start_instance(self) -> None:
        """A new instance with a new context, as task startup makes them."""
        transactions = RecordingTransactionContext() if self._kind == "connector" else None
        decisions = None
        if transactions is not None:
            decisions = transactions._decisions = TaskTransactionContext()
        self._boundary = BoundaryPolicy(self._kind, self._interval_ms, decisions, self._clock)
        instance = self._factory()
        self._label = type(instance).__name__
        # Overriding commit_record is what makes the framework track each record.
        self._wants_metadata = type(instance).commit_record is not SourceTask.commit_record
        self._context = MemoryTaskContext(self._config, self.offsets, transactions)
        instance.initialize(self._context)
        instance.start(dict(self._config))
        self._instance = instance  # only a started task is stopped, as in the framework

    def _round(self) -> int:
        polled = self.task.poll()
        size = 0
        unsent: Sequence[Any] = ()
        if polled and self._rewinding():  # asked in poll: the list is not sent at all
            size, unsent = record_count(polled), polled
        elif polled:
            size = dispatch(polled, self._label, records=self._send_records,
                            record_batch=self._send_record_batch)
        if not self._rewinding():  # a rewind wins over the poll's other requests
            decision = self._boundary.after_poll(size, self._in_txn)
            if decision is not Decision.NONE:
                self._end(decision)
        if self._rewinding():  # asked in poll, or in commit_record/commit just now
            self._rewind(unsent)
        return size

    def _rewinding(self) -> bool:
        # The runtime's own flag, as the loop reads it (BoundaryPolicy.rewind_requested).
        return self._boundary.rewind_requested

    def _send_records(self, records: Sequence[SourceRecord]) -> int:
        """A run of records, record by record (the loop's bulk path for runs
        decides nothing differently: no boundary ends a transaction inside it)."""
        for record in records:
            self._begin()
            self._items.append(record)
            metadata = self._write(record.topic, record.partition, 1, record.timestamp)
            if self._wants_metadata:
                self._sent.append((record, metadata))
            if record.source_partition is not None:
                self._latest(record)
            decision = self._boundary.after_record(record)
            if decision is not Decision.NONE:
                self._end(decision)
        return len(records)

    def _send_record_batch(self, batch: RecordBatch) -> int:
        """A checked batch, whole; then the boundary may end the transaction after it."""
        if len(batch.values):
            self._begin()
            self._items.append(batch)
            if self._wants_metadata:
                for row in expand(batch):
                    self._sent.append((row, self._write(row.topic, row.partition, 1,
                                                        row.timestamp)))
            else:
                self._write(batch.topic, batch.partition, len(batch.values), None)
            if batch.source_partition is not None:
                self._latest(offset_carrier(batch))
        decision = self._boundary.after_record(batch)
        if decision is not Decision.NONE:
            self._end(decision)
        return len(batch.values)

    def _begin(self) -> None:
        if not self._in_txn:
            self._in_txn = True
            self._boundary.transaction_began()

    def _write(self, topic: str, partition: int | None, count: int,
               timestamp: int | None) -> RecordMetadata:
        """``count`` records to a topic partition; the metadata of the first."""
        where = (topic, partition or 0)
        offset = self._next_offset.get(where, 0)
        self._next_offset[where] = offset + count
        self._touched.add(where)
        return RecordMetadata(topic, where[1], offset, timestamp)

    def _latest(self, record: SourceRecord) -> None:
        """``record`` carries the latest offset of its partition object; re-inserted
        so the order is that of latest writes, as the loop keeps it."""
        self._pending.pop(id(record.source_partition), None)
        self._pending[id(record.source_partition)] = record

    def _markers(self) -> None:
        """A commit or abort marker in each topic partition the transaction wrote to."""
        for where in self._touched:
            self._next_offset[where] += 1
        self._touched.clear()

    def _end(self, decision: Decision) -> None:
        """The loop's end of a transaction: an abort drops the records, then their
        offsets commit alone; a commit makes records and offsets visible together."""
        outcome = Outcome.COMMITTED
        if decision is Decision.ABORT:
            outcome = Outcome.ABORTED
            if self._in_txn:
                self._in_txn = False
                self._markers()
                sent, self._sent = self._sent, []
                for record, _ in sent:
                    self.task.commit_record(record, None)
        if not self._in_txn and not self._pending:
            if self._items:  # an abort whose records carried no offsets
                self._record(outcome, {})
            return
        written = self._offsets_to_write()
        self.offsets._apply(written.items())
        self._in_txn = False
        self._markers()
        self._record(outcome, written)
        sent, self._sent = self._sent, []
        for record, metadata in sent:
            self.task.commit_record(record, metadata)
        self.task.commit()

    def _offsets_to_write(self) -> dict[bytes, bytes | None]:
        """One offset per partition, the latest; InvalidOffsetException as the loop's."""
        latest: dict[bytes, bytes | None] = {}
        for record in self._pending.values():
            partition = record.source_partition
            assert partition is not None  # records without one are not tracked
            latest[serialize_key(_CONNECTOR, partition)] = serialize_value(record.source_offset)
        return latest

    def _record(self, outcome: Outcome, written: Mapping[bytes, bytes | None]) -> None:
        self.transactions.append(Transaction(
            outcome, tuple(self._items), tuple(_decoded(k, v) for k, v in written.items())))
        self._items = []
        self._pending.clear()

    def _discard(self, extra: Sequence[Any] = ()) -> None:
        """Abort what is open without committing its offsets (DISCARDED)."""
        # What a poll returned that sending would have put in the transaction.
        items = [*self._items, *(item for item in extra if isinstance(item, SourceRecord)
                                 or (isinstance(item, RecordBatch) and len(item.values)))]
        if self._in_txn:
            self._markers()
        self._in_txn = False
        self._items, self._sent = items, []
        if items:
            self._record(Outcome.DISCARDED, {})
        self._pending.clear()

    def _rewind(self, unsent: Sequence[Any]) -> None:
        """``rewind_transaction()``: discard the open transaction with what this poll
        returned unsent, stop the instance and start a new one on the committed
        offsets."""
        self._discard(unsent)
        stopping, self._instance = self.task, None
        stopping.stop()
        self.restarts += 1
        self._start_instance()

    def _fail(self, error: BaseException) -> None:
        """The task failed: discard what is open, stop it (as the slot does)."""
        self._discard()
        self._state = _State.FAILED
        if self._instance is not None:
            try:
                self._instance.stop()
            except Exception as stop_error:  # the task's failure is the news
                error.add_note(f"stop() raised too: {stop_error!r}")

    def _require(self, state: _State, what: str) -> None:
        if self._state is not state:
            raise ConnectError(f"TaskRunner.{what}: the runner is {self._state.value}; "
                               f"{what} needs it {state.value}")

    def _progress(self) -> str:
        return (f"{len(self.transactions)} transactions ended, "
                f"{len(self.committed_records())} records committed")


def _serialized(offsets: Iterable[tuple[SourcePartition, SourceOffset | None]],
                ) -> list[tuple[bytes, bytes | None]]:
    return [(serialize_key(_CONNECTOR, p), serialize_value(o)) for p, o in offsets]


def _decoded(key: bytes, value: bytes | None) -> _OffsetPair:
    return orjson.loads(key)[1], None if value is None else orjson.loads(value)
