"""End to end: the SQL source on a real worker, SQLite and PostgreSQL, through a SIGKILL.

One worker runs six connectors: incrementing and timestamp+incrementing (with
3-second ``interval`` transactions, so the kill finds records of an open one on
the broker) and timestamp (``transaction.boundary=connector``), on a SQLite
file and on a PostgreSQL database, all with ``exactly.once.support=required``. A writer keeps
inserting rows and updating old ones (up to 8 rows share each timestamp, so
timestamp groups are cut by ``batch.max.rows=5`` and streamed) while the worker is killed
with SIGKILL (the whole process tree: worker, Spark, its Python workers) and a
new worker takes over the same topics. Read back with ``read_committed``:

* incrementing: every row, exactly once, in id order;
* the timestamp modes: every row's latest version; no (row, version) twice;
  each row's versions in increasing order; timestamps never going back.

A duplicated group (a restart resuming inside a timestamp group), a lost row
or an aborted transaction made visible would each fail one of these.

Values are Structs, written by Connect's JsonConverter with ``schemas.enable``:
each envelope carries the table's schema (checked too).
"""

from __future__ import annotations

import datetime
import random
import signal
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from support.kafka import create_topic, free_port, read_topic, wait_for
from support.postgres import Database, PostgresServer
from support.workers import WorkerProcess

MODES = ("incrementing", "timestamp+incrementing", "timestamp")
WORKER_SETTINGS = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1500"}


@dataclass
class Source:
    """One table, the connector reading it, and its topic."""

    db: Database
    mode: str
    table: sa.Table
    connector: str
    topic: str

    @property
    def label(self) -> str:
        return f"{self.db.kind} {self.mode}"


class Writer(threading.Thread):
    """Inserts 1-7 rows into every table and updates one older row (timestamp modes), in
    one transaction per table per round; all rows of a transaction share its timestamp."""

    def __init__(self, sources: list[Source]) -> None:
        super().__init__(name="sql-writer", daemon=True)
        self.sources = sources
        self.stopping = threading.Event()
        self.error: BaseException | None = None
        self.rounds = 0
        self._random = random.Random(13)

    def run(self) -> None:
        try:
            while not self.stopping.wait(0.05):
                for source in self.sources:
                    self._write(source)
                self.rounds += 1
        except BaseException as e:
            self.error = e

    def _write(self, source: Source) -> None:
        table = source.table
        with source.db.engine.begin() as conn:
            # PostgreSQL: now() is the transaction's start, the same for every row of it.
            stamp: Any = sa.func.now() if source.db.kind == "postgresql" else _utc_now_ms()
            # Up to 7 rows: more than batch.max.rows, so some groups are streamed in parts.
            rows = [{"version": 0, "updated": stamp} for _ in range(self._random.randint(1, 7))]
            conn.execute(table.insert().values(rows))
            if source.mode != "incrementing":
                top = conn.execute(sa.select(sa.func.max(table.c.id))).scalar_one()
                target = self._random.randint(1, top)
                conn.execute(table.update().where(table.c.id == target).values(
                    version=table.c.version + 1, updated=stamp))

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        if self.error is not None:
            raise self.error


def _utc_now_ms() -> datetime.datetime:
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


@pytest.fixture
def databases(postgres: PostgresServer, tmp_path: Path) -> Iterator[list[Database]]:
    sqlite = Database(f"sqlite:///{tmp_path / 'source.db'}")
    with sqlite.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")  # the writer and the task overlap
    dbs = [sqlite, Database(postgres.create_database("e2e"))]
    try:
        yield dbs
    finally:
        for db in dbs:
            db.engine.dispose()


def make_sources(dbs: list[Database], bootstrap: str, prefix: str) -> list[Source]:
    sources = []
    for db in dbs:
        for mode in MODES:
            name = mode.replace("+", "_") + "_rows"
            table = db.table(name, sa.Column("version", sa.Integer, nullable=False))
            connector = f"{prefix}-{db.kind}-{name}"
            topic = f"{connector}-{name}"
            create_topic(bootstrap, topic)
            sources.append(Source(db, mode, table, connector, topic))
    return sources


def connector_config(source: Source) -> dict[str, str]:
    # The delay covers a writer transaction between its now() and its commit, even on a
    # loaded CI machine; a row committed later than that would (rightly) be missed.
    config = {"connector.class": "SqlSourceConnector", "connection.url": source.db.url,
              "mode": source.mode, "table.whitelist": source.table.name,
              "topic.prefix": f"{source.connector}-", "incrementing.column.name": "id",
              "timestamp.column.name": "updated", "batch.max.rows": "5",
              "poll.interval.ms": "200", "timestamp.delay.interval.ms": "3000",
              "exactly.once.support": "required",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "true"}
    if source.mode == "timestamp":
        config["transaction.boundary"] = "connector"
    else:  # long transactions: the kill surely finds one open, with records on the broker
        config.update({"transaction.boundary": "interval",
                       "transaction.boundary.interval.ms": "3000"})
    return config


def committed_rows(bootstrap: str, source: Source) -> list[dict[str, Any]]:
    """The committed values' payloads; each envelope's schema must be the table's."""
    envelopes = [r["value"] for r in read_topic(bootstrap, source.topic)]
    for envelope in envelopes[:1]:
        schema = envelope["schema"]
        assert schema["name"] == source.table.name, schema
        assert [(f["field"], f["type"], f.get("name")) for f in schema["fields"]] == [
            ("id", "int32", None), ("version", "int32", None),
            ("updated", "int64", "org.apache.kafka.connect.data.Timestamp")], schema
    return [envelope["payload"] for envelope in envelopes]


def start_worker(bootstrap: str, group: str, workdir: Path) -> WorkerProcess:
    return WorkerProcess(bootstrap, group, free_port(), workdir, WORKER_SETTINGS).start()


def running(worker: WorkerProcess, sources: list[Source]) -> bool:
    """Whether every connector's task runs; a FAILED task fails the test with its trace."""
    states = []
    for source in sources:
        tasks = worker.status(source.connector).get("tasks", [])
        failed = [t.get("trace", "") for t in tasks if t["state"] == "FAILED"]
        assert not failed, f"{source.label}: task FAILED:\n{failed[0]}"
        states += [t["state"] for t in tasks] or ["none"]
    return all(state == "RUNNING" for state in states)


def test_every_row_reaches_kafka_once_through_a_sigkill(
        kafka_bootstrap: str, databases: list[Database], tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    sources = make_sources(databases, kafka_bootstrap, unique_name("sql"))
    group = f"sql-e2e-{uuid.uuid4().hex[:8]}"
    writer = Writer(sources)
    workers = [start_worker(kafka_bootstrap, group, tmp_path)]
    try:
        for source in sources:
            r = workers[0].rest("POST", "/connectors", json={
                "name": source.connector, "config": connector_config(source)})
            assert r.status_code == 201, r.text
        wait_for(lambda: running(workers[0], sources), 90, "every task to run")
        writer.start()
        wait_for(lambda: running(workers[0], sources) and all(
            len(committed_rows(kafka_bootstrap, s)) >= 20 for s in sources),
            90, "every connector to commit rows")

        workers[0].signal_tree(signal.SIGKILL)
        workers[0].stop()
        time.sleep(1)  # the writer goes on while no worker runs
        before = {s.topic: len(committed_rows(kafka_bootstrap, s)) for s in sources}
        workers.append(start_worker(kafka_bootstrap, group, tmp_path))
        # The new tasks commit while the writer goes on (a RUNNING status alone could
        # still be the killed worker's).
        wait_for(lambda: running(workers[1], sources) and all(
            len(committed_rows(kafka_bootstrap, s)) >= before[s.topic] + 20 for s in sources),
            90, "every connector to commit rows again")
        writer.stop()

        aborted = sum(expect_exactly_once(kafka_bootstrap, source, workers[1])
                      for source in sources)
        assert aborted > 0, "the kill found no open transaction: the test proved nothing"
    finally:
        writer.stopping.set()
        for worker in workers:
            worker.stop()


def expect_exactly_once(bootstrap: str, source: Source, worker: WorkerProcess) -> int:
    """Check ``source``'s topic (see the module docstring); returns how many records
    were produced in transactions that never committed."""
    with source.db.engine.connect() as conn:
        final = dict(conn.execute(sa.select(source.table.c.id, source.table.c.version)).all())

    def complete() -> list[dict[str, Any]] | None:
        running(worker, [source])
        rows = committed_rows(bootstrap, source)
        latest = {row["id"]: row["version"] for row in rows}
        return rows if latest == final else None
    rows = wait_for(complete, 90, f"{source.label}: every row's last version in Kafka",
                    interval=1)
    aborted = len(read_topic(bootstrap, source.topic, "read_uncommitted")) - len(rows)
    print(f"{source.label}: {len(final)} rows, {len(rows)} records committed, "
          f"{aborted} produced in transactions that never committed")
    seen = [(row["id"], row["version"]) for row in rows]
    assert len(seen) == len(set(seen)), f"{source.label}: a row version came twice"
    if source.mode == "incrementing":
        assert [row["id"] for row in rows] == sorted(final), f"{source.label}: not in id order"
        return aborted
    versions: dict[int, int] = {}
    for row_id, version in seen:
        assert version > versions.get(row_id, -1), f"{source.label}: row {row_id} went back"
        versions[row_id] = version
    stamps = [row["updated"] for row in rows]
    assert stamps == sorted(stamps), f"{source.label}: timestamps went back"
    return aborted
