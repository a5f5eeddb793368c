"""Cast (connect_runtime.transforms.cast): Java's conversions, schemas, errors."""

from __future__ import annotations

import datetime
import decimal
import math

import pytest
from smt_records import configured, record

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.cast import Cast, cast_value, java_float_string

T = SchemaType
UTC = datetime.UTC


@pytest.mark.parametrize(("value", "target", "expected"), [
    (42, T.INT8, 42), (300, T.INT8, 44), (-129, T.INT8, 127), (70_000, T.INT16, 4464),
    (2**40 + 5, T.INT32, 5), (True, T.INT64, 1), (False, T.INT32, 0),
    (42.9, T.INT32, 42), (-42.9, T.INT64, -42), (1e20, T.INT32, 2**31 - 1),
    (1e20, T.INT8, -1), (1e20, T.INT64, 2**63 - 1), (math.nan, T.INT16, 0),
    ("42", T.INT8, 42), ("-128", T.INT8, -128), ("+7", T.INT64, 7),
    (42, T.FLOAT64, 42.0), (True, T.FLOAT32, 1.0), ("1e3", T.FLOAT64, 1000.0),
    ("  2.5f ", T.FLOAT32, 2.5), ("-Infinity", T.FLOAT64, -math.inf),
    (1.1, T.FLOAT32, 1.100000023841858), (1e39, T.FLOAT32, math.inf),
    (0, T.BOOLEAN, False), (-3, T.BOOLEAN, True), (0.5, T.BOOLEAN, False),
    ("TRUE", T.BOOLEAN, True), ("yes", T.BOOLEAN, False),
    (True, T.STRING, "true"), (42, T.STRING, "42"), (1e20, T.STRING, "1.0E20"),
    (100.0, T.STRING, "100.0"), (0.001, T.STRING, "0.001"), (1e-4, T.STRING, "1.0E-4"),
    (1.5e7, T.STRING, "1.5E7"), (-0.0, T.STRING, "-0.0"), (math.nan, T.STRING, "NaN"),
    (b"\x00\x01hi", T.STRING, "AAFoaQ=="), ("same", T.STRING, "same"),
])
def test_schemaless_values_cast_like_java(value: object, target: SchemaType,
                                          expected: object) -> None:
    assert cast_value(None, value, target) == expected


@pytest.mark.parametrize(("value", "target"), [("300", T.INT8), ("4.2", T.INT32),
                                               (" 1", T.INT32), ("abc", T.FLOAT64)])
def test_strings_that_are_not_numbers_of_the_type_are_refused(value: str,
                                                              target: SchemaType) -> None:
    with pytest.raises(DataException, match="out of range for requested data type"):
        cast_value(None, value, target)


def test_float32_values_print_like_java_floats() -> None:
    assert cast_value(Schema.FLOAT32, 1.100000023841858, T.STRING) == "1.1"
    assert cast_value(Schema.FLOAT64, 1.100000023841858, T.STRING) == "1.100000023841858"
    assert cast_value(Schema.FLOAT64, 3, T.STRING) == "3.0"
    assert java_float_string(123456789.0) == "1.23456789E8"


def test_logical_values_become_their_encoding_or_connect_date_strings() -> None:
    date, time = datetime.date(1970, 1, 3), datetime.time(1, 2, 3, 4000)
    stamp = datetime.datetime(2024, 1, 2, 3, 4, 5, 678_000, tzinfo=UTC)
    assert cast_value(Schema.date(), date, T.INT32) == 2
    assert cast_value(Schema.time(), time, T.INT64) == 3_723_004
    assert cast_value(Schema.timestamp(), stamp, T.INT64) == 1_704_164_645_678
    assert cast_value(Schema.date(), date, T.STRING) == "1970-01-03"
    assert cast_value(Schema.time(), time, T.STRING) == "01:02:03.004Z"
    assert cast_value(Schema.timestamp(), stamp, T.STRING) == "2024-01-02T03:04:05.678Z"
    assert cast_value(Schema.decimal(2), decimal.Decimal("12.50"), T.STRING) == "12.50"
    assert cast_value(Schema.decimal(1), decimal.Decimal("12.9"), T.INT32) == 12
    assert cast_value(Schema.decimal(1), decimal.Decimal("0.5"), T.FLOAT64) == 0.5


@pytest.mark.parametrize(("schema", "value", "target", "message"), [
    (None, [1], T.INT32, "does not support casting from ARRAY"),
    (None, {"a": 1}, T.STRING, "does not support casting from MAP"),
    (None, decimal.Decimal(1), T.INT32, "not supported by Connect's data API"),
    (Schema.BYTES, b"x", T.INT32, "Unexpected type in Cast transformation: bytes"),
])
def test_values_cast_cannot_take_are_refused(schema: Schema | None, value: object,
                                             target: SchemaType, message: str) -> None:
    with pytest.raises(DataException, match=message):
        cast_value(schema, value, target)


def test_whole_value_cast_schemaless_and_with_schema() -> None:
    xform = configured(Cast.Value, {"spec": "int8"})
    assert xform.apply(record(42)).value == 42
    out = xform.apply(record(300, value_schema=Schema.INT64.replace(optional=True, doc="d")))
    assert out.value == 44
    assert out.value_schema == Schema(T.INT8, optional=True, doc="d")


def test_whole_value_cast_of_a_logical_type_drops_its_name() -> None:
    stamp = datetime.datetime(2024, 1, 2, tzinfo=UTC)
    out = configured(Cast.Value, {"spec": "string"}).apply(
        record(stamp, value_schema=Schema.timestamp()))
    assert out.value == "2024-01-02" and out.value_schema == Schema.STRING


def test_field_casts_schemaless_add_null_for_missing_fields_like_connect() -> None:
    xform = configured(Cast.Value, {"spec": "a:int16, b:string, absent:boolean"})
    out = xform.apply(record({"a": 70_000, "b": 1.0, "c": "kept"}))
    assert out.value == {"a": 4464, "b": "1.0", "c": "kept", "absent": None}


def test_field_casts_with_schema_build_the_new_schema_and_cast_defaults() -> None:
    schema = Schema.struct({
        "int": Schema(T.INT64, optional=True, default=7), "str": Schema.STRING,
        "keep": Schema.BOOLEAN,
    }, name="r", version=1)
    xform = configured(Cast.Value, {"spec": "int:string,str:int32"})
    out = xform.apply(record(Struct(schema, int=None, str="12", keep=True),
                             value_schema=schema))
    expected = Schema.struct({
        "int": Schema(T.STRING, optional=True, default="7"), "str": Schema.INT32,
        "keep": Schema.BOOLEAN,
    }, name="r", version=1)
    assert out.value_schema == expected
    assert out.value == Struct(expected, int="7", str=12, keep=True)  # null -> its default
    raw = configured(Cast.Value, {"spec": "int:string", "replace.null.with.default": "false"})
    assert raw.apply(record(Struct(schema, int=None, str="1", keep=True),
                            value_schema=schema)).value["int"] is None


def test_cast_key_variant_and_tombstones() -> None:
    xform = configured(Cast.Key, {"spec": "string"})
    out = xform.apply(record({"v": 1}, key=5))
    assert (out.key, out.value) == ("5", {"v": 1})
    tombstone = record(None, key=None)
    assert xform.apply(tombstone) is tombstone


def test_a_field_that_cannot_be_cast_names_alias_field_and_topic() -> None:
    xform = configured(Cast.Value, {"spec": "n:int8"})
    xform.bind("c", "transforms.c.")
    with pytest.raises(DataException) as caught:
        xform.apply(record({"n": "many"}))
    assert str(caught.value) == (
        "transform 'c' (org.apache.kafka.connect.transforms.Cast$Value) failed on a record for "
        "topic 'orders': field 'n': Value (many) was out of range for requested data type INT8")


@pytest.mark.parametrize(("spec", "message"), [
    ("", "Must specify at least one field to cast."),
    ("a:int128", "Invalid type found in casting spec: int128"),
    ("a:map", "Cast transformation does not support casting to MAP; supported types are "
              "[INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, STRING]"),
    ("bytes", "does not support casting to BYTES"),
    ("int8,a:string", "may only specify a single cast in their spec"),
    ("a:b:c", "Invalid cast mapping: a:b:c"),
])
def test_bad_specs_are_config_errors(spec: str, message: str) -> None:
    xform = Cast.Value()
    xform.bind("c", "transforms.c.")
    with pytest.raises(ConfigException, match=message.replace("[", r"\[").replace("]", r"\]")):
        xform.configure({"spec": spec})
