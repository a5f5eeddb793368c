"""The task: reads its tables (or the query) in turn, one bounded step per ``poll``.

* ``start`` reads the committed offset of each of its sources (Confluent's
  shapes, ``offsets.py``) and makes a :class:`~.reader.SourceReader` for each.
* ``poll`` picks the source that is due (a source that returned a full batch
  is due again at once; one that is caught up after ``poll.interval.ms``),
  runs one step of it and returns its rows as one
  :class:`~connect_runtime.api.record.RecordBatch` (offsets per row, see
  ``reader.py``). A source in the middle of a
  timestamp group is always picked until the group ends, so records of a
  half-read group are never followed by another source's.
* With ``transaction.boundary=connector`` the task commits after every step
  that ends at a safe point (``Step.boundary``): every batch in the
  incrementing modes, and only where a timestamp group ends in timestamp mode
  (``commit_transaction(batch)``: after the batch's last row).
  A transaction left open when the task stops is discarded by the framework,
  so a restart resumes at the end of the last whole group.
* ``stop`` may come from another thread: it wakes a waiting ``poll``, waits for
  a running step, and closes the database connections.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping

from connect_runtime import RecordBatch, SourceTask, TransactionContext, __version__

from .config import Mode, SqlConfig, parse, safe_url, task_tables
from .dialect import create_engine
from .offsets import Offset, query_partition, table_partition
from .reader import ReaderSettings, SourceReader, SourceSpec
from .tables import TableId

log = logging.getLogger(__name__)

IDLE_WAIT_S = 1.0  # longest a poll blocks while nothing is due: keeps pause/stop prompt


class SqlSourceTask(SourceTask):
    """Reads rows of its tables as records (see the module docstring)."""

    def __init__(self) -> None:
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # a step and stop()'s cleanup never overlap
        self._readers: list[SourceReader] = []
        self._due: list[float] = []
        self._txn: TransactionContext | None = None

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        sql = parse(config)
        self._poll_interval_s = sql.poll_interval_s
        self._engine = create_engine(sql.url)
        specs = _specs(sql, task_tables(config))
        settings = ReaderSettings(sql.mode, sql.incrementing_column, sql.timestamp_columns,
                                  sql.batch_max_rows, sql.timestamp_delay_s,
                                  sql.table_poll_interval_s)
        offsets = self._committed(specs)
        self._readers = [SourceReader(self._engine, spec, settings,
                                      Offset.from_map(offset, spec.label))
                         for spec, offset in zip(specs, offsets, strict=True)]
        self._due = [0.0] * len(self._readers)
        self._txn = self.context.transaction_context()
        log.info("SQL source task reading %s from %s in mode %s",
                 [r.spec.label for r in self._readers], safe_url(sql.url), sql.mode.value)

    def _committed(self, specs: list[SourceSpec]) -> list[dict[str, object] | None]:
        partitions = [s.partition for s in specs if s.partition is not None]
        found = {_key(p): o for p, o in self.context.offset_storage_reader.offsets(partitions)}
        return [None if s.partition is None else found.get(_key(s.partition)) for s in specs]

    def poll(self) -> list[RecordBatch] | None:
        if self._stopping.is_set() or not self._readers:
            self._stopping.wait(IDLE_WAIT_S)
            return None
        index, wait = self._next()
        if wait > 0:
            if self._stopping.wait(min(wait, IDLE_WAIT_S)):
                return None
            index, wait = self._next()
            if wait > 0:
                return None
        with self._lock:
            if self._stopping.is_set():
                return None
            step = self._readers[index].read()
        now = time.monotonic()
        self._due[index] = now if step.more else now + self._poll_interval_s
        if step.batch is None:
            return None
        if step.boundary and self._txn is not None:
            self._txn.commit_transaction(step.batch)
        return [step.batch]

    def _next(self) -> tuple[int, float]:
        """The source to read now (a half-read group first), and how long until it is due."""
        for i, reader in enumerate(self._readers):
            if reader.in_group:
                return i, 0.0
        index = min(range(len(self._due)), key=self._due.__getitem__)
        return index, self._due[index] - time.monotonic()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            for reader in self._readers:
                reader.close()
            engine = getattr(self, "_engine", None)
            if engine is not None:
                engine.dispose()


def _specs(sql: SqlConfig, tables: list[str]) -> list[SourceSpec]:
    bulk = sql.mode is Mode.BULK
    if sql.query:
        return [SourceSpec(None, sql.query, sql.topic_prefix,
                           None if bulk else query_partition())]
    specs = []
    for name in tables:
        table = TableId.parse(name)
        specs.append(SourceSpec(table, "", sql.topic_prefix + table.name,
                                None if bulk else table_partition(table.qualified)))
    return specs


def _key(partition: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    return tuple(sorted(partition.items()))
