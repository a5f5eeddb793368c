"""Transforms that add, drop, rename or mask fields: InsertField, ReplaceField, MaskField.

Each has Connect's ``$Key`` and ``$Value`` variants and works on a dict (no
schema) or a Struct (with its schema, for which it builds, and caches, the
updated schema like Connect).
"""

from __future__ import annotations

import datetime
import decimal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, NonEmptyString, Type
from connect_runtime.api.schema import TIMESTAMP, Schema, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    Described,
    NonEmptyList,
    define_replace_null_with_default,
    java_split,
)
from connect_runtime.transforms.data import (
    EPOCH,
    SchemaCache,
    field_value,
    from_millis,
    struct_like,
    values_of,
)

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord

# --------------------------------------------------------------------- InsertField

_OPTIONALITY_DOC = ("Suffix with <code>!</code> to make this a required field, or "
                    "<code>?</code> to keep it optional (the default).")


@dataclass(frozen=True)
class _Insertion:
    """A field to insert: ``name!`` is required, ``name`` or ``name?`` optional."""

    name: str
    optional: bool

    @classmethod
    def parse(cls, spec: str | None) -> _Insertion | None:
        if spec is None:
            return None
        if spec.endswith("?"):
            return cls(spec[:-1], True)
        if spec.endswith("!"):
            return cls(spec[:-1], False)
        return cls(spec, True)

    def schema(self, required: Schema) -> Schema:
        return required.replace(optional=True) if self.optional else required


@with_sides
class InsertField(Sided):
    """Insert fields from the record's topic, partition and timestamp, or a static value.

    Records whose key/value is null pass unchanged. Without a schema the value
    must be a dict (the timestamp is inserted as epoch ms); with one, a Struct
    (the timestamp is a Connect Timestamp). ``offset.field`` exists only for
    sink connectors: configuring it here is a ConfigException.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.InsertField"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("topic.field", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Field name for Kafka topic. " + _OPTIONALITY_DOC)
        .define("partition.field", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Field name for Kafka partition. " + _OPTIONALITY_DOC)
        .define("offset.field", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Field name for Kafka offset - only applicable to sink "
                "connectors.<br/>" + _OPTIONALITY_DOC)
        .define("timestamp.field", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Field name for record timestamp. " + _OPTIONALITY_DOC)
        .define("static.field", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Field name for static data field. " + _OPTIONALITY_DOC)
        .define("static.value", Type.STRING, None, importance=Importance.MEDIUM,
                documentation="Static field value, if field name configured."))

    def configured(self, values: dict[str, Any]) -> None:
        self._topic = _Insertion.parse(values["topic.field"])
        self._partition = _Insertion.parse(values["partition.field"])
        self._timestamp = _Insertion.parse(values["timestamp.field"])
        self._static = _Insertion.parse(values["static.field"])
        self._static_value: str | None = values["static.value"]
        if values["offset.field"] is not None:
            raise self.config_error("offset.field", values["offset.field"],
                                    "Kafka offsets exist only for sink connectors, and "
                                    "connect-runtime runs source connectors")
        if not (self._topic or self._partition or self._timestamp or self._static):
            raise self.config_error(None, None, "No field insertion configured")
        if self._static is not None and self._static_value is None:
            raise self.config_error("static.value", None, "No value specified for static "
                                    f"field: {self._static.name}")
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        if value is None:
            return record
        if self.schema_of(record) is None:
            updated = dict(self.require_map(record, value, "field insertion"))
            updated.update(self._inserted(record, record.timestamp))
            return self.updated(record, None, updated)
        struct = self.require_struct(record, value, "field insertion")
        schema = self._schemas.get(struct.schema, self._updated_schema)
        values = values_of(struct, struct.schema.fields, self._with_default)
        timestamp = None if record.timestamp is None else from_millis(record.timestamp,
                                                                      TIMESTAMP)
        values.update(self._inserted(record, timestamp))
        return self.updated(record, schema, Struct(schema, values))

    def _inserted(self, record: SourceRecord, timestamp: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self._topic is not None:
            out[self._topic.name] = record.topic
        if self._partition is not None and record.partition is not None:
            out[self._partition.name] = record.partition
        if self._timestamp is not None and timestamp is not None:
            out[self._timestamp.name] = timestamp
        if self._static is not None:
            out[self._static.name] = self._static_value
        return out

    def _updated_schema(self, schema: Schema) -> Schema:
        fields = [(f.name, f.schema) for f in schema.fields]
        for insertion, required in ((self._topic, Schema.STRING),
                                    (self._partition, Schema.INT32),
                                    (self._timestamp, Schema.timestamp()),
                                    (self._static, Schema.STRING)):
            if insertion is not None:
                fields.append((insertion.name, insertion.schema(required)))
        return struct_like(schema, fields)


# -------------------------------------------------------------------- ReplaceField


def _renames(mappings: list[str], key: str = "renames") -> dict[str, str]:
    """``old:new`` pairs -> {old: new}; ConfigException naming ``key`` for a bad pair."""
    out = {}
    for mapping in mappings:
        parts = java_split(mapping, ":")
        if len(parts) != 2:
            raise ConfigException(f"Invalid rename mapping: {mapping}", name=key,
                                  value=mappings)
        out[parts[0]] = parts[1]
    return out


@with_sides
class ReplaceField(Sided):
    """Filter or rename fields.

    ``exclude`` wins over ``include``; an empty ``include`` keeps every field.
    Records whose key/value is null pass unchanged.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.ReplaceField"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("exclude", Type.LIST, [], importance=Importance.MEDIUM,
                documentation="Fields to exclude. This takes precedence over the fields to "
                "include.")
        .define("include", Type.LIST, [], importance=Importance.MEDIUM,
                documentation="Fields to include. If specified, only these fields will be "
                "used.")
        .define("renames", Type.LIST, [],
                Described(lambda name, value: _renames(value, name),
                          "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"),
                Importance.MEDIUM, "Field rename mappings."))

    def configured(self, values: dict[str, Any]) -> None:
        self._exclude = set(values["exclude"])
        self._include = set(values["include"])
        self._renames = _renames(values["renames"], self.key_prefix + "renames")
        self._reverse = {new: old for old, new in self._renames.items()}
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def _kept(self, name: str) -> bool:
        return name not in self._exclude and (not self._include or name in self._include)

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        if value is None:
            return record
        if self.schema_of(record) is None:
            data = self.require_map(record, value, "field replacement")
            updated = {self._renames.get(k, k): v for k, v in data.items() if self._kept(k)}
            return self.updated(record, None, updated)
        struct = self.require_struct(record, value, "field replacement")
        schema = self._schemas.get(struct.schema, self._updated_schema)
        values = {f.name: field_value(struct, self._reverse.get(f.name, f.name),
                                      self._with_default) for f in schema.fields}
        return self.updated(record, schema, Struct(schema, values))

    def _updated_schema(self, schema: Schema) -> Schema:
        try:
            return struct_like(schema, [(self._renames.get(f.name, f.name), f.schema)
                                        for f in schema.fields if self._kept(f.name)])
        except DataException as e:  # two fields renamed alike
            raise DataException(f"{self.label}: {e}") from e


# ----------------------------------------------------------------------- MaskField


def _null_mask(value: Any) -> Any:
    """Connect's "valid null value" for ``value``'s type (0, false, "", epoch, [], {})."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return 0
    if isinstance(value, float):
        return 0.0
    if isinstance(value, decimal.Decimal):
        return decimal.Decimal(0)
    if isinstance(value, str):
        return ""
    if isinstance(value, datetime.datetime):
        return EPOCH if value.tzinfo is not None else EPOCH.replace(tzinfo=None)
    if isinstance(value, datetime.date):
        return EPOCH.date()
    if isinstance(value, datetime.time):
        return datetime.time(0)
    if isinstance(value, list | tuple):
        return []
    if isinstance(value, Mapping):
        return {}
    raise DataException(f"Cannot mask value of type: {type(value).__name__}")


def _replacement_mask(value: Any, replacement: str) -> Any:
    """``replacement`` converted to ``value``'s type (numbers and strings only)."""
    try:
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            return int(decimal.Decimal(replacement.strip()))
        elif isinstance(value, float):
            return float(replacement)
        elif isinstance(value, decimal.Decimal):
            return decimal.Decimal(replacement.strip())
        elif isinstance(value, str):
            return replacement
    except (ValueError, ArithmeticError):
        raise DataException(f"Unable to convert {replacement} (str) to number") from None
    raise DataException(f"Cannot mask value of type {type(value).__name__} with custom "
                        "replacement.")


@with_sides
class MaskField(Sided):
    """Mask fields with the null value of their type (0, false, "", ...) or ``replacement``.

    As in Connect, the key/value must be a dict or a Struct: a null one (a
    tombstone) is a DataException; guard with a ``RecordIsTombstone`` predicate
    (``negate=true``) if tombstones can occur.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.MaskField"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("fields", Type.LIST, validator=NonEmptyList(), importance=Importance.HIGH,
                documentation="Names of fields to mask.")
        .define("replacement", Type.STRING, None, NonEmptyString(), Importance.LOW,
                "Custom value replacement, that will be applied to all 'fields' values "
                "(numeric or non-empty string values only)."))

    def configured(self, values: dict[str, Any]) -> None:
        self._fields: list[str] = values["fields"]
        self._masked = set(self._fields)
        self._replacement: str | None = values["replacement"]
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        if self.schema_of(record) is None:
            data = self.require_map(record, value, "mask fields")
            updated = dict(data)
            for name in self._fields:
                updated[name] = self._mask(record, name, data.get(name))
            return self.updated(record, None, updated)
        struct = self.require_struct(record, value, "mask fields")
        values = values_of(struct, struct.schema.fields, self._with_default)
        for name in self._masked.intersection(values):
            values[name] = self._mask(record, name, values[name])
        return self.updated(record, struct.schema, Struct(struct.schema, values))

    def _mask(self, record: SourceRecord, name: str, value: Any) -> Any:
        if value is None:
            return None
        try:
            if self._replacement is None:
                return _null_mask(value)
            return _replacement_mask(value, self._replacement)
        except DataException as e:
            raise self.data_error(record, f"field {name!r}: {e}") from None
