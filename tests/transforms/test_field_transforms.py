"""InsertField, ReplaceField, MaskField (connect_runtime.transforms.fields), as Connect has them."""

from __future__ import annotations

import datetime
import decimal

import pytest
from smt_records import OFFSET, PARTITION, configured, record

from connect_runtime.api.schema import Schema, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.fields import InsertField, MaskField, ReplaceField

UTC = datetime.UTC
ORDER = Schema.struct({"id": Schema.INT64, "name": Schema.OPTIONAL_STRING},
                      name="shop.Order", version=3, doc="an order")


# ------------------------------------------------------------------ InsertField

INSERT_ALL = {"topic.field": "topic_field!", "partition.field": "partition_field",
              "timestamp.field": "timestamp_field?", "static.field": "instance_id",
              "static.value": "my-instance-id"}


def test_insert_field_schemaless_adds_metadata_and_static_value() -> None:
    xform = configured(InsertField.Value, INSERT_ALL)
    original = record({"magic": 42}, partition=0, timestamp=1_700_000_000_123)
    out = xform.apply(original)
    assert out.value == {"magic": 42, "topic_field": "orders", "partition_field": 0,
                         "timestamp_field": 1_700_000_000_123, "instance_id": "my-instance-id"}
    assert out.value_schema is None
    assert original.value == {"magic": 42}  # the input record is never changed
    assert (out.source_partition, out.source_offset, out.topic) == (PARTITION, OFFSET, "orders")


def test_insert_field_schemaless_skips_absent_partition_and_timestamp() -> None:
    xform = configured(InsertField.Value, INSERT_ALL)
    out = xform.apply(record({"magic": 42}))
    assert out.value == {"magic": 42, "topic_field": "orders", "instance_id": "my-instance-id"}


def test_insert_field_with_schema_builds_the_schema_connect_builds() -> None:
    xform = configured(InsertField.Value, INSERT_ALL)
    value = Struct(ORDER, id=1, name="pen")
    out = xform.apply(record(value, value_schema=ORDER, partition=2, timestamp=86_400_123))
    expected = Schema.struct({
        "id": Schema.INT64, "name": Schema.OPTIONAL_STRING,
        "topic_field": Schema.STRING,  # "!": required
        "partition_field": Schema.OPTIONAL_INT32,
        "timestamp_field": Schema.timestamp(optional=True),
        "instance_id": Schema.OPTIONAL_STRING,
    }, name="shop.Order", version=3, doc="an order")
    assert out.value_schema == expected
    assert out.value == Struct(expected, id=1, name="pen", topic_field="orders",
                               partition_field=2, instance_id="my-instance-id",
                               timestamp_field=datetime.datetime(1970, 1, 2, 0, 0, 0, 123_000,
                                                                 tzinfo=UTC))
    out.value.validate()


def test_insert_field_reuses_the_updated_schema_for_equal_schemas() -> None:
    xform = configured(InsertField.Value, {"static.field": "s", "static.value": "v"})
    twin = Schema.struct({"id": Schema.INT64, "name": Schema.OPTIONAL_STRING},
                         name="shop.Order", version=3, doc="an order")
    first = xform.apply(record(Struct(ORDER, id=1), value_schema=ORDER))
    second = xform.apply(record(Struct(twin, id=2), value_schema=twin))
    assert first.value_schema is second.value_schema


def test_insert_field_key_variant_works_on_the_key() -> None:
    xform = configured(InsertField.Key, {"topic.field": "t"})
    out = xform.apply(record({"v": 1}, key={"k": 1}))
    assert out.key == {"k": 1, "t": "orders"} and out.value == {"v": 1}


def test_insert_field_passes_tombstones_unchanged() -> None:
    xform = configured(InsertField.Value, INSERT_ALL)
    tombstone = record(None, value_schema=ORDER)
    assert xform.apply(tombstone) is tombstone


def test_insert_field_replace_null_with_default() -> None:
    schema = Schema.struct({"qty": Schema(Schema.INT32.type, optional=True, default=1)})
    keep = configured(InsertField.Value, {"static.field": "s", "static.value": "v"})
    raw = configured(InsertField.Value, {"static.field": "s", "static.value": "v",
                                         "replace.null.with.default": "false"})
    value = Struct(schema, qty=None)
    assert keep.apply(record(value, value_schema=schema)).value["qty"] == 1
    assert raw.apply(record(value, value_schema=schema)).value["qty"] is None


def test_insert_field_refuses_data_of_the_wrong_shape() -> None:
    xform = configured(InsertField.Value, {"topic.field": "t"})
    xform.bind("ins", "transforms.ins.")
    with pytest.raises(DataException) as schemaless:
        xform.apply(record("just a string"))
    assert str(schemaless.value) == (
        "transform 'ins' (org.apache.kafka.connect.transforms.InsertField$Value) failed on a "
        "record for topic 'orders': only dict values are supported without a schema for "
        "[field insertion], found: str")
    with pytest.raises(DataException, match="only Struct values are supported"):
        xform.apply(record({"a": 1}, value_schema=ORDER))


@pytest.mark.parametrize(("configs", "key", "message"), [
    ({}, None, "No field insertion configured"),
    ({"static.field": "s"}, "transforms.ins.static.value",
     "No value specified for static field: s"),
    ({"offset.field": "o"}, "transforms.ins.offset.field", "only for sink connectors"),
])
def test_insert_field_config_errors_name_the_full_key(configs: dict[str, str], key: str | None,
                                                       message: str) -> None:
    xform = InsertField.Value()
    xform.bind("ins", "transforms.ins.")
    with pytest.raises(ConfigException, match=message) as caught:
        xform.configure(configs)
    assert caught.value.name == key


# ------------------------------------------------------------------ ReplaceField


def test_replace_field_schemaless_excludes_includes_and_renames() -> None:
    xform = configured(ReplaceField.Value, {"exclude": "dont", "renames": "abc:xyz,foo:bar"})
    out = xform.apply(record({"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}))
    assert out.value == {"xyz": 42, "bar": True, "etc": "etc"}
    only = configured(ReplaceField.Value, {"include": "abc,foo", "exclude": "foo"})
    assert only.apply(record({"abc": 1, "foo": 2, "etc": 3})).value == {"abc": 1}


def test_replace_field_with_schema_keeps_order_and_schema_metadata() -> None:
    schema = Schema.struct({"dont": Schema.STRING, "abc": Schema.INT32, "foo": Schema.BOOLEAN,
                            "etc": Schema.STRING}, name="s", version=2)
    xform = configured(ReplaceField.Value, {"exclude": "dont", "renames": "abc:xyz,foo:bar"})
    value = Struct(schema, dont="whatever", abc=42, foo=True, etc="etc")
    out = xform.apply(record(value, value_schema=schema))
    expected = Schema.struct({"xyz": Schema.INT32, "bar": Schema.BOOLEAN, "etc": Schema.STRING},
                             name="s", version=2)
    assert out.value_schema == expected
    assert out.value == Struct(expected, xyz=42, bar=True, etc="etc")


def test_replace_field_key_variant_and_tombstones() -> None:
    xform = configured(ReplaceField.Key, {"renames": "id:order_id"})
    out = xform.apply(record({"v": 1}, key={"id": 5}))
    assert out.key == {"order_id": 5} and out.value == {"v": 1}
    tombstone = record(None, key=None)
    assert xform.apply(tombstone) is tombstone


@pytest.mark.parametrize("renames", ["abc", "abc:", "a:b:c"])
def test_replace_field_refuses_bad_rename_pairs(renames: str) -> None:
    xform = ReplaceField.Value()
    xform.bind("r", "transforms.r.")
    with pytest.raises(ConfigException, match=f"Invalid rename mapping: {renames}") as caught:
        xform.configure({"renames": renames})
    assert caught.value.name == "transforms.r.renames"


# --------------------------------------------------------------------- MaskField

ALL_TYPES = {"magic": 42, "bool": True, "byte": 1, "short": 2, "int": 3, "long": 4,
             "float": 5.5, "double": 6.5, "decimal": decimal.Decimal("7.25"), "string": "hmm",
             "date": datetime.date(2024, 5, 6), "timestamp": datetime.datetime(2024, 5, 6, 7),
             "time": datetime.time(7, 8), "array": [1, 2, 3], "map": {"k": "v"},
             "withDefault": None}


def test_mask_field_schemaless_uses_the_null_value_of_each_type() -> None:
    fields = ",".join(k for k in ALL_TYPES if k not in ("magic", "withDefault"))
    out = configured(MaskField.Value, {"fields": fields}).apply(record(dict(ALL_TYPES)))
    assert out.value == {"magic": 42, "bool": False, "byte": 0, "short": 0, "int": 0,
                         "long": 0, "float": 0.0, "double": 0.0,
                         "decimal": decimal.Decimal(0), "string": "",
                         "date": datetime.date(1970, 1, 1),
                         "timestamp": datetime.datetime(1970, 1, 1),
                         "time": datetime.time(0), "array": [], "map": {},
                         "withDefault": None}


def test_mask_field_schemaless_adds_missing_fields_as_null_like_connect() -> None:
    out = configured(MaskField.Value, {"fields": "absent"}).apply(record({"a": 1}))
    assert out.value == {"a": 1, "absent": None}


def test_mask_field_with_schema_keeps_the_schema() -> None:
    schema = Schema.struct({"id": Schema.INT64, "secret": Schema.STRING,
                            "note": Schema(Schema.STRING.type, optional=True, default="n/a")})
    xform = configured(MaskField.Value, {"fields": "secret,note,absent"})
    out = xform.apply(record(Struct(schema, id=1, secret="s3cr3t", note=None),
                             value_schema=schema))
    assert out.value_schema is schema
    assert out.value == Struct(schema, id=1, secret="", note="")  # the default, masked


@pytest.mark.parametrize(("value", "replacement", "masked"), [
    (42, "123", 123), (42, "12.7", 12), (4.5, "1.25", 1.25), ("secret", "***", "***"),
    (decimal.Decimal("9.99"), "0.00", decimal.Decimal("0.00")),
])
def test_mask_field_with_replacement_converts_it_to_the_field_type(
        value: object, replacement: str, masked: object) -> None:
    xform = configured(MaskField.Value, {"fields": "f", "replacement": replacement})
    assert xform.apply(record({"f": value})).value == {"f": masked}


@pytest.mark.parametrize(("value", "replacement", "message"), [
    (True, "x", "Cannot mask value of type bool with custom replacement"),
    (42, "not a number", "Unable to convert not a number"),
    (b"raw", "x", "Cannot mask value of type bytes"),
])
def test_mask_field_unmaskable_values_name_field_and_topic(value: object, replacement: str,
                                                            message: str) -> None:
    xform = configured(MaskField.Value, {"fields": "f", "replacement": replacement})
    xform.bind("mask", "transforms.mask.")
    with pytest.raises(DataException, match=message) as caught:
        xform.apply(record({"f": value}))
    assert "transform 'mask'" in str(caught.value) and "'orders'" in str(caught.value)
    assert "field 'f'" in str(caught.value)


def test_mask_field_refuses_tombstones_like_connect() -> None:
    with pytest.raises(DataException, match="found: null"):
        configured(MaskField.Value, {"fields": "f"}).apply(record(None))


def test_mask_field_key_variant() -> None:
    out = configured(MaskField.Key, {"fields": "id"}).apply(record({"v": 1}, key={"id": 5}))
    assert out.key == {"id": 0} and out.value == {"v": 1}


@pytest.mark.parametrize(("configs", "key", "message"), [
    ({}, "transforms.m.fields", "Missing required configuration"),
    ({"fields": ""}, "transforms.m.fields", "Empty list"),
    ({"fields": "a", "replacement": ""}, "transforms.m.replacement", "non-empty"),
])
def test_mask_field_config_errors(configs: dict[str, str], key: str, message: str) -> None:
    xform = MaskField.Value()
    xform.bind("m", "transforms.m.")
    with pytest.raises(ConfigException, match=message) as caught:
        xform.configure(configs)
    assert key in str(caught.value)
