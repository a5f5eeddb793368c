"""The SQL source's configuration keys (Confluent JDBC source's names) and their checks.

Everything here is pure: no database is touched. :func:`parse` turns the
connector's ``dict[str, str]`` into a :class:`SqlConfig` or raises the first
:class:`ConfigException` (naming its key); :func:`cross_key_errors` lists every
problem between keys, by key, for ``validate``. Connecting and checking tables
and columns is ``validation.py``'s job.

``connection.url`` is a SQLAlchemy URL. The two JDBC forms most users arrive
with are rewritten (``jdbc:sqlite:<path>``, ``jdbc:postgresql://host/db?user=..``);
any other ``jdbc:`` URL, and a dialect alias SQLAlchemy refuses (``postgres://``),
is refused with a message saying what to write instead.
``connection.user`` / ``connection.password`` override the URL's credentials;
the password is a PASSWORD key: never rendered, never logged
(:func:`safe_url` is how a URL is shown).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl

import sqlalchemy as sa
from sqlalchemy.engine import URL

from connect_runtime import (
    ConfigDef,
    ConfigException,
    Importance,
    NonEmptyString,
    Range,
    Type,
    ValidString,
)

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"
MODE = "mode"
INCREMENTING_COLUMN = "incrementing.column.name"
TIMESTAMP_COLUMNS = "timestamp.column.name"
TABLE_WHITELIST = "table.whitelist"
TABLE_BLACKLIST = "table.blacklist"
TABLE_INCLUDE_LIST = "table.include.list"
TABLE_EXCLUDE_LIST = "table.exclude.list"
QUERY = "query"
TOPIC_PREFIX = "topic.prefix"
POLL_INTERVAL_MS = "poll.interval.ms"
BATCH_MAX_ROWS = "batch.max.rows"
TIMESTAMP_DELAY_MS = "timestamp.delay.interval.ms"
TABLE_POLL_INTERVAL_MS = "table.poll.interval.ms"
TRANSACTION_BOUNDARY = "transaction.boundary"  # the framework's key; read for EOS support
EXACTLY_ONCE_SUPPORT = "exactly.once.support"  # the framework's key; validate explains a "no"

TASK_TABLES = "sql.task.tables"  # task configs only: JSON list of the task's tables


class Mode(Enum):
    """How rows are found (``mode``); the value is Confluent's name."""

    BULK = "bulk"
    INCREMENTING = "incrementing"
    TIMESTAMP = "timestamp"
    TIMESTAMP_INCREMENTING = "timestamp+incrementing"

    @property
    def uses_incrementing(self) -> bool:
        return self in (Mode.INCREMENTING, Mode.TIMESTAMP_INCREMENTING)

    @property
    def uses_timestamp(self) -> bool:
        return self in (Mode.TIMESTAMP, Mode.TIMESTAMP_INCREMENTING)


CONFIG_DEF = (
    ConfigDef()
    .define(CONNECTION_URL, Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            documentation="A SQLAlchemy database URL, e.g. sqlite:////var/data/app.db or "
            "postgresql+psycopg://host:5432/db. jdbc:sqlite: and jdbc:postgresql: URLs are "
            "rewritten to their SQLAlchemy form.")
    .define(CONNECTION_USER, Type.STRING, None, importance=Importance.HIGH,
            documentation="Database user; overrides a user in the URL.")
    .define(CONNECTION_PASSWORD, Type.PASSWORD, None, importance=Importance.HIGH,
            documentation="Database password; overrides a password in the URL. Never shown "
            "or logged.")
    .define(MODE, Type.STRING, validator=ValidString.in_(*(m.value for m in Mode)),
            importance=Importance.HIGH,
            documentation="bulk (the whole table at each poll), incrementing (new rows by a "
            "strictly increasing column), timestamp (new and changed rows by timestamp "
            "columns), timestamp+incrementing (both; each row gets a unique position).")
    .define(INCREMENTING_COLUMN, Type.STRING, "", importance=Importance.MEDIUM,
            documentation="The strictly increasing, unique, non-null integer column. Empty: "
            "the table's auto-incrementing integer primary key.")
    .define(TIMESTAMP_COLUMNS, Type.LIST, "", importance=Importance.MEDIUM,
            documentation="Timestamp columns; several are combined as COALESCE(a, b, ...). "
            "At least one should be NOT NULL: rows where all are null are never read.")
    .define(TABLE_WHITELIST, Type.LIST, "", importance=Importance.MEDIUM,
            documentation="Tables to copy (names or schema-qualified names). Not with "
            "table.blacklist.")
    .define(TABLE_BLACKLIST, Type.LIST, "", importance=Importance.MEDIUM,
            documentation="Tables not to copy. Not with table.whitelist.")
    .define(TABLE_INCLUDE_LIST, Type.LIST, "", importance=Importance.MEDIUM,
            documentation="Regular expressions; a table is copied if one matches its whole "
            "name or schema-qualified name. Not with table.whitelist/blacklist.")
    .define(TABLE_EXCLUDE_LIST, Type.LIST, "", importance=Importance.MEDIUM,
            documentation="Regular expressions of tables not to copy among those the "
            "include list selects. Requires table.include.list.")
    .define(QUERY, Type.STRING, "", importance=Importance.MEDIUM,
            documentation="Read the rows of this SELECT instead of tables (it may have its "
            "own WHERE and joins: it is wrapped as a subquery).")
    .define(TOPIC_PREFIX, Type.STRING, importance=Importance.HIGH,
            documentation="Topic = this prefix + the table name; with query, the topic "
            "itself.")
    .define(POLL_INTERVAL_MS, Type.INT, 5000, Range.at_least(1), Importance.HIGH,
            "How often each table is queried for new rows once it is caught up.")
    .define(BATCH_MAX_ROWS, Type.INT, 1000, Range.at_least(1), Importance.LOW,
            "Most rows one query (and one poll) returns.")
    .define(TIMESTAMP_DELAY_MS, Type.LONG, 0, Range.at_least(0), Importance.HIGH,
            "Only rows whose timestamp is older than the database's clock minus this delay "
            "are read, so transactions still open with earlier timestamps can commit first.")
    .define(TABLE_POLL_INTERVAL_MS, Type.LONG, 60000, Range.at_least(1), Importance.LOW,
            "How often the connector looks for new or dropped tables.")
)

def exactly_once_obstacle(mode: Mode, boundary: str) -> str | None:
    """Why ``mode`` cannot deliver exactly once under ``transaction.boundary`` =
    ``boundary`` (its trimmed, lower-cased value; empty for the default), or None
    if it can. The one rule behind ``exactly_once_support`` and validate's message
    on ``exactly.once.support``."""
    if mode is Mode.BULK:
        return ("mode=bulk reads whole tables again after a restart (and every "
                "poll.interval.ms), so it can never be exactly once; use incrementing, "
                "timestamp+incrementing, or timestamp with transaction.boundary=connector, "
                "or set exactly.once.support=requested")
    if mode is Mode.TIMESTAMP and boundary != "connector":
        boundary = boundary or "poll"
        return (f"mode=timestamp is exactly once only with transaction.boundary=connector, "
                f"not {boundary}: rows sharing a timestamp must be committed in one "
                "transaction and only the task knows where such a group ends (with "
                f"{boundary} a restart may deliver some of them again); set "
                "transaction.boundary=connector, or exactly.once.support=requested to accept "
                "at-least-once delivery")
    return None


_TASK_CONFIG_DEF = ConfigDef().define(
    TASK_TABLES, Type.STRING, "[]", documentation="JSON list of this task's tables.")


@dataclass(frozen=True)
class SqlConfig:
    """The parsed connector (or task) configuration."""

    url: URL
    mode: Mode
    incrementing_column: str
    timestamp_columns: tuple[str, ...]
    whitelist: tuple[str, ...]
    blacklist: tuple[str, ...]
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    query: str
    topic_prefix: str
    poll_interval_s: float
    batch_max_rows: int
    timestamp_delay_s: float
    table_poll_interval_s: float

    @property
    def password(self) -> str | None:
        return self.url.password if isinstance(self.url.password, str) else None


def parse(config: dict[str, str]) -> SqlConfig:
    """The typed configuration; raises ConfigException naming the first bad key."""
    values = CONFIG_DEF.parse(config)
    errors = cross_key_errors(values)
    if errors:
        key, messages = next(iter(errors.items()))
        raise ConfigException(messages[0], name=key, value=values.get(key))
    url = database_url(values[CONNECTION_URL], values[CONNECTION_USER],
                       values[CONNECTION_PASSWORD])
    return SqlConfig(
        url=url, mode=Mode(values[MODE]),
        incrementing_column=values[INCREMENTING_COLUMN],
        timestamp_columns=tuple(c for c in values[TIMESTAMP_COLUMNS] if c),
        whitelist=tuple(values[TABLE_WHITELIST]), blacklist=tuple(values[TABLE_BLACKLIST]),
        include=tuple(values[TABLE_INCLUDE_LIST]), exclude=tuple(values[TABLE_EXCLUDE_LIST]),
        query=values[QUERY], topic_prefix=values[TOPIC_PREFIX],
        poll_interval_s=values[POLL_INTERVAL_MS] / 1000,
        batch_max_rows=values[BATCH_MAX_ROWS],
        timestamp_delay_s=values[TIMESTAMP_DELAY_MS] / 1000,
        table_poll_interval_s=values[TABLE_POLL_INTERVAL_MS] / 1000)


def cross_key_errors(values: dict[str, Any]) -> dict[str, list[str]]:
    """Problems between keys, by the key a user should change. ``values`` are parsed
    values (a key whose own value was invalid may be None)."""
    errors: dict[str, list[str]] = {}
    for key, message in [*_mode_problems(values), *_table_list_problems(values)]:
        errors.setdefault(key, []).append(message)
    return errors


def _mode_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    mode, query = values.get(MODE), values.get(QUERY) or ""
    problems = []
    if mode in (Mode.TIMESTAMP.value, Mode.TIMESTAMP_INCREMENTING.value) and not [
            c for c in values.get(TIMESTAMP_COLUMNS) or [] if c]:
        problems.append((TIMESTAMP_COLUMNS, f"mode={mode} needs at least one timestamp column"))
    if mode in (Mode.INCREMENTING.value, Mode.TIMESTAMP_INCREMENTING.value) and query and not (
            values.get(INCREMENTING_COLUMN)):
        problems.append((INCREMENTING_COLUMN, f"mode={mode} with a query needs the "
                         "incrementing column named (it cannot be found from a primary key)"))
    return problems


def _table_list_problems(values: dict[str, Any]) -> list[tuple[str, str]]:
    lists = {k: [v for v in values.get(k) or [] if v] for k in
             (TABLE_WHITELIST, TABLE_BLACKLIST, TABLE_INCLUDE_LIST, TABLE_EXCLUDE_LIST)}
    white, black = lists[TABLE_WHITELIST], lists[TABLE_BLACKLIST]
    include, exclude = lists[TABLE_INCLUDE_LIST], lists[TABLE_EXCLUDE_LIST]
    problems = []
    if white and black:
        problems.append((TABLE_BLACKLIST, f"Set {TABLE_WHITELIST} or {TABLE_BLACKLIST}, not both"))
    if (include or exclude) and (white or black):
        problems.append((TABLE_INCLUDE_LIST, f"{TABLE_INCLUDE_LIST}/{TABLE_EXCLUDE_LIST} cannot "
                         f"be combined with {TABLE_WHITELIST}/{TABLE_BLACKLIST}"))
    if exclude and not include:
        problems.append((TABLE_EXCLUDE_LIST, f"{TABLE_EXCLUDE_LIST} requires {TABLE_INCLUDE_LIST}"))
    for key, patterns in ((TABLE_INCLUDE_LIST, include), (TABLE_EXCLUDE_LIST, exclude)):
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as e:
                problems.append((key, f"{pattern!r} is not a regular expression: {e}"))
    if (values.get(QUERY) or "") and any(lists.values()):
        problems.append((QUERY, "Set either query or table lists, not both"))
    return problems


def database_url(raw: str, user: str | None, password: str | None) -> URL:
    """The SQLAlchemy URL for ``connection.url`` with the credential keys applied.

    Raises ConfigException on ``connection.url`` (the password never in the message).
    """
    text = _from_jdbc(raw.strip())
    try:
        url = sa.make_url(text)
    except sa.exc.ArgumentError:
        raise ConfigException(
            "Not a SQLAlchemy database URL; write e.g. sqlite:////path/to/app.db or "
            "postgresql+psycopg://user@host:5432/db", name=CONNECTION_URL,
            value=_redacted(raw)) from None
    _refuse_alias(url)
    if url.drivername == "postgresql" and not _installed("psycopg2") and _installed("psycopg"):
        url = url.set(drivername="postgresql+psycopg")  # SQLAlchemy's default is psycopg2
    if user:
        url = url.set(username=user)
    if password:
        url = url.set(password=password)
    try:
        url.get_dialect()
    except sa.exc.NoSuchModuleError as e:
        raise ConfigException(f"No SQLAlchemy dialect or driver for {url.drivername!r} ({e}); "
                              "install the database's driver package", name=CONNECTION_URL,
                              value=safe_url(url)) from None
    return url


# Dialect names SQLAlchemy does not know that users arrive with: name -> (SQLAlchemy's
# name, the database). "postgres" is what libpq, psql and many hosting providers'
# DATABASE_URL write; SQLAlchemy accepted it until 1.4 removed it, and now answers
# "Can't load plugin", which reads like a missing driver.
_DIALECT_ALIASES = {"postgres": ("postgresql", "PostgreSQL")}


def _refuse_alias(url: URL) -> None:
    """Raise ConfigException on ``connection.url`` naming the URL to write, if ``url``
    uses a known alias of a dialect name (see ``_DIALECT_ALIASES``).

    Refused rather than rewritten: the config then holds a URL that SQLAlchemy, its
    documentation and every other tool agree on (JDBC URLs are rewritten instead,
    because they arrive with configs written for Confluent's connector).
    """
    dialect, plus, driver = url.drivername.partition("+")
    alias = _DIALECT_ALIASES.get(dialect.lower())
    if alias is None:
        return
    name, database = alias
    fixed = url.set(drivername=f"{name}{plus}{driver}")
    raise ConfigException(
        f"{dialect!r} is not a SQLAlchemy dialect name; write {safe_url(fixed)} "
        f"(SQLAlchemy's name for {database})", name=CONNECTION_URL, value=safe_url(url))


def safe_url(url: URL) -> str:
    """``url`` as it may be shown or logged: the password is masked."""
    return url.render_as_string(hide_password=True)


def _redacted(raw: str) -> str:
    # A string that did not parse as a URL may still hold user:password@.
    return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", raw)


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


_JDBC_POSTGRES = re.compile(r"jdbc:postgresql://(?P<rest>[^?]*)(?:\?(?P<query>.*))?", re.I)


def _from_jdbc(url: str) -> str:
    """Rewrite the JDBC URLs of SQLite and PostgreSQL; refuse other ``jdbc:`` URLs."""
    if not url.lower().startswith("jdbc:"):
        return url
    if url.lower().startswith("jdbc:sqlite:"):
        path = url[len("jdbc:sqlite:"):]
        return "sqlite://" if path in ("", ":memory:") else f"sqlite:///{path}"
    match = _JDBC_POSTGRES.fullmatch(url)
    if match is None:
        raise ConfigException(
            "JDBC URLs are not understood here (only jdbc:sqlite: and jdbc:postgresql: are "
            "rewritten); use a SQLAlchemy URL such as mysql+pymysql://user@host/db",
            name=CONNECTION_URL, value=_redacted(url))
    params = dict(parse_qsl(match["query"] or ""))
    user, password = params.pop("user", None), params.pop("password", None)
    built = sa.make_url(f"postgresql+psycopg://{match['rest']}")
    return built.set(username=user, password=password, query=params).render_as_string(
        hide_password=False)


def task_tables(config: dict[str, str]) -> list[str]:
    """The tables a task config assigns (see :data:`TASK_TABLES`)."""
    raw = _TASK_CONFIG_DEF.parse(config)[TASK_TABLES]
    try:
        tables = json.loads(raw)
    except ValueError:
        tables = None
    if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
        raise ConfigException("Expected a JSON list of table names", name=TASK_TABLES,
                              value=raw)
    return tables


def with_task_tables(config: dict[str, str], tables: list[str]) -> dict[str, str]:
    """A task config: the connector's plus its tables."""
    return {**config, TASK_TABLES: json.dumps(tables)}
