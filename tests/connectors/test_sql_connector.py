"""SqlSourceConnector against real databases: validate's errors on the right keys, tables
spread over tasks, and the table monitor asking for new task configs."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from support.kafka import free_port, wait_for
from support.postgres import Database

from connect_runtime import ConnectError
from connect_runtime.config.validation import validate_connector_config
from connect_runtime.connectors.sql import SqlSourceConnector


def connector_config(db: Database, **extra: str) -> dict[str, str]:
    return {"name": "sql", "connector.class": "SqlSourceConnector", "connection.url": db.url,
            "mode": "timestamp+incrementing", "timestamp.column.name": "updated",
            "topic.prefix": "db-", **{k.replace("_", "."): v for k, v in extra.items()}}


def errors(config: dict[str, str]) -> dict[str, list[str]]:
    """Error messages by key, as the REST validate endpoint reports them."""
    infos = validate_connector_config(SqlSourceConnector(), config, "enabled")
    return {value.name: value.errors for _, value in infos.configs if value.errors}


def orders(db: Database, name: str = "orders") -> sa.Table:
    return db.table(name, sa.Column("note", sa.Text), sa.Column("created", sa.Date))


# --- validate ------------------------------------------------------------------

def test_a_valid_config_has_no_errors(database: Database) -> None:
    orders(database)
    assert errors(connector_config(database, table_whitelist="orders")) == {}
    assert errors(connector_config(database, mode="incrementing")) == {}  # id: the integer pk
    assert errors(connector_config(database, mode="timestamp",
                                   timestamp_column_name="created,updated")) == {}


def test_an_unknown_mode_is_reported_on_mode(database: Database) -> None:
    found = errors(connector_config(database, mode="sometimes"))
    assert list(found) == ["mode"] and "bulk, incrementing" in found["mode"][0]


@pytest.mark.parametrize(("column", "key", "words"), [
    ("nope", "incrementing.column.name", "does not exist in table"),
    ("note", "incrementing.column.name", "not an integer type"),
])
def test_a_bad_incrementing_column_is_reported_on_its_key(
        database: Database, column: str, key: str, words: str) -> None:
    orders(database)
    found = errors(connector_config(database, incrementing_column_name=column))
    assert list(found) == [key] and words in found[key][0] and "orders" in found[key][0]


@pytest.mark.parametrize(("columns", "words"), [
    ("updated,gone", "['gone'] do not exist in table"),
    ("note", "must be DATETIME/TIMESTAMP or DATE: 'note' is TEXT"),
])
def test_a_bad_timestamp_column_is_reported_on_its_key(
        database: Database, columns: str, words: str) -> None:
    orders(database)
    found = errors(connector_config(database, timestamp_column_name=columns))
    assert list(found) == ["timestamp.column.name"] and words in found[
        "timestamp.column.name"][0]


def test_a_table_without_an_integer_key_needs_the_column_named(database: Database) -> None:
    database.execute("CREATE TABLE notes (code VARCHAR(5) PRIMARY KEY, updated TIMESTAMP)")
    found = errors(connector_config(database, mode="incrementing"))
    assert "no single-column integer primary key" in found["incrementing.column.name"][0]


def test_a_missing_whitelisted_table_is_reported_on_the_whitelist(database: Database) -> None:
    orders(database)
    found = errors(connector_config(database, table_whitelist="orders,missing"))
    assert list(found) == ["table.whitelist"]
    assert "['missing'] do not exist" in found["table.whitelist"][0]


def test_a_query_that_does_not_run_is_reported_on_query(database: Database) -> None:
    found = errors(connector_config(database, query="SELECT * FROM nowhere",
                                    incrementing_column_name="id"))
    assert list(found) == ["query"] and "The query does not run" in found["query"][0]


def test_an_unreachable_database_is_reported_on_the_url_without_the_password() -> None:
    url = f"postgresql+psycopg://alice@127.0.0.1:{free_port()}/shop"
    config = {"name": "sql", "connector.class": "SqlSourceConnector", "connection.url": url,
              "connection.password": "s3cret-pw", "mode": "bulk", "topic.prefix": "db-"}
    infos = validate_connector_config(SqlSourceConnector(), config, "enabled")
    found = {value.name: value.errors for _, value in infos.configs if value.errors}
    assert list(found) == ["connection.url"]
    assert found["connection.url"][0].startswith(
        "Could not connect to postgresql+psycopg://alice:***@127.0.0.1")
    assert "s3cret" not in json.dumps([v.to_dict(k.type if k else None)
                                       for k, v in infos.configs])


@pytest.mark.parametrize("url", ["jdbc:oracle:thin:@h:1521:db", "::not a url::"])
def test_a_url_that_is_not_sqlalchemys_is_reported_on_the_url(url: str) -> None:
    config = {"name": "sql", "connector.class": "SqlSourceConnector", "connection.url": url,
              "mode": "bulk", "topic.prefix": "db-"}
    found = errors(config)
    assert list(found) == ["connection.url"] and "SQLAlchemy" in found["connection.url"][0]


@pytest.mark.parametrize(("mode", "boundary", "words"), [
    ("timestamp", None, "mode=timestamp is exactly once only with "
     "transaction.boundary=connector"),
    ("timestamp", "poll", "set transaction.boundary=connector"),
    ("timestamp", "interval", "set transaction.boundary=connector"),
    ("bulk", None, "mode=bulk reads whole tables again"),
])
def test_exactly_once_required_where_the_mode_cannot_says_why_on_its_key(
        sqlite_database: Database, mode: str, boundary: str | None, words: str) -> None:
    orders(sqlite_database)
    extra = {"exactly.once.support": "required", "mode": mode}
    if boundary is not None:
        extra["transaction.boundary"] = boundary
    found = errors({**connector_config(sqlite_database), **extra})
    assert list(found) == ["exactly.once.support"]
    [message] = found["exactly.once.support"]  # the connector's reason, not Connect's generic one
    assert words in message


def test_exactly_once_required_in_timestamp_mode_with_the_connector_boundary_is_valid(
        sqlite_database: Database) -> None:
    orders(sqlite_database)
    config = {**connector_config(sqlite_database), "mode": "timestamp",
              "exactly.once.support": "required", "transaction.boundary": "connector"}
    assert errors(config) == {}
    assert errors({**config, "exactly.once.support": "requested",
                   "transaction.boundary": "poll"}) == {}  # at-least-once was asked for


def test_a_worker_without_exactly_once_is_reported_with_the_connectors_reason(
        sqlite_database: Database) -> None:
    orders(sqlite_database)
    config = {**connector_config(sqlite_database), "mode": "timestamp",
              "exactly.once.support": "required"}
    infos = validate_connector_config(SqlSourceConnector(), config, "disabled")
    found = {value.name: value.errors for _, value in infos.configs if value.errors}
    worker, reason = found["exactly.once.support"]
    assert "exactly.once.source.support=disabled" in worker
    assert "transaction.boundary=connector" in reason


def test_two_tables_sharing_a_topic_are_refused(postgres_database: Database) -> None:
    db = postgres_database
    db.execute("CREATE SCHEMA sales")
    db.execute("CREATE TABLE public.orders (id SERIAL PRIMARY KEY, updated TIMESTAMP)")
    db.execute("CREATE TABLE sales.orders (id SERIAL PRIMARY KEY, updated TIMESTAMP)")
    found = errors(connector_config(db, table_include_list=".*orders"))
    assert "share a name and so would share a topic" in found["table.include.list"][0]
    assert errors(connector_config(db, table_whitelist="sales.orders")) == {}


# --- tasks and the table monitor ------------------------------------------------------

class RecordingContext:
    def __init__(self) -> None:
        self.requests = 0
        self.requested = threading.Event()

    def request_task_reconfiguration(self) -> None:
        self.requests += 1
        self.requested.set()

    def raise_error(self, error: BaseException) -> None:
        raise AssertionError(f"unexpected raise_error({error!r})")

    @property
    def offset_storage_reader(self) -> Any:
        raise AssertionError("not used")


def task_tables(configs: list[dict[str, str]]) -> list[list[str]]:
    return [json.loads(c["sql.task.tables"]) for c in configs]


def test_tables_are_spread_over_tasks_each_owned_once(database: Database) -> None:
    for i in range(5):
        orders(database, f"t{i}")
    prefix = "public." if database.kind == "postgresql" else ""
    connector = SqlSourceConnector()
    connector.initialize(RecordingContext())  # type: ignore[arg-type]
    connector.start(connector_config(database, table_blacklist="t4"))
    try:
        two = task_tables(connector.task_configs(2))
        assert two == [[f"{prefix}t0", f"{prefix}t2"], [f"{prefix}t1", f"{prefix}t3"]]
        assert len(connector.task_configs(10)) == 4
        assert all(c["mode"] == "timestamp+incrementing" for c in connector.task_configs(2))
    finally:
        connector.stop()


def test_new_and_dropped_tables_request_task_reconfiguration(database: Database) -> None:
    first = orders(database, "first")
    context = RecordingContext()
    connector = SqlSourceConnector()
    connector.initialize(context)  # type: ignore[arg-type]
    connector.start(connector_config(database, table_poll_interval_ms="50"))
    try:
        assert len(task_tables(connector.task_configs(4))) == 1
        orders(database, "second")
        assert context.requested.wait(10), "no reconfiguration requested for a new table"
        assert len(task_tables(connector.task_configs(4))) == 2
        context.requested.clear()
        database.drop(first)
        assert context.requested.wait(10), "no reconfiguration requested for a dropped table"
        names = [t for tables in task_tables(connector.task_configs(4)) for t in tables]
        assert [n.rsplit(".", 1)[-1] for n in names] == ["second"]
        # Nothing changes: no more requests.
        before = context.requests
        wait_for(lambda: True, 0.3, "a few monitor rounds")
        assert context.requests == before
    finally:
        connector.stop()


def test_start_fails_readably_when_the_database_is_unreachable() -> None:
    connector = SqlSourceConnector()
    connector.initialize(RecordingContext())  # type: ignore[arg-type]
    url = f"postgresql+psycopg://bob:hunter2@127.0.0.1:{free_port()}/db"
    with pytest.raises(ConnectError, match=r"Could not list the tables of .*bob:\*\*\*@") as e:
        connector.start({"connection.url": url, "mode": "bulk", "topic.prefix": "x"})
    assert "hunter2" not in str(e.value)


def test_the_query_is_one_task(database: Database) -> None:
    connector = SqlSourceConnector()
    connector.initialize(RecordingContext())  # type: ignore[arg-type]
    connector.start(connector_config(database, query="SELECT 1 AS id",
                                     incrementing_column_name="id", mode="incrementing"))
    assert task_tables(connector.task_configs(5)) == [[]]
    connector.stop()
