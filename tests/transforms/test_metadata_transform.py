"""SetSchemaMetadata (connect_runtime.transforms.metadata)."""

from __future__ import annotations

import pytest
from smt_records import configured, record

from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.metadata import SetSchemaMetadata

ROW = Schema.struct({"id": Schema.INT64, "note": Schema(SchemaType.STRING, optional=True,
                                                        default="none")},
                    name="old.Row", version=1, doc="a row")


def test_sets_name_and_version_and_rebuilds_a_struct_value() -> None:
    xform = configured(SetSchemaMetadata.Value, {"schema.name": "new.Row",
                                                 "schema.version": "7"})
    out = xform.apply(record(Struct(ROW, id=1, note=None), value_schema=ROW))
    renamed = ROW.replace(name="new.Row", version=7)
    assert out.value_schema == renamed
    assert out.value == Struct(renamed, id=1, note="none")
    out.value.validate()


def test_keeps_what_is_not_configured_and_works_on_keys_and_primitives() -> None:
    name_only = configured(SetSchemaMetadata.Key, {"schema.name": "k"})
    out = name_only.apply(record({"v": 1}, key=5, key_schema=Schema.INT64.replace(version=2)))
    assert out.key_schema == Schema(SchemaType.INT64, name="k", version=2) and out.key == 5
    version_only = configured(SetSchemaMetadata.Value, {"schema.version": "3"})
    raw = configured(SetSchemaMetadata.Value, {"schema.version": "3",
                                               "replace.null.with.default": "false"})
    assert version_only.apply(record(Struct(ROW, id=1), value_schema=ROW)).value_schema == \
        ROW.replace(version=3)
    assert raw.apply(record(Struct(ROW, id=1), value_schema=ROW)).value["note"] is None


def test_schemaless_records_are_refused_unless_null() -> None:
    xform = configured(SetSchemaMetadata.Value, {"schema.name": "x"})
    tombstone = record(None)
    assert xform.apply(tombstone) is tombstone
    xform.bind("meta", "transforms.meta.")
    with pytest.raises(DataException, match=r"transform 'meta'.*topic 'orders': the value has "
                                            r"no schema"):
        xform.apply(record({"a": 1}))


def test_needs_a_name_or_a_version() -> None:
    with pytest.raises(ConfigException, match="Neither schema name nor version configured"):
        configured(SetSchemaMetadata.Value)
    xform = SetSchemaMetadata.Value()
    xform.bind("meta", "transforms.meta.")
    with pytest.raises(ConfigException, match=r"transforms\.meta\.schema\.version") as caught:
        xform.configure({"schema.version": "one"})
    assert caught.value.name == "transforms.meta.schema.version"
