"""End to end: the SQL source on a real worker writing through a real Schema Registry.

* Avro, Protobuf and JSON Schema: three connectors read one SQLite table; what
  they commit is decoded by confluent-kafka's deserializers (Avro, JSON Schema)
  and by a protoc-compiled class (Protobuf) and equals the table's rows; a file
  source's lines go out as Avro strings.
* Schema evolution under the subject's BACKWARD compatibility: a new nullable
  column registers version 2 and the task goes on; a new NOT NULL column is
  refused by the registry, the task fails naming the subject, the versions and
  the registry's message, and nothing of the refused batch is committed.
* A registry that cannot be reached: the task fails naming its URL, restarts by
  itself once the registry is back, and every row reaches Kafka exactly once.
* A registry behind basic auth, the password given through a config provider.
"""

from __future__ import annotations

import datetime
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format
from support.kafka import create_topic, free_port, wait_for
from support.offsets import committed, committed_values
from support.postgres import Database
from support.registry import RegistryProxy, SchemaRegistry, compile_proto
from support.workers import WorkerProcess

from connect_runtime.security.providers import FILE_PROVIDER

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
STAMP = datetime.datetime(2024, 3, 4, 5, 6, 7, 890000)
AUTO_RESTART = {"errors.restart.policy": "on-failure", "errors.restart.max.attempts": "-1",
                "errors.restart.backoff.initial.ms": "4000",
                "errors.restart.backoff.max.ms": "4000"}


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = Database(f"sqlite:///{tmp_path / 'source.db'}")
    with database.engine.connect() as conn:
        conn.exec_driver_sql("PRAGMA journal_mode=WAL")  # the test writes while the task reads
    yield database
    database.engine.dispose()


def sql_connector(db: Database, table: str, prefix: str, converter: str, url: str,
                  **more: str) -> dict[str, str]:
    return {"connector.class": "SqlSourceConnector", "connection.url": db.url,
            "mode": "incrementing", "table.whitelist": table, "topic.prefix": prefix,
            "incrementing.column.name": "id", "poll.interval.ms": "200",
            "table.poll.interval.ms": "500", "exactly.once.support": "required",
            "value.converter": converter, "value.converter.schema.registry.url": url, **more}


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
           ) -> Iterator[WorkerProcess]:
    """A worker of this module's own: its tests run four tasks at once, which the
    session's shared worker (Spark local[8]) may not have free slots for when
    tests before them left connectors running."""
    w = WorkerProcess(kafka_bootstrap, f"sr-{uuid.uuid4().hex[:8]}", free_port(),
                      tmp_path_factory.mktemp("sr-worker")).start()
    try:
        yield w
    finally:
        w.stop()


@pytest.fixture(autouse=True)
def _delete_connectors(worker: WorkerProcess) -> Iterator[None]:
    """Each test's connectors go when it ends."""
    before = set(worker.rest("GET", "/connectors").json())
    yield
    for name in set(worker.rest("GET", "/connectors").json()) - before:
        worker.rest("DELETE", f"/connectors/{name}")


def create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text
    worker.wait_tasks(name, "RUNNING", 1)


def test_avro_protobuf_and_json_schema_decode_with_independent_readers(
        kafka_bootstrap: str, worker: WorkerProcess, db: Database,
        schema_registry: SchemaRegistry, unique_name: Callable[[str], str],
        tmp_path: Path) -> None:
    name = unique_name("rows").replace("-", "_")
    table = db.table(name, sa.Column("customer", sa.String, nullable=False),
                     sa.Column("note", sa.String, nullable=True),
                     sa.Column("amount", sa.Numeric(10, 2), nullable=False))
    rows = [{"customer": f"c{i}", "note": None if i % 3 == 0 else f"n{i}",
             "amount": f"{i}.25", "updated": STAMP}
            for i in range(1, 31)]
    db.insert(table, *rows)
    prefixes = {fmt: f"{name}-{fmt}-" for fmt in ("avro", "proto", "json")}
    for fmt, converter in (("avro", AVRO), ("proto", PROTOBUF), ("json", JSON_SCHEMA)):
        create_topic(kafka_bootstrap, prefixes[fmt] + name)
        create(worker, f"{name}-{fmt}", sql_connector(db, name, prefixes[fmt], converter,
                                                      schema_registry.url))
    # The file source's lines (str without a schema) as Avro strings.
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"line {i} ✓\n" for i in range(30)))
    file_topic = f"{name}-file"
    create_topic(kafka_bootstrap, file_topic)
    create(worker, f"{name}-file", {
        "connector.class": "FileStreamSourceConnector", "file": str(lines),
        "topic": file_topic, "exactly.once.support": "required", "value.converter": AVRO,
        "value.converter.schema.registry.url": schema_registry.url})
    for topic_name in [*(p + name for p in prefixes.values()), file_topic]:
        wait_for(lambda t=topic_name: committed(kafka_bootstrap, t, decode=bytes) == 30,  # type: ignore[misc]
                 90, f"30 records in {topic_name}")

    client = SchemaRegistryClient({"url": schema_registry.url})
    want = [(i, f"c{i}", None if i % 3 == 0 else f"n{i}", f"{i}.25") for i in range(1, 31)]

    topic = prefixes["avro"] + name
    avro = AvroDeserializer(client)
    got = [avro(v, SerializationContext(topic, MessageField.VALUE))
           for v in committed_values(kafka_bootstrap, topic, decode=bytes)]
    assert [(r["id"], r["customer"], r["note"], str(r["amount"])) for r in got] == want
    assert got[0]["updated"].isoformat() == "2024-03-04T05:06:07.890000+00:00"

    got_lines = [avro(v, SerializationContext(file_topic, MessageField.VALUE))
                 for v in committed_values(kafka_bootstrap, file_topic, decode=bytes)]
    assert got_lines == [f"line {i} ✓" for i in range(30)]

    topic = prefixes["json"] + name
    json_reader = JSONDeserializer(None, schema_registry_client=client)
    got = [json_reader(v, SerializationContext(topic, MessageField.VALUE))
           for v in committed_values(kafka_bootstrap, topic, decode=bytes)]
    assert [(r["id"], r["customer"], r["note"]) for r in got] == [w[:3] for w in want]
    assert got[0]["updated"] == 1709528767890  # Connect's Timestamp: epoch milliseconds

    topic = prefixes["proto"] + name
    registered = client.get_latest_version(f"{topic}-value")
    proto_reader = ProtobufDeserializer(
        compile_proto(registered.schema.schema_str, tmp_path, name),
        {"use.deprecated.format": False})
    got = [json_format.MessageToDict(proto_reader(v, None), preserving_proto_field_name=True)
           for v in committed_values(kafka_bootstrap, topic, decode=bytes)]
    assert [(int(r["id"]), r["customer"], r.get("note") or None) for r in got] == [
        w[:3] for w in want]
    assert got[0]["updated"] == "2024-03-04T05:06:07.890Z"
    client.close()


def test_schema_evolution_under_backward_compatibility(
        kafka_bootstrap: str, worker: WorkerProcess, db: Database,
        schema_registry: SchemaRegistry, unique_name: Callable[[str], str]) -> None:
    name = unique_name("evolve").replace("-", "_")
    table = db.table(name, sa.Column("customer", sa.String, nullable=False))
    topic, connector = f"{name}-{name}", f"{name}-avro"
    subject = f"{topic}-value"
    create_topic(kafka_bootstrap, topic)
    db.insert(table, *({"customer": f"c{i}", "updated": STAMP}
                       for i in range(5)))
    create(worker, connector, sql_connector(db, name, f"{name}-", AVRO, schema_registry.url))
    wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) == 5, 90, "5 records")
    client = SchemaRegistryClient({"url": schema_registry.url})
    client.set_compatibility(subject, "BACKWARD")

    # A nullable column: an optional field with default null, BACKWARD compatible.
    db.execute(f"ALTER TABLE {name} ADD COLUMN note VARCHAR")
    table = reflected(db, name)
    time.sleep(1.5)  # table.poll.interval.ms: the task sees the new column
    db.insert(table, *({"customer": f"c{i}", "note": f"n{i}", "updated": STAMP}
                       for i in range(5, 10)))
    wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) == 10, 90, "10 records")
    assert client.get_versions(subject) == [1, 2]
    assert worker.task_states(connector) == ["RUNNING"]
    avro = AvroDeserializer(client)
    decoded = [avro(v, SerializationContext(topic, MessageField.VALUE))
               for v in committed_values(kafka_bootstrap, topic, decode=bytes)]
    assert [d.get("note") for d in decoded] == [None] * 5 + [f"n{i}" for i in range(5, 10)]

    # A NOT NULL column: a field without a default, which BACKWARD refuses.
    db.execute(f"ALTER TABLE {name} ADD COLUMN qty INTEGER NOT NULL DEFAULT 0")
    table = reflected(db, name)
    time.sleep(1.5)
    db.insert(table, *({"customer": f"c{i}", "note": "x", "qty": i,
                        "updated": STAMP} for i in range(10, 15)))
    worker.wait_tasks(connector, "FAILED", 1)
    trace = worker.status(connector)["tasks"][0]["trace"]
    assert f"subject '{subject}'" in trace, trace
    assert "registered versions [1, 2], compatibility BACKWARD" in trace, trace
    assert schema_registry.url in trace and "qty" in trace, trace
    time.sleep(2)  # nothing of the refused batch may surface, even late
    assert committed(kafka_bootstrap, topic, decode=bytes) == 10
    assert client.get_versions(subject) == [1, 2]
    client.close()


def reflected(db: Database, name: str) -> sa.Table:
    """The table as the database has it now (an insert ignores keys its Table lacks)."""
    return sa.Table(name, sa.MetaData(), autoload_with=db.engine)


class Writer(threading.Thread):
    """Inserts a row every 20 ms, each in its own transaction, until stopped."""

    def __init__(self, db: Database, table: sa.Table) -> None:
        super().__init__(name="writer", daemon=True)
        self.db, self.table = db, table
        self.stopping = threading.Event()
        self.written = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.wait(0.02):
                self.db.insert(self.table, {"customer": f"c{self.written}",
                                            "updated": STAMP})
                self.written += 1
        except BaseException as e:
            self.error = e

    def stop(self) -> int:
        self.stopping.set()
        self.join(30)
        if self.error is not None:
            raise self.error
        return self.written


def test_an_unreachable_registry_fails_the_task_and_loses_nothing(
        kafka_bootstrap: str, worker: WorkerProcess, db: Database,
        schema_registry: SchemaRegistry, unique_name: Callable[[str], str]) -> None:
    name = unique_name("outage").replace("-", "_")
    table = db.table(name, sa.Column("customer", sa.String, nullable=False))
    topic, connector = f"{name}-{name}", f"{name}-avro"
    create_topic(kafka_bootstrap, topic)
    host_port = schema_registry.url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    proxy = RegistryProxy((host_port[0], int(host_port[1])))
    url = f"http://127.0.0.1:{proxy.port}/apis/ccompat/v7"
    writer = Writer(db, table)
    try:
        create(worker, connector, sql_connector(
            db, name, f"{name}-", AVRO, url, **AUTO_RESTART,
            **{"transaction.boundary": "interval", "transaction.boundary.interval.ms": "500",
               "value.converter.max.retries": "1", "value.converter.retries.wait.ms": "100",
               "errors.retry.timeout": "1000", "errors.tolerance": "all"}))
        writer.start()
        wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) >= 30, 90, "30 records")

        # A restarted task has no schema id yet: it must ask the registry, which is gone.
        proxy.cut()
        r = worker.rest("POST", f"/connectors/{connector}/tasks/0/restart")
        assert r.status_code in (200, 202, 204), r.text

        def failed_trace() -> str | None:
            tasks = worker.status(connector).get("tasks", [])
            trace = tasks[0].get("trace", "") if tasks and tasks[0]["state"] == "FAILED" \
                else ""
            return trace or None
        trace = wait_for(failed_trace, 60, "the task to fail without its registry",
                         interval=0.1)
        assert url in trace and "could not be reached" in trace, trace
        stalled = committed(kafka_bootstrap, topic, decode=bytes)
        time.sleep(2)
        # errors.tolerance=all did not skip a record: nothing was written meanwhile.
        assert committed(kafka_bootstrap, topic, decode=bytes) == stalled

        proxy.restore()  # errors.restart.policy brings the task back
        wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) >= stalled + 30, 90,
                 "records again after the registry came back")
        written = writer.stop()
        wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) == written, 90,
                 f"all {written} rows")
    finally:
        writer.stopping.set()
        proxy.close()

    client = SchemaRegistryClient({"url": schema_registry.url})
    avro = AvroDeserializer(client)
    ids = [avro(v, SerializationContext(topic, MessageField.VALUE))["id"]
           for v in committed_values(kafka_bootstrap, topic, decode=bytes)]
    assert ids == list(range(1, written + 1)), "a row lost, duplicated or out of order"
    client.close()


def test_registry_credentials_come_from_a_config_provider(
        kafka_bootstrap: str, db: Database, unique_name: Callable[[str], str],
        tmp_path: Path) -> None:
    """A registry behind basic auth; the connector config names the password only as
    ``${file:...}``: the task resolves it, the connector's config and status never show it."""
    password = f"pw-{uuid.uuid4().hex}"
    registry = SchemaRegistry(tmp_path / "registry",
                              {"REGISTRY_BASIC_AUTH_USERS": f"connect:{password}"})
    registry.start()
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "registry.properties").write_text(f"user.info=connect:{password}\n")
    worker = WorkerProcess(kafka_bootstrap, unique_name("sr-secrets"), free_port(),
                           tmp_path, {
                               "config.providers": "file",
                               "config.providers.file.class": FILE_PROVIDER,
                               "config.providers.file.param.allowed.paths": str(secrets)})
    try:
        worker.start()
        name = unique_name("secret").replace("-", "_")
        table = db.table(name, sa.Column("customer", sa.String, nullable=False))
        db.insert(table, *({"customer": f"c{i}", "updated": STAMP} for i in range(5)))
        topic, connector = f"{name}-{name}", f"{name}-avro"
        create_topic(kafka_bootstrap, topic)
        placeholder = f"${{file:{secrets / 'registry.properties'}:user.info}}"
        create(worker, connector, sql_connector(db, name, f"{name}-", AVRO, registry.url, **{
            "value.converter.basic.auth.credentials.source": "USER_INFO",
            "value.converter.basic.auth.user.info": placeholder}))
        wait_for(lambda: committed(kafka_bootstrap, topic, decode=bytes) == 5, 90, "5 records")
        client = SchemaRegistryClient({"url": registry.url,
                                       "basic.auth.user.info": f"connect:{password}"})
        avro = AvroDeserializer(client)
        assert [avro(v, SerializationContext(topic, MessageField.VALUE))["customer"]
                for v in committed_values(kafka_bootstrap, topic, decode=bytes)] == [
            f"c{i}" for i in range(5)]
        client.close()
        config = worker.rest("GET", f"/connectors/{connector}/config").json()
        assert config["value.converter.basic.auth.user.info"] == placeholder
        assert password not in worker.rest("GET", f"/connectors/{connector}/status").text
    finally:
        worker.stop()
        registry.stop()

