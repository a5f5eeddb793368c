"""Transforms and predicates on a real worker, and their REST shapes next to Kafka Connect's.

1. A sequence connector runs a chain of bundled transforms, bundled predicates
   (one negated) and a user's own predicate (found by import path on the
   executors): the output, read with ``read_committed``, is checked exactly, and
   the offsets of the records the chain dropped still advance.
2. Every other bundled transform and predicate runs on a worker too: on
   schemaless records (a second sequence connector) and on Struct records with
   their schema (the SQL source on SQLite, written with Connect's JSON envelope).
3. (``kafka_connect``) Kafka Connect 4.1.1 and this runtime list the same
   transformations and predicates, describe their keys the same way, and
   answer ``PUT .../config/validate`` with configs using them in the same shape
   (the intended differences are asserted too).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.kafka import create_topic, free_port, read_topic, wait_for
from support.workers import WorkerProcess

SEQ = "SequenceSourceConnector"
PKG = "org.apache.kafka.connect.transforms"
PARTITIONS, RECORDS = 2, 40

# Written to a folder on the worker's PYTHONPATH: a user's predicate, imported by path.
USER_PREDICATE = textwrap.dedent('''
    """A predicate of the user's own: true for records whose value's ``n`` is odd."""

    class OddN:
        def configure(self, configs):
            self.field = configs.get("field", "n")

        def test(self, record):
            return record.value[self.field] % 2 == 1

        def close(self):
            pass
''')


def chain_config(in_topic: str) -> dict[str, str]:
    return {
        "connector.class": SEQ, "tasks.max": "1", "topic": in_topic,
        "partitions": str(PARTITIONS), "max.records": str(RECORDS), "batch.size": "7",
        "record.size.bytes": "0", "exactly.once.support": "required",
        "transforms": "ins,ren,route,tag,untagged,drop",
        "transforms.ins.type": f"{PKG}.InsertField$Value",
        "transforms.ins.static.field": "origin", "transforms.ins.static.value": "sequence",
        "transforms.ins.topic.field": "source_topic",
        "transforms.ren.type": f"{PKG}.ReplaceField$Value",
        "transforms.ren.renames": "seq:n", "transforms.ren.exclude": "pad,task",
        "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(.*)-in", "transforms.route.replacement": "$1-out",
        "transforms.tag.type": "InsertHeader", "transforms.tag.predicate": "routed",
        "transforms.tag.header": "stage", "transforms.tag.value.literal": "transformed",
        "transforms.untagged.type": "InsertHeader", "transforms.untagged.predicate": "routed",
        "transforms.untagged.negate": "true",
        "transforms.untagged.header": "unrouted", "transforms.untagged.value.literal": "yes",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "odd",
        "predicates": "routed,odd",
        "predicates.routed.type": f"{PKG}.predicates.TopicNameMatches",
        "predicates.routed.pattern": ".*-out",
        "predicates.odd.type": "smt_e2e_predicates.OddN",
    }


def offsets_of(worker: WorkerProcess, name: str) -> dict[int, Any]:
    r = worker.rest("GET", f"/connectors/{name}/offsets")
    assert r.status_code == 200, r.text
    return {o["partition"]["sequence.partition"]: o["offset"] for o in r.json()["offsets"]}


def test_a_chain_transforms_routes_tags_and_drops_records_exactly_once(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    plugins, workdir = tmp_path / "plugins", tmp_path / "work"
    plugins.mkdir()
    workdir.mkdir()
    (plugins / "smt_e2e_predicates.py").write_text(USER_PREDICATE)
    base = unique_name("smt")
    in_topic, out_topic, name = f"{base}-in", f"{base}-out", unique_name("chain")
    # Only the routed topic exists (the test broker does not auto-create topics): a record
    # reaching the sender untransformed would fail the task.
    create_topic(kafka_bootstrap, out_topic, partitions=1)
    worker = WorkerProcess(kafka_bootstrap, unique_name("smt-worker"), free_port(), workdir,
                           {"exactly.once.source.support": "enabled"},
                           pythonpath=(str(plugins),))
    worker.start()
    try:
        r = worker.rest("POST", "/connectors", json={"name": name,
                                                     "config": chain_config(in_topic)})
        assert r.status_code == 201, r.text
        worker.wait_tasks(name, "RUNNING", 1)
        # The last record of each partition (seq 39) is odd and dropped: the offsets
        # still reach it, so a restart would not produce it again.
        wait_for(lambda: offsets_of(worker, name) == {k: {"seq": RECORDS}
                                                      for k in range(PARTITIONS)},
                 120, "the offsets of every record, dropped ones included")
        records = read_topic(kafka_bootstrap, out_topic)
        assert worker.task_states(name) == ["RUNNING"], worker.tail()
    finally:
        worker.stop()

    expected = {(k, n) for k in range(PARTITIONS) for n in range(0, RECORDS, 2)}
    assert len(records) == len(expected)  # each kept record exactly once
    seen = set()
    for rec in records:
        value = rec["value"]
        k, n = value["partition"], value["n"]
        seen.add((k, n))
        assert value == {"partition": k, "n": n, "origin": "sequence",
                         "source_topic": in_topic}
        assert rec["key"] == str(k).encode()
        assert rec["headers"] == [("stage", b"transformed")]
    assert seen == expected
    by_partition = [[n for k, n in ((r["value"]["partition"], r["value"]["n"])
                                    for r in records) if k == part]
                    for part in range(PARTITIONS)]
    assert by_partition == [list(range(0, RECORDS, 2))] * PARTITIONS  # in order


def test_a_chain_that_cannot_be_built_is_refused_with_the_key(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    config = {"connector.class": SEQ, "topic": unique_name("t"), "transforms": "a",
              "transforms.a.type": "Filter", "transforms.a.predicate": "nope"}
    r = worker.rest("POST", "/connectors", json={"name": unique_name("bad"), "config": config})
    assert r.status_code == 400
    assert r.json()["message"].splitlines()[:2] == [
        "Connector configuration is invalid and contains the following 1 error(s):",
        "Predicate 'nope' is not listed in 'predicates' (listed: none)"]


# ------------------------------------------------- next to Kafka Connect 4.1.1 (Java)

FILE_SOURCE = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
               "name": "smt-parity", "topic": "t", "file": "/tmp/smt-parity.txt"}
# Configs both runtimes judge alike (the same keys carry the same errors).
SAME = {
    "valid": {"transforms": "ins,route", "transforms.ins.type": f"{PKG}.InsertField$Value",
              "transforms.ins.static.field": "f", "transforms.ins.static.value": "v",
              "transforms.ins.predicate": "isT", "transforms.ins.negate": "true",
              "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "$1-x", "predicates": "isT",
              "predicates.isT.type": "TopicNameMatches", "predicates.isT.pattern": "t.*"},
    "unknown type": {"transforms": "a", "transforms.a.type": "com.nope.Nope"},
    "missing type": {"transforms": "a"},
    "predicate without type": {"transforms": "a", "transforms.a.type": "Filter",
                               "transforms.a.predicate": "p", "predicates": "p"},
    "negate alone": {"transforms": "a", "transforms.a.type": "Filter",
                     "transforms.a.negate": "true"},
    "missing key": {"transforms": "a", "transforms.a.type": f"{PKG}.MaskField$Value"},
    "bad regex": {"transforms": "a", "transforms.a.type": "RegexRouter",
                  "transforms.a.regex": "(", "transforms.a.replacement": "x"},
    "bad spec": {"transforms": "a", "transforms.a.type": f"{PKG}.Cast$Value",
                 "transforms.a.spec": "x:map"},
    "bad negate": {"transforms": "a", "transforms.a.type": "Filter",
                   "transforms.a.predicate": "p", "transforms.a.negate": "maybe",
                   "predicates": "p", "predicates.p.type": "RecordIsTombstone"},
    "wrong kind": {"transforms": "a", "transforms.a.type": "TopicNameMatches"},
    "duplicate alias": {"transforms": "a,a", "transforms.a.type": "Filter"},
    "every transform": {"transforms": ",".join(f"t{i}" for i in range(6)),
                        **{f"transforms.t{i}.type": f"{PKG}.{t}" for i, t in enumerate([
                            "Flatten$Key", "HoistField$Value", "ExtractField$Value",
                            "TimestampRouter", "SetSchemaMetadata$Value",
                            "TimestampConverter$Key"])},
                        "transforms.t4.schema.name": "renamed"},
}
# Configs Connect accepts and then fails the task with; this runtime refuses them here.
STRICTER = {
    "predicate not listed": ({"transforms": "a", "transforms.a.type": "Filter",
                              "transforms.a.predicate": "p"}, "transforms.a.predicate"),
    "nothing to insert": ({"transforms": "a", "transforms.a.type": f"{PKG}.InsertField$Value"},
                          "transforms.a.type"),
    "lists of different lengths": ({"transforms": "a",
                                    "transforms.a.type": f"{PKG}.HeaderFrom$Value",
                                    "transforms.a.fields": "a,b", "transforms.a.headers": "h",
                                    "transforms.a.operation": "copy"}, "transforms.a.headers"),
}


def plugin_part(infos: dict[str, Any]) -> list[tuple[str, Any, Any, Any, bool]]:
    """Per transform/predicate key, in order: its definition, value and recommended values
    (versions, which name each runtime's own release, left out) and whether it has errors
    (the messages are worded differently)."""
    out = []
    for config in infos["configs"]:
        name = config["value"]["name"]
        if not name.startswith(("transforms.", "predicates.")):
            continue
        definition, value = dict(config["definition"]), dict(config["value"])
        if name.endswith(".plugin.version"):
            definition.pop("default_value")
            value.pop("value")
            value.pop("recommended_values")
        out.append((name, definition, value.get("value"), value.get("recommended_values"),
                    bool(value["errors"])))
    return out


def with_errors(infos: dict[str, Any]) -> list[str]:
    return sorted(c["value"]["name"] for c in infos["configs"] if c["value"]["errors"])


@pytest.mark.kafka_connect
@pytest.mark.timeout(600)
def test_listing_keys_and_validation_match_kafka_connect(
        kafka_bootstrap: str, worker: WorkerProcess, tmp_path: Path) -> None:
    from support.java_connect import JavaWorker

    java = JavaWorker(kafka_bootstrap, tmp_path)
    java.start()
    try:
        sides = {"java": java.rest, "ours": worker.rest}
        listed = {side: {(p["class"], p["type"]) for p in rest(
            "GET", "/connector-plugins?connectorsOnly=false").json()
            if p["type"] in ("transformation", "predicate")} for side, rest in sides.items()}
        assert listed["ours"] == listed["java"] and len(listed["java"]) == 29
        for class_name, _ in sorted(listed["java"]):
            keys = {side: rest("GET", f"/connector-plugins/{class_name}/config").json()
                    for side, rest in sides.items()}
            assert keys["ours"] == keys["java"], class_name
        validate = "/connector-plugins/FileStreamSourceConnector/config/validate"
        for case, extra in SAME.items():
            answers = {side: rest("PUT", validate, json={**FILE_SOURCE, **extra})
                       for side, rest in sides.items()}
            assert answers["ours"].status_code == answers["java"].status_code == 200, case
            java_infos, our_infos = answers["java"].json(), answers["ours"].json()
            assert our_infos["groups"] == java_infos["groups"], case
            # Which keys have errors, not how many: Java adds a second error to a missing
            # required key whose validator also rejects null (ONE_ERROR_PER_KEY in
            # test_rest_parity.py).
            assert with_errors(our_infos) == with_errors(java_infos), case
            assert plugin_part(our_infos) == plugin_part(java_infos), case
        for case, (extra, key) in STRICTER.items():
            java_infos, our_infos = (rest("PUT", validate, json={**FILE_SOURCE, **extra}).json()
                                     for rest in (java.rest, worker.rest))
            assert java_infos["error_count"] == 0, case
            assert our_infos["error_count"] == 1, case
            assert with_errors(our_infos) == [key], case
            assert [part[:2] for part in plugin_part(our_infos)] == \
                [part[:2] for part in plugin_part(java_infos)], case
    finally:
        java.stop()


def wait_for_records(bootstrap: str, topic: str, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = wait_for(
        lambda: (lambda rs: rs if len(rs) >= count else None)(read_topic(bootstrap, topic)),
        120, f"{count} records in {topic}", interval=1)
    return found


def test_the_other_transforms_and_predicates_run_on_a_worker(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    """Every bundled transform and predicate the chain above does not use, on schemaless
    records (sequence connector) and on records with a schema (SQL source, SQLite)."""
    base = unique_name("smt2")
    routed = f"{base}-routed"  # TimestampRouter's output: topic + a literal 'routed'
    create_topic(worker.bootstrap, routed)
    name = unique_name("others")
    config = {
        "connector.class": SEQ, "tasks.max": "1", "topic": base, "partitions": "1",
        "max.records": "10", "record.size.bytes": "0", "exactly.once.support": "required",
        "transforms": "hoist,flat,mask,cast,ts,tsconv,key,extract,hdr,had,drophdr,tomb,route",
        "transforms.hoist.type": f"{PKG}.HoistField$Value", "transforms.hoist.field": "data",
        "transforms.flat.type": f"{PKG}.Flatten$Value", "transforms.flat.delimiter": "_",
        "transforms.mask.type": f"{PKG}.MaskField$Value", "transforms.mask.fields": "data_pad",
        "transforms.mask.replacement": "***",
        "transforms.cast.type": f"{PKG}.Cast$Value", "transforms.cast.spec": "data_seq:string",
        "transforms.ts.type": f"{PKG}.InsertField$Value", "transforms.ts.timestamp.field": "ts",
        "transforms.tsconv.type": f"{PKG}.TimestampConverter$Value",
        "transforms.tsconv.field": "ts", "transforms.tsconv.target.type": "unix",
        "transforms.key.type": f"{PKG}.ValueToKey", "transforms.key.fields": "data_partition",
        "transforms.extract.type": f"{PKG}.ExtractField$Key",
        "transforms.extract.field": "data_partition",
        "transforms.hdr.type": f"{PKG}.HeaderFrom$Value", "transforms.hdr.fields": "data_task",
        "transforms.hdr.headers": "task", "transforms.hdr.operation": "move",
        "transforms.had.type": f"{PKG}.InsertHeader", "transforms.had.header": "had",
        "transforms.had.value.literal": "task", "transforms.had.predicate": "hasTask",
        "transforms.drophdr.type": f"{PKG}.DropHeaders", "transforms.drophdr.headers": "task",
        "transforms.tomb.type": f"{PKG}.Filter", "transforms.tomb.predicate": "tomb",
        "transforms.route.type": f"{PKG}.TimestampRouter",
        "transforms.route.topic.format": "${topic}-${timestamp}",
        "transforms.route.timestamp.format": "'routed'",
        "predicates": "hasTask,tomb",
        "predicates.hasTask.type": f"{PKG}.predicates.HasHeaderKey",
        "predicates.hasTask.name": "task",
        "predicates.tomb.type": f"{PKG}.predicates.RecordIsTombstone",
    }
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text
    records = wait_for_records(worker.bootstrap, routed, 10)
    assert worker.task_states(name) == ["RUNNING"], worker.tail()
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    assert len(records) == 10
    for n, rec in enumerate(records):
        value = rec["value"]
        ts = value.pop("ts")
        assert value == {"data_partition": 0, "data_seq": str(n), "data_pad": "***"}
        assert isinstance(ts, int) and ts > 1_700_000_000_000  # epoch ms, from the record
        assert rec["key"] == b"0"  # ValueToKey then ExtractField$Key: the partition
        assert rec["headers"] == [("had", b"task")]  # HeaderFrom moved, InsertHeader, Drop


def test_transforms_rewrite_schemas_on_a_worker(
        worker: WorkerProcess, tmp_path: Path, unique_name: Callable[[str], str]) -> None:
    """Struct records with their schema (SQL source, SQLite): schema-aware transforms and
    Connect's JSON envelope, through a per-connector value.converter override."""
    import sqlite3

    db = tmp_path / "items.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
                     "amount REAL NOT NULL)")
        conn.executemany("INSERT INTO items (id, name, amount) VALUES (?, ?, ?)",
                         [(i, f"item-{i}", i + 0.5) for i in range(1, 6)])
    prefix = unique_name("sql-smt") + "-"
    create_topic(worker.bootstrap, prefix + "items")
    name = unique_name("schemas")
    config = {
        "connector.class": "SqlSourceConnector", "tasks.max": "1",
        "connection.url": f"sqlite:///{db}", "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": "items", "topic.prefix": prefix,
        "poll.interval.ms": "200", "exactly.once.support": "required",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "meta,rename,cast,mask",
        "transforms.meta.type": f"{PKG}.SetSchemaMetadata$Value",
        "transforms.meta.schema.name": "shop.Item", "transforms.meta.schema.version": "3",
        "transforms.rename.type": f"{PKG}.ReplaceField$Value",
        "transforms.rename.renames": "name:title",
        "transforms.cast.type": f"{PKG}.Cast$Value", "transforms.cast.spec": "amount:string",
        "transforms.mask.type": f"{PKG}.MaskField$Value", "transforms.mask.fields": "id",
    }
    r = worker.rest("POST", "/connectors", json={"name": name, "config": config})
    assert r.status_code == 201, r.text
    records = wait_for_records(worker.bootstrap, prefix + "items", 5)
    assert worker.task_states(name) == ["RUNNING"], worker.tail()
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204
    assert len(records) == 5
    for i, rec in enumerate(records, start=1):
        schema, payload = rec["value"]["schema"], rec["value"]["payload"]
        assert (schema["type"], schema["name"], schema["version"]) == ("struct", "shop.Item", 3)
        assert [(f["field"], f["type"]) for f in schema["fields"]] == [
            ("id", schema["fields"][0]["type"]), ("title", "string"), ("amount", "string")]
        assert schema["fields"][0]["type"] in ("int32", "int64")
        assert payload == {"id": 0, "title": f"item-{i}", "amount": str(i + 0.5)}
