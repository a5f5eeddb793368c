"""The connector: validates against the database, lists tables, hands them out, watches them.

* ``validate`` adds to the key-by-key checks the checks between keys
  (``config.cross_key_errors``), why the mode cannot be exactly once when
  ``exactly.once.support=required`` (``config.exactly_once_obstacle``, on that
  framework key) and, when the keys are right, the database's
  (``validation.check_database``): each error on the key to change.
* ``start`` lists the selected tables once (a database it cannot reach fails
  the connector, saying which URL, password masked) and starts a
  :class:`~.tables.TableMonitor` that calls
  ``context.request_task_reconfiguration()`` when tables appear or disappear.
* ``task_configs`` gives each table to exactly one task, round-robin, at most
  ``tasks.max`` tasks and none without a table; the query is one task.
* Exactly-once support depends on the mode (see the package docstring).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from connect_runtime import (
    Config,
    ConfigDef,
    ConfigException,
    ConfigValue,
    ConnectError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
    __version__,
)

from .config import (
    CONFIG_DEF,
    CONNECTION_URL,
    EXACTLY_ONCE_SUPPORT,
    MODE,
    TRANSACTION_BOUNDARY,
    Mode,
    SqlConfig,
    cross_key_errors,
    exactly_once_obstacle,
    parse,
    safe_url,
    with_task_tables,
)
from .dialect import create_engine, error_line
from .offsets import check_altered_offsets
from .tables import TableMonitor, assign, discover, select
from .task import SqlSourceTask
from .validation import check_database

log = logging.getLogger(__name__)


class SqlSourceConnector(SourceConnector):
    """Rows of SQL tables (or of one query) as records, exactly once (see the package doc)."""

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._sql: SqlConfig | None = None
        self._engine: sa.Engine | None = None
        self._monitor: TableMonitor | None = None

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def validate(self, config: dict[str, str]) -> Config:
        result = super().validate(config)
        by_name = {v.name: v for v in result.config_values}

        def report(key: str, message: str) -> None:
            if key not in by_name:
                by_name[key] = ConfigValue(key)
                result.config_values.append(by_name[key])
            by_name[key].add_error_message(message)

        parsed = {v.name: v.value for v in result.config_values}
        for key, messages in cross_key_errors(parsed).items():
            for message in messages:
                report(key, message)
        keys_right = not any(v.errors for v in result.config_values)
        if _required(config):
            # On the framework's key, where the runtime shows it instead of its
            # generic "does not support exactly-once"; independent of the database.
            mode = _mode(config)
            obstacle = None if mode is None else exactly_once_obstacle(mode, _boundary(config))
            if obstacle is not None:
                report(EXACTLY_ONCE_SUPPORT, obstacle)
        if not keys_right:
            return result  # the database checks need every key right
        try:
            sql = parse(config)
        except ConfigException as e:
            report(e.name or CONNECTION_URL, str(e))
            return result
        check_database(sql, report)
        return result

    def start(self, config: dict[str, str]) -> None:
        sql = parse(config)
        self._sql, self._config = sql, dict(config)
        if sql.query:
            return
        self._engine = engine = create_engine(sql.url)
        try:
            tables = select(discover(engine), sql)
        except sa.exc.SQLAlchemyError as e:
            engine.dispose()
            raise ConnectError(f"Could not list the tables of {safe_url(sql.url)}: "
                               f"{error_line(e)}") from e
        if not tables:
            log.warning("No table matches the table lists yet; no task runs until one does")
        self._monitor = TableMonitor(lambda: select(discover(engine), sql),
                                     sql.table_poll_interval_s,
                                     self.context.request_task_reconfiguration, tables)
        self._monitor.start()

    def task_class(self) -> type[SourceTask]:
        return SqlSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if self._sql is not None and self._sql.query:
            return [with_task_tables(self._config, [])]
        tables = [] if self._monitor is None else [t.qualified for t in self._monitor.current()]
        return [with_task_tables(self._config, group) for group in assign(tables, max_tasks)]

    def stop(self) -> None:
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        """SUPPORTED for incrementing and timestamp+incrementing: every row has a unique,
        increasing position to resume after. For timestamp only with
        ``transaction.boundary=connector`` (rows sharing a timestamp are committed
        together; see ``progress.py``). UNSUPPORTED for bulk: a snapshot has no
        position, so re-reading after a restart duplicates rows."""
        mode = _mode(config)
        if mode is None or exactly_once_obstacle(mode, _boundary(config)) is not None:
            return ExactlyOnceSupport.UNSUPPORTED
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        """SUPPORTED in every mode with offsets (the task commits at safe points)."""
        mode = _mode(config)
        if mode is None or mode is Mode.BULK:
            return ConnectorTransactionBoundaries.UNSUPPORTED
        return ConnectorTransactionBoundaries.SUPPORTED

    def alter_offsets(self, config: dict[str, str],
                      offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]],
                      ) -> bool:
        """Accept this connector's partitions with Confluent-shaped offsets (or None).

        The offsets live only in Kafka, so the change is complete: True.
        """
        check_altered_offsets(list(offsets))
        return True


def _mode(config: dict[str, str]) -> Mode | None:
    try:
        return Mode((config.get(MODE) or "").strip())
    except ValueError:
        return None


def _boundary(config: dict[str, str]) -> str:
    return (config.get(TRANSACTION_BOUNDARY) or "").strip().lower()


def _required(config: dict[str, str]) -> bool:
    return (config.get(EXACTLY_ONCE_SUPPORT) or "").strip().lower() == "required"

