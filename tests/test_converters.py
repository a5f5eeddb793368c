"""Converters: what bytes reach Kafka for a key or value."""

from __future__ import annotations

import datetime
from typing import Any

import orjson
import pytest

from connect_runtime.converters import (
    ByteArrayConverter,
    Converter,
    JsonConverter,
    StringConverter,
    fast_encoder,
    load_converter,
)
from connect_runtime.errors import ConfigException, DataException


def test_json_is_schemaless_by_default() -> None:
    c = JsonConverter()
    c.configure({}, is_key=False)
    assert orjson.loads(c.from_connect("t", None, {"a": [1, 2.5, None, "x"]}) or b"") == {
        "a": [1, 2.5, None, "x"]}
    assert c.from_connect("t", None, "s") == b'"s"'
    assert c.from_connect("t", None, None) is None


def test_json_envelope_when_schemas_enabled() -> None:
    c = load_converter("org.apache.kafka.connect.json.JsonConverter",
                       {"schemas.enable": "TRUE"}, is_key=False)
    body = c.from_connect("t", None, {"seq": 1}) or b""
    assert orjson.loads(body) == {"schema": None, "payload": {"seq": 1}}
    assert c.from_connect("t", None, None) is None  # a tombstone stays a tombstone


def test_json_passes_bytes_through_unchanged() -> None:
    c = JsonConverter()
    raw = b'{"already":"json"}'
    assert c.from_connect("t", None, raw) is raw
    assert c.from_connect("t", None, bytearray(b"ab")) == b"ab"


def test_json_unserializable_value_names_the_topic() -> None:
    with pytest.raises(DataException, match="orders"):
        JsonConverter().from_connect("orders", None, {"when": object()})
    with pytest.raises(DataException, match="orders"):
        JsonConverter().from_connect("orders", None, {1: "int keys are not JSON"})


def test_json_bad_schemas_enable_names_the_key() -> None:
    with pytest.raises(ConfigException, match=r"schemas\.enable"):
        JsonConverter().configure({"schemas.enable": "yes"}, is_key=True)


def test_json_handles_datetimes() -> None:
    value = {"at": datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)}
    assert JsonConverter().from_connect("t", None, value) == b'{"at":"2024-01-02T03:04:05+00:00"}'


@pytest.mark.parametrize(
    ("value", "expected"),
    [("héllo", "héllo".encode()), (42, b"42"), (b"\x00raw", b"\x00raw"), (None, None)],
)
def test_string_converter(value: Any, expected: bytes | None) -> None:
    assert StringConverter().from_connect("t", None, value) == expected


def test_string_converter_encoding() -> None:
    c = load_converter("org.apache.kafka.connect.storage.StringConverter",
                       {"converter.encoding": "latin-1"}, is_key=True)
    assert c.from_connect("t", None, "é") == b"\xe9"
    with pytest.raises(DataException, match="topic t"):
        c.from_connect("t", None, "€")
    with pytest.raises(ConfigException, match=r"converter\.encoding"):
        StringConverter().configure({"converter.encoding": "klingon"}, is_key=False)


def test_byte_array_converter() -> None:
    c = ByteArrayConverter()
    raw = b"abc"
    assert c.from_connect("t", None, raw) is raw
    assert c.from_connect("t", None, bytearray(b"x")) == b"x"
    assert c.from_connect("t", None, memoryview(b"yz")) == b"yz"
    assert c.from_connect("t", None, None) is None
    with pytest.raises(DataException, match="str"):
        c.from_connect("t", None, "text")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("connect_runtime.converters.JsonConverter", JsonConverter),
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
        (" StringConverter ", StringConverter),
    ],
)
def test_load_converter_names(name: str, cls: type) -> None:
    converter = load_converter(name, {}, is_key=False)
    assert type(converter) is cls
    assert isinstance(converter, Converter)


class Upper:
    """A user converter found by module path."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        self.suffix = configs.get("suffix", "") + ("-key" if is_key else "")

    def from_connect(self, topic: str, schema: Any, value: Any) -> bytes | None:
        return None if value is None else (str(value).upper() + self.suffix).encode()


def test_load_user_converter_by_path_and_configure_it() -> None:
    c = load_converter(f"{__name__}.Upper", {"suffix": "!"}, is_key=True)
    assert c.from_connect("t", None, "a") == b"A!-key"


@pytest.mark.parametrize("is_key", [True, False])
def test_unknown_converter_names_the_config_key(is_key: bool) -> None:
    key = "key.converter" if is_key else "value.converter"
    with pytest.raises(ConfigException) as info:
        load_converter("io.confluent.connect.avro.AvroConverter", {}, is_key=is_key)
    assert info.value.name == key
    assert "JsonConverter" in str(info.value)  # lists what is available


def test_non_converter_class_is_rejected_with_the_given_key() -> None:
    with pytest.raises(ConfigException) as info:
        load_converter("collections.OrderedDict", {}, is_key=False,
                       config_key="worker value.converter")
    assert info.value.name == "worker value.converter"


_SAMPLES: list[Any] = [
    {"a": [1, 2.5, None, "x"]}, "text", "naïve ☃", "", 0, -7, 3.25, True, [1, "b"],
    b"bytes", bytearray(b"ba"), memoryview(b"mv"), {1, 2}, {"k": {1}}, object(), "\ud800",
    datetime.date(2024, 1, 2),
]


@pytest.mark.parametrize(("cls", "configs"), [
    (JsonConverter, {}), (StringConverter, {}), (StringConverter, {"converter.encoding": "UTF8"}),
])
def test_a_fast_encoder_agrees_with_from_connect_or_refuses(cls: type, configs: dict[str, str],
                                                            ) -> None:
    # The task loop calls the fast encoder first and from_connect when it raises,
    # so for every value it must either give from_connect's bytes or raise.
    converter = cls()
    converter.configure(configs, False)
    encode = fast_encoder(converter)
    assert encode is not None
    accepted = 0
    for value in _SAMPLES:
        try:
            fast = encode(value)
        except Exception:
            continue
        accepted += 1
        assert fast == converter.from_connect("t", None, value), value
    assert accepted >= 3


@pytest.mark.parametrize(("cls", "configs"), [
    (JsonConverter, {"schemas.enable": "true"}),
    (StringConverter, {"converter.encoding": "latin-1"}),
    (ByteArrayConverter, {}),
])
def test_no_fast_encoder_where_it_would_differ(cls: type, configs: dict[str, str]) -> None:
    converter = cls()
    converter.configure(configs, False)
    assert fast_encoder(converter) is None
