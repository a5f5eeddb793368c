"""What differs between databases: engines, the clock, and how timestamps compare.

Every query compares and orders rows by one *timestamp expression* ``E``: the
timestamp column, or ``COALESCE(a, b, ...)`` of several (Confluent's rule).
The offset stores E's value, so E must compare in SQL exactly as its values
compare in Python. That holds for real timestamp types (PostgreSQL and most
databases). SQLite has none: a DATETIME column holds text, compared as text,
and ``'2024-01-01 10:00:00'`` (what ``CURRENT_TIMESTAMP`` writes) neither
equals nor sorts right against ``'2024-01-01 10:00:00.000000'`` (what
SQLAlchemy writes). So on SQLite E is ``strftime('%Y-%m-%d %H:%M:%f', ...)``:
one text form, millisecond precision, for every way SQLite accepts a time
(space or ``T``, with or without fraction or zone). Rows are then grouped and
positioned by the millisecond; values in records keep the column's own
precision. The price is that SQLite cannot use an index on the column.

The clock for ``timestamp.delay.interval.ms`` is the database's where we know
how to ask (PostgreSQL: ``clock_timestamp()``, SQLite: its ``'now'``, which is
this machine's clock anyway) and this process's UTC clock elsewhere.
Timestamps are naive UTC throughout; PostgreSQL sessions are put in UTC so
``timestamp with time zone`` values and the clock agree with that.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import URL, Connection, Engine

TS_LABEL = "__connect_ts"
"""The extra result column holding E (excluded from records)."""

_SQLITE_FORMAT = "%Y-%m-%d %H:%M:%f"  # SQLite's strftime; %f is SS.SSS
_SQLITE_PARSE = "%Y-%m-%d %H:%M:%S.%f"
EPOCH = datetime.datetime(1970, 1, 1)


def create_engine(url: URL) -> Engine:
    """An engine with a small pool that checks connections before use (a restarted
    database is reconnected to, not failed on)."""
    kwargs: dict[str, Any] = {"pool_pre_ping": True}
    if url.get_backend_name() == "postgresql" and url.get_driver_name() == "psycopg":
        # libpq option: every session in UTC (see the module docstring).
        kwargs["connect_args"] = {"options": "-c timezone=UTC"}
    return sa.create_engine(url, **kwargs)


def timestamp_expression(dialect_name: str,
                         columns: Sequence[sa.ColumnElement[Any]]) -> sa.ColumnElement[Any]:
    """E for ``columns`` (see the module docstring)."""
    # COALESCE with one argument is an error on SQLite.
    combined = columns[0] if len(columns) == 1 else sa.func.coalesce(*columns)
    if dialect_name == "sqlite":
        return sa.func.strftime(_SQLITE_FORMAT, combined, type_=sa.String())
    return combined


def to_utc(value: Any) -> datetime.datetime | None:
    """A value of E (or of a timestamp column) as a naive UTC datetime (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return datetime.datetime.strptime(value, _SQLITE_PARSE)
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value
    if isinstance(value, datetime.date):
        return datetime.datetime.combine(value, datetime.time())
    raise TypeError(f"not a timestamp: {value!r}")


def bind_timestamp(dialect_name: str, value: datetime.datetime) -> Any:
    """A parameter comparable with E."""
    if dialect_name == "sqlite":
        return value.strftime(_SQLITE_PARSE)[:23]  # milliseconds, as strftime('%f') writes
    return value


def database_now(conn: Connection) -> datetime.datetime:
    """The database's current time, naive UTC (see the module docstring)."""
    name = conn.dialect.name
    if name == "sqlite":
        raw = conn.execute(sa.select(sa.func.strftime(_SQLITE_FORMAT, "now"))).scalar_one()
        return datetime.datetime.strptime(raw, _SQLITE_PARSE)
    if name == "postgresql":
        # clock_timestamp(), not now(): now() is frozen at the start of the transaction.
        value = conn.execute(sa.text("SELECT clock_timestamp()")).scalar_one()
        result = to_utc(value)
        assert result is not None
        return result
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)


def epoch_ms_and_nanos(value: datetime.datetime) -> tuple[int, int]:
    """Confluent's offset pair: ms since the epoch, and nanoseconds within the second
    (what ``java.sql.Timestamp`` keeps in ``getTime`` and ``getNanos``)."""
    ms = (value - EPOCH) // datetime.timedelta(milliseconds=1)
    return ms, value.microsecond * 1000


def from_epoch(ms: int, nanos: int | None) -> datetime.datetime:
    """The inverse of :func:`epoch_ms_and_nanos` (to microseconds)."""
    seconds = ms // 1000
    micros = (nanos // 1000) if nanos is not None else (ms % 1000) * 1000
    return EPOCH + datetime.timedelta(seconds=seconds, microseconds=micros)


def error_line(error: BaseException, password: str | None = None) -> str:
    """A database error's first line, for messages: the driver's words without
    SQLAlchemy's SQL and parameter dump, the password masked should a driver echo it."""
    line = (str(error).strip().splitlines() or [type(error).__name__])[0]
    return line.replace(password, "***") if password else line
