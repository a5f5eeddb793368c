"""Cast: fields, or the whole key/value, to another primitive type, with Java's conversions.

Casting follows Connect's ``Cast``, which uses Java's rules, so a config moved
from Connect gives the same data:

* to an integer type: ints wrap to the width (300 as int8 is 44), floats are
  truncated toward zero (saturating at 32 bits, or 64 for int64, then
  wrapping), booleans are 1/0, strings must be decimal integers in range;
* to float32: rounded to single precision; to boolean: a number is true unless
  it truncates to 0, a string is true only for ``true`` (any case);
* to string: booleans are ``true``/``false``, floats are written like Java's
  ``Double.toString`` (``1.0E20``), bytes as base64, Date/Time/Timestamp values
  like Connect's ``Values.dateFormatFor`` in UTC;
* Date, Time and Timestamp values cast to a number become their Connect
  encoding (days, ms since midnight, epoch ms); Decimal values truncate.

Only INT8..FLOAT64, BOOLEAN, STRING and BYTES values can be cast, and BYTES only
to string. Without a schema, values are typed by their Python type (an ``int``
is INT64); other types are a DataException.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import math
import re
import struct as binary
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type
from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    Described,
    define_replace_null_with_default,
    java_split,
)
from connect_runtime.transforms.data import MILLIS_PER_DAY, SchemaCache, struct_like, to_millis

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord

_T = SchemaType
_OUTPUT = (_T.INT8, _T.INT16, _T.INT32, _T.INT64, _T.FLOAT32, _T.FLOAT64, _T.BOOLEAN,
           _T.STRING)
_INPUT = (*_OUTPUT, _T.BYTES)
_FLOATS = (_T.FLOAT32, _T.FLOAT64)
_BITS = {_T.INT8: 8, _T.INT16: 16, _T.INT32: 32, _T.INT64: 64}
_LOGICAL_TIMES = (DATE, TIME, TIMESTAMP)
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)"
                         r"[fFdD]?")


def _listed(types: tuple[SchemaType, ...]) -> str:
    return "[" + ", ".join(t.name for t in types) + "]"


def parse_spec(mappings: list[str], key: str = "spec") -> tuple[SchemaType | None,
                                                                dict[str, SchemaType]]:
    """``field:type,...`` or a single ``type`` -> (whole-value type, field types).

    ConfigException (Connect's messages) for an empty spec, an unknown type, a type
    casts cannot produce, or a whole-value type mixed with other casts.
    """
    if not mappings:
        raise ConfigException("Must specify at least one field to cast.")
    whole: SchemaType | None = None
    fields: dict[str, SchemaType] = {}
    for mapping in mappings:
        parts = java_split(mapping, ":")
        if len(parts) > 2:
            raise ConfigException(f"Invalid cast mapping: {mapping}", name=key, value=mappings)
        if len(parts) == 1:
            whole = _output_type(parts[0])
        else:
            fields[parts[0].strip()] = _output_type(parts[1])
    if whole is not None and len(mappings) > 1:
        raise ConfigException("Cast transformations that specify a type to cast the entire "
                              "value to may only specify a single cast in their spec")
    return whole, fields


def _output_type(name: str) -> SchemaType:
    try:
        found = SchemaType[name.strip().upper()]
    except KeyError:
        raise ConfigException(f"Invalid type found in casting spec: {name.strip()}") from None
    if found not in _OUTPUT:
        raise ConfigException(f"Cast transformation does not support casting to {found.name}; "
                              f"supported types are {_listed(_OUTPUT)}")
    return found


@with_sides
class Cast(Sided):
    """Cast fields, or the entire key/value, to another type (see the module docstring)."""

    connect_name = f"{TRANSFORMS_PACKAGE}.Cast"
    CONFIG_DEF = define_replace_null_with_default(ConfigDef().define(
        "spec", Type.LIST, validator=Described(
            lambda name, value: parse_spec(value, name),
            "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"),
        importance=Importance.HIGH,
        documentation="List of fields and the type to cast them to of the form "
        "field1:type,field2:type to cast fields of Maps or Structs. A single type to cast "
        "the entire value. Valid types are int8, int16, int32, int64, float32, float64, "
        "boolean, and string. Note that binary fields can only be cast to string."))

    def configured(self, values: dict[str, Any]) -> None:
        self._whole, self._casts = parse_spec(values["spec"], self.key_prefix + "spec")
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]
        self._schemas = SchemaCache()

    def apply(self, record: SourceRecord) -> SourceRecord:
        value = self.value_of(record)
        if value is None:
            return record
        schema = self.schema_of(record)
        if schema is None:
            return self.updated(record, None, self._cast_schemaless(record, value))
        updated = self._schemas.get(
            schema, lambda s: self._guarded(record, self._updated_schema, s))
        whole = self._whole
        if whole is not None:
            return self.updated(record, updated, self._guarded(
                record, lambda v: cast_value(schema, v, whole), value))
        struct = self.require_struct(record, value, "cast types")
        return self.updated(record, updated, self._guarded(
            record, lambda s: self._cast_struct(s, updated), struct))

    def _guarded(self, record: SourceRecord, cast: Callable[[Any], Any], value: Any) -> Any:
        """``cast(value)``; a DataException from it names this transform and the topic."""
        try:
            return cast(value)
        except DataException as e:
            raise self.data_error(record, str(e)) from e

    def _cast_schemaless(self, record: SourceRecord, value: Any) -> Any:
        whole = self._whole
        if whole is not None:
            return self._guarded(record, lambda v: cast_value(None, v, whole), value)
        data: Mapping[str, Any] = self.require_map(record, value, "cast types")
        updated = dict(data)
        for name, target in self._casts.items():
            updated[name] = self._guarded(
                record, functools.partial(_cast_field, name, None, target=target),
                data.get(name))
        return updated

    def _cast_struct(self, struct: Struct, updated: Schema) -> Struct:
        values = {}
        for field in struct.schema.fields:
            value = struct.get(field.name) if self._with_default else struct[field.name]
            target = self._casts.get(field.name)
            values[field.name] = value if target is None else _cast_field(
                field.name, field.schema, value, target)
        return Struct(updated, values)

    def _updated_schema(self, schema: Schema) -> Schema:
        if self._whole is not None:
            basics: dict[str, Any] = {"name": schema.name, "version": schema.version,
                                      "doc": schema.doc, "parameters": schema.parameters}
            if schema.name in (*_LOGICAL_TIMES, DECIMAL):
                # The result is no longer that logical type (Connect keeps the name, and
                # then fails to convert the value it made).
                basics.update(name=None, version=None, parameters=None)
            default = cast_value(schema, schema.default, self._whole)
            return Schema(self._whole, optional=schema.optional, default=default, **basics)
        fields = []
        for field in schema.fields:
            target = self._casts.get(field.name)
            if target is None:
                fields.append((field.name, field.schema))
                continue
            default = _cast_field(field.name, field.schema, field.schema.default, target)
            fields.append((field.name, Schema(target, optional=field.schema.optional,
                                              default=default)))
        updated = struct_like(schema, fields).replace(optional=schema.optional)
        if isinstance(schema.default, Struct):
            updated = updated.replace(default=self._cast_struct(schema.default, updated))
        return updated


def _cast_field(name: str, schema: Schema | None, value: Any, target: SchemaType) -> Any:
    """:func:`cast_value`; a DataException names field ``name``."""
    try:
        return cast_value(schema, value, target)
    except DataException as e:
        raise DataException(f"field {name!r}: {e}") from e


def cast_value(schema: Schema | None, value: Any, target: SchemaType) -> Any:
    """``value`` (of ``schema``, or typed by its Python type) cast to ``target``."""
    if value is None:
        return None
    source = schema.type if schema is not None else _python_type(value)
    if source is None:
        raise DataException(f"Cast transformation was passed a value of type "
                            f"{type(value).__name__} which is not supported by Connect's "
                            "data API")
    if source not in _INPUT:
        raise DataException(f"Cast transformation does not support casting from "
                            f"{source.name}; supported types are {_listed(_INPUT)}")
    if schema is not None and schema.name in _LOGICAL_TIMES and target is not _T.STRING:
        value = _encoded(schema.name, value)
    try:
        if target in _BITS:
            return _to_int(value, _BITS[target])
        if target is _T.FLOAT32:
            return _to_float32(_to_float(value))
        if target is _T.FLOAT64:
            return _to_float(value)
        if target is _T.BOOLEAN:
            return _to_boolean(value)
        return _to_string(value, schema)
    except (ValueError, OverflowError):
        raise DataException(f"Value ({value}) was out of range for requested data type "
                            f"{target.name}") from None


def _python_type(value: Any) -> SchemaType | None:
    """Connect's ``ConnectSchema.schemaType`` for a schemaless value."""
    for types, found in ((bool, _T.BOOLEAN), (int, _T.INT64), (float, _T.FLOAT64),
                         (str, _T.STRING), ((bytes, bytearray, memoryview), _T.BYTES),
                         ((list, tuple), _T.ARRAY), (Mapping, _T.MAP), (Struct, _T.STRUCT)):
        if isinstance(value, types):
            return found
    return None


def _encoded(logical: str, value: Any) -> int:
    """A Date, Time or Timestamp value as Connect encodes it (days / ms / epoch ms)."""
    millis = to_millis(value)
    return millis // MILLIS_PER_DAY if logical == DATE else millis


def _unexpected(value: Any) -> DataException:
    return DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")


def _wrap(number: int, bits: int) -> int:
    """Java's narrowing of an integer to ``bits`` (two's complement)."""
    number &= (1 << bits) - 1
    return number - (1 << bits) if number >> (bits - 1) else number


def _truncated(value: float, bits: int) -> int:
    """Java's narrowing of a float to ``bits``: truncate, saturate at int/long, wrap."""
    if math.isnan(value):
        return 0
    wide = 64 if bits == 64 else 32
    limit = 1 << (wide - 1)
    number = max(-limit, min(limit - 1, int(value))) if math.isfinite(value) else (
        limit - 1 if value > 0 else -limit)
    return _wrap(number, bits)


def _to_int(value: Any, bits: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return _wrap(value, bits)
    if isinstance(value, float):
        return _truncated(value, bits)
    if isinstance(value, decimal.Decimal):
        return _wrap(int(value), bits)
    if isinstance(value, str):
        if not _JAVA_INT.fullmatch(value) or _wrap(int(value), bits) != int(value):
            raise ValueError(value)
        return int(value)
    raise _unexpected(value)


def _to_float(value: Any) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float | decimal.Decimal):
        try:
            return float(value)
        except OverflowError:
            return math.copysign(math.inf, value)
    if isinstance(value, str):
        text = value.strip()
        if not _JAVA_FLOAT.fullmatch(text):
            raise ValueError(value)
        return float(text.rstrip("fFdD").replace("Infinity", "inf"))
    raise _unexpected(value)


def _to_float32(value: float) -> float:
    """Round to single precision, as Java's ``floatValue`` (overflow gives infinity)."""
    try:
        return float(binary.unpack("f", binary.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _to_boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, float):
        return _truncated(value, 64) != 0
    if isinstance(value, int | decimal.Decimal):
        return _wrap(int(value), 64) != 0
    if isinstance(value, str):
        return value.lower() == "true"
    raise _unexpected(value)


def _to_string(value: Any, schema: Schema | None) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    source = None if schema is None else schema.type
    if isinstance(value, float) or (isinstance(value, int) and source in _FLOATS):
        return java_float_string(float(value), source is _T.FLOAT32)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.date | datetime.time):
        return _date_string(to_millis(value))
    return str(value)


def _date_string(millis: int) -> str:
    """Connect's ``Values.dateFormatFor`` in UTC: a time, a date or a timestamp."""
    moment = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC) + datetime.timedelta(
        milliseconds=millis)
    time = f"{moment:%H:%M:%S}.{millis % 1000:03d}Z"
    if 0 <= millis < MILLIS_PER_DAY:
        return time
    if millis % MILLIS_PER_DAY == 0:
        return f"{moment:%Y-%m-%d}"
    return f"{moment:%Y-%m-%d}T{time}"


def java_float_string(value: float, single: bool = False) -> str:
    """Java's ``Double.toString`` (or ``Float.toString`` with ``single``): shortest digits,
    ``1.0E10`` notation outside [1e-3, 1e7), ``NaN``, ``Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    sign, digits, exponent = decimal.Decimal(_shortest(value, single)).as_tuple()
    assert isinstance(exponent, int)
    text = "".join(map(str, digits)).rstrip("0") or "0"
    point = len(digits) + exponent  # digits before the decimal point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            body = "0." + "0" * -point + text
        elif point >= len(text):
            body = text + "0" * (point - len(text)) + ".0"
        else:
            body = text[:point] + "." + text[point:]
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{point - 1}"
    return ("-" if sign else "") + body


def _shortest(value: float, single: bool) -> str:
    if not single:
        return repr(value)
    for precision in range(1, 10):
        text = f"{value:.{precision}g}"
        if _to_float32(float(text)) == value:
            return text
    return repr(value)
