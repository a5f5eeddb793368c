"""Which tables the connector reads, how they are split over tasks, and watching for changes.

* A table is named as Confluent's offset protocol 1 names it: schema-qualified
  (``public.orders``) where the database has schemas, bare (``orders``) on
  SQLite's main database. :func:`discover` lists the tables (not views) of
  every non-system schema.
* ``table.whitelist`` / ``table.blacklist`` entries match a table's qualified
  or bare name exactly; ``table.include.list`` / ``table.exclude.list`` are
  regular expressions that must match one of them whole (:func:`select`).
* Topics are ``topic.prefix`` + the bare name, so two selected tables with the
  same bare name in different schemas would share a topic: refused, as
  Confluent does.
* Each table belongs to exactly one task (KIP-618: one writer per source
  partition): :func:`assign` deals them round-robin.
* :class:`TableMonitor` re-lists them every ``table.poll.interval.ms`` in a
  background thread and calls back when the selection changes, so the
  connector can ask for new task configs. A failed listing is logged and
  retried at the next interval (the database may be restarting).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from connect_runtime import ConfigException

from .config import TABLE_INCLUDE_LIST, TABLE_WHITELIST, SqlConfig
from .dialect import error_line

log = logging.getLogger(__name__)

_SYSTEM_SCHEMAS = frozenset({"information_schema"})


@dataclass(frozen=True, order=True)
class TableId:
    """A table: its schema (None for SQLite's main database) and name."""

    schema: str | None
    name: str

    @property
    def qualified(self) -> str:
        """The name in source partitions and messages (Confluent's protocol 1)."""
        return self.name if self.schema is None else f"{self.schema}.{self.name}"

    @staticmethod
    def parse(text: str) -> TableId:
        """The inverse of :attr:`qualified` (a name with dots must be schema-qualified)."""
        schema, dot, name = text.partition(".")
        return TableId(schema, name) if dot else TableId(None, text)


def discover(bind: Engine | Connection) -> list[TableId]:
    """Every table of every non-system schema, sorted."""
    inspector = sa.inspect(bind)
    main = inspector.default_schema_name if bind.dialect.name == "sqlite" else None
    found = []
    for schema in inspector.get_schema_names():
        if schema in _SYSTEM_SCHEMAS or schema.startswith("pg_"):
            continue
        qualifier = None if schema == main else schema
        found += [TableId(qualifier, name) for name in inspector.get_table_names(schema=schema)]
    return sorted(found, key=lambda t: (t.schema or "", t.name))


def _names(table: TableId) -> tuple[str, str]:
    return table.qualified, table.name


def select(tables: Sequence[TableId], config: SqlConfig) -> list[TableId]:
    """The tables ``config``'s lists select; ConfigException if two share a topic."""
    if config.include:
        included = [re.compile(p) for p in config.include]
        excluded = [re.compile(p) for p in config.exclude]
        chosen = [t for t in tables
                  if any(p.fullmatch(n) for p in included for n in _names(t))
                  and not any(p.fullmatch(n) for p in excluded for n in _names(t))]
    elif config.whitelist:
        chosen = [t for t in tables if set(_names(t)) & set(config.whitelist)]
    else:
        chosen = [t for t in tables if not set(_names(t)) & set(config.blacklist)]
    _refuse_shared_topics(chosen, TABLE_INCLUDE_LIST if config.include else TABLE_WHITELIST)
    return chosen


def _refuse_shared_topics(tables: Sequence[TableId], key: str) -> None:
    by_name: dict[str, list[str]] = {}
    for table in tables:
        by_name.setdefault(table.name, []).append(table.qualified)
    shared = [names for names in by_name.values() if len(names) > 1]
    if shared:
        raise ConfigException(
            f"Tables {shared} share a name and so would share a topic (topic.prefix + table "
            f"name); narrow {key} so each name is selected once", name=key, value=None)


def missing_from_whitelist(tables: Sequence[TableId], whitelist: Sequence[str]) -> list[str]:
    """Whitelist entries that name no existing table."""
    known = {n for t in tables for n in _names(t)}
    return [entry for entry in whitelist if entry not in known]


def assign(tables: Sequence[str], max_tasks: int) -> list[list[str]]:
    """Round-robin over at most ``max_tasks`` tasks; no task without a table."""
    count = min(max_tasks, len(tables))
    return [list(tables[i::count]) for i in range(count)]


class TableMonitor:
    """Re-lists tables in a daemon thread and calls ``on_change`` when they change.

    ``list_tables`` returns the selected tables (it may raise: logged, retried
    next time). ``current()`` is the latest successful listing.
    """

    def __init__(self, list_tables: Callable[[], list[TableId]], interval_s: float,
                 on_change: Callable[[], None], initial: list[TableId]) -> None:
        self._list = list_tables
        self._interval_s = interval_s
        self._on_change = on_change
        self._tables = list(initial)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sql-table-monitor", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)

    def current(self) -> list[TableId]:
        with self._lock:
            return list(self._tables)

    def check_now(self) -> bool:
        """List once; True (after calling ``on_change``) if the selection changed."""
        try:
            tables = self._list()
        except Exception as e:
            log.warning("Could not list the database's tables (will retry in %.0f s): %s",
                        self._interval_s, error_line(e))
            return False
        with self._lock:
            changed = tables != self._tables
            self._tables = tables
        if changed:
            log.info("The selected tables changed to %s; requesting new task configs",
                     [t.qualified for t in tables])
            self._on_change()
        return changed

    def _run(self) -> None:
        while not self._stopping.wait(self._interval_s):
            self.check_now()

