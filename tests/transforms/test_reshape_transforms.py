"""ExtractField, HoistField, ValueToKey, Flatten (connect_runtime.transforms.reshape)."""

from __future__ import annotations

import decimal

import pytest
from smt_records import configured, record

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.reshape import ExtractField, Flatten, HoistField, ValueToKey

ORDER = Schema.struct({"id": Schema.INT64, "name": Schema.OPTIONAL_STRING})

# ------------------------------------------------------------------ ExtractField


def test_extract_field_schemaless() -> None:
    xform = configured(ExtractField.Key, {"field": "magic"})
    out = xform.apply(record({"v": 1}, key={"magic": 42}))
    assert (out.key, out.key_schema, out.value) == (42, None, {"v": 1})
    assert xform.apply(record(None, key={"other": 1})).key is None  # missing: null
    assert xform.apply(record(None, key=None)).key is None  # null stays null


def test_extract_field_with_schema() -> None:
    xform = configured(ExtractField.Value, {"field": "name"})
    out = xform.apply(record(Struct(ORDER, id=1, name="pen"), value_schema=ORDER))
    assert (out.value, out.value_schema) == ("pen", Schema.OPTIONAL_STRING)
    tombstone = xform.apply(record(None, value_schema=ORDER))
    assert (tombstone.value, tombstone.value_schema) == (None, Schema.OPTIONAL_STRING)


def test_extract_field_unknown_field_with_schema_names_alias_field_and_topic() -> None:
    xform = configured(ExtractField.Value, {"field": "nope"})
    xform.bind("pick", "transforms.pick.")
    with pytest.raises(DataException) as caught:
        xform.apply(record(Struct(ORDER, id=1), value_schema=ORDER))
    assert str(caught.value) == (
        "transform 'pick' (org.apache.kafka.connect.transforms.ExtractField$Value) failed on "
        "a record for topic 'orders': field 'nope' is not in the value schema (fields: id, "
        "name)")


def test_extract_field_v2_reaches_nested_fields() -> None:
    inner = Schema.struct({"c": Schema.INT32, "d.e": Schema.STRING})
    outer = Schema.struct({"a": inner, "a.b": Schema.STRING})
    value = Struct(outer, {"a": Struct(inner, {"c": 7, "d.e": "x"}), "a.b": "flat"})
    nested = configured(ExtractField.Value, {"field": "a.c", "field.syntax.version": "v2"})
    quoted = configured(ExtractField.Value, {"field": "a.`d.e`", "field.syntax.version": "V2"})
    v1 = configured(ExtractField.Value, {"field": "a.b"})
    assert nested.apply(record(value, value_schema=outer)).value == 7
    assert quoted.apply(record(value, value_schema=outer)).value == "x"
    assert v1.apply(record(value, value_schema=outer)).value == "flat"
    schemaless = {"a": {"c": 7}, "a.b": "flat"}
    assert nested.apply(record(schemaless)).value == 7
    assert v1.apply(record(schemaless)).value == "flat"


def test_extract_field_replace_null_with_default() -> None:
    schema = Schema.struct({"f": Schema(SchemaType.INT32, optional=True, default=9)})
    value = Struct(schema, f=None)
    assert configured(ExtractField.Value, {"field": "f"}).apply(
        record(value, value_schema=schema)).value == 9
    assert configured(ExtractField.Value, {"field": "f", "replace.null.with.default": "false"}
                      ).apply(record(value, value_schema=schema)).value is None


def test_extract_field_bad_path_names_the_key() -> None:
    xform = ExtractField.Value()
    xform.bind("pick", "transforms.pick.")
    with pytest.raises(ConfigException, match="Incomplete backtick pair") as caught:
        xform.configure({"field": "`a.b", "field.syntax.version": "V2"})
    assert caught.value.name == "transforms.pick.field"
    with pytest.raises(ConfigException, match=r"transforms\.pick\.field\.syntax\.version"):
        xform.configure({"field": "a", "field.syntax.version": "V3"})


# -------------------------------------------------------------------- HoistField


def test_hoist_field_schemaless_and_with_schema() -> None:
    xform = configured(HoistField.Key, {"field": "magic"})
    out = xform.apply(record(None, key=420))
    assert (out.key, out.key_schema) == ({"magic": 420}, None)
    with_schema = xform.apply(record(None, key=420, key_schema=Schema.INT32))
    assert with_schema.key_schema == Schema.struct({"magic": Schema.INT32})
    assert with_schema.key == Struct(with_schema.key_schema, magic=420)
    again = xform.apply(record(None, key=1, key_schema=Schema.INT32))
    assert again.key_schema is with_schema.key_schema  # cached


def test_hoist_field_hoists_nulls_too() -> None:
    out = configured(HoistField.Value, {"field": "v"}).apply(record(None))
    assert out.value == {"v": None}


def test_hoist_field_needs_a_field_name() -> None:
    xform = HoistField.Key()
    xform.bind("wrap", "transforms.wrap.")
    with pytest.raises(ConfigException, match=r'"transforms\.wrap\.field"') as caught:
        xform.configure({})
    assert caught.value.name == "transforms.wrap.field"


# -------------------------------------------------------------------- ValueToKey


def test_value_to_key_schemaless() -> None:
    xform = configured(ValueToKey, {"fields": "a,b"})
    out = xform.apply(record({"a": 1, "b": 2, "c": 3}, key="old"))
    assert (out.key, out.key_schema, out.value) == ({"a": 1, "b": 2}, None,
                                                    {"a": 1, "b": 2, "c": 3})


def test_value_to_key_with_schema() -> None:
    schema = Schema.struct({"a": Schema.INT32, "b": Schema.INT32, "c": Schema.INT32})
    xform = configured(ValueToKey, {"fields": "a,b"})
    value = Struct(schema, a=1, b=2, c=3)
    out = xform.apply(record(value, value_schema=schema))
    key_schema = Schema.struct({"a": Schema.INT32, "b": Schema.INT32})
    assert out.key_schema == key_schema and out.key == Struct(key_schema, a=1, b=2)
    assert out.value is value and out.value_schema is schema


def test_value_to_key_missing_field_names_alias_field_and_topic() -> None:
    xform = configured(ValueToKey, {"fields": "a,zz"})
    xform.bind("k", "transforms.k.")
    schema = Schema.struct({"a": Schema.INT32})
    with pytest.raises(DataException) as caught:
        xform.apply(record(Struct(schema, a=1), value_schema=schema))
    assert str(caught.value) == (
        "transform 'k' (org.apache.kafka.connect.transforms.ValueToKey) failed on a record "
        "for topic 'orders': field 'zz' does not exist in the value schema (fields: a)")


def test_value_to_key_refuses_a_null_value_like_connect() -> None:
    with pytest.raises(DataException, match="found: null"):
        configured(ValueToKey, {"fields": "a"}).apply(record(None))


# ----------------------------------------------------------------------- Flatten


def test_flatten_schemaless_nested_maps() -> None:
    value = {"A": {"B": {"int8": 8, "bytes": b"x", "array": [1], "none": None}}, "top": 1}
    out = configured(Flatten.Value, {"delimiter": "#"}).apply(record(value))
    assert out.value == {"A#B#int8": 8, "A#B#bytes": b"x", "A#B#array": [1], "A#B#none": None,
                         "top": 1}


def test_flatten_schemaless_refuses_values_connect_data_lacks() -> None:
    xform = configured(Flatten.Value)
    xform.bind("flat", "transforms.flat.")
    with pytest.raises(DataException, match=r"field 'a\.d' holds a Decimal"):
        xform.apply(record({"a": {"d": decimal.Decimal("1.5")}}))


def test_flatten_with_schema_propagates_optionality_and_defaults() -> None:
    inner = Schema.struct({"x": Schema.INT32, "y": Schema(SchemaType.STRING, default="dy")},
                          name="inner")
    outer = Schema.struct({
        "id": Schema.INT64,
        "opt": inner.replace(optional=True),
        "req": inner,
        "list": Schema.array(Schema.STRING),
    }, name="flat.me", version=2)
    xform = configured(Flatten.Value)
    value = Struct(outer, id=1, opt=None, req=Struct(inner, x=2, y=None), list=["a"])
    out = xform.apply(record(value, value_schema=outer))
    expected = Schema.struct({
        "id": Schema.INT64,
        "opt.x": Schema.OPTIONAL_INT32,  # optional because its struct is
        "opt.y": Schema(SchemaType.STRING, optional=True, default="dy"),
        "req.x": Schema.INT32,
        "req.y": Schema(SchemaType.STRING, default="dy"),
        "list": Schema.array(Schema.STRING),
    }, name="flat.me", version=2)
    assert out.value_schema == expected
    assert out.value == Struct(expected, {"id": 1, "req.x": 2, "req.y": "dy", "list": ["a"]})
    out.value.validate()


def test_flatten_with_schema_refuses_map_fields() -> None:
    schema = Schema.struct({"m": Schema.map(Schema.STRING, Schema.STRING)})
    with pytest.raises(DataException, match="Flatten does not support map fields"):
        configured(Flatten.Value).apply(record(Struct(schema, m={}), value_schema=schema))


def test_flatten_passes_tombstones_and_works_on_keys() -> None:
    tombstone = record(None)
    assert configured(Flatten.Value).apply(tombstone) is tombstone
    out = configured(Flatten.Key, {"delimiter": "_"}).apply(record(1, key={"a": {"b": 1}}))
    assert out.key == {"a_b": 1} and out.value == 1
