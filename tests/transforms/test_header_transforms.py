"""HeaderFrom, InsertHeader, DropHeaders (connect_runtime.transforms.headers)."""

from __future__ import annotations

import decimal

import pytest
from smt_records import configured, record

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.headers import (
    DropHeaders,
    HeaderFrom,
    InsertHeader,
    parse_literal,
)

EXISTING = [("existing", b"x")]
SCHEMA = Schema.struct({"id": Schema.INT64, "field1": Schema.STRING,
                        "field2": Schema(SchemaType.STRING, optional=True, default="dflt")},
                       name="row", version=1)


def test_header_from_copy_schemaless() -> None:
    xform = configured(HeaderFrom.Value, {"fields": "field1,absent", "headers": "h1,h2",
                                          "operation": "copy"})
    original = record({"field1": "a", "other": 1}, headers=list(EXISTING))
    out = xform.apply(original)
    assert out.value == {"field1": "a", "other": 1}
    assert out.headers == [("existing", b"x"), ("h1", "a"), ("h2", None)]
    assert original.headers == EXISTING  # the input's list is not changed


def test_header_from_move_schemaless_and_on_the_key() -> None:
    xform = configured(HeaderFrom.Key, {"fields": "id", "headers": "id", "operation": "move"})
    out = xform.apply(record({"v": 1}, key={"id": 5, "rest": 2}))
    assert (out.key, out.value, out.headers) == ({"rest": 2}, {"v": 1}, [("id", 5)])


def test_header_from_with_schema_copy_and_move() -> None:
    value = Struct(SCHEMA, id=1, field1="a", field2=None)
    copy = configured(HeaderFrom.Value, {"fields": "field1,field2", "headers": "a,b",
                                         "operation": "copy"})
    out = copy.apply(record(value, value_schema=SCHEMA))
    assert out.value is value and out.value_schema is SCHEMA
    assert out.headers == [("a", "a"), ("b", "dflt")]
    move = configured(HeaderFrom.Value, {"fields": "field1,field2", "headers": "a,b",
                                         "operation": "move",
                                         "replace.null.with.default": "false"})
    out = move.apply(record(value, value_schema=SCHEMA, headers=list(EXISTING)))
    moved = Schema.struct({"id": Schema.INT64}, name="row", version=1)
    assert out.value_schema == moved and out.value == Struct(moved, id=1)
    assert out.headers == [("existing", b"x"), ("a", "a"), ("b", None)]


def test_header_from_a_field_missing_from_the_schema_names_alias_field_and_topic() -> None:
    xform = configured(HeaderFrom.Value, {"fields": "nope", "headers": "h",
                                          "operation": "copy"})
    xform.bind("hf", "transforms.hf.")
    with pytest.raises(DataException) as caught:
        xform.apply(record(Struct(SCHEMA, id=1, field1="a"), value_schema=SCHEMA))
    assert str(caught.value) == (
        "transform 'hf' (org.apache.kafka.connect.transforms.HeaderFrom$Value) failed on a "
        "record for topic 'orders': field 'nope' is not in the value schema (fields: id, "
        "field1, field2)")


def test_header_from_refuses_tombstones_like_connect() -> None:
    xform = configured(HeaderFrom.Value, {"fields": "a", "headers": "a", "operation": "copy"})
    with pytest.raises(DataException, match="found: null"):
        xform.apply(record(None))


@pytest.mark.parametrize(("configs", "key", "message"), [
    ({"fields": "a,b", "headers": "h", "operation": "copy"}, "transforms.hf.headers",
     "'fields' config must have the same number of elements as 'headers' config."),
    ({"fields": "a", "headers": "h", "operation": "steal"}, "transforms.hf.operation",
     "String must be one of: move, copy"),
    ({"fields": "", "headers": "h", "operation": "copy"}, "transforms.hf.fields", "Empty list"),
])
def test_header_from_config_errors(configs: dict[str, str], key: str, message: str) -> None:
    xform = HeaderFrom.Value()
    xform.bind("hf", "transforms.hf.")
    with pytest.raises(ConfigException, match=message) as caught:
        xform.configure(configs)
    assert caught.value.name == key


@pytest.mark.parametrize(("literal", "value"), [
    ("hello", "hello"), ("", ""), ("true", True), ("false", False), ("null", None),
    ("42", 42), ("-7", -7), ("1.0", 1), ("1.5", 1.5), ("+2e3", 2000),
    ("9223372036854775808", 9.223372036854776e18), ("1e400", decimal.Decimal("1e400")),
    ("True", "True"), ("12abc", "12abc"), ("[1, 2]", "[1, 2]"),
])
def test_literals_are_read_like_connect_scalars(literal: str, value: object) -> None:
    parsed = parse_literal(literal)
    assert parsed == value and type(parsed) is type(value)


def test_insert_header_appends_to_a_new_list() -> None:
    xform = configured(InsertHeader, {"header": "source", "value.literal": "42"})
    original = record({"v": 1}, headers=list(EXISTING))
    out = xform.apply(original)
    assert out.headers == [("existing", b"x"), ("source", 42)]
    assert original.headers == EXISTING
    assert xform.apply(record()).headers == [("source", 42)]


def test_insert_header_needs_both_keys() -> None:
    xform = InsertHeader()
    xform.bind("ih", "transforms.ih.")
    with pytest.raises(ConfigException, match=r'"transforms\.ih\.value\.literal"'):
        xform.configure({"header": "h"})


def test_drop_headers_removes_every_header_of_those_names() -> None:
    xform = configured(DropHeaders, {"headers": "a,b"})
    headers = [("a", b"1"), ("keep", b"2"), ("b", None), ("a", b"3")]
    out = xform.apply(record(headers=headers))
    assert out.headers == [("keep", b"2")]
    assert headers == [("a", b"1"), ("keep", b"2"), ("b", None), ("a", b"3")]
    without = record()
    assert xform.apply(without) is without


def test_drop_headers_needs_a_name() -> None:
    with pytest.raises(ConfigException, match="Empty list"):
        configured(DropHeaders, {"headers": ""})
