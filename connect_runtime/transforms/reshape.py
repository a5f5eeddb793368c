"""Transforms that reshape a key or value: ExtractField, HoistField, ValueToKey, Flatten.

``ExtractField`` takes one field out (``field.syntax.version=V2`` reaches into
nested data), ``HoistField`` wraps the whole key/value in a one-field
struct/dict, ``ValueToKey`` builds the key from value fields, ``Flatten`` turns
nested structs/dicts into one level with joined names.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type
from connect_runtime.api.schema import Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Bundled, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    NonEmptyList,
    define_replace_null_with_default,
)
from connect_runtime.transforms.data import SchemaCache, field_value, struct_like
from connect_runtime.transforms.field_path import (
    FIELD_SYNTAX_VERSION,
    FieldPath,
    FieldSyntaxVersion,
    define_field_syntax_version,
)

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord


@with_sides
class ExtractField(Sided):
    """Replace the key/value with one of its fields (a Struct's with a schema, a dict's without).

    A null key/value stays null. Without a schema a missing field gives null;
    with one, a field the schema lacks is a DataException.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.ExtractField"
    CONFIG_DEF = define_field_syntax_version(define_replace_null_with_default(
        ConfigDef().define("field", Type.STRING, importance=Importance.MEDIUM,
                           documentation="Field name to extract.")))

    def configured(self, values: dict[str, Any]) -> None:
        version = FieldSyntaxVersion.parse(values[FIELD_SYNTAX_VERSION])
        try:
            self._path = FieldPath.parse(values["field"], version)
        except ConfigException as e:
            raise self.config_error("field", values["field"], str(e)) from None
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]

    def apply(self, record: SourceRecord) -> SourceRecord:
        schema, value = self.schema_of(record), self.value_of(record)
        if schema is None:
            if value is None:
                return self.updated(record, None, None)
            data = self.require_map(record, value, "field extraction")
            return self.updated(record, None, self._in(record, self._path.value_from_map, data))
        struct = None if value is None else self.require_struct(record, value,
                                                                  "field extraction")
        field = self._path.field_from(schema)
        if field is None:
            raise self.data_error(record, f"field {self._path.text!r} is not in the "
                                  f"{self.part} schema (fields: "
                                  f"{', '.join(f.name for f in schema.fields)})")
        extracted = None if struct is None else self._in(
            record, lambda s: self._path.value_from_struct(s, self._with_default), struct)
        return self.updated(record, field.schema, extracted)

    def _in(self, record: SourceRecord, read: Callable[[Any], Any], data: Any) -> Any:
        try:
            return read(data)
        except Exception as e:  # a nested step that is not a struct/dict
            raise self.data_error(record, f"field {self._path.text!r}: {e}") from None


@with_sides
class HoistField(Sided):
    """Wrap the key/value in a struct (with a schema) or a dict (without) of one field."""

    connect_name = f"{TRANSFORMS_PACKAGE}.HoistField"
    CONFIG_DEF = ConfigDef().define(
        "field", Type.STRING, importance=Importance.MEDIUM,
        documentation="Field name for the single field that will be created in the "
        "resulting Struct or Map.")

    def configured(self, values: dict[str, Any]) -> None:
        self._field: str = values["field"]
        self._schemas = SchemaCache()

    def apply(self, record: SourceRecord) -> SourceRecord:
        schema, value = self.schema_of(record), self.value_of(record)
        if schema is None:
            return self.updated(record, None, {self._field: value})
        hoisted = self._schemas.get(schema, lambda s: Schema.struct({self._field: s}))
        return self.updated(record, hoisted, Struct(hoisted, {self._field: value}))


class ValueToKey(Bundled):
    """Replace the key with a struct (with a schema) or dict (without) of value fields.

    The value must be a Struct or a dict (a null value is a DataException, as in
    Connect); with a schema, a field the value schema lacks is a DataException.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.ValueToKey"
    CONFIG_DEF = define_replace_null_with_default(ConfigDef().define(
        "fields", Type.LIST, validator=NonEmptyList(), importance=Importance.HIGH,
        documentation="Field names on the record value to extract as the record key."))

    def configured(self, values: dict[str, Any]) -> None:
        self._fields: list[str] = values["fields"]
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = record.value
        if record.value_schema is None:
            if not isinstance(value, Mapping):
                raise self.data_error(record, "only dict values are supported without a "
                                      "schema for [copying fields from value to key], found: "
                                      f"{'null' if value is None else type(value).__name__}")
            key = {name: value.get(name) for name in self._fields}
            return dataclasses.replace(record, key_schema=None, key=key)
        if not isinstance(value, Struct):
            raise self.data_error(record, "only Struct values are supported for [copying "
                                  "fields from value to key], found: "
                                  f"{'null' if value is None else type(value).__name__}")
        key_schema = self._schemas.get(value.schema, lambda s: self._key_schema(record, s))
        key_struct = Struct(key_schema, {name: field_value(value, name, self._with_default)
                                  for name in self._fields})
        return dataclasses.replace(record, key_schema=key_schema, key=key_struct,
                                   value_schema=value.schema)

    def _key_schema(self, record: SourceRecord, value_schema: Schema) -> Schema:
        fields = []
        for name in self._fields:
            found = value_schema.field(name)
            if found is None:
                raise self.data_error(record, f"field {name!r} does not exist in the value "
                                      f"schema (fields: "
                                      f"{', '.join(f.name for f in value_schema.fields)})")
            fields.append((name, found.schema))
        return Schema.struct(fields)


# The Python types Flatten copies as they are (Connect's primitives, bytes, arrays).
_FLAT_TYPES = (bool, int, float, str, bytes, bytearray, memoryview, list, tuple)
_FLAT_SCHEMA_TYPES = frozenset(SchemaType) - {SchemaType.MAP, SchemaType.STRUCT}


@with_sides
class Flatten(Sided):
    """Flatten nested structs (with a schema) or dicts (without) into one level.

    Field names are joined with ``delimiter``; arrays are kept as they are. With
    a schema, a flattened field is optional if any enclosing struct is, and takes
    a default from its own schema or an enclosing struct's default; MAP fields
    are a DataException. Without one, values Connect's data API lacks (Decimal,
    dates, Structs) are a DataException. A null key/value passes unchanged.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.Flatten"
    CONFIG_DEF = ConfigDef().define(
        "delimiter", Type.STRING, ".", importance=Importance.MEDIUM,
        documentation="Delimiter to insert between field names from the input record when "
        "generating field names for the output record")

    def configured(self, values: dict[str, Any]) -> None:
        self._delimiter: str = values["delimiter"]
        self._schemas = SchemaCache()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else f"{prefix}{self._delimiter}{name}"

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        if value is None:
            return record
        if self.schema_of(record) is None:
            flat: dict[str, Any] = {}
            self._flatten_map(record, self.require_map(record, value, "flattening"), "", flat)
            return self.updated(record, None, flat)
        struct = self.require_struct(record, value, "flattening")
        schema = self._schemas.get(struct.schema, lambda s: self._flat_schema(record, s))
        values: dict[str, Any] = {}
        self._flatten_struct(struct, "", values)
        return self.updated(record, schema, Struct(schema, values))

    def _flatten_map(self, record: SourceRecord, data: Mapping[Any, Any], prefix: str,
                     out: dict[str, Any]) -> None:
        for key, value in data.items():
            name = self._name(prefix, str(key))
            if value is None or isinstance(value, _FLAT_TYPES):
                out[name] = value
            elif isinstance(value, Mapping):
                self._flatten_map(record, value, name, out)
            else:
                raise self.data_error(record, f"field {name!r} holds a "
                                      f"{type(value).__name__}, which has no place in "
                                      "schemaless data (Connect's data API)"
                                      + _hint(value))

    def _flat_schema(self, record: SourceRecord, schema: Schema) -> Schema:
        fields: list[tuple[str, Schema]] = []
        self._flatten_fields(record, schema, "", schema.optional, schema.default, fields)
        return struct_like(schema, fields)

    def _flatten_fields(self, record: SourceRecord, schema: Schema, prefix: str,
                        optional: bool, parent_default: Struct | None,
                        out: list[tuple[str, Schema]]) -> None:
        for field in schema.fields:
            name = self._name(prefix, field.name)
            is_optional = optional or field.schema.optional
            default = field.schema.default
            if default is None and parent_default is not None:
                default = parent_default.get(field.name)
            if field.schema.type is SchemaType.STRUCT:
                self._flatten_fields(record, field.schema, name, is_optional, default, out)
            elif field.schema.type in _FLAT_SCHEMA_TYPES:
                out.append((name, field.schema.replace(optional=is_optional, default=default)))
            else:
                raise self.data_error(record, f"Flatten does not support {field.schema.type.value}"
                                      f" fields in records with schemas (field {name!r})")

    def _flatten_struct(self, struct: Struct, prefix: str, out: dict[str, Any]) -> None:
        for field in struct.schema.fields:
            name = self._name(prefix, field.name)
            if field.schema.type is SchemaType.STRUCT:
                nested = struct.get(field.name)
                if nested is not None:
                    self._flatten_struct(nested, name, out)
            else:
                out[name] = struct.get(field.name)


def _hint(value: Any) -> str:
    if isinstance(value, decimal.Decimal | datetime.date | datetime.time):
        return "; give the record a schema to carry Decimal, Date, Time or Timestamp values"
    return ""
