"""TimestampConverter: timestamps between epoch numbers, strings and Connect's Date/Time/Timestamp.

The source representation comes from the schema (Timestamp, Date, Time logical
types; STRING is a string in ``format``; INT64 is a Unix time in
``unix.precision``) or, without a schema, from the Python value: ``datetime``
(Timestamp), ``date`` (Date), ``time`` (Time), ``int`` (Unix), ``str``
(``format``). Every conversion goes through epoch milliseconds in UTC, so
anything finer than a millisecond is lost, as in Connect. ``format`` is a Java
``SimpleDateFormat`` pattern (:mod:`.simple_date_format`).
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type, ValidString
from connect_runtime.api.schema import DATE, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    define_replace_null_with_default,
)
from connect_runtime.transforms.data import (
    MILLIS_PER_DAY,
    SchemaCache,
    field_value,
    from_millis,
    struct_like,
    to_millis,
)
from connect_runtime.transforms.simple_date_format import ParseError, SimpleDateFormat

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord

STRING, UNIX, DATE_TYPE, TIME_TYPE, TIMESTAMP_TYPE = "string", "unix", "Date", "Time", "Timestamp"
_LOGICAL = {DATE_TYPE: DATE, TIME_TYPE: TIME, TIMESTAMP_TYPE: TIMESTAMP}
_PER_MILLI = {"seconds": 0.001, "milliseconds": 1, "microseconds": 1_000,
              "nanoseconds": 1_000_000}


def _quotient(a: int, b: int) -> int:
    """Java's integer division (truncates toward zero), as ``TimeUnit`` conversions do."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass(frozen=True)
class _Representation:
    """How a timestamp is written: its type name and, for strings and unix, how to read it."""

    type: str
    format: SimpleDateFormat | None
    unix_precision: str

    def to_millis(self, value: Any) -> int:
        if self.type == STRING:
            if not isinstance(value, str):
                raise DataException(f"Expected string timestamp to be a str, but found "
                                    f"{type(value).__name__}")
            if self.format is None:
                raise DataException("A string timestamp needs 'format' to be read")
            try:
                return self.format.parse(value)
            except ParseError:
                raise DataException(f"Could not parse timestamp: value ({value}) does not "
                                    f"match pattern ({self.format.pattern})") from None
        if self.type == UNIX:
            if type(value) is not int:
                raise DataException(f"Expected Unix timestamp to be an int, but found "
                                    f"{type(value).__name__}")
            per_milli = _PER_MILLI[self.unix_precision]
            return value * 1000 if per_milli < 1 else _quotient(value, int(per_milli))
        expected: type[datetime.date | datetime.time] = {
            DATE_TYPE: datetime.date, TIME_TYPE: datetime.time,
            TIMESTAMP_TYPE: datetime.datetime}[self.type]
        if not isinstance(value, expected):
            raise DataException(f"Expected {self.type} to be a {expected.__name__}, but found "
                                f"{type(value).__name__}")
        return to_millis(value)

    def from_millis(self, millis: int) -> Any:
        if self.type == STRING:
            assert self.format is not None  # configure() requires it for this target
            return self.format.format(millis)
        if self.type == UNIX:
            per_milli = _PER_MILLI[self.unix_precision]
            return _quotient(millis, 1000) if per_milli < 1 else millis * int(per_milli)
        if self.type == DATE_TYPE:
            millis -= millis % MILLIS_PER_DAY
        return from_millis(millis, _LOGICAL[self.type])

    def schema(self, optional: bool) -> Schema:
        if self.type == STRING:
            return Schema(SchemaType.STRING, optional=optional)
        if self.type == UNIX:
            return Schema(SchemaType.INT64, optional=optional)
        build = {DATE_TYPE: Schema.date, TIME_TYPE: Schema.time,
                 TIMESTAMP_TYPE: Schema.timestamp}[self.type]
        return build(optional=optional)


@with_sides
class TimestampConverter(Sided):
    """Convert a timestamp field, or the whole key/value, to ``target.type``."""

    connect_name = f"{TRANSFORMS_PACKAGE}.TimestampConverter"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("field", Type.STRING, "", importance=Importance.HIGH,
                documentation="The field containing the timestamp, or empty if the entire "
                "value is a timestamp")
        .define("target.type", Type.STRING,
                validator=ValidString.in_(STRING, UNIX, DATE_TYPE, TIME_TYPE, TIMESTAMP_TYPE),
                importance=Importance.HIGH, documentation="The desired timestamp "
                "representation: string, unix, Date, Time, or Timestamp")
        .define("format", Type.STRING, "", importance=Importance.MEDIUM,
                documentation="A SimpleDateFormat-compatible format for the timestamp. Used to "
                "generate the output when type=string or used to parse the input if the input "
                "is a string.")
        .define("unix.precision", Type.STRING, "milliseconds",
                ValidString.in_("nanoseconds", "microseconds", "milliseconds", "seconds"),
                Importance.LOW, "The desired Unix precision for the timestamp: seconds, "
                "milliseconds, microseconds, or nanoseconds. Used to generate the output when "
                "type=unix or used to parse the input if the input is a Long.Note: This SMT "
                "will cause precision loss during conversions from, and to, values with "
                "sub-millisecond components."))

    def configured(self, values: dict[str, Any]) -> None:
        self._field: str = values["field"]
        pattern: str = values["format"]
        target: str = values["target.type"]
        if target == STRING and not pattern.strip():
            raise self.config_error("format", pattern, "TimestampConverter requires format "
                                    "option to be specified when using string timestamps")
        try:
            fmt = SimpleDateFormat(pattern) if pattern.strip() else None
        except ConfigException as e:
            raise self.config_error("format", pattern, "TimestampConverter requires a "
                                    "SimpleDateFormat-compatible pattern for string "
                                    f"timestamps: {e}") from None
        precision: str = values["unix.precision"]
        self._format, self._precision = fmt, precision
        self._target = _Representation(target, fmt, precision)
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def _of(self, type_name: str) -> _Representation:
        return _Representation(type_name, self._format, self._precision)

    def apply(self, record: SourceRecord) -> SourceRecord:
        schema, value = self.schema_of(record), self.value_of(record)
        if schema is None:
            if value is None or not self._field:
                return self.updated(record, None, self._convert(record, value, None))
            updated = dict(self.require_map(record, value, "converting timestamp formats"))
            updated[self._field] = self._convert(record, updated.get(self._field), None)
            return self.updated(record, None, updated)
        if not self._field:
            converted = self._convert(record, value, self._source(record, schema))
            return self.updated(record, self._target.schema(schema.optional), converted)
        struct = None if value is None else self.require_struct(
            record, value, "converting timestamp formats")
        new_schema = self._schemas.get(schema, lambda s: self._updated_schema(record, s))
        return self.updated(record, new_schema,
                            None if struct is None else self._convert_struct(record, struct,
                                                                             new_schema))

    def _convert(self, record: SourceRecord, value: Any, source: _Representation | None) -> Any:
        if value is None:
            return None
        source = source or self._inferred(record, value)
        try:
            return self._target.from_millis(source.to_millis(value))
        except (DataException, OverflowError, ValueError) as e:
            where = f"field {self._field!r}: " if self._field else ""
            raise self.data_error(record, f"{where}{e}") from None

    def _inferred(self, record: SourceRecord, value: Any) -> _Representation:
        for python_type, name in ((datetime.datetime, TIMESTAMP_TYPE),
                                  (datetime.date, DATE_TYPE), (datetime.time, TIME_TYPE),
                                  (str, STRING)):
            if isinstance(value, python_type):
                return self._of(name)
        if type(value) is int:
            return self._of(UNIX)
        raise self.data_error(record, f"TimestampConverter does not support "
                              f"{type(value).__name__} values as timestamps")

    def _source(self, record: SourceRecord, schema: Schema) -> _Representation:
        for type_name, logical in _LOGICAL.items():
            if schema.name == logical:
                return self._of(type_name)
        if schema.type is SchemaType.STRING:
            return self._of(STRING)
        if schema.type is SchemaType.INT64:
            return self._of(UNIX)
        raise self.data_error(record, f"a {schema.type.value} schema "
                              f"{'(' + schema.name + ') ' if schema.name else ''}does not "
                              "correspond to a known timestamp type format")

    def _updated_schema(self, record: SourceRecord, schema: Schema) -> Schema:
        fields = [(f.name, self._target.schema(f.schema.optional) if f.name == self._field
                   else f.schema) for f in schema.fields]
        updated = struct_like(schema, fields).replace(optional=schema.optional)
        if isinstance(schema.default, Struct):
            updated = updated.replace(default=self._convert_struct(record, schema.default,
                                                                   updated))
        return updated

    def _convert_struct(self, record: SourceRecord, struct: Struct, schema: Schema) -> Struct:
        values = {}
        for field in struct.schema.fields:
            value = field_value(struct, field.name, self._with_default)
            if field.name == self._field:
                value = self._convert(record, value, self._source(record, field.schema))
            values[field.name] = value
        return Struct(schema, values)
