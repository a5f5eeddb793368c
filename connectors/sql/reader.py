"""Reading one source (a table or the query) in its mode: the task's unit of work.

:meth:`SourceReader.read` runs one bounded step and returns a :class:`Step`:
its rows (at most ``batch.max.rows``) as one
:class:`~connect_runtime.api.record.RecordBatch`, whether its last row ends at
a safe commit point (``boundary``: the end of a timestamp group; always true in
the other modes), and whether more rows may be ready right away (``more``).
The queries are ``queries.py``'s, the offset rules ``progress.py``'s.

The batch carries one offset per row (``source_offsets``): each row's resume
point, exactly what a record per row carried (``progress.py``). Not one per
batch: the at-least-once loop commits a per-batch offset only once every row
of the batch is acknowledged, where a per-row offset lets each acknowledged
row's position be committed, and transforms and ``commit_record`` see each
row's own offset. In bulk mode there is no source partition and no offset, as
before.

A timestamp group cut by the LIMIT is read by its own query and streamed,
``batch.max.rows`` rows per step, from one open cursor (a server-side cursor
on PostgreSQL), so a group of any size is read whole without holding it in
memory; :attr:`SourceReader.in_group` is true meanwhile, and the task reads
nothing else until it ends (a commit for another table would commit half the
group). Bulk mode streams the whole table the same way, once per poll interval.

Errors: a table that no longer exists fails the task, saying so. After any
other database error the columns are read again (a column added or dropped
rebuilds the statements); errors of the connection or of a busy database are
logged and retried after ``poll.interval.ms``; anything else fails the task
with the database's message. An error after part of a timestamp group was
emitted fails the task too: the group's order is not repeatable, so only
aborting the open transaction and reading the group again whole is safe. Rows
breaking the mode's rules (``progress.py``) fail it as well.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from connect_runtime import ConnectError, RecordBatch

from . import queries
from .columns import ColumnInfo, RowMapping, row_mapping
from .config import Mode
from .dialect import database_now, error_line, to_utc
from .offsets import Offset
from .progress import (
    check_incrementing,
    check_positions,
    group_offsets,
    plan_timestamp_batch,
)
from .reflect import (
    OffsetColumns,
    offset_columns,
    primary_key,
    query_columns,
    table_columns,
    table_exists,
)
from .tables import TableId

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SourceSpec:
    """One thing a task reads: a table, or (``table`` None) the query."""

    table: TableId | None
    query: str
    topic: str
    partition: dict[str, str] | None  # None in bulk mode: nothing to resume from

    @property
    def label(self) -> str:
        return "the query" if self.table is None else f"table {self.table.qualified}"


@dataclass(frozen=True)
class ReaderSettings:
    mode: Mode
    incrementing_column: str
    timestamp_columns: tuple[str, ...]
    batch_max_rows: int
    timestamp_delay_s: float
    refresh_s: float  # how often the columns are read again


@dataclass(frozen=True)
class Step:
    batch: RecordBatch | None  # None: no rows
    boundary: bool
    more: bool


class RowStream:
    """Rows of one statement fetched in chunks from an open cursor, with one row of
    lookahead so the chunk that ends the result knows it does."""

    def __init__(self, engine: Engine, statement: queries.Select, chunk: int) -> None:
        self._conn = engine.connect().execution_options(stream_results=True, yield_per=chunk)
        try:
            self._result = self._conn.execute(statement)
        except BaseException:
            self._conn.close()
            raise
        self._pending: Row[Any] | None = None

    def fetch(self, n: int) -> tuple[list[Row[Any]], bool]:
        """Up to ``n`` rows, and whether they are the last (the stream is then closed)."""
        rows = [] if self._pending is None else [self._pending]
        self._pending = None
        rows += self._result.fetchmany(n - len(rows))
        peek = self._result.fetchone() if len(rows) == n else None
        if peek is None:
            self.close()
            return rows, True
        self._pending = peek
        return rows, False

    def close(self) -> None:
        self._result.close()
        self._conn.close()


class SourceReader:
    """Reads one source from ``offset`` on (see the module docstring)."""

    def __init__(self, engine: Engine, spec: SourceSpec, settings: ReaderSettings,
                 offset: Offset) -> None:
        self.spec = spec
        self.offset = offset
        self._engine = engine
        self._settings = settings
        self._columns: list[ColumnInfo] | None = None
        self._positions = OffsetColumns(None, ())
        self._shape: queries.Shape | None = None
        self._mapping: RowMapping | None = None
        self._inc_index = -1
        self._refreshed_at = 0.0
        self._stream: RowStream | None = None
        self._group: datetime.datetime | None = None  # the timestamp group being read
        self._group_rows = 0  # rows of it already emitted

    @property
    def in_group(self) -> bool:
        """True while a timestamp group (or a bulk pass) is half read."""
        return self._group is not None or self._stream is not None

    def read(self) -> Step:
        try:
            if not self.in_group and (
                    self._shape is None
                    or time.monotonic() - self._refreshed_at >= self._settings.refresh_s):
                self._refresh()
            return self._read_mode()
        except sa.exc.NoSuchTableError as e:
            self.close()
            raise self._dropped(e) from e
        except sa.exc.DBAPIError as e:
            self.close()
            if self._group_rows and self._group is not None:
                # Part of the group is in the open transaction and the rest cannot be
                # told apart: failing aborts it, and a restart reads the group whole.
                raise ConnectError(
                    f"Reading {self.spec.label} failed in the middle of the rows with "
                    f"timestamp {self._group} ({error_line(e)}); failing so the open "
                    "transaction is aborted and the group is read again whole") from e
            return self._after_error(e)

    def close(self) -> None:
        """Close an open cursor (a group or bulk pass then starts over when read next)."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            try:
                stream.close()
            except sa.exc.SQLAlchemyError:
                log.debug("closing the cursor of %s failed", self.spec.label, exc_info=True)

    # ---------------------------------------------------------------- columns

    def _refresh(self) -> bool:
        """Read the columns again; True if they changed (the statements are rebuilt)."""
        mode, spec = self._settings.mode, self.spec
        with self._engine.connect() as conn:
            columns, pk = self._reflect(conn)
        self._refreshed_at = time.monotonic()
        if self._columns is not None and _signature(columns) == _signature(self._columns):
            return False
        positions = offset_columns(mode, columns, self._settings.incrementing_column,
                                   self._settings.timestamp_columns, spec.label, pk)
        name = self._engine.dialect.name
        if spec.table is None:
            self._shape = queries.query_shape(spec.query, columns, positions, name)
        else:
            self._shape = queries.table_shape(spec.table, columns, positions, name)
        self._mapping = row_mapping(columns, None if spec.table is None else spec.table.name,
                                    name)
        self._inc_index = ([c.name for c in columns].index(positions.incrementing)
                           if positions.incrementing else -1)
        if self._columns is not None:
            log.info("The columns of %s changed; records now have schema %s", spec.label,
                     [f.name for f in self._mapping.schema.fields])
        self._columns, self._positions = columns, positions
        return True

    def _reflect(self, conn: Connection) -> tuple[list[ColumnInfo], list[str]]:
        if self.spec.table is None:
            return query_columns(conn, self.spec.query), []
        table = self.spec.table
        needs_pk = self._settings.mode.uses_incrementing and not (
            self._settings.incrementing_column)
        return table_columns(conn, table), primary_key(conn, table) if needs_pk else []

    # ------------------------------------------------------------------ modes

    def _read_mode(self) -> Step:
        mode = self._settings.mode
        if mode is Mode.INCREMENTING:
            return self._read_incrementing()
        if mode is Mode.TIMESTAMP_INCREMENTING:
            return self._read_timestamp_incrementing()
        if mode is Mode.TIMESTAMP:
            return self._read_timestamp()
        return self._read_bulk()

    def _read_incrementing(self) -> Step:
        assert self._shape is not None
        n, last = self._settings.batch_max_rows, self.offset.incrementing
        with self._engine.connect() as conn:
            rows = conn.execute(queries.incrementing(self._shape, self.offset, n)).fetchall()
        values = [_as_int(row[self._inc_index]) for row in rows]
        skip = check_incrementing(values, last, self.spec.label,
                                  self._positions.incrementing or "")
        emitted = values[skip:skip + n]
        batch = self._batch(rows[skip:skip + n], [Offset(incrementing=v) for v in emitted])
        if emitted:
            self.offset = Offset(incrementing=emitted[-1])
        return Step(batch, True, more=len(rows) == (n if last is None else n + 1))

    def _read_timestamp_incrementing(self) -> Step:
        assert self._shape is not None
        n = self._settings.batch_max_rows
        with self._engine.connect() as conn:
            end = self._end(conn)
            statement = queries.timestamp_incrementing(self._shape, self.offset, end, n)
            rows = conn.execute(statement).fetchall()
        positions = [(_ts(row), _as_int(row[self._inc_index])) for row in rows]
        check_positions(positions, (self.offset.timestamp, self.offset.incrementing),
                        self.spec.label, self._positions.incrementing or "")
        batch = self._batch(rows, [Offset(ts, inc) for ts, inc in positions])
        if rows:
            self.offset = Offset(*positions[-1])
        return Step(batch, True, more=len(rows) == n)

    def _read_timestamp(self) -> Step:
        assert self._shape is not None
        if self._group is not None:
            return self._read_group()
        n = self._settings.batch_max_rows
        with self._engine.connect() as conn:
            end = self._end(conn)
            rows = conn.execute(queries.timestamp(self._shape, self.offset, end, n)).fetchall()
        keys = [_ts(row) for row in rows]
        plan = plan_timestamp_batch(keys, len(rows) == n, self.offset.timestamp)
        batch = self._batch(rows[:plan.emit], [Offset(ts) for ts in plan.offsets])
        if plan.emit:
            self.offset = Offset(keys[plan.emit - 1])
        if plan.cut_group is None:
            return Step(batch, True, more=False)
        self._group, self._group_rows = plan.cut_group, 0
        return Step(batch, True, more=True) if batch is not None else self._read_group()

    def _read_group(self) -> Step:
        """The next rows of the group being read (its query opens on the first call)."""
        assert self._shape is not None and self._group is not None
        n = self._settings.batch_max_rows
        if self._stream is None:
            self._stream = RowStream(self._engine,
                                     queries.timestamp_group(self._shape, self._group), n)
        rows, finished = self._stream.fetch(n)
        offsets = group_offsets(len(rows), finished, self._group, self.offset.timestamp)
        batch = self._batch(rows, [Offset(ts) for ts in offsets])
        self._group_rows += len(rows)
        if finished:
            self._stream = None
            self.offset, self._group = Offset(self._group), None
        return Step(batch, finished, more=True)

    def _read_bulk(self) -> Step:
        assert self._shape is not None
        if self._stream is None:
            self._stream = RowStream(self._engine, queries.bulk(self._shape),
                                     self._settings.batch_max_rows)
        rows, finished = self._stream.fetch(self._settings.batch_max_rows)
        if finished:
            self._stream = None
        return Step(self._batch(rows, None), True, more=not finished)

    def _end(self, conn: Connection) -> datetime.datetime:
        """The upper bound of timestamps read: the database's clock minus the delay."""
        return database_now(conn) - datetime.timedelta(seconds=self._settings.timestamp_delay_s)

    def _batch(self, rows: Sequence[Sequence[Any]],
               offsets: Sequence[Offset] | None) -> RecordBatch | None:
        """``rows`` as one batch: a Struct per row, ``offsets[i]`` the resume point after
        row ``i`` (None in bulk mode, which has no source partition either); None if
        there are no rows."""
        if not rows:
            return None
        assert self._mapping is not None
        to_struct = self._mapping.to_struct
        values = [to_struct(row) for row in rows]
        if offsets is None:
            assert self.spec.partition is None  # a partition without offsets would reset it
            return RecordBatch(self.spec.topic, values, value_schema=self._mapping.schema)
        assert len(offsets) == len(values)
        return RecordBatch(self.spec.topic, values, source_partition=self.spec.partition,
                           source_offsets=[o.to_map() for o in offsets],
                           value_schema=self._mapping.schema)

    # ----------------------------------------------------------------- errors

    def _dropped(self, error: BaseException) -> ConnectError:
        return ConnectError(
            f"{self.spec.label} no longer exists: it was dropped or renamed while the "
            f"connector read it ({error_line(error)}). Recreate it, or take it out of the "
            "table lists; the connector's table monitor also reassigns tasks without it.")

    def _after_error(self, error: sa.exc.DBAPIError) -> Step:
        """See the module docstring: fail readably, rebuild, or wait and retry."""
        try:
            if self.spec.table is not None:
                with self._engine.connect() as conn:
                    gone = not table_exists(conn, self.spec.table)
                if gone:
                    raise self._dropped(error) from error
            if self._refresh():
                return Step(None, True, more=True)
        except sa.exc.SQLAlchemyError:
            pass  # the database cannot even be asked: treat as transient below
        if error.connection_invalidated or isinstance(
                error, sa.exc.OperationalError | sa.exc.InterfaceError):
            log.warning("Reading %s failed; retrying after poll.interval.ms: %s",
                        self.spec.label, error_line(error))
            return Step(None, True, more=False)
        raise ConnectError(f"Reading {self.spec.label} failed: {error_line(error)}") from error


def _signature(columns: Sequence[ColumnInfo]) -> list[tuple[str, str, bool]]:
    # SQLAlchemy types do not compare by value; their repr does name the parameters.
    return [(c.name, repr(c.type), c.nullable) for c in columns]


def _ts(row: Sequence[Any]) -> Any:
    return to_utc(row[-1])


def _as_int(value: Any) -> int | None:
    return None if value is None else int(value)

