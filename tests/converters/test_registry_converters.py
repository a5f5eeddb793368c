"""The Schema Registry converters against a real registry (Apicurio, Confluent's API).

What a converter writes is read back by decoders that are not ours:
confluent-kafka's ``AvroDeserializer`` and ``JSONDeserializer`` (which fetch the
writer schema from the registry by the id in the frame), and for Protobuf a
message class compiled by Google's ``protoc`` from the text the registry holds,
fed to confluent-kafka's ``ProtobufDeserializer`` (which reads the frame).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import json_format
from support.registry import LINE, ORDER_FIELDS, SchemaRegistry, compile_proto, order_values
from support.tls import make_pki, tools_missing

from connect_runtime.api.schema import Schema, Struct
from connect_runtime.converters import load_converter
from connect_runtime.errors import DataException, ServiceException, ServiceUnavailableException

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"

ORDER = Schema.struct(ORDER_FIELDS, name="com.example.Order", version=1)


def order(i: int) -> Struct:
    return Struct(ORDER, order_values(i))


def registry_conf(registry: SchemaRegistry, **more: str) -> dict[str, str]:
    return {"schema.registry.url": registry.url, **more}


@pytest.fixture
def client(schema_registry: SchemaRegistry) -> Iterator[SchemaRegistryClient]:
    c = SchemaRegistryClient({"url": schema_registry.url})
    yield c
    c.close()


def expected_avro(i: int) -> dict[str, Any]:
    """order(i) as an Avro reader sees it (logical types decoded by fastavro)."""
    return {"id": i, "customer": f"c{i}", "note": None if i % 2 else f"n{i}",
            "amount": i * 1.25, "ratio": 0.5, "paid": bool(i % 2),
            "price": decimal.Decimal(f"{i}.05"), "day": datetime.date(2024, 2, 29),
            "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=datetime.UTC),
            "raw": bytes([i % 256, 0]), "tags": ["a", f"t{i}"], "attrs": {"x": i},
            "line": {"code": i % 100, "label": None}, "qty": 1}


def test_avro_decodes_with_confluents_deserializer(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str]) -> None:
    topic = unique_name("avro")
    converter = load_converter(AVRO, registry_conf(schema_registry), False)
    frames = [converter.from_connect(topic, ORDER, order(i)) for i in range(3)]
    decode = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert [decode(f, ctx) for f in frames] == [expected_avro(i) for i in range(3)]
    # One registration for the three records, under TopicNameStrategy's subject.
    assert client.get_versions(f"{topic}-value") == [1]
    assert len({f[:5] for f in frames if f}) == 1


def test_schemaless_lines_are_avro_strings(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str]) -> None:
    """A file source's lines (str, no schema): Connect's STRING, an Avro "string"."""
    topic = unique_name("lines")
    converter = load_converter(AVRO, registry_conf(schema_registry), False)
    frames = [converter.from_connect(topic, None, line) for line in ("one", "twö", "")]
    decode = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    assert [decode(f, ctx) for f in frames] == ["one", "twö", ""]
    assert client.get_latest_version(f"{topic}-value").schema.schema_str.strip('"') == "string"
    with pytest.raises(DataException, match="has no schema"):
        converter.from_connect(topic, None, {"a": 1})


def test_json_schema_decodes_with_confluents_deserializer(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str]) -> None:
    topic = unique_name("json")
    converter = load_converter(JSON_SCHEMA, registry_conf(schema_registry), False)
    frames = [converter.from_connect(topic, ORDER, order(i)) for i in range(3)]
    decode = JSONDeserializer(None, schema_registry_client=client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    for i, frame in enumerate(frames):
        got = decode(frame, ctx)
        want = expected_avro(i)
        assert got == {**want, "price": base64.b64encode(_unscaled(want["price"])).decode(),
                       "day": 19782, "at": 1704164645678,
                       "raw": base64.b64encode(want["raw"]).decode()}


def _unscaled(d: decimal.Decimal) -> bytes:
    n = int(d.scaleb(2))
    return n.to_bytes((n + (n < 0)).bit_length() // 8 + 1, "big", signed=True)


def test_protobuf_decodes_with_a_protoc_compiled_class(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic = unique_name("proto")
    converter = load_converter(PROTOBUF, registry_conf(schema_registry), False)
    frames = [converter.from_connect(topic, ORDER, order(i)) for i in range(3)]
    registered = client.get_latest_version(f"{topic}-value")
    assert registered.schema.schema_type == "PROTOBUF"
    message_class = compile_proto(registered.schema.schema_str, tmp_path, "Order")
    decode = ProtobufDeserializer(message_class, {"use.deprecated.format": False})
    for i, frame in enumerate(frames):
        assert frame is not None and frame[1:5] == registered.schema_id.to_bytes(4, "big")
        got = json_format.MessageToDict(decode(frame, None), preserving_proto_field_name=True)
        want = expected_avro(i)
        unscaled = _unscaled(want["price"])
        expected = {
            "id": str(i), "customer": f"c{i}", "amount": i * 1.25, "ratio": 0.5,
            "price": {"value": base64.b64encode(unscaled).decode(), "scale": 2},
            "day": {"year": 2024, "month": 2, "day": 29}, "at": "2024-01-02T03:04:05.678Z",
            "raw": base64.b64encode(want["raw"]).decode(), "tags": ["a", f"t{i}"],
            "attrs": {"x": i}, "line": {"code": i % 100}, "qty": 1}
        if i % 2 == 0:
            expected["note"] = f"n{i}"
        if i % 2:
            expected["paid"] = True
        if i == 0:  # proto3 leaves zero values out
            del expected["id"], expected["amount"]  # (a map entry keeps its zero)
            expected["line"] = {}
            expected["raw"] = base64.b64encode(b"\x00\x00").decode()
        assert got == expected


def test_incompatible_change_names_subject_versions_and_the_registry(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str]) -> None:
    topic = unique_name("evolve")
    v1 = Schema.struct({"id": Schema.INT64}, name="com.example.Row")
    v2 = Schema.struct({"id": Schema.INT64, "note": Schema.OPTIONAL_STRING},
                       name="com.example.Row")
    v3 = Schema.struct({"id": Schema.INT64, "note": Schema.OPTIONAL_STRING,
                        "qty": Schema.INT32}, name="com.example.Row")
    converter = load_converter(AVRO, registry_conf(schema_registry), False)
    converter.from_connect(topic, v1, Struct(v1, id=1))
    client.set_compatibility(f"{topic}-value", "BACKWARD")
    converter.from_connect(topic, v2, Struct(v2, id=2))  # compatible: version 2
    assert client.get_versions(f"{topic}-value") == [1, 2]
    with pytest.raises(DataException) as e:
        converter.from_connect(topic, v3, Struct(v3, id=3, qty=1))
    message = str(e.value)
    assert f"subject '{topic}-value'" in message
    assert "registered versions [1, 2], compatibility BACKWARD" in message
    assert "would have been version 3" in message
    assert schema_registry.url in message and "qty" in message  # the registry's own words


def test_lookup_only_and_latest_version(
        schema_registry: SchemaRegistry, client: SchemaRegistryClient,
        unique_name: Callable[[str], str]) -> None:
    topic = unique_name("lookup")
    row = Schema.struct({"id": Schema.INT64}, name="com.example.Looked")
    lookup = load_converter(AVRO, registry_conf(schema_registry,
                                                **{"auto.register.schemas": "false"}), False)
    with pytest.raises(DataException, match=r"not registered under subject .*auto\.register"):
        lookup.from_connect(topic, row, Struct(row, id=1))
    writer = load_converter(AVRO, registry_conf(schema_registry), False)
    frame = writer.from_connect(topic, row, Struct(row, id=1))
    assert lookup.from_connect(topic, row, Struct(row, id=2))[:5] == frame[:5]

    latest = load_converter(AVRO, registry_conf(schema_registry, **{
        "auto.register.schemas": "false", "use.latest.version": "true"}), False)
    assert latest.from_connect(topic, row, Struct(row, id=3))[:5] == frame[:5]

    # A newer version with another optional field: records of the old schema are
    # written with it, the field from its default.
    wider = Schema.struct({"id": Schema.INT64, "note": Schema.OPTIONAL_STRING},
                          name="com.example.Looked")
    writer.from_connect(topic, wider, Struct(wider, id=4, note="x"))
    newest = load_converter(AVRO, registry_conf(schema_registry, **{
        "auto.register.schemas": "false", "use.latest.version": "true"}), False)
    framed = newest.from_connect(topic, row, Struct(row, id=5))
    assert framed[1:5] == client.get_latest_version(f"{topic}-value").schema_id.to_bytes(4, "big")
    decode = AvroDeserializer(client)
    assert decode(framed, SerializationContext(topic, MessageField.VALUE)) == {
        "id": 5, "note": None}


def test_record_name_strategy(schema_registry: SchemaRegistry, client: SchemaRegistryClient,
                              unique_name: Callable[[str], str]) -> None:
    name = f"com.example.r{uuid.uuid4().hex[:8]}.Named"
    row = Schema.struct({"id": Schema.INT64}, name=name)
    converter = load_converter(AVRO, registry_conf(schema_registry, **{
        "value.subject.name.strategy":
            "io.confluent.kafka.serializers.subject.TopicRecordNameStrategy"}), False)
    converter.from_connect("orders", row, Struct(row, id=1))
    assert client.get_versions(f"orders-{name}") == [1]


def test_an_unreachable_registry_names_the_url() -> None:
    from support.kafka import free_port

    url = f"http://127.0.0.1:{free_port()}/apis/ccompat/v7"
    converter = load_converter(AVRO, {"schema.registry.url": url, "max.retries": "1",
                                      "retries.wait.ms": "10"}, False)
    with pytest.raises(ServiceUnavailableException) as e:
        converter.from_connect("t", LINE, Struct(LINE, code=1))
    assert url in str(e.value) and "could not be reached" in str(e.value)


@pytest.fixture(scope="module")
def secured_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        tuple[SchemaRegistry, Path]]:
    why = tools_missing()
    if why:
        pytest.fail(why)
    pki = make_pki(tmp_path_factory.mktemp("registry-pki"))
    data = tmp_path_factory.mktemp("registry-secured")
    registry = SchemaRegistry(data, {
        "REGISTRY_BASIC_AUTH_USERS": "connect:s3cret-pw",
        "REGISTRY_TLS_CERT": str(pki / "worker.crt"), "REGISTRY_TLS_KEY": str(pki / "worker.key")})
    registry.start()
    try:
        yield registry, pki
    finally:
        registry.stop()


def test_https_with_a_pkcs12_truststore_and_basic_auth(
        secured_registry: tuple[SchemaRegistry, Path],
        unique_name: Callable[[str], str]) -> None:
    registry, pki = secured_registry
    assert registry.url.startswith("https://")
    good = {"schema.registry.url": registry.url,
            "schema.registry.ssl.truststore.location": str(pki / "trust.p12"),
            "schema.registry.ssl.truststore.password": "st0re-pass",
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "connect:s3cret-pw"}
    topic = unique_name("tls")
    frame = load_converter(AVRO, good, False).from_connect(topic, LINE, Struct(LINE, code=7))
    assert frame is not None and frame[0] == 0

    wrong = load_converter(AVRO, {**good, "basic.auth.user.info": "connect:nope"}, False)
    with pytest.raises(ServiceException) as e:
        wrong.from_connect(unique_name("tls"), LINE, Struct(LINE, code=7))
    assert "HTTP 401" in str(e.value) and registry.url in str(e.value)
    assert "nope" not in str(e.value)

    untrusted = {k: v for k, v in good.items() if "truststore" not in k}
    no_trust = load_converter(AVRO, {**untrusted, "max.retries": "0"}, False)
    with pytest.raises(ServiceUnavailableException, match="CERTIFICATE_VERIFY_FAILED"):
        no_trust.from_connect(unique_name("tls"), LINE, Struct(LINE, code=7))
