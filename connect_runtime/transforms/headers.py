"""Transforms on record headers: HeaderFrom, InsertHeader, DropHeaders.

Headers are ``(name, value)`` pairs; a value may be any Python value (the
header converter serializes it; bytes pass through). Every transform here makes
a new list and never changes the record's own.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type, ValidString
from connect_runtime.api.schema import Schema, Struct
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Bundled, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    NonEmptyList,
    define_replace_null_with_default,
)
from connect_runtime.transforms.data import SchemaCache, field_value, struct_like, values_of

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord

_NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")
_INT64 = 1 << 63


def _headers(record: SourceRecord) -> list[tuple[str, Any]]:
    """A new list with the record's headers."""
    return list(record.headers or ())


@with_sides
class HeaderFrom(Sided):
    """Move or copy fields of the key/value into headers (``fields[i]`` -> ``headers[i]``).

    The key/value must be a dict or a Struct (a null one is a DataException, as in
    Connect). With a schema, a field the schema lacks is a DataException; without,
    a missing field gives a header with a null value.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.HeaderFrom"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("fields", Type.LIST, validator=NonEmptyList(), importance=Importance.HIGH,
                documentation="Field names in the record whose values are to be copied or "
                "moved to headers.")
        .define("headers", Type.LIST, validator=NonEmptyList(), importance=Importance.HIGH,
                documentation="Header names, in the same order as the field names listed in "
                "the fields configuration property.")
        .define("operation", Type.STRING, validator=ValidString.in_("move", "copy"),
                importance=Importance.HIGH, documentation="Either <code>move</code> if the "
                "fields are to be moved to the headers (removed from the key/value), or "
                "<code>copy</code> if the fields are to be copied to the headers (retained in "
                "the key/value)."))

    def configured(self, values: dict[str, Any]) -> None:
        self._fields: list[str] = values["fields"]
        self._headers: list[str] = values["headers"]
        if len(self._fields) != len(self._headers):
            raise self.config_error("headers", values["headers"], "'fields' config must have "
                                    "the same number of elements as 'headers' config.")
        self._move = values["operation"] == "move"
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        purpose = f"header {'move' if self._move else 'copy'}"
        headers = _headers(record)
        if self.schema_of(record) is None:
            data = self.require_map(record, value, purpose)
            updated = dict(data)
            for name, header in zip(self._fields, self._headers, strict=True):
                headers.append((header, data.get(name)))
                if self._move:
                    updated.pop(name, None)
            return dataclasses.replace(self.updated(record, None, updated), headers=headers)
        struct = self.require_struct(record, value, purpose)
        for name, header in zip(self._fields, self._headers, strict=True):
            if struct.schema.field(name) is None:
                raise self.data_error(record, f"field {name!r} is not in the {self.part} "
                                      f"schema (fields: "
                                      f"{', '.join(f.name for f in struct.schema.fields)})")
            headers.append((header, field_value(struct, name, self._with_default)))
        schema, kept = struct.schema, struct
        if self._move:
            schema = self._schemas.get(struct.schema, self._moved_schema)
            kept = Struct(schema, values_of(struct, schema.fields, self._with_default))
        return dataclasses.replace(self.updated(record, schema, kept), headers=headers)

    def _moved_schema(self, schema: Schema) -> Schema:
        return struct_like(schema, [(f.name, f.schema) for f in schema.fields
                                    if f.name not in self._fields])


def parse_literal(text: str) -> Any:
    """A header value from its text, like Connect's ``Values.parseString`` for scalars.

    ``true``/``false`` are booleans, ``null`` is None, a whole number within 64
    bits is an ``int`` (``1.0`` too), another number a ``float`` (or a
    ``Decimal`` if a float cannot hold it); anything else stays the text.
    """
    if text in ("true", "false"):
        return text == "true"
    if text == "null":
        return None
    if not text or not _NUMBER.fullmatch(text):
        return text
    number = decimal.Decimal(text)
    if number == number.to_integral_value() and -_INT64 <= number < _INT64:
        return int(number)
    as_float = float(number)
    return as_float if as_float not in (float("inf"), float("-inf")) else number


class InsertHeader(Bundled):
    """Add the header ``header`` with the value ``value.literal`` to every record.

    The literal is read like Connect's ``Values.parseString`` for scalars
    (:func:`parse_literal`): ``42`` is an int, ``true`` a boolean, ``abc`` a string.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.InsertHeader"
    CONFIG_DEF = (
        ConfigDef()
        .define("header", Type.STRING, importance=Importance.HIGH,
                documentation="The name of the header.")
        .define("value.literal", Type.STRING, importance=Importance.HIGH,
                documentation="The literal value that is to be set as the header value on "
                "all records."))

    def configured(self, values: dict[str, Any]) -> None:
        self._header: str = values["header"]
        self._value = parse_literal(values["value.literal"])

    def apply(self, record: SourceRecord) -> SourceRecord:
        return dataclasses.replace(record, headers=[*_headers(record),
                                                    (self._header, self._value)])


class DropHeaders(Bundled):
    """Remove every header whose name is in ``headers``."""

    connect_name = f"{TRANSFORMS_PACKAGE}.DropHeaders"
    CONFIG_DEF = ConfigDef().define(
        "headers", Type.LIST, validator=NonEmptyList(), importance=Importance.HIGH,
        documentation="The name of the headers to be removed.")

    def configured(self, values: dict[str, Any]) -> None:
        self._dropped = frozenset(values["headers"])

    def apply(self, record: SourceRecord) -> SourceRecord:
        if record.headers is None:
            return record
        kept = [(name, value) for name, value in record.headers if name not in self._dropped]
        return dataclasses.replace(record, headers=kept)
