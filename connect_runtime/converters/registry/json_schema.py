"""Confluent's JsonSchemaConverter: Connect data as JSON, framed with a registry id.

The bytes are Confluent's wire format (magic byte 0, the 4-byte schema id) and
the value as JSON, as Confluent's ``JsonSchemaData.fromConnectData`` writes it:
INT8..INT64 and floats as numbers (Java's text), BYTES as base64, Decimal as
base64 of the unscaled value (``decimal.format=NUMERIC``: a number), Date, Time
and Timestamp as their Connect numbers, a MAP with STRING keys as an object and
with other keys as an array of ``{"key": k, "value": v}`` objects, a STRUCT as an
object of its fields (a null field with a default written as the default; a
null optional field as ``null``).

The schema registered is draft-07 JSON Schema with Confluent's annotations, so
Confluent's deserializer rebuilds the Connect schema:

* INT8..INT64: ``{"type":"integer","connect.type":"int8"}`` (``int16``, ...);
  FLOAT32/FLOAT64 ``number`` with ``connect.type``; BYTES ``string`` with
  ``"connect.type":"bytes"``; BOOLEAN, STRING alike;
* ARRAY ``{"type":"array","items":...}``; MAP with STRING keys an ``object``
  with ``additionalProperties`` and ``"connect.type":"map"``, else an array of
  key/value objects;
* STRUCT an ``object`` whose ``properties`` carry ``connect.index`` (the field's
  position); ``title`` is the Connect name, ``description`` the doc,
  ``connect.version`` and ``connect.parameters`` the rest;
* an optional schema is ``{"oneOf":[{"type":"null"}, ...]}``.

Key order follows Confluent's output where it is known; the registry compares
JSON schemas by content, so a connector moved here from Confluent's converter
may register one more version of the same meaning (docs/converters.md).
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from connect_runtime.api.config_def import (
    CaseInsensitiveValidString,
    ConfigDef,
    Importance,
    Type,
    Width,
)
from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.converters import java
from connect_runtime.converters.base import as_bytes
from connect_runtime.converters.json import _double_node, _finish, _float_node
from connect_runtime.converters.registry.config import registry_config_def
from connect_runtime.converters.registry.converter import Plan, RegistryConverter

DECIMAL_FORMAT = "decimal.format"
NAMESPACE = "io.confluent.connect.json"
_INTEGER = {SchemaType.INT8: "int8", SchemaType.INT16: "int16", SchemaType.INT32: "int32",
            SchemaType.INT64: "int64"}
_NUMBER = {SchemaType.FLOAT32: "float32", SchemaType.FLOAT64: "float64"}

Tree = Callable[[Any], Any]


def json_schema(schema: Schema, numeric_decimals: bool = False) -> dict[str, Any]:
    """The JSON Schema Confluent's ``JsonSchemaData.fromConnectSchema`` makes of ``schema``."""
    return _node(schema, None, numeric_decimals)


def _node(schema: Schema, index: int | None, numeric: bool) -> dict[str, Any]:
    out = _base(schema, numeric)
    if schema.type is SchemaType.STRUCT and schema.optional:
        # An optional struct: oneOf null and the non-optional one (its metadata inside).
        wrapped: dict[str, Any] = {"oneOf": [{"type": "null"},
                                             _node(schema.replace(optional=False), None,
                                                   numeric)]}
        if index is not None:
            wrapped["connect.index"] = index
        return wrapped
    annotated = _annotated(schema, out, numeric)
    if schema.optional:
        wrapped = {"oneOf": [{"type": "null"}, annotated]}
        if index is not None:
            wrapped["connect.index"] = index
        return wrapped
    if index is not None:
        annotated["connect.index"] = index
    return annotated


def _base(schema: Schema, numeric: bool) -> dict[str, Any]:
    kind = schema.type
    if kind in _INTEGER:
        return {"type": "integer", "connect.type": _INTEGER[kind]}
    if kind in _NUMBER:
        return {"type": "number", "connect.type": _NUMBER[kind]}
    if kind is SchemaType.BOOLEAN:
        return {"type": "boolean"}
    if kind is SchemaType.STRING:
        return {"type": "string"}
    if kind is SchemaType.BYTES:
        as_number = schema.name == DECIMAL and numeric
        return {"type": "number" if as_number else "string", "connect.type": "bytes"}
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return {"type": "array", "items": _node(schema.value_schema, None, numeric)}
    if kind is SchemaType.MAP:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        if keys.type is SchemaType.STRING and not keys.optional:
            return {"type": "object", "additionalProperties": _node(values, None, numeric),
                    "connect.type": "map"}
        entry = {"type": "object", "properties": {"key": _node(keys, 0, numeric),
                                                  "value": _node(values, 1, numeric)}}
        return {"type": "array", "items": entry, "connect.type": "map"}
    if schema.optional:
        return {}
    return {"type": "object", "properties": {
        f.name: _node(f.schema, f.index, numeric) for f in schema.fields}}


def _annotated(schema: Schema, base: dict[str, Any], numeric: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if schema.name is not None:
        out["title"] = schema.name
    if schema.doc is not None:
        out["description"] = schema.doc
    if schema.default is not None:
        out["default"] = _value_tree(schema, numeric)(schema.default)
    out.update(base)
    if schema.version is not None:
        out["connect.version"] = schema.version
    params = {k: v for k, v in (schema.parameters or {}).items() if not k.startswith(NAMESPACE)}
    if params:
        out["connect.parameters"] = params
    return out


# Values -------------------------------------------------------------------------

def _value_tree(schema: Schema, numeric: bool) -> Tree:
    """Connect value -> the JSON tree Confluent's JsonSchemaData writes."""
    inner = _non_null(schema, numeric)
    default = schema.default

    def convert(v: Any) -> Any:
        if v is None:
            return None if default is None else inner(default)
        return inner(v)
    return convert


def _non_null(schema: Schema, numeric: bool) -> Tree:
    kind = schema.type
    if schema.name == DECIMAL:
        scale = schema.scale
        if numeric:
            return lambda v: _decimal_number(v, scale)
        return lambda v: _base64(java.decimal_bytes(java.decimal_unscaled(v, scale)))
    if schema.name == DATE:
        return java.epoch_days
    if schema.name == TIME:
        return java.millis_of_day
    if schema.name == TIMESTAMP:
        return java.epoch_millis
    if kind is SchemaType.BYTES:
        return lambda v: _base64(as_bytes(v))
    if kind is SchemaType.FLOAT64:
        return lambda v: _double_node(float(v))
    if kind is SchemaType.FLOAT32:
        return lambda v: _float_node(float(v))
    if kind.is_primitive:
        return _checked(kind)
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        item = _value_tree(schema.value_schema, numeric)
        return lambda v: [item(x) for x in v]
    if kind is SchemaType.MAP:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        value = _value_tree(values, numeric)
        if keys.type is SchemaType.STRING and not keys.optional:
            return lambda v: {str(k): value(x) for k, x in v.items()}
        key = _value_tree(keys, numeric)
        return lambda v: [{"key": key(k), "value": value(x)} for k, x in v.items()]
    fields = [(f.name, _value_tree(f.schema, numeric), f.schema.optional
               or f.schema.default is not None) for f in schema.fields]

    def struct(v: Any) -> Any:
        if type(v) is not Struct:
            raise TypeError(f"a struct needs a Struct, not {type(v).__name__}")
        raw = v._values  # the values as set; _value_tree applies defaults
        out = {}
        for name, tree, nullable in fields:
            item = raw.get(name)
            if item is None and not nullable:
                raise TypeError(f"field {name!r} is required")
            out[name] = tree(item)
        return out
    return struct


def _checked(kind: SchemaType) -> Tree:
    expected: type | tuple[type, ...] = (bool if kind is SchemaType.BOOLEAN
                                         else str if kind is SchemaType.STRING else int)

    def check(v: Any) -> Any:
        if not isinstance(v, expected) or (expected is int and isinstance(v, bool)):
            raise TypeError(f"{type(v).__name__} is not a {kind.value}")
        return v
    return check


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decimal_number(value: Any, scale: int) -> Any:
    return orjson.Fragment(java.decimal_text(java.decimal_unscaled(value, scale), scale))


class JsonSchemaConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.json.JsonSchemaConverter`` (module docstring)."""

    schema_type = "JSON"
    format_name = "JSON Schema"

    def __init__(self) -> None:
        super().__init__()
        self._numeric = False

    @staticmethod
    def config_def() -> ConfigDef:
        return registry_config_def().define(
            DECIMAL_FORMAT, Type.STRING, "BASE64", CaseInsensitiveValidString.in_(
                "BASE64", "NUMERIC"), Importance.LOW,
            "How decimals are written: BASE64 (the unscaled value's bytes) or NUMERIC.",
            group="JSON Schema", order_in_group=0, width=Width.MEDIUM,
            display_name="Decimal Format")

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        self._numeric = str(values[DECIMAL_FORMAT]).upper() == "NUMERIC"

    def _make_plan(self, schema: Schema) -> Plan:
        tree = _value_tree(schema, self._numeric)
        text = _finish(json_schema(schema, self._numeric)).decode("utf-8")
        return Plan(schema=schema, text=text, record_name=schema.name or "JsonSchema",
                    encode=lambda v: _finish(tree(v)), datum=tree)
