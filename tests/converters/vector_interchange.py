"""The form in which a vector's schema and value travel between Python and Java.

Both ``ConverterVectors.java`` (which hands them to Kafka Connect's converters)
and the Python tests (which hand them to ours) rebuild the same schema and value
from it; change the two together.

* A schema is in Connect's JSON schema form (what JsonConverter writes in its
  envelope: ``type`` is ``int8``..``int64``, ``float``, ``double``, ``boolean``,
  ``string``, ``bytes``, ``array`` (``items``), ``map`` (``keys``, ``values``)
  or ``struct`` (``fields``, each with ``field``); ``optional``, ``name``,
  ``version``, ``doc``, ``parameters``), except that ``default`` is a value in
  the form below.
* A value of a schema: JSON for ints, booleans and strings; a float as a JSON
  number or the string ``NaN``, ``Infinity`` or ``-Infinity``; bytes as base64;
  a Decimal as its string (``"1.50"``: the scale is the string's); Date
  ``"2024-01-02"``, Time ``"03:04:05.678"``, Timestamp
  ``"2024-01-02T03:04:05.678Z"``; an array as a list; a map as a list of
  ``[key, value]`` pairs (any key type, in order); a struct as an object of its
  set fields (a null or absent field is unset).
* A schemaless value: JSON as Connect's Java types (an integer is a Long, a
  number with a fraction or exponent a Double, an object a string-keyed map),
  and tagged objects for the rest: ``{"$bytes": base64}``, ``{"$float": "NaN"}``,
  ``{"$map": [[key, value], ...]}`` (keys of any type).
"""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any

from connect_runtime.api.schema import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    Field,
    Schema,
    SchemaType,
    Struct,
)

_TYPES = {
    "int8": SchemaType.INT8, "int16": SchemaType.INT16, "int32": SchemaType.INT32,
    "int64": SchemaType.INT64, "float": SchemaType.FLOAT32, "double": SchemaType.FLOAT64,
    "boolean": SchemaType.BOOLEAN, "string": SchemaType.STRING, "bytes": SchemaType.BYTES,
    "array": SchemaType.ARRAY, "map": SchemaType.MAP, "struct": SchemaType.STRUCT,
}


def schema(node: dict[str, Any] | None) -> Schema | None:
    """The Schema a node in Connect's JSON schema form describes."""
    if node is None:
        return None
    kind = _TYPES[node["type"]]
    meta: dict[str, Any] = {"optional": bool(node.get("optional", False)),
                            "name": node.get("name"), "version": node.get("version"),
                            "doc": node.get("doc"), "parameters": node.get("parameters")}
    if kind is SchemaType.ARRAY:
        built = Schema(kind, value_schema=schema(node["items"]), **meta)
    elif kind is SchemaType.MAP:
        built = Schema(kind, key_schema=schema(node["keys"]),
                       value_schema=schema(node["values"]), **meta)
    elif kind is SchemaType.STRUCT:
        fields = tuple(Field(f["field"], i, _required(schema(f)))
                       for i, f in enumerate(node["fields"]))
        built = Schema(kind, fields=fields, **meta)
    else:
        built = Schema(kind, **meta)
    if node.get("default") is not None:
        built = built.replace(default=value(built, node["default"]))
    return built


def _required(found: Schema | None) -> Schema:
    assert found is not None
    return found


def value(of: Schema | None, node: Any) -> Any:
    """The Python value of ``of`` (None: schemaless) that ``node`` describes."""
    if of is None:
        return schemaless(node)
    if node is None:
        return None
    logical = _LOGICAL.get(of.name or "")
    if logical is not None:
        return logical(node)
    kind = of.type
    if kind in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return float(node)
    if kind is SchemaType.BYTES:
        return base64.b64decode(node)
    if kind is SchemaType.ARRAY:
        return [value(of.value_schema, item) for item in node]
    if kind is SchemaType.MAP:
        return {value(of.key_schema, k): value(of.value_schema, v) for k, v in node}
    if kind is SchemaType.STRUCT:
        return Struct(of, {name: value(_field_schema(of, name), v)
                           for name, v in node.items() if v is not None})
    return node


def _field_schema(struct: Schema, name: str) -> Schema:
    found = struct.field(name)
    assert found is not None, name
    return found.schema


def _timestamp(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text)


_LOGICAL = {
    DECIMAL: decimal.Decimal,
    DATE: datetime.date.fromisoformat,
    TIME: datetime.time.fromisoformat,
    TIMESTAMP: _timestamp,
}


def schemaless(node: Any) -> Any:
    """A schemaless value from its interchange form."""
    if isinstance(node, dict):
        if "$bytes" in node:
            return base64.b64decode(node["$bytes"])
        if "$float" in node:
            return float(node["$float"])
        if "$map" in node:
            return {_hashable(schemaless(k)): schemaless(v) for k, v in node["$map"]}
        return {k: schemaless(v) for k, v in node.items()}
    if isinstance(node, list):
        return [schemaless(item) for item in node]
    return node


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key
