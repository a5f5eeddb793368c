"""``validate``'s checks that need the database, each reported on the key to change.

=====================================  ===========================================
problem                                reported on
=====================================  ===========================================
not a URL, no driver, cannot connect   ``connection.url`` (password masked)
whitelisted table that does not exist  ``table.whitelist``
two tables sharing a topic name        ``table.whitelist`` / ``table.include.list``
the query does not run                 ``query``
incrementing column missing or not an  ``incrementing.column.name``
integer (or no integer primary key)
timestamp column missing or not a      ``timestamp.column.name``
timestamp/date
=====================================  ===========================================

Only run when the keys themselves parsed (a bad ``mode`` is already reported by
its validator; there is nothing to check columns against then).
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from connect_runtime import ConfigException

from .config import (
    CONNECTION_URL,
    QUERY,
    TABLE_WHITELIST,
    SqlConfig,
    safe_url,
)
from .dialect import create_engine, error_line
from .reflect import ColumnProblem, offset_columns, primary_key, query_columns, table_columns
from .tables import TableId, discover, missing_from_whitelist, select

Report = Callable[[str, str], None]  # (key, message)


def check_database(sql: SqlConfig, report: Report) -> None:
    """Connect and check tables, the query and the mode's columns (see the module doc)."""
    engine = create_engine(sql.url)
    try:
        try:
            conn = engine.connect()
        except sa.exc.SQLAlchemyError as e:
            report(CONNECTION_URL, f"Could not connect to {safe_url(sql.url)}: "
                   f"{error_line(e, sql.password)}")
            return
        with conn:
            if sql.query:
                _check_query(conn, sql, report)
            else:
                _check_tables(conn, sql, report)
    finally:
        engine.dispose()


def _check_query(conn: Connection, sql: SqlConfig, report: Report) -> None:
    try:
        columns = query_columns(conn, sql.query)
    except sa.exc.SQLAlchemyError as e:
        conn.rollback()
        report(QUERY, f"The query does not run: {error_line(e, sql.password)}")
        return
    try:
        offset_columns(sql.mode, columns, sql.incrementing_column, sql.timestamp_columns,
                       "the query")
    except ColumnProblem as e:
        report(e.key, str(e))


def _check_tables(conn: Connection, sql: SqlConfig, report: Report) -> None:
    tables = discover(conn)
    missing = missing_from_whitelist(tables, sql.whitelist)
    if missing:
        known = ", ".join(t.qualified for t in tables) or "none"
        report(TABLE_WHITELIST, f"Table(s) {missing} do not exist (tables: {known})")
    try:
        chosen = select(tables, sql)
    except ConfigException as e:
        report(e.name or TABLE_WHITELIST, str(e))
        return
    for table in chosen:
        problem = _column_problem(conn, table, sql)
        if problem is not None:
            report(problem.key, str(problem))


def _column_problem(conn: Connection, table: TableId, sql: SqlConfig) -> ColumnProblem | None:
    what = f"table {table.qualified}"
    columns = table_columns(conn, table)
    needs_pk = sql.mode.uses_incrementing and not sql.incrementing_column
    pk = primary_key(conn, table) if needs_pk else []
    try:
        offset_columns(sql.mode, columns, sql.incrementing_column, sql.timestamp_columns,
                       what, pk)
    except ColumnProblem as e:
        return e
    return None

