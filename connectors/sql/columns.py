"""Column types to Connect schemas, and row values to the Python values those schemas take.

==========================================  ===========================================
SQLAlchemy type (reflected)                 Connect schema
==========================================  ===========================================
Boolean                                     BOOLEAN
SmallInteger / Integer / BigInteger         INT16 / INT32 / INT64
Numeric(p, s) with a scale                  Decimal(scale=s) (``decimal.Decimal``)
Numeric without a scale (PostgreSQL         FLOAT64 (Connect's Decimal needs a fixed
``numeric``)                                scale; Confluent's best_fit does the same)
REAL, Float(precision <= 24)                FLOAT32 (FLOAT64 on SQLite: its REAL is 8 bytes)
Float, Double, DOUBLE PRECISION             FLOAT64
String, Text, Enum, ...                     STRING
Date / DateTime / Time                      Date / Timestamp / Time (naive UTC)
LargeBinary, BLOB, BYTEA, ...               BYTES
JSON                                        STRING (the JSON text)
anything else (UUID, INTERVAL, arrays, a    STRING (``str(value)``): nothing is dropped
SQLite expression with no declared type)
==========================================  ===========================================

A nullable column is optional; a NOT NULL one required. The row schema is a
STRUCT named after the table (Confluent's choice; no name in query mode).
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from connect_runtime import Schema, Struct

Convert = Callable[[Any], Any]


@dataclass(frozen=True)
class ColumnInfo:
    """One reflected column: its name, SQLAlchemy type and nullability."""

    name: str
    type: sa.types.TypeEngine[Any]
    nullable: bool


@dataclass(frozen=True)
class RowMapping:
    """How one table's rows become Structs: the schema and a converter per column."""

    schema: Schema
    names: tuple[str, ...]
    converters: tuple[Convert, ...]

    def to_struct(self, row: Sequence[Any]) -> Struct:
        """The Struct of ``row`` (its values in ``names`` order)."""
        values = {name: None if value is None else convert(value)
                  for name, convert, value in zip(self.names, self.converters, row, strict=False)}
        return Struct(self.schema, values)


def row_mapping(columns: Sequence[ColumnInfo], schema_name: str | None,
                dialect_name: str) -> RowMapping:
    """The mapping for ``columns`` (see the module docstring)."""
    fields: list[tuple[str, Schema]] = []
    converters: list[Convert] = []
    for column in columns:
        schema, convert = field_schema(column.type, dialect_name)
        fields.append((column.name, schema.replace(optional=column.nullable)))
        converters.append(convert)
    return RowMapping(Schema.struct(fields, name=schema_name),
                      tuple(c.name for c in columns), tuple(converters))


def field_schema(type_: sa.types.TypeEngine[Any], dialect_name: str) -> tuple[Schema, Convert]:
    """The Connect schema of a column type and the function making its values."""
    if isinstance(type_, sa.Boolean):
        return Schema.BOOLEAN, bool
    if isinstance(type_, sa.Integer):
        return _integer(type_), int
    if isinstance(type_, sa.Float):
        return _float(type_, dialect_name), float
    if isinstance(type_, sa.Numeric):
        if type_.scale is None:
            return Schema.FLOAT64, float
        return Schema.decimal(type_.scale), _decimal(type_.scale)
    if isinstance(type_, sa.DateTime):
        return Schema.timestamp(), _timestamp
    if isinstance(type_, sa.Date):
        return Schema.date(), _date
    if isinstance(type_, sa.Time):
        return Schema.time(), _time
    if isinstance(type_, sa.JSON):
        return Schema.STRING, _json
    if isinstance(type_, sa.String):
        return Schema.STRING, str
    if isinstance(type_, sa.LargeBinary | sa.BINARY | sa.VARBINARY):
        return Schema.BYTES, bytes
    return Schema.STRING, str


def is_integer(type_: sa.types.TypeEngine[Any]) -> bool:
    """Whether a column can be an incrementing column: an integer type, or a
    Numeric with scale 0 (Confluent accepts both)."""
    return isinstance(type_, sa.Integer) or (
        isinstance(type_, sa.Numeric) and not isinstance(type_, sa.Float) and type_.scale == 0)


def is_timestamp(type_: sa.types.TypeEngine[Any]) -> bool:
    """Whether a column can be a timestamp column: DateTime or Date."""
    return isinstance(type_, sa.DateTime | sa.Date)


def _integer(type_: sa.Integer) -> Schema:
    if isinstance(type_, sa.SmallInteger):
        return Schema.INT16
    if isinstance(type_, sa.BigInteger):
        return Schema.INT64
    return Schema.INT32


def _float(type_: sa.Float[Any], dialect_name: str) -> Schema:
    if dialect_name == "sqlite":
        return Schema.FLOAT64
    if isinstance(type_, sa.REAL) or (type_.precision is not None and type_.precision <= 24):
        return Schema.FLOAT32
    return Schema.FLOAT64


def _decimal(scale: int) -> Convert:
    quantum = decimal.Decimal(1).scaleb(-scale)

    def convert(value: Any) -> decimal.Decimal:
        # SQLite hands back floats; str() keeps their shortest exact decimal form.
        exact = value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
        return exact.quantize(quantum)
    return convert


def _timestamp(value: Any) -> datetime.datetime:
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            return value.astimezone(datetime.UTC).replace(tzinfo=None)
        return value
    if isinstance(value, datetime.date):
        return datetime.datetime.combine(value, datetime.time())
    raise TypeError(f"not a timestamp: {value!r}")


def _date(value: Any) -> datetime.date:
    return value.date() if isinstance(value, datetime.datetime) else value


def _time(value: Any) -> datetime.time:
    if isinstance(value, datetime.time) and value.tzinfo is not None:
        return value.replace(tzinfo=None)
    return value


def _json(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)
