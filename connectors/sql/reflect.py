"""Reading a table's (or the query's) columns from the database, and checking the mode's.

* A table's columns come from SQLAlchemy's inspector.
* The query's come from a temporary view made from it, reflected and dropped
  again in the same session: the database itself says what each result column
  is (on SQLite an expression such as ``a + 1`` has no declared type and maps
  to STRING; see ``columns.py``).
* :func:`offset_columns` resolves ``incrementing.column.name`` (empty: the
  table's one-column integer primary key, or an auto-incrementing integer
  column) and ``timestamp.column.name`` and checks their types. Its errors are
  :class:`ColumnProblem`, which says which configuration key is at fault, so
  ``validate`` reports it on that key and a task fails with the same words.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from connect_runtime import ConnectError

from .columns import ColumnInfo, is_integer, is_timestamp
from .config import INCREMENTING_COLUMN, TIMESTAMP_COLUMNS, Mode
from .tables import TableId


class ColumnProblem(ConnectError):
    """A configured column is missing or of the wrong type; ``key`` is the config key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def table_columns(conn: Connection, table: TableId) -> list[ColumnInfo]:
    """The columns of ``table``, in order; ``sa.exc.NoSuchTableError`` if it is gone."""
    found = sa.inspect(conn).get_columns(table.name, schema=table.schema)
    return [ColumnInfo(c["name"], c["type"], bool(c["nullable"])) for c in found]


def table_exists(conn: Connection, table: TableId) -> bool:
    return bool(sa.inspect(conn).has_table(table.name, schema=table.schema))


def query_columns(conn: Connection, query: str) -> list[ColumnInfo]:
    """The result columns of ``query`` (via a temporary view; see the module docstring)."""
    view = f"connect_query_{uuid.uuid4().hex[:12]}"
    create = f"CREATE TEMPORARY VIEW {view} AS {clean_query(query)}"
    if conn.dialect.paramstyle in ("format", "pyformat"):
        create = create.replace("%", "%%")  # the driver reads % as a placeholder
    conn.exec_driver_sql(create)
    try:
        inspector = sa.inspect(conn)
        try:
            found = inspector.get_columns(view)
        except sa.exc.NoSuchTableError:
            found = inspector.get_columns(view, schema="temp")  # SQLite keeps temp apart
    finally:
        conn.exec_driver_sql(f"DROP VIEW {view}")
        conn.commit()
    return [ColumnInfo(c["name"], c["type"], bool(c.get("nullable", True))) for c in found]


def clean_query(query: str) -> str:
    """The query without trailing semicolons (it becomes a subquery)."""
    return query.strip().rstrip(";").strip()


@dataclass(frozen=True)
class OffsetColumns:
    """The columns that position rows: the incrementing one and the timestamp ones."""

    incrementing: str | None
    timestamps: tuple[str, ...]


def offset_columns(mode: Mode, columns: Sequence[ColumnInfo], incrementing: str,
                   timestamps: Sequence[str], what: str,
                   primary_key: Sequence[str] = ()) -> OffsetColumns:
    """Resolve and check the mode's columns against ``columns`` of ``what`` (``"table x"``).

    Raises :class:`ColumnProblem` naming the configuration key at fault.
    """
    by_name = {c.name: c for c in columns}
    inc: str | None = None
    if mode.uses_incrementing:
        inc = incrementing or _auto_incrementing(columns, primary_key, what)
        column = by_name.get(inc)
        if column is None:
            raise ColumnProblem(INCREMENTING_COLUMN, f"Incrementing column {inc!r} does not "
                                f"exist in {what} (columns: {', '.join(by_name)})")
        if not is_integer(column.type):
            raise ColumnProblem(INCREMENTING_COLUMN, f"Incrementing column {inc!r} of {what} "
                                f"is {column.type}, not an integer type")
    ts: tuple[str, ...] = ()
    if mode.uses_timestamp:
        ts = tuple(timestamps)
        missing = [t for t in ts if t not in by_name]
        if missing:
            raise ColumnProblem(TIMESTAMP_COLUMNS, f"Timestamp column(s) {missing} do not "
                                f"exist in {what} (columns: {', '.join(by_name)})")
        wrong = [f"{t!r} is {by_name[t].type}" for t in ts if not is_timestamp(by_name[t].type)]
        if wrong:
            raise ColumnProblem(TIMESTAMP_COLUMNS, f"Timestamp column(s) of {what} must be "
                                f"DATETIME/TIMESTAMP or DATE: {', '.join(wrong)}")
    return OffsetColumns(inc, ts)


def _auto_incrementing(columns: Sequence[ColumnInfo], primary_key: Sequence[str],
                       what: str) -> str:
    integer_pk = [c.name for c in columns if c.name in primary_key and is_integer(c.type)]
    if len(primary_key) == 1 and integer_pk:
        return integer_pk[0]
    raise ColumnProblem(INCREMENTING_COLUMN, f"{what} has no single-column integer primary "
                        f"key to use as the incrementing column; set {INCREMENTING_COLUMN}")


def primary_key(conn: Connection, table: TableId) -> list[str]:
    constraint = sa.inspect(conn).get_pk_constraint(table.name, schema=table.schema)
    return list(constraint.get("constrained_columns") or [])
