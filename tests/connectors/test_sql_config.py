"""The SQL source's pure parts: keys, URLs, offsets, exactly-once rules, batch planning."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from connect_runtime import (
    ConfigException,
    ConnectorTransactionBoundaries,
    DataException,
    ExactlyOnceSupport,
    InvalidOffsetException,
)
from connect_runtime.connectors.sql import SqlSourceConnector
from connect_runtime.connectors.sql.config import cross_key_errors, database_url, parse
from connect_runtime.connectors.sql.offsets import Offset, check_altered_offsets
from connect_runtime.connectors.sql.progress import (
    check_incrementing,
    check_positions,
    group_offsets,
    plan_timestamp_batch,
)
from connect_runtime.connectors.sql.tables import TableId, assign

BASE = {"name": "sql", "connector.class": "SqlSourceConnector",
        "connection.url": "sqlite:////tmp/x.db", "topic.prefix": "db-"}


def config(**overrides: str) -> dict[str, str]:
    return {**BASE, **{k.replace("_", "."): v for k, v in overrides.items()}}


# --- keys and URLs ------------------------------------------------------------

def test_parse_reads_confluent_keys() -> None:
    sql = parse({**BASE, "mode": "timestamp+incrementing", "timestamp.column.name": "a, b",
                 "incrementing.column.name": "id", "batch.max.rows": "7",
                 "poll.interval.ms": "250", "timestamp.delay.interval.ms": "1500",
                 "table.whitelist": "orders,public.users", "transaction.boundary": "connector"})
    assert sql.timestamp_columns == ("a", "b")
    assert sql.whitelist == ("orders", "public.users")
    assert (sql.batch_max_rows, sql.poll_interval_s, sql.timestamp_delay_s) == (7, 0.25, 1.5)


@pytest.mark.parametrize(("values", "key"), [
    ({"mode": "timestamp"}, "timestamp.column.name"),
    ({"mode": "incrementing", "query": "SELECT 1 AS x"}, "incrementing.column.name"),
    ({"mode": "bulk", "table.whitelist": "a", "table.blacklist": "b"}, "table.blacklist"),
    ({"mode": "bulk", "table.include.list": "a.*", "table.whitelist": "b"},
     "table.include.list"),
    ({"mode": "bulk", "table.exclude.list": "a"}, "table.exclude.list"),
    ({"mode": "bulk", "table.include.list": "(unclosed"}, "table.include.list"),
    ({"mode": "bulk", "query": "SELECT 1", "table.whitelist": "a"}, "query"),
])
def test_cross_key_problems_land_on_the_key_to_change(values: dict[str, Any], key: str) -> None:
    parsed = {k: v for k, v in values.items()}
    for list_key in ("table.whitelist", "table.blacklist", "table.include.list",
                     "table.exclude.list", "timestamp.column.name"):
        if list_key in parsed:
            parsed[list_key] = [parsed[list_key]]
    assert list(cross_key_errors(parsed)) == [key]
    with pytest.raises(ConfigException) as raised:
        parse({**BASE, **values})
    assert raised.value.name == key


def test_jdbc_urls_are_rewritten_and_credentials_applied() -> None:
    sqlite = database_url("jdbc:sqlite:/var/data/app.db", None, None)
    assert sqlite.render_as_string() == "sqlite:////var/data/app.db"
    pg = database_url("jdbc:postgresql://db.example:5433/shop?user=alice&password=pw&sslmode=require",
                      None, None)
    assert (pg.drivername, pg.host, pg.port, pg.database) == (
        "postgresql+psycopg", "db.example", 5433, "shop")
    assert (pg.username, pg.password, dict(pg.query)) == ("alice", "pw", {"sslmode": "require"})
    keys = database_url("postgresql://h/db", "bob", "s3cret")
    assert (keys.drivername, keys.username, keys.password) == ("postgresql+psycopg", "bob",
                                                                "s3cret")


@pytest.mark.parametrize("url", ["jdbc:mysql://h/db", "not a url", "nosuchdb://h/db"])
def test_bad_urls_are_refused_on_connection_url_without_the_password(url: str) -> None:
    with pytest.raises(ConfigException) as raised:
        database_url(url, "u", "s3cret")
    assert raised.value.name == "connection.url"
    assert "s3cret" not in str(raised.value)
    if url.startswith("jdbc:"):
        assert "SQLAlchemy URL" in str(raised.value)


@pytest.mark.parametrize(("url", "fix"), [
    ("postgres://alice:s3cret@h:5432/shop", "postgresql://alice:***@h:5432/shop"),
    ("postgres+psycopg://h/shop?sslmode=require", "postgresql+psycopg://h/shop?sslmode=require"),
    ("POSTGRES://h/shop", "postgresql://h/shop"),
])
def test_the_postgres_alias_is_refused_naming_postgresql(url: str, fix: str) -> None:
    with pytest.raises(ConfigException) as raised:
        database_url(url, None, None)
    assert raised.value.name == "connection.url"
    assert f"write {fix} (SQLAlchemy's name for PostgreSQL)" in str(raised.value)
    assert "s3cret" not in str(raised.value) and "driver package" not in str(raised.value)


def test_a_password_in_the_url_is_masked_in_errors() -> None:
    with pytest.raises(ConfigException) as raised:
        database_url("nosuchdb://u:s3cret@h/db", None, None)
    assert "s3cret" not in str(raised.value) and "***" in str(raised.value)


# --- exactly-once rules ---------------------------------------------------------

@pytest.mark.parametrize(("mode", "boundary", "support", "boundaries"), [
    ("incrementing", "poll", "SUPPORTED", "SUPPORTED"),
    ("timestamp+incrementing", "poll", "SUPPORTED", "SUPPORTED"),
    ("timestamp", "poll", "UNSUPPORTED", "SUPPORTED"),
    ("timestamp", "interval", "UNSUPPORTED", "SUPPORTED"),
    ("timestamp", "connector", "SUPPORTED", "SUPPORTED"),
    ("bulk", "connector", "UNSUPPORTED", "UNSUPPORTED"),
    ("sometimes", "poll", "UNSUPPORTED", "UNSUPPORTED"),
])
def test_exactly_once_support_by_mode(mode: str, boundary: str, support: str,
                                      boundaries: str) -> None:
    cfg = config(mode=mode, transaction_boundary=boundary)
    connector = SqlSourceConnector()
    assert connector.exactly_once_support(cfg) is ExactlyOnceSupport[support]
    assert connector.can_define_transaction_boundaries(cfg) is (
        ConnectorTransactionBoundaries[boundaries])


# --- offsets --------------------------------------------------------------------

def test_offsets_have_confluents_shape_and_round_trip() -> None:
    ts = datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)
    offset = Offset(ts, 42)
    assert offset.to_map() == {"incrementing": 42, "timestamp": 1714979289123,
                               "timestamp_nanos": 123456000}
    assert Offset.from_map(offset.to_map(), "t") == offset
    before_epoch = Offset(datetime.datetime(1969, 12, 31, 23, 59, 59, 500000))
    assert before_epoch.to_map() == {"timestamp": -500, "timestamp_nanos": 500000000}
    assert Offset.from_map(before_epoch.to_map(), "t") == before_epoch
    assert Offset().to_map() == {} and Offset.from_map({}, "t") == Offset()


@pytest.mark.parametrize("bad", [{"incrementing": "5"}, {"position": 3},
                                 {"timestamp_nanos": 5}, {"timestamp": 1, "timestamp_nanos": -1}])
def test_malformed_committed_offsets_fail_naming_the_table(bad: dict[str, Any]) -> None:
    with pytest.raises(InvalidOffsetException, match=r"table public\.orders"):
        Offset.from_map(bad, "table public.orders")


def test_altered_offsets_must_be_this_connectors() -> None:
    check_altered_offsets([({"protocol": "1", "table": "public.t"}, {"incrementing": 3}),
                           ({"query": "query"}, {"timestamp": 5, "timestamp_nanos": 0}),
                           ({"protocol": "1", "table": "t"}, None)])
    with pytest.raises(ConfigException, match="not one of this connector's"):
        check_altered_offsets([({"table": "t"}, {"incrementing": 3})])
    with pytest.raises(ConfigException, match="expected an integer"):
        check_altered_offsets([({"protocol": "1", "table": "t"}, {"incrementing": 1.5})])
    assert SqlSourceConnector().alter_offsets({}, [({"query": "query"}, None)]) is True


# --- batch planning (progress.py) --------------------------------------------------

T = [datetime.datetime(2024, 1, 1, 0, 0, s) for s in range(10)]


def test_a_result_that_is_not_full_holds_whole_groups() -> None:
    plan = plan_timestamp_batch([T[1], T[1], T[2], T[3], T[3], T[3]], False, T[0])
    assert plan.emit == 6 and plan.cut_group is None
    # Mid-group rows resume before their group; a group's last row at the group.
    assert plan.offsets == (T[0], T[1], T[2], T[2], T[2], T[3])


def test_a_full_result_leaves_its_last_group_for_the_group_query() -> None:
    plan = plan_timestamp_batch([T[1], T[2], T[2], T[3], T[3]], True, None)
    assert (plan.emit, plan.cut_group) == (3, T[3])
    assert plan.offsets == (T[1], T[1], T[2])
    only_one_group = plan_timestamp_batch([T[4]] * 3, True, T[1])
    assert (only_one_group.emit, only_one_group.cut_group) == (0, T[4])


def test_streamed_group_rows_resume_before_the_group_until_its_last() -> None:
    assert group_offsets(3, False, T[5], T[4]) == [T[4]] * 3
    assert group_offsets(2, True, T[5], T[4]) == [T[4], T[5]]
    assert group_offsets(0, True, T[5], None) == []


def test_rows_out_of_timestamp_order_fail() -> None:
    with pytest.raises(DataException, match="out of timestamp order"):
        plan_timestamp_batch([T[2], T[1]], False, None)


def test_incrementing_checks_skip_the_resume_row_and_catch_repeats() -> None:
    assert check_incrementing([5, 6, 7], 5, "table t", "id") == 1
    assert check_incrementing([6, 7], 5, "table t", "id") == 0  # row 5 was deleted
    assert check_incrementing([1, 2], None, "table t", "id") == 0
    with pytest.raises(DataException, match=r"table t: incrementing column 'id' is not strictly"):
        check_incrementing([5, 5, 6], 5, "table t", "id")
    with pytest.raises(DataException, match="not strictly increasing"):
        check_incrementing([1, 3, 3], None, "table t", "id")
    with pytest.raises(DataException, match="is null"):
        check_incrementing([1, None], None, "table t", "id")


def test_timestamp_incrementing_positions_must_be_unique() -> None:
    check_positions([(T[1], 3), (T[1], 4), (T[2], 1)], (T[1], 2), "table t", "id")
    with pytest.raises(DataException, match="must be unique"):
        check_positions([(T[1], 3), (T[1], 3)], (None, None), "table t", "id")


# --- tables -------------------------------------------------------------------------

def test_tables_are_dealt_round_robin_one_owner_each() -> None:
    tables = [f"t{i}" for i in range(5)]
    assert assign(tables, 2) == [["t0", "t2", "t4"], ["t1", "t3"]]
    assert assign(tables, 9) == [[t] for t in tables]
    assert assign([], 3) == []
    assert TableId.parse("public.orders") == TableId("public", "orders")
    assert TableId.parse("orders").qualified == "orders"
