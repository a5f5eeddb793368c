"""What our AvroConverter writes, read back by Java: Apicurio Registry's own decoders.

``java/ConfluentFramesDecoder.java`` decodes each Confluent frame (magic 0, 4-byte
schema id, Avro binary) twice, with jars from Maven Central
(``java/apicurio-decoder/pom.xml``, resolved once into ``.cache/``):

* ``io.apicurio.registry.utils.converter.AvroConverter.toConnectData``: a Kafka
  Connect converter (Apicurio's fork of Confluent's ``AvroData``), so the Connect
  schema a Java sink would see (INT16 from ``connect.type``, Decimal's name and scale,
  Date, Timestamp, the field default) and its values;
* ``io.apicurio.registry.serde.avro.AvroKafkaDeserializer``: plain Avro (no
  logical-type conversions), with the writer schema it fetched by the frame's id.

Both use ``apicurio.registry.as-confluent=true`` (4-byte id) and
``apicurio.registry.use-id=contentId`` (the id Apicurio's Confluent API hands out is
the content id; with globalId they would silently fetch another schema) against the
registry's core API, ``/apis/registry/v2``. One JVM runs for all the frames.

Needs ``java``, ``javac`` (JDK >= 17) and ``mvn``: the test fails, not skips, without.
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import json
import shutil
import struct as binary
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support.java_connect import maven_jars
from support.registry import LINE as INNER
from support.registry import ORDER_FIELDS, SchemaRegistry, order_values

from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.converters import load_converter

AVRO = "io.confluent.connect.avro.AvroConverter"
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DECODER = HERE / "java" / "ConfluentFramesDecoder.java"
POM = HERE / "java" / "apicurio-decoder" / "pom.xml"
# Keyed by the pom's content: editing the pom resolves again, into a new directory.
POM_HASH = hashlib.sha256(POM.read_bytes()).hexdigest()[:12]
LIBS = REPO / ".cache" / f"apicurio-decoder-{POM_HASH}" / "libs"

# support.registry's order, plus an INT8 and a Time field.
ORDER = Schema.struct({**ORDER_FIELDS, "tiny": Schema.INT8, "clock": Schema.time()},
                      name="com.example.Order", version=1)
KEY = Schema.struct({"id": Schema.INT64, "region": Schema.STRING}, name="com.example.OrderKey")


def order(i: int) -> Struct:
    return Struct(ORDER, {**order_values(i), "tiny": i, "clock": datetime.time(13, 14, 15, 16000)})


# Extremes: negative and wide numbers, a float32 that rounds, a non-BMP string,
# days and instants before the epoch, empty bytes/array/map, the default overridden.
EDGE = Struct(ORDER, id=-(2**63), customer="Zoë ☃ 𝄞", note="", amount=-1.5e300, ratio=1.1,
              paid=True, price=decimal.Decimal("-98765432109876543.21"),
              day=datetime.date(1969, 12, 31),
              at=datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=datetime.UTC),
              raw=b"", tags=[], attrs={"a": -1, "b": 2**31 - 1}, line=Struct(INNER, code=-32768,
                                                                             label="L"),
              qty=7, tiny=-128, clock=datetime.time(0, 0))

# The Java class of each Connect type's value in Apicurio's Struct. BYTES comes
# out as a ByteBuffer, not byte[]: Connect accepts both, and Confluent's AvroData
# does the same (``ByteBuffer.wrap`` in toConnectData).
JAVA_CLASS = {SchemaType.INT8: "Byte", SchemaType.INT16: "Short", SchemaType.INT32: "Integer",
              SchemaType.INT64: "Long", SchemaType.FLOAT32: "Float", SchemaType.FLOAT64: "Double",
              SchemaType.BOOLEAN: "Boolean", SchemaType.STRING: "String",
              SchemaType.BYTES: "HeapByteBuffer", SchemaType.ARRAY: "ArrayList",
              SchemaType.MAP: "HashMap", SchemaType.STRUCT: "Struct"}
JAVA_LOGICAL_CLASS = {DECIMAL: "BigDecimal", DATE: "Date", TIME: "Date", TIMESTAMP: "Date"}

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
MILLI = datetime.timedelta(milliseconds=1)


def _float32(x: float) -> float:
    return float(binary.unpack("<f", binary.pack("<f", x))[0])


def _unscaled(d: decimal.Decimal, scale: int) -> bytes:
    """Java's ``BigInteger.toByteArray`` of the unscaled value: minimal two's complement."""
    n = int(d.scaleb(scale))
    return n.to_bytes((n + (n < 0)).bit_length() // 8 + 1, "big", signed=True)


def connect_json(schema: Schema, value: Any) -> Any:
    """``value`` as ConfluentFramesDecoder prints the Connect value of ``schema``
    (a null filled with the schema's default, as Connect's ``Struct.get`` does)."""
    if value is None:
        value = schema.default
    if value is None:
        return None
    if schema.name == DECIMAL:
        return format(value.quantize(decimal.Decimal(1).scaleb(-schema.scale)), "f")
    if schema.name == DATE:
        return (value - EPOCH.date()).days
    if schema.name == TIME:
        return (datetime.datetime.combine(EPOCH.date(), value, datetime.UTC) - EPOCH) // MILLI
    if schema.name == TIMESTAMP:
        return (value.replace(tzinfo=value.tzinfo or datetime.UTC) - EPOCH) // MILLI
    if schema.type is SchemaType.STRUCT:
        return {f.name: connect_json(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return [connect_json(schema.value_schema, v) for v in value]
    if schema.type is SchemaType.MAP:
        assert schema.value_schema is not None
        return {k: connect_json(schema.value_schema, v) for k, v in value.items()}
    if schema.type is SchemaType.BYTES:
        return bytes(value).hex()
    if schema.type is SchemaType.FLOAT32:
        return _float32(value)
    return value


def avro_json(schema: Schema, value: Any) -> Any:
    """``value`` as the plain Avro deserializer gives it (no logical-type conversion):
    Decimal as its unscaled bytes, Date, Time and Timestamp as their numbers."""
    if value is None:
        value = schema.default
    if value is None:
        return None
    if schema.name == DECIMAL:
        return _unscaled(value, schema.scale).hex()
    if schema.type is SchemaType.STRUCT:
        return {f.name: avro_json(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return [avro_json(schema.value_schema, v) for v in value]
    if schema.type is SchemaType.MAP:
        assert schema.value_schema is not None
        return {k: avro_json(schema.value_schema, v) for k, v in value.items()}
    return connect_json(schema, value)


def schema_json(schema: Schema) -> dict[str, Any]:
    """``schema`` as ConfluentFramesDecoder prints a Connect schema."""
    out: dict[str, Any] = {
        "type": schema.type.name, "optional": schema.optional, "name": schema.name,
        "version": schema.version, "doc": schema.doc,
        "parameters": dict(schema.parameters) if schema.parameters is not None else None,
        "default": connect_json(schema, schema.default)}
    if schema.type is SchemaType.STRUCT:
        out["fields"] = [{"name": f.name, "index": f.index, "schema": schema_json(f.schema)}
                         for f in schema.fields]
    elif schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        out["valueSchema"] = schema_json(schema.value_schema)
    elif schema.type is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        out["keySchema"] = schema_json(schema.key_schema)
        out["valueSchema"] = schema_json(schema.value_schema)
    return out


def java_classes(schema: Schema, value: Struct, prefix: str = "") -> dict[str, str | None]:
    """Field path -> the Java class of its value in the decoded Connect Struct."""
    out: dict[str, str | None] = {}
    for f in schema.fields:
        v = value.get(f.name)
        path = prefix + f.name
        out[path] = None if v is None else (JAVA_LOGICAL_CLASS.get(f.schema.name or "")
                                            or JAVA_CLASS[f.schema.type])
        if f.schema.type is SchemaType.STRUCT and v is not None:
            out.update(java_classes(f.schema, v, path + "."))
    return out


def decode_in_java(core_url: str, frames: list[tuple[str, bytes, str]],
                   work: Path) -> list[dict[str, Any]]:
    """ConfluentFramesDecoder's answer for each (topic, frame, "key"|"value")."""
    missing = [tool for tool in ("java", "javac", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"this test needs a JDK (>= 17) and Maven; not on PATH: {missing}")
    libs = maven_jars(POM, LIBS)
    classes = work / "classes"
    subprocess.run(["javac", "--release", "17", "-encoding", "UTF-8", "-cp", f"{libs}/*",
                    "-d", str(classes), str(DECODER)], check=True)
    lines = "".join(f"{topic}\t{frame.hex()}\t{kind}\n" for topic, frame, kind in frames)
    done = subprocess.run(["java", "-cp", f"{classes}:{libs}/*", "ConfluentFramesDecoder",
                           core_url], input=lines, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(frames), done.stdout + done.stderr
    for answer in answers:  # a decoder that threw: its stack trace, not a KeyError later
        for side in ("connect", "avro"):
            assert "error" not in answer[side], answer[side]["error"]
    return answers


def test_apicurio_java_decoders_read_what_our_avro_converter_writes(
        schema_registry: SchemaRegistry, unique_name: Callable[[str], str],
        tmp_path: Path) -> None:
    topic = unique_name("javadec")
    conf = {"schema.registry.url": schema_registry.url}
    values = load_converter(AVRO, conf, False)
    keys = load_converter(AVRO, conf, True)
    records = [order(i) for i in range(3)] + [EDGE]
    key_records = [Struct(KEY, id=i, region=f"r{i}") for i in range(2)]
    frames = ([(topic, values.from_connect(topic, ORDER, r), "value") for r in records]
              + [(topic, keys.from_connect(topic, KEY, k), "key") for k in key_records]
              + [(topic, keys.from_connect(topic, Schema.STRING, "order-7"), "key")])
    assert all(frame is not None and frame[0] == 0 for _, frame, _ in frames)
    core_url = schema_registry.url.replace("/apis/ccompat/v7", "/apis/registry/v2")

    answers = decode_in_java(core_url, [(t, f or b"", k) for t, f, k in frames], tmp_path)

    # The subjects TopicNameStrategy names: one value schema, two key schemas
    # (the struct key, then the string key, under the same -key subject).
    versions = schema_registry.request("GET", f"/subjects/{topic}-value/versions").json()
    assert versions == [1]
    versions = schema_registry.request("GET", f"/subjects/{topic}-key/versions").json()
    assert versions == [1, 2]

    cases = [(ORDER, r) for r in records] + [(KEY, k) for k in key_records]
    for (_, frame, _), answer, (schema, record) in zip(frames[:-1], answers[:-1], cases,
                                                       strict=True):
        assert frame is not None
        connect, avro = answer["connect"], answer["avro"]
        # Apicurio's Connect converter: the same schema (names, types, INT16 and INT8
        # from connect.type, Decimal with scale 2, Date, Time, Timestamp, versions, the
        # default), the same values field by field, each of the Java class Connect
        # gives that type.
        assert connect["class"] == "Struct"
        assert connect["schema"] == schema_json(schema)
        assert connect["value"] == connect_json(schema, record)
        assert connect["classes"] == java_classes(schema, record)
        # Apicurio's plain Avro deserializer: the same values, and the writer schema it
        # fetched by the frame's id is the one the registry holds under that id.
        assert avro["class"] == "Record"
        assert avro["value"] == avro_json(schema, record)
        schema_id = int.from_bytes(frame[1:5], "big")
        held = schema_registry.request("GET", f"/schemas/ids/{schema_id}").json()["schema"]
        assert avro["schema"] == json.loads(held)

    # A key of a primitive schema (Avro "string"). The plain deserializer reads the
    # text; Apicurio's Connect converter returns it with NO schema: its
    # AvroConverter.toSchemaAndValue builds a Connect schema only for an Avro
    # GenericContainer (a record, or a NonRecordContainer, which only its serializer
    # uses), and AvroKafkaDeserializer hands back a primitive as is. Confluent's
    # AvroConverter would say STRING here; this is Apicurio's, not the frame's.
    string_key = answers[-1]
    assert string_key["avro"] == {"class": "Utf8", "value": "order-7"}
    assert string_key["connect"] == {"class": "Utf8", "schema": None, "value": "order-7",
                                     "classes": {}}
