"""The Avro converter's pure parts: Connect schema -> Avro schema text, values, config.

No registry here (tests/converters/test_registry_converters.py has the real one):
these pin Confluent's AvroData mapping and the errors a user sees.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
import random
from typing import Any

import pytest
from fastavro import parse_schema, schemaless_reader

from connect_runtime.api.schema import Schema, Struct
from connect_runtime.converters import load_converter
from connect_runtime.converters.registry.avro import AvroOptions, plan_for, scrub_name
from connect_runtime.converters.registry.wire import header, read_header
from connect_runtime.errors import ConfigException, ConnectError, DataException, ServiceException
from connect_runtime.task.error_handler import ErrorHandler

AVRO = "io.confluent.connect.avro.AvroConverter"


def text(schema: Schema, **options: Any) -> Any:
    return json.loads(plan_for(schema, AvroOptions(**options)).text)


def roundtrip(schema: Schema, value: Any) -> Any:
    """Encode with the plan's writer, decode with the registered text as reader."""
    plan = plan_for(schema, AvroOptions())
    reader = parse_schema(json.loads(plan.text))
    return schemaless_reader(io.BytesIO(plan.encode(value)), reader, reader)


def test_primitives_carry_connect_types_and_names() -> None:
    assert text(Schema.INT64) == "long"
    assert text(Schema.INT8) == {"type": "int", "connect.type": "int8"}
    assert text(Schema.INT16) == {"type": "int", "connect.type": "int16"}
    assert text(Schema.OPTIONAL_STRING) == ["null", "string"]
    assert text(Schema.decimal(2)) == {
        "type": "bytes", "scale": 2, "precision": 64, "connect.version": 1,
        "connect.parameters": {"scale": "2"},
        "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}
    assert text(Schema.date()) == {
        "type": "int", "connect.version": 1, "connect.name": "org.apache.kafka.connect.data.Date",
        "logicalType": "date"}
    assert text(Schema.timestamp())["logicalType"] == "timestamp-millis"
    assert text(Schema.time())["logicalType"] == "time-millis"


def test_java_key_order_is_kept_in_the_registered_text() -> None:
    schema = Schema.struct({"id": Schema.INT64, "note": Schema.OPTIONAL_STRING},
                           name="com.example.Row", version=3, doc="a row")
    assert plan_for(schema, AvroOptions()).text == (
        '{"type":"record","name":"Row","namespace":"com.example","fields":['
        '{"name":"id","type":"long"},{"name":"note","type":["null","string"],"default":null}],'
        '"connect.doc":"a row","connect.version":3,"connect.name":"com.example.Row"}')


def test_unnamed_structs_are_numbered_and_reused_by_reference() -> None:
    inner = Schema.struct({"a": Schema.INT32})
    other = Schema.struct({"b": Schema.INT32})
    outer = Schema.struct({"x": inner, "y": inner.replace(optional=True), "z": other})
    found = text(outer)
    assert (found["name"], found["namespace"]) == ("ConnectDefault", "io.confluent.connect.avro")
    fields = {f["name"]: f for f in found["fields"]}
    assert fields["x"]["type"]["name"] == "ConnectDefault2"
    assert "namespace" not in fields["x"]["type"]  # the enclosing one
    assert fields["y"]["type"] == ["null", "ConnectDefault2"]
    assert fields["y"]["default"] is None
    assert fields["z"]["type"]["name"] == "ConnectDefault3"


def test_optional_with_default_puts_null_last_and_keeps_the_default() -> None:
    schema = Schema.struct({"n": Schema.OPTIONAL_INT32.replace(default=7)})
    field = text(schema)["fields"][0]
    assert field["type"] == [{"type": "int", "connect.default": 7}, "null"]
    assert field["default"] == 7


def test_maps_with_other_keys_are_arrays_of_map_entries() -> None:
    field = text(Schema.struct({"m": Schema.map(Schema.INT32, Schema.STRING)},
                               name="com.example.M"))["fields"][0]
    assert field["type"]["type"] == "array"
    assert field["type"]["items"]["name"] == "MapEntry"
    assert field["type"]["items"]["namespace"] == "io.confluent.connect.avro"
    assert text(Schema.map(Schema.STRING, Schema.INT64)) == {"type": "map", "values": "long"}


def test_values_roundtrip_through_the_registered_schema() -> None:
    inner = Schema.struct({"a": Schema.INT8}, name="com.example.Inner")
    schema = Schema.struct({
        "id": Schema.INT64, "price": Schema.decimal(2), "day": Schema.date(optional=True),
        "at": Schema.timestamp(), "tags": Schema.array(Schema.STRING),
        "m": Schema.map(Schema.INT32, Schema.STRING), "inner": inner,
        "count": Schema.INT32.replace(default=5), "raw": Schema.BYTES,
        "ratio": Schema.FLOAT64}, name="com.example.Order")
    value = Struct(schema, id=1, price=decimal.Decimal("1.5"), day=datetime.date(2024, 2, 29),
                   at=datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), tags=["a", "b"],
                   m={1: "x"}, inner=Struct(inner, a=-3), raw=bytearray(b"\x00\xff"),
                   ratio=2)
    decoded = roundtrip(schema, value)
    assert decoded == {
        "id": 1, "price": decimal.Decimal("1.50"), "day": datetime.date(2024, 2, 29),
        "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC),
        "tags": ["a", "b"], "m": [{"key": 1, "value": "x"}], "inner": {"a": -3},
        "count": 5, "raw": b"\x00\xff", "ratio": 2.0}


WIDE = Schema.struct({
    "i8": Schema.INT8, "i16": Schema.INT16, "i32": Schema.INT32, "i64": Schema.INT64,
    "f32": Schema.FLOAT32, "f64": Schema.FLOAT64, "ok": Schema.BOOLEAN, "s": Schema.STRING,
    "b": Schema.BYTES, "maybe": Schema.OPTIONAL_INT64,
    "dflt": Schema.OPTIONAL_STRING.replace(default="d"),
    "nums": Schema.array(Schema.OPTIONAL_INT32), "words": Schema.map(Schema.STRING, Schema.STRING),
    "by_id": Schema.map(Schema.INT64, Schema.array(Schema.STRING)),
    "inner": Schema.struct({"x": Schema.FLOAT64}, optional=True),
    "dec": Schema.decimal(4), "when": Schema.timestamp(), "day": Schema.date(),
    "clock": Schema.time()}, name="t.Wide")


def wide(rng: random.Random) -> Struct:
    def text() -> str:
        return "".join(rng.choice("aé☃𝄞\x00 ") for _ in range(rng.randrange(0, 80)))
    inner = WIDE.fields[14].schema
    return Struct(WIDE, {
        "i8": rng.randint(-128, 127), "i16": rng.randint(-2**15, 2**15 - 1),
        "i32": rng.choice([0, -1, 63, 64, -64, -65, 2**31 - 1, -2**31,
                           rng.randint(-2**31, 2**31 - 1)]),
        "i64": rng.choice([0, 2**63 - 1, -2**63, rng.randint(-2**63, 2**63 - 1),
                           rng.randint(-300, 300)]),
        "f32": rng.uniform(-1e6, 1e6), "f64": rng.choice([0.0, -0.0, 1e308, rng.random()]),
        "ok": rng.random() < 0.5, "s": text(), "b": rng.randbytes(rng.randrange(0, 200)),
        "maybe": rng.choice([None, rng.randint(-2**63, 2**63 - 1)]),
        "dflt": rng.choice([None, text()]),
        "nums": [rng.choice([None, rng.randint(-2**31, 2**31 - 1)])
                 for _ in range(rng.randrange(0, 70))],
        "words": {text(): text() for _ in range(rng.randrange(0, 5))},
        "by_id": {rng.randint(-10**12, 10**12): [text()] for _ in range(rng.randrange(0, 4))},
        "inner": rng.choice([None, Struct(inner, x=rng.random())]),
        "dec": decimal.Decimal(rng.randint(-10**30, 10**30)).scaleb(-4),
        "when": datetime.datetime(1960, 1, 1) + datetime.timedelta(
            milliseconds=rng.randint(0, 10**12)),
        "day": datetime.date(1900, 1, 1) + datetime.timedelta(days=rng.randint(0, 80000)),
        "clock": datetime.time(rng.randrange(24), rng.randrange(60), rng.randrange(60),
                               rng.randrange(1000) * 1000)})


def test_the_compiled_writer_writes_fastavros_bytes() -> None:
    """Our encoder against fastavro's, both from the registered schema's point of view."""
    from fastavro import schemaless_writer
    plan = plan_for(WIDE, AvroOptions())
    reference = parse_schema(json.loads(plan.text))
    rng = random.Random(31)
    for _ in range(400):
        value = wide(rng)
        out = io.BytesIO()
        assert plan.datum is not None
        schemaless_writer(out, reference, plan.datum(value))
        assert plan.encode(value) == out.getvalue(), value


def test_optional_map_keys_either_way() -> None:
    from fastavro import schemaless_writer
    schema = Schema.struct({"m": Schema.map(Schema.OPTIONAL_STRING, Schema.INT32)}, name="t.M")
    value = Struct(schema, m={"a": 1, "b": 2})
    for allow in (False, True):
        plan = plan_for(schema, AvroOptions(allow_optional_map_keys=allow))
        assert (json.loads(plan.text)["fields"][0]["type"]["type"] == "map") is allow
        out = io.BytesIO()
        assert plan.datum is not None
        schemaless_writer(out, parse_schema(json.loads(plan.text)), plan.datum(value))
        assert plan.encode(value) == out.getvalue()


def test_the_compiled_writer_refuses_what_does_not_fit() -> None:
    plan = plan_for(WIDE, AvroOptions())
    good = wide(random.Random(1))
    for field, bad in (("i32", 2**31), ("i64", 2**63), ("s", 7), ("ok", 1), ("i8", "x"),
                       ("b", None), ("nums", [1.5])):
        value = Struct(WIDE, {**good._values, field: bad})
        with pytest.raises((TypeError, ValueError, AttributeError)):
            plan.encode(value)


def test_invalid_names_fail_naming_them_unless_scrubbed() -> None:
    schema = Schema.struct({"order-id": Schema.INT64}, name="my-app.Row")
    with pytest.raises(DataException, match=r"'my-app\.Row' is not a valid Avro name"):
        plan_for(schema, AvroOptions())
    scrubbed = text(schema, scrub_invalid_names=True)
    assert scrubbed["namespace"] == "my_app" and scrubbed["fields"][0]["name"] == "order_id"
    assert scrub_name("1abc") == "x1abc"
    assert scrub_name("ok_name") == "ok_name"


def test_metadata_can_be_left_out() -> None:
    assert text(Schema.decimal(2), connect_meta_data=False) == {
        "type": "bytes", "scale": 2, "precision": 64, "logicalType": "decimal"}


def test_wire_header() -> None:
    assert header(258) == b"\x00\x00\x00\x01\x02"
    assert read_header(b"\x00\x00\x00\x01\x02rest") == (258, b"rest")
    with pytest.raises(ValueError):
        read_header(b"\x01\x00\x00\x00\x01")


def test_a_value_that_does_not_fit_names_topic_key_and_field() -> None:
    converter = load_converter(AVRO, {"schema.registry.url": "http://127.0.0.1:9"}, False)
    schema = Schema.struct({"inner": Schema.struct({"n": Schema.INT32})}, name="a.B")
    plan = converter._plan("orders", schema)  # type: ignore[attr-defined]
    plan.ids["orders-value"] = 1  # no registry: the id is known
    bad = Struct(schema, inner=Struct(schema.fields[0].schema, n="seven"))
    with pytest.raises(DataException) as e:
        converter.from_connect("orders", schema, bad)
    assert "topic orders" in str(e.value)
    assert "value" in str(e.value) and "inner.n" in str(e.value)


def test_schemaless_values_ask_for_a_schema_and_bytes_pass_through() -> None:
    converter = load_converter(AVRO, {"schema.registry.url": "http://127.0.0.1:9"}, True)
    assert converter.from_connect("t", None, b"\x00raw") == b"\x00raw"
    with pytest.raises(DataException, match="record's key has no schema"):
        converter.from_connect("t", None, {"a": 1})
    with pytest.raises(DataException, match="record's key has no schema"):
        converter.from_connect("t", None, [1, 2])


@pytest.mark.parametrize("configs, key, message", [
    ({}, "value.converter.schema.registry.url", "Missing required configuration"),
    ({"schema.registry.url": "localhost:8081"}, "value.converter.schema.registry.url",
     "not an http:// or https:// URL"),
    ({"schema.registry.url": "http://r:8081", "value.subject.name.strategy": "Nope"},
     "value.converter.value.subject.name.strategy", "Unknown subject name strategy"),
    ({"schema.registry.url": "http://r:8081", "use.latest.version": "true"},
     "value.converter.use.latest.version", "auto.register.schemas=false"),
    ({"schema.registry.url": "http://r:8081", "basic.auth.credentials.source": "USER_INFO"},
     "value.converter.basic.auth.user.info", "user:password"),
    ({"schema.registry.url": "http://r:8081",
      "schema.registry.ssl.truststore.location": "/nonexistent/ts.p12"},
     "value.converter.schema.registry.ssl.truststore.location", "cannot read the file"),
])
def test_config_errors_name_the_key_as_written(configs: dict[str, str], key: str,
                                               message: str) -> None:
    with pytest.raises(ConfigException) as e:
        load_converter(AVRO, configs, False)
    assert e.value.name == key
    assert message in str(e.value)


def test_subject_strategies() -> None:
    from connect_runtime.converters.registry.config import strategy_named
    topic = strategy_named("io.confluent.kafka.serializers.subject.TopicNameStrategy")
    record = strategy_named("RecordNameStrategy")
    both = strategy_named("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy")
    assert topic is not None and record is not None and both is not None
    assert topic("t", True, "a.B") == "t-key" and topic("t", False, "a.B") == "t-value"
    assert record("t", False, "a.B") == "a.B"
    assert both("t", False, "a.B") == "t-a.B"


def test_a_registry_failure_is_never_tolerated() -> None:
    handler = ErrorHandler(label="c-0", tolerate_all=True)

    def fail() -> None:
        raise ServiceException("Schema Registry at http://r:8081 refused")

    with pytest.raises(ConnectError, match="Tolerance exceeded") as e:  # fails the task
        handler.execute("VALUE_CONVERTER", AVRO, None, fail)
    assert "http://r:8081" in str(e.value)
    assert handler.counts.records_skipped == 0
