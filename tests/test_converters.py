"""Converters: what bytes reach Kafka for a key or value."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from typing import Any

import orjson
import pytest
from support.converter_names import KEY_VALUE_CONVERTERS

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.converters import (
    BooleanConverter,
    ByteArrayConverter,
    Converter,
    HeaderConverter,
    IntegerConverter,
    JsonConverter,
    SimpleHeaderConverter,
    StringConverter,
    converter_class_named,
    converter_version,
    fast_encoder,
    listed_converter_names,
    listed_header_converter_names,
    load_converter,
    load_header_converter,
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
    with pytest.raises(DataException, match=r"orders.*Decimal needs a schema"):
        JsonConverter().from_connect("orders", None, {"price": decimal.Decimal("1.50")})


def test_json_map_with_a_non_string_key_is_an_array_of_pairs_as_in_connect() -> None:
    c = JsonConverter()
    assert c.from_connect("t", None, {1: "a", "b": 2}) == b'[[1,"a"],["b",2]]'
    assert c.from_connect("t", None, {"a": {None: 1.0}}) == b'{"a":[[null,1.0]]}'


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
        load_converter("com.example.connect.NoSuchConverter", {}, is_key=is_key)
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


# JsonConverter with schemas ------------------------------------------------------

LINE = Schema.struct({"sku": Schema.STRING, "price": Schema.decimal(2)}, name="Line")
ORDER = Schema.struct({"id": Schema.INT64, "lines": Schema.array(LINE),
                       "note": Schema.OPTIONAL_STRING}, name="Order", version=2)


def _order(*prices: str) -> Struct:
    lines = [Struct(LINE, sku=f"s{i}", price=decimal.Decimal(p)) for i, p in enumerate(prices)]
    return Struct(ORDER, id=7, lines=lines)


def test_json_writes_connects_envelope_and_payload_for_a_struct() -> None:
    on = load_converter("JsonConverter", {"schemas.enable": "true"}, is_key=False)
    body = on.from_connect("t", ORDER, _order("1.50"))
    assert body == (
        b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
        b'{"type":"array","items":{"type":"struct","fields":[{"type":"string","optional":false,'
        b'"field":"sku"},{"type":"bytes","optional":false,"name":'
        b'"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"},'
        b'"field":"price"}],"optional":false,"name":"Line"},"optional":false,"field":"lines"},'
        b'{"type":"string","optional":true,"field":"note"}],"optional":false,"name":"Order",'
        b'"version":2},"payload":{"id":7,"lines":[{"sku":"s0","price":"AJY="}],"note":null}}')
    numeric = load_converter("JsonConverter", {"decimal.format": "numeric"}, is_key=False)
    assert numeric.from_connect("t", ORDER, _order("1.5")) == (
        b'{"id":7,"lines":[{"sku":"s0","price":1.50}],"note":null}')  # at the schema's scale


def test_json_value_that_does_not_match_its_schema_names_topic_and_place() -> None:
    with pytest.raises(DataException) as info:
        JsonConverter().from_connect("orders", ORDER, _order("1.50", "2.345"))
    message = str(info.value)
    assert "orders" in message and "field 'lines[1].price'" in message
    assert "more than 2 decimal places" in message
    bad = Struct(ORDER, id="seven", lines=[])
    with pytest.raises(DataException, match=r"orders.*field 'id'.*str 'seven'"):
        JsonConverter().from_connect("orders", ORDER, bad)
    with pytest.raises(DataException, match=r"orders.*field 'lines'.*null for a required"):
        JsonConverter().from_connect("orders", ORDER, Struct(ORDER, id=1))


def test_json_replace_null_with_default() -> None:
    schema = Schema.struct({"n": Schema(SchemaType.INT32, default=5),
                            "o": Schema(SchemaType.INT32, optional=True, default=6)})
    value = Struct(schema)
    assert JsonConverter().from_connect("t", schema, value) == b'{"n":5,"o":6}'
    keep = load_converter("JsonConverter", {"replace.null.with.default": "false"}, False)
    with pytest.raises(DataException, match=r"field 'n'.*replace\.null\.with\.default=false"):
        keep.from_connect("t", schema, value)
    value["n"] = 1
    assert keep.from_connect("t", schema, value) == b'{"n":1,"o":null}'


def test_json_bad_settings_name_their_key() -> None:
    with pytest.raises(ConfigException, match=r"decimal\.format"):
        JsonConverter().configure({"decimal.format": "hex"}, is_key=False)
    with pytest.raises(ConfigException, match=r"replace\.null\.with\.default"):
        JsonConverter().configure({"replace.null.with.default": "maybe"}, is_key=False)
    assert [k for k in JsonConverter.config_def().config_keys] == [
        "schemas.enable", "schemas.cache.size", "decimal.format", "replace.null.with.default"]
    assert JsonConverter.config_def().config_keys["schemas.enable"].default is False


@dataclasses.dataclass
class Reading:
    sensor: str
    value: float
    at: datetime.datetime


def test_json_struct_or_dataclass_without_a_schema_is_written_with_its_own() -> None:
    on = load_converter("JsonConverter", {"schemas.enable": "true"}, is_key=False)
    struct = Struct(LINE, sku="a", price=decimal.Decimal("1.00"))
    assert on.from_connect("t", None, struct) == on.from_connect("t", LINE, struct)
    reading = Reading("s1", 1e7, datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=datetime.UTC))
    assert JsonConverter().from_connect("t", None, reading) == (
        b'{"sensor":"s1","value":1.0E7,"at":1000}')  # Timestamp millis, Java's double
    assert JsonConverter().from_connect("t", None, {"r": reading}) == (
        b'{"r":{"sensor":"s1","value":1.0E7,"at":1000}}')


def test_json_schema_cache_is_bounded_and_still_right() -> None:
    c = load_converter("JsonConverter", {"schemas.cache.size": "2"}, is_key=False)
    schemas = [Schema.struct({f"f{i}": Schema.INT32}) for i in range(5)]
    for _ in range(2):
        for i, schema in enumerate(schemas):
            assert c.from_connect("t", schema, Struct(schema, {f"f{i}": i})) == \
                f'{{"f{i}":{i}}}'.encode()


def test_json_fast_encoder_leaves_schema_work_to_from_connect() -> None:
    # Values whose bytes need a schema or a decision make the fast encoder raise,
    # so the task loop falls back to from_connect (which derives or refuses).
    encode = fast_encoder(JsonConverter())
    assert encode is not None
    for value in (Reading("s", 1.0, datetime.datetime(2024, 1, 1)), datetime.date(2024, 1, 1),
                  decimal.Decimal("1"), b"raw", Struct(LINE), {1: "a"}):
        with pytest.raises(TypeError):
            encode(value)
    # ... and writes Jackson's bytes where orjson's differ.
    assert encode({"x": 1e7, "y": float("nan"), "z": "\x1f😀", "w": None}) == (
        b'{"x":1.0E7,"y":"NaN","z":"\\u001F\\uD83D\\uDE00","w":null}')


# The other converters --------------------------------------------------------------


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("IntegerConverter", -2, b"\xff\xff\xff\xfe"),
    ("org.apache.kafka.connect.converters.ShortConverter", 258, b"\x01\x02"),
    ("Long", 1, b"\x00" * 7 + b"\x01"),
    ("Float", 0.1, b"\x3d\xcc\xcc\xcd"),
    ("DoubleConverter", 2, b"\x40\x00" + b"\x00" * 6),
    ("BooleanConverter", True, b"\x01"),
    ("Integer", b"\x00raw", b"\x00raw"),  # bytes pass through
])
def test_primitive_converters(name: str, value: Any, expected: bytes) -> None:
    assert load_converter(name, {}, is_key=True).from_connect("t", None, value) == expected


@pytest.mark.parametrize(("name", "value"), [
    ("IntegerConverter", 2**31), ("ShortConverter", "1"), ("LongConverter", True),
    ("FloatConverter", 1e300), ("DoubleConverter", "x"), ("BooleanConverter", 1),
])
def test_primitive_converters_refuse_what_connects_refuse(name: str, value: Any) -> None:
    with pytest.raises(DataException, match="orders"):
        load_converter(name, {}, is_key=False).from_connect("orders", None, value)


def test_boolean_and_byte_array_converters_check_the_schema_type() -> None:
    with pytest.raises(DataException, match="Invalid schema type for BooleanConverter: INT32"):
        BooleanConverter().from_connect("t", Schema.INT32, True)
    with pytest.raises(DataException, match="Invalid schema type for ByteArrayConverter"):
        ByteArrayConverter().from_connect("t", Schema.STRING, b"x")
    assert ByteArrayConverter().from_connect("t", Schema.OPTIONAL_BYTES, b"x") == b"x"


def test_string_converter_writes_javas_to_string() -> None:
    c = StringConverter()
    assert c.from_connect("t", None, True) == b"true"
    assert c.from_connect("t", None, 1e10) == b"1.0E10"
    assert c.from_connect("t", Schema.FLOAT32, 0.1) == b"0.1"
    assert c.from_connect("t", None, [1, None, "a"]) == b"[1, null, a]"
    assert c.from_connect("t", None, {"k": 1.5}) == b"{k=1.5}"
    assert c.from_connect("t", LINE, Struct(LINE, sku="a")) == b"Struct{sku=a}"
    with pytest.raises(DataException, match="t"):
        c.from_connect("t", None, [b"nested bytes"])
    utf16 = load_converter("StringConverter", {"converter.encoding": "UTF-16"}, is_key=False)
    assert utf16.from_connect("t", None, "a") == b"\xfe\xff\x00a"  # Java: BOM, big-endian


# Header converters -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "cls"), [
    ("org.apache.kafka.connect.storage.SimpleHeaderConverter", SimpleHeaderConverter),
    ("SimpleHeaderConverter", SimpleHeaderConverter),
    ("Simple", SimpleHeaderConverter),
    ("connect_runtime.converters.SimpleHeaderConverter", SimpleHeaderConverter),
    ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
    ("StringConverter", StringConverter),
    ("Integer", IntegerConverter),
])
def test_load_header_converter_names(name: str, cls: type) -> None:
    converter = load_header_converter(name, {})
    assert type(converter) is cls
    assert isinstance(converter, HeaderConverter)


def test_header_converter_errors_name_the_key() -> None:
    with pytest.raises(ConfigException) as info:
        load_header_converter("no.such.HeaderConverter", {})
    assert info.value.name == "header.converter"
    assert "SimpleHeaderConverter" in str(info.value)
    with pytest.raises(ConfigException) as info:
        load_header_converter(f"{__name__}.Upper", {})  # a Converter, not a HeaderConverter
    assert info.value.name == "header.converter"
    with pytest.raises(ConfigException) as info:
        load_header_converter("JsonConverter", {"schemas.enable": "perhaps"})
    assert info.value.name == "schemas.enable"


def test_simple_header_converter() -> None:
    c = load_header_converter("SimpleHeaderConverter", {})
    assert c.from_connect_header("t", "h", None, "héllo") == "héllo".encode()
    assert c.from_connect_header("t", "h", None, b"\x00raw") == b"\x00raw"  # project rule
    assert c.from_connect_header("t", "h", None, None) is None
    assert c.from_connect_header("t", "h", None, [1, "a\"b", 1e7]) == b'[1,"a\\"b",1.0E7]'
    assert c.from_connect_header("t", "h", Schema.date(), datetime.date(2024, 1, 2)) == \
        b"2024-01-02"
    with pytest.raises(DataException, match=r"header 'h'.*topic 't'"):
        c.from_connect_header("t", "h", None, object())


def test_json_and_string_converters_are_header_converters_too() -> None:
    json_headers = load_header_converter("JsonConverter", {"schemas.enable": "true"})
    assert json_headers.from_connect_header("t", "h", Schema.INT32, 1) == (
        b'{"schema":{"type":"int32","optional":false},"payload":1}')
    string_headers = load_header_converter("StringConverter", {})
    assert string_headers.from_connect_header("t", "h", None, 2.5) == b"2.5"


def test_registry_lists_connects_names() -> None:
    assert listed_converter_names() == KEY_VALUE_CONVERTERS
    assert listed_header_converter_names() == sorted(
        [*listed_converter_names()[3:], "org.apache.kafka.connect.storage.SimpleHeaderConverter"])
    assert converter_class_named("SimpleHeaderConverter") is None  # not a key/value converter
    assert converter_version("Simple") is not None
    for name in ("connect_runtime.converters.JsonConverter",
                 "connect_runtime.converters.json.JsonConverter", "Json", "JsonConverter"):
        assert converter_class_named(name) is JsonConverter
