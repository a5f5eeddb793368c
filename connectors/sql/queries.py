"""The SELECT statements of each mode, built with SQLAlchemy Core (no I/O here).

With E the timestamp expression (``dialect.py``), ``inc`` the incrementing
column, ``(t, i)`` the offset, ``end`` the database clock minus
``timestamp.delay.interval.ms`` and ``n`` = ``batch.max.rows``:

=========================  ====================================================================
incrementing               ``WHERE inc >= i ORDER BY inc LIMIT n + 1``: the row at ``i`` is
                           read again on purpose, so a second row with the same value (a
                           column that is not unique) is caught instead of skipped
timestamp+incrementing     ``WHERE E < end AND ((E = t AND inc > i) OR E > t)
                           ORDER BY E, inc LIMIT n`` (Confluent's criteria)
timestamp                  ``WHERE E > t AND E < end ORDER BY E LIMIT n``; a timestamp
                           group cut by the LIMIT is then read whole by
                           ``WHERE E = <its timestamp>`` (see ``progress.py``)
bulk                       every row, streamed
=========================  ====================================================================

Without an offset the lower bound is left out. Every statement selects E as an
extra last column (``TS_LABEL``) so the offset is E's value exactly as the
database compares it.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from .columns import ColumnInfo
from .dialect import TS_LABEL, bind_timestamp, timestamp_expression
from .offsets import Offset
from .reflect import OffsetColumns, clean_query
from .tables import TableId

Select = sa.Select[Any]


@dataclass(frozen=True)
class Shape:
    """What the statements read: the row columns, E and the incrementing column."""

    source: sa.FromClause
    columns: tuple[sa.ColumnElement[Any], ...]
    ts: sa.ColumnElement[Any] | None
    inc: sa.ColumnElement[Any] | None
    dialect_name: str

    def select(self) -> Select:
        extra = () if self.ts is None else (self.ts.label(TS_LABEL),)
        return sa.select(*self.columns, *extra).select_from(self.source)

    def bind_ts(self, value: datetime.datetime) -> Any:
        return bind_timestamp(self.dialect_name, value)


def table_shape(table: TableId, columns: Sequence[ColumnInfo], offset_columns: OffsetColumns,
                dialect_name: str) -> Shape:
    """The shape of a table (a lightweight ``sa.Table`` from the reflected columns)."""
    source = sa.Table(table.name, sa.MetaData(),
                      *(sa.Column(c.name, c.type) for c in columns), schema=table.schema)
    return _shape(source, columns, offset_columns, dialect_name)


def query_shape(query: str, columns: Sequence[ColumnInfo], offset_columns: OffsetColumns,
                dialect_name: str) -> Shape:
    """The shape of the user's query, wrapped as a subquery (so it may have a WHERE)."""
    # text() reads ":name" as a bind parameter; the user's query has none, so every
    # colon is literal (PostgreSQL casts, times, strings).
    literal = clean_query(query).replace(":", "\\:")
    text = sa.text(literal).columns(*(sa.column(c.name, c.type) for c in columns))
    return _shape(text.subquery("connect_query"), columns, offset_columns, dialect_name)


def _shape(source: sa.FromClause, columns: Sequence[ColumnInfo], offset_columns: OffsetColumns,
           dialect_name: str) -> Shape:
    cols = tuple(source.c[c.name] for c in columns)
    ts = None
    if offset_columns.timestamps:
        ts = timestamp_expression(dialect_name, [source.c[t] for t in offset_columns.timestamps])
    inc = None if offset_columns.incrementing is None else source.c[offset_columns.incrementing]
    return Shape(source, cols, ts, inc, dialect_name)


def incrementing(shape: Shape, offset: Offset, limit: int) -> Select:
    assert shape.inc is not None
    query = shape.select().order_by(shape.inc)
    if offset.incrementing is None:
        return query.limit(limit)
    return query.where(shape.inc >= offset.incrementing).limit(limit + 1)


def timestamp_incrementing(shape: Shape, offset: Offset, end: datetime.datetime,
                           limit: int) -> Select:
    assert shape.ts is not None and shape.inc is not None
    ts, inc = shape.ts, shape.inc
    query = shape.select().where(ts < shape.bind_ts(end)).order_by(ts, inc).limit(limit)
    if offset.timestamp is None:
        return query
    last = shape.bind_ts(offset.timestamp)
    if offset.incrementing is None:  # an offset from timestamp mode: strictly after it
        return query.where(ts > last)
    return query.where(sa.or_(sa.and_(ts == last, inc > offset.incrementing), ts > last))


def timestamp(shape: Shape, offset: Offset, end: datetime.datetime, limit: int) -> Select:
    assert shape.ts is not None
    query = shape.select().where(shape.ts < shape.bind_ts(end)).order_by(shape.ts).limit(limit)
    if offset.timestamp is None:
        return query
    return query.where(shape.ts > shape.bind_ts(offset.timestamp))


def timestamp_group(shape: Shape, group: datetime.datetime) -> Select:
    """Every row of one timestamp (no LIMIT: it is streamed)."""
    assert shape.ts is not None
    return shape.select().where(shape.ts == shape.bind_ts(group))


def bulk(shape: Shape) -> Select:
    return shape.select()
