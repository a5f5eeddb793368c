"""SqlSourceTask against real databases (SQLite file and PostgreSQL), with in-memory
fakes of the task's contexts: what each mode reads, its offsets, and resuming from them.

The task returns :class:`RecordBatch` items; most tests look at their rows as the
framework expands them (:func:`rows`), one ``SourceRecord`` per row."""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest
import sqlalchemy as sa
from support.fakes import FakeReader
from support.postgres import Database, past

from connect_runtime import ConnectError, DataException, RecordBatch, SourceRecord
from connect_runtime.connectors.sql import SqlSourceTask
from connect_runtime.task.batches import check, expand
from connect_runtime.task.startup import TaskContext

MAX_POLLS = 200

# id(batch) -> (batch, its rows): a batch expands to the same records every time, so a
# commit naming a batch is matched to its last row by identity, as records compare.
_EXPANDED: dict[int, tuple[RecordBatch, list[SourceRecord]]] = {}


@pytest.fixture(autouse=True)
def _forget_batches() -> Iterator[None]:
    yield
    _EXPANDED.clear()


def batch_rows(batch: RecordBatch) -> list[SourceRecord]:
    """A batch's rows as the framework expands them (checked first, as it is sent)."""
    found = _EXPANDED.get(id(batch))
    if found is None:
        check(batch, "sql-test")
        found = _EXPANDED[id(batch)] = (batch, expand(batch))
    return found[1]


def rows(polled: Sequence[SourceRecord | RecordBatch] | None) -> list[SourceRecord]:
    """What a poll returned, one record per row in order: batches expanded."""
    out: list[SourceRecord] = []
    for item in polled or []:
        out += batch_rows(item) if isinstance(item, RecordBatch) else [item]
    return out


class FakeTransactions:
    def __init__(self) -> None:
        self.commits: list[SourceRecord] = []  # the last record of each transaction
        self.batches: list[RecordBatch] = []  # the batches named in commit_transaction

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        assert record is not None
        if isinstance(record, RecordBatch):  # the transaction ends after its last row
            self.batches.append(record)
            record = batch_rows(record)[-1]
        self.commits.append(record)

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        raise AssertionError("the SQL source never aborts")


def task_config(db: Database, mode: str, tables: list[str], **extra: str) -> dict[str, str]:
    import json

    return {"name": "sql", "connector.class": "SqlSourceConnector", "connection.url": db.url,
            "mode": mode, "topic.prefix": "db-", "poll.interval.ms": "1",
            "timestamp.column.name": "updated", "sql.task.tables": json.dumps(tables),
            **{k.replace("_", "."): v for k, v in extra.items()}}


def table_or_query(partition: Mapping[str, Any]) -> Any:
    """What the SQL source's committed offsets are keyed by."""
    return partition.get("table") or partition.get("query") or ""


def started(config: dict[str, str], committed: Mapping[str, dict[str, Any]] | None = None,
            txn: FakeTransactions | None = None) -> SqlSourceTask:
    task = SqlSourceTask()
    task.initialize(TaskContext(config, FakeReader(committed, key=table_or_query), txn))
    task.start(config)
    return task


def drain(task: SqlSourceTask, max_batch: int | None = None) -> list[SourceRecord]:
    """Poll until two polls in a row return nothing."""
    out: list[SourceRecord] = []
    empty = 0
    for _ in range(MAX_POLLS):
        batch = rows(task.poll())
        if batch:
            assert max_batch is None or len(batch) <= max_batch
            out += batch
            empty = 0
        else:
            empty += 1
            if empty == 2:
                return out
    raise AssertionError("the task never ran dry")


def table_name(db: Database, name: str) -> str:
    """The name in partitions: schema-qualified where the database has schemas."""
    return f"public.{name}" if db.kind == "postgresql" else name


def ids(records: list[SourceRecord]) -> list[int]:
    return [r.value["id"] for r in records]


def items_table(db: Database) -> sa.Table:
    return db.table("items", sa.Column("name", sa.String(20), nullable=False),
                    sa.Column("price", sa.Numeric(10, 2)))


# --- incrementing --------------------------------------------------------------

def test_incrementing_reads_new_rows_in_order_and_resumes(database: Database) -> None:
    items = items_table(database)
    database.insert(items, *({"name": f"n{i}", "price": decimal.Decimal(i) / 4,
                              "updated": past(60)} for i in range(5)))
    name = table_name(database, "items")
    config = task_config(database, "incrementing", [name], batch_max_rows="2")
    task = started(config)
    records = drain(task, max_batch=2)
    assert ids(records) == [1, 2, 3, 4, 5]
    first = records[0]
    assert first.topic == "db-items" and first.key is None
    assert first.source_partition == {"protocol": "1", "table": name}
    assert [r.source_offset for r in records] == [{"incrementing": i} for i in range(1, 6)]
    assert first.value["name"] == "n0" and first.value["price"] == decimal.Decimal("0.00")
    assert first.value_schema is not None and first.value_schema.name == "items"
    first.value.validate()
    database.insert(items, {"name": "late", "updated": past(1)})
    assert ids(drain(task)) == [6]
    task.stop()

    resumed = started(config, {name: {"incrementing": 3}})
    assert ids(drain(resumed)) == [4, 5, 6]
    resumed.stop()


def test_a_repeated_incrementing_value_fails_naming_table_and_column(database: Database) -> None:
    events = database.table("events", sa.Column("seq", sa.Integer, nullable=False))
    database.insert(events, *({"seq": s, "updated": past(60)} for s in (1, 2, 2, 3)))
    config = task_config(database, "incrementing", [table_name(database, "events")],
                         incrementing_column_name="seq", batch_max_rows="2")
    task = started(config)
    assert [r.value["seq"] for r in rows(task.poll())] == [1, 2]
    # The next query re-reads seq >= 2 on purpose: a second row with 2 is caught.
    with pytest.raises(DataException, match=r"events: incrementing column 'seq' is not strictly"):
        task.poll()
    task.stop()


def test_a_dropped_table_fails_the_task_readably(database: Database) -> None:
    items = items_table(database)
    database.insert(items, {"name": "a", "updated": past(60)})
    task = started(task_config(database, "incrementing", [table_name(database, "items")]))
    assert ids(drain(task)) == [1]
    database.drop(items)
    with pytest.raises(ConnectError, match="no longer exists: it was dropped or renamed"):
        drain(task)
    task.stop()


# --- timestamp+incrementing -------------------------------------------------------

def test_timestamp_incrementing_sees_inserts_and_updates_once(database: Database) -> None:
    items = items_table(database)
    when = past(60)  # once: two calls may fall in different seconds
    database.insert(items, *({"name": f"n{i}", "updated": when} for i in range(3)))
    name = table_name(database, "items")
    config = task_config(database, "timestamp+incrementing", [name], batch_max_rows="2")
    task = started(config)
    records = drain(task, max_batch=2)
    assert ids(records) == [1, 2, 3]
    ms = int((when - datetime.datetime(1970, 1, 1)).total_seconds() * 1000)
    assert records[0].source_offset == {"incrementing": 1, "timestamp": ms, "timestamp_nanos": 0}
    database.execute(items.update().where(items.c.id == 1).values(name="changed",
                                                                 updated=past(30)))
    database.insert(items, {"name": "new", "updated": past(30)})
    again = drain(task)
    assert [(r.value["id"], r.value["name"]) for r in again] == [(1, "changed"), (4, "new")]
    task.stop()

    # Resuming inside a timestamp (same ts, higher id) reads the rest of it only.
    resumed = started(config, {name: records[1].source_offset or {}})
    assert ids(drain(resumed)) == [3, 1, 4]
    resumed.stop()


def test_rows_newer_than_the_delay_wait(database: Database) -> None:
    items = items_table(database)
    database.insert(items, {"name": "old", "updated": past(7200)},
                    {"name": "recent", "updated": past(5)})
    config = task_config(database, "timestamp+incrementing", [table_name(database, "items")],
                         timestamp_delay_interval_ms=str(3600 * 1000))
    task = started(config)
    assert [r.value["name"] for r in drain(task)] == ["old"]
    task.stop()
    no_delay = started({**config, "timestamp.delay.interval.ms": "0"})
    assert [r.value["name"] for r in drain(no_delay)] == ["old", "recent"]
    no_delay.stop()


# --- timestamp: groups ------------------------------------------------------------

GROUPS = [3, 1, 5, 2, 4]  # rows per distinct timestamp, oldest first


def grouped_table(db: Database) -> tuple[sa.Table, list[datetime.datetime]]:
    items = items_table(db)
    stamps = [past(600 - 10 * g) for g in range(len(GROUPS))]
    rows = [{"name": f"g{g}-{i}", "updated": stamps[g]}
            for g, size in enumerate(GROUPS) for i in range(size)]
    db.insert(items, *rows)
    return items, stamps


def test_timestamp_groups_cut_by_batch_max_rows_commit_only_at_group_ends(
        database: Database) -> None:
    _, stamps = grouped_table(database)
    name = table_name(database, "items")
    config = task_config(database, "timestamp", [name], batch_max_rows="2",
                         transaction_boundary="connector")
    txn = FakeTransactions()
    task = started(config, txn=txn)
    records = drain(task, max_batch=2)
    task.stop()
    assert sorted(ids(records)) == list(range(1, sum(GROUPS) + 1))  # each row once
    group_of = [int(r.value["name"].split("-")[0][1:]) for r in records]
    assert group_of == sorted(group_of)  # in timestamp order
    # A commit only after a group's last row, and after every group.
    ends = [i for i in range(len(records))
            if i + 1 == len(records) or group_of[i + 1] != group_of[i]]
    committed_at = [records.index(r) for r in txn.commits]
    assert set(committed_at) <= set(ends) and committed_at[-1] == len(records) - 1
    for i in ends:
        assert records[i].source_offset == offset_of(stamps[group_of[i]])
    # Mid-group records point before their group: resuming there re-reads the group.
    for i, record in enumerate(records):
        if i not in ends:
            g = group_of[i]
            assert record.source_offset == ({} if g == 0 else offset_of(stamps[g - 1]))


def test_a_restart_from_any_commit_resumes_at_a_group_boundary(database: Database) -> None:
    grouped_table(database)
    name = table_name(database, "items")
    config = task_config(database, "timestamp", [name], batch_max_rows="2",
                         transaction_boundary="connector")
    txn = FakeTransactions()
    task = started(config, txn=txn)
    records = drain(task)
    task.stop()
    for commit in txn.commits:
        after = records[records.index(commit) + 1:]
        resumed = started(config, {name: dict(commit.source_offset or {})})
        assert ids(drain(resumed)) == ids(after)  # nothing lost, nothing repeated
        resumed.stop()


def test_a_group_larger_than_a_batch_is_streamed_whole(database: Database) -> None:
    items = items_table(database)
    stamp = past(60)
    database.insert(items, *({"name": f"n{i}", "updated": stamp} for i in range(7)))
    config = task_config(database, "timestamp", [table_name(database, "items")],
                         batch_max_rows="3", transaction_boundary="connector")
    txn = FakeTransactions()
    task = started(config, txn=txn)
    batches = [rows(task.poll()) for _ in range(3)]
    assert [len(b) for b in batches] == [3, 3, 1]
    assert txn.commits == [batches[2][0]]  # one transaction for the whole group
    assert [r.source_offset for b in batches for r in b] == [{}] * 6 + [offset_of(stamp)]
    database.insert(items, {"name": "later", "updated": past(30)})
    assert [r.value["name"] for r in drain(task)] == ["later"]
    task.stop()


def test_polls_return_batches_with_per_row_offsets_and_resume_after_a_commit(
        database: Database) -> None:
    name = table_name(database, "items")
    partition = {"protocol": "1", "table": name}
    # incrementing: one batch per poll, each row's own position as its offset.
    items = items_table(database)
    database.insert(items, *({"name": f"n{i}", "updated": past(60)} for i in range(5)))
    config = task_config(database, "incrementing", [name], batch_max_rows="3",
                         transaction_boundary="connector")
    txn = FakeTransactions()
    task = started(config, txn=txn)
    (batch,) = task.poll() or []
    assert isinstance(batch, RecordBatch) and len(batch) == 3
    assert batch.topic == "db-items" and batch.keys is None and batch.partition is None
    assert batch.source_partition == partition and batch.source_offset is None
    assert batch.source_offsets == [{"incrementing": i} for i in (1, 2, 3)]
    assert [v["id"] for v in batch.values] == [1, 2, 3]
    assert batch.value_schema is not None and batch.value_schema.name == "items"
    assert all(v.schema is batch.value_schema for v in batch.values)
    assert txn.batches == [batch]  # the transaction ends after the batch's last row
    task.stop()
    # A restart from the committed offset (the batch's last row's) resumes after it.
    assert batch.last_offset == {"incrementing": 3}
    resumed = started(config, {name: dict(batch.last_offset)})
    assert ids(drain(resumed)) == [4, 5]
    resumed.stop()

    # timestamp: rows of one batch carry different offsets (a row inside a group points
    # before it), which a single per-batch offset could not say.
    database.drop(items)
    _, stamps = grouped_table(database)  # groups of 3, 1, 5, ... rows
    config = task_config(database, "timestamp", [name], batch_max_rows="4",
                         transaction_boundary="connector")
    txn = FakeTransactions()
    task = started(config, txn=txn)
    (batch,) = task.poll() or []  # 4 rows read; the second group may be cut: not emitted
    assert isinstance(batch, RecordBatch) and batch.source_partition == partition
    assert batch.source_offsets == [{}, {}, offset_of(stamps[0])]
    assert txn.batches == [batch]
    task.stop()
    resumed = started(config, {name: dict(batch.last_offset or {})})
    assert sorted(ids(drain(resumed))) == list(range(GROUPS[0] + 1, sum(GROUPS) + 1))
    resumed.stop()


def offset_of(ts: datetime.datetime) -> dict[str, int]:
    ms = (ts - datetime.datetime(1970, 1, 1)) // datetime.timedelta(milliseconds=1)
    return {"timestamp": ms, "timestamp_nanos": ts.microsecond * 1000}


def test_sqlite_timestamps_written_in_other_text_forms_compare_right(
        sqlite_database: Database) -> None:
    db = sqlite_database
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, "
               "updated DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP)")
    db.execute("INSERT INTO t (updated) VALUES ('2024-01-01 10:00:00'), "
               "('2024-01-01T10:00:00.000'), ('2024-01-01 09:59:59.5')")
    config = task_config(db, "timestamp+incrementing", ["t"], batch_max_rows="1")
    task = started(config)
    records = drain(task)
    assert ids(records) == [3, 1, 2]  # 09:59:59.5 first; the two spellings of 10:00 tie
    task.stop()
    resumed = started(config, {"t": dict(records[1].source_offset or {})})
    assert ids(drain(resumed)) == [2]
    resumed.stop()


# --- bulk and query -----------------------------------------------------------------

def test_bulk_reads_the_whole_table_each_interval_without_offsets(database: Database) -> None:
    items = items_table(database)
    database.insert(items, *({"name": f"n{i}", "updated": past(60)} for i in range(3)))
    task = started(task_config(database, "bulk", [table_name(database, "items")],
                               batch_max_rows="2"))
    first = [rows(task.poll()) for _ in range(2)]
    assert [ids(b) for b in first] == [[1, 2], [3]]
    assert all(r.source_partition is None and r.source_offset is None for b in first for r in b)
    assert ids(rows(task.poll())) == [1, 2]  # poll.interval.ms=1: the next snapshot
    task.stop()


def test_query_mode_reads_a_join_with_its_own_where(database: Database) -> None:
    items = items_table(database)
    database.insert(items, *({"name": f"n{i}", "price": i, "updated": past(60)}
                             for i in range(5)))
    query = ("SELECT i.id, i.name, i.price * 2 AS doubled, '50% :x' AS note, i.updated "
             "FROM items i WHERE i.price >= 2;")
    config = task_config(database, "incrementing", [], query=query,
                         incrementing_column_name="id", batch_max_rows="2")
    task = started(config)
    records = drain(task)
    assert ids(records) == [3, 4, 5]
    assert records[0].topic == "db-" and records[0].source_partition == {"query": "query"}
    assert records[0].value_schema is not None and records[0].value_schema.name is None
    assert records[0].value["note"] == "50% :x" and float(records[0].value["doubled"]) == 4
    task.stop()
    resumed = started(config, {"query": {"incrementing": 4}})
    assert ids(drain(resumed)) == [5]
    resumed.stop()


# --- types ---------------------------------------------------------------------------

def test_postgres_column_types_map_to_connect_schemas(postgres_database: Database) -> None:
    db = postgres_database
    db.execute("""CREATE TABLE typed (
        id BIGSERIAL PRIMARY KEY, s SMALLINT NOT NULL, i INTEGER, n NUMERIC(12, 3),
        free NUMERIC, r REAL, d DOUBLE PRECISION, v VARCHAR(5), t TEXT, b BOOLEAN,
        day DATE, at TIMESTAMP, atz TIMESTAMPTZ, tm TIME, raw BYTEA, u UUID, j JSONB)""")
    db.execute("""INSERT INTO typed (s, i, n, free, r, d, v, t, b, day, at, atz, tm, raw, u, j)
        VALUES (1, 2, 3.5, 1.25, 0.5, 2.25, 'abc', 'text', true, '2024-02-03',
        '2024-02-03 04:05:06.789', '2024-02-03 04:05:06+02', '07:08:09', '\\x0102',
        '6e0f6c3a-1b8e-4a8e-9d7e-0a1b2c3d4e5f', '{"k": [1]}')""")
    task = started(task_config(db, "incrementing", ["public.typed"]))
    (record,) = drain(task)
    task.stop()
    schema = record.value_schema
    assert schema is not None
    kinds = {f.name: (f.schema.name or f.schema.type.value, f.schema.optional)
             for f in schema.fields}
    decimal_name = "org.apache.kafka.connect.data.Decimal"
    assert kinds == {
        "id": ("int64", False), "s": ("int16", False), "i": ("int32", True),
        "n": (decimal_name, True), "free": ("float64", True), "r": ("float32", True),
        "d": ("float64", True), "v": ("string", True), "t": ("string", True),
        "b": ("boolean", True), "day": ("org.apache.kafka.connect.data.Date", True),
        "at": ("org.apache.kafka.connect.data.Timestamp", True),
        "atz": ("org.apache.kafka.connect.data.Timestamp", True),
        "tm": ("org.apache.kafka.connect.data.Time", True), "raw": ("bytes", True),
        "u": ("string", True), "j": ("string", True)}
    assert schema.field("n").schema.scale == 3  # type: ignore[union-attr]
    value = record.value
    value.validate()
    assert value["n"] == decimal.Decimal("3.500") and value["free"] == 1.25
    assert value["at"] == datetime.datetime(2024, 2, 3, 4, 5, 6, 789000)
    assert value["atz"] == datetime.datetime(2024, 2, 3, 2, 5, 6)  # naive UTC
    assert value["day"] == datetime.date(2024, 2, 3) and value["tm"] == datetime.time(7, 8, 9)
    assert value["raw"] == b"\x01\x02" and value["j"] == '{"k": [1]}'
    assert value["u"] == "6e0f6c3a-1b8e-4a8e-9d7e-0a1b2c3d4e5f"


def test_sqlite_column_types_map_to_connect_schemas(sqlite_database: Database) -> None:
    db = sqlite_database
    db.execute("CREATE TABLE typed (id INTEGER PRIMARY KEY AUTOINCREMENT, s SMALLINT, "
               "big BIGINT NOT NULL, n NUMERIC(6, 2), r REAL, v VARCHAR(5), b BOOLEAN, "
               "day DATE, at DATETIME, tm TIME, raw BLOB, untyped)")
    db.execute("INSERT INTO typed (s, big, n, r, v, b, day, at, tm, raw, untyped) VALUES "
               "(1, 2, 1.5, 0.25, 'x', 1, '2024-02-03', '2024-02-03 04:05:06.5', "
               "'07:08:09', x'0102', 42)")
    task = started(task_config(db, "incrementing", ["typed"]))
    (record,) = drain(task)
    task.stop()
    value = record.value
    value.validate()
    assert value.as_dict() == {
        "id": 1, "s": 1, "big": 2, "n": decimal.Decimal("1.50"), "r": 0.25, "v": "x",
        "b": True, "day": datetime.date(2024, 2, 3),
        "at": datetime.datetime(2024, 2, 3, 4, 5, 6, 500000), "tm": datetime.time(7, 8, 9),
        "raw": b"\x01\x02", "untyped": "42"}
    assert record.value_schema is not None
    assert record.value_schema.field("r").schema.type.value == "float64"  # type: ignore[union-attr]


# --- database errors ------------------------------------------------------------------

def terminate_other_sessions(db: Database) -> int:
    """Kill every other session of the database, as a restart or a network cut would."""
    with db.engine.begin() as conn:
        return len(conn.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()").all())


def test_a_lost_connection_between_polls_is_reconnected(postgres_database: Database) -> None:
    db = postgres_database
    items = items_table(db)
    db.insert(items, {"name": "a", "updated": past(60)})
    task = started(task_config(db, "incrementing", ["public.items"]))
    assert ids(drain(task)) == [1]
    assert terminate_other_sessions(db) >= 1
    db.insert(items, {"name": "b", "updated": past(60)})
    assert ids(drain(task)) == [2]
    task.stop()


def test_a_lost_connection_inside_a_group_fails_the_task(postgres_database: Database) -> None:
    db = postgres_database
    items = items_table(db)
    db.insert(items, *({"name": f"n{i}", "updated": past(60)} for i in range(7)))
    task = started(task_config(db, "timestamp", ["public.items"], batch_max_rows="3",
                               transaction_boundary="connector"), txn=FakeTransactions())
    assert len(rows(task.poll())) == 3  # the group's cursor stays open for the rest
    assert terminate_other_sessions(db) >= 1
    with pytest.raises(ConnectError, match="in the middle of the rows with timestamp"):
        task.poll()
    task.stop()
