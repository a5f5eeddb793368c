"""Avro's binary encoding of Connect values, compiled once per Connect schema.

The converter's hot path: one call per record, writing straight into a
``bytearray`` from the Struct's values, with no intermediate dict. Its bytes
are the Avro specification's binary encoding of the value under the schema
:mod:`.avro` registers for the Connect schema (the tests compare them with
fastavro's for the same values), which is also what Confluent's converter
writes:

* int and long: zig-zag varints (an INT8..INT32 value outside the 32-bit range
  is refused, not wrapped); float and double: 4 and 8 bytes little-endian;
  boolean: one byte; string and bytes: a length, then the bytes (UTF-8);
* array and map: one block of ``len`` items (keys first for a map), then 0;
  an empty one is the single 0;
* an optional schema is a union: its branch index, then the value: ``["null", T]``
  for one without a default (a None writes 0), ``[T, "null"]`` for one with a
  default (a None is the default, Connect's ``Struct.get``);
* a record: its fields in order, a None field taking its schema's default;
* Decimal: the unscaled value's big-endian two's complement as bytes; Date,
  Time and Timestamp: Connect's numbers.

Why not fastavro's ``schemaless_writer``: it re-reads the (parsed) schema's
names and sets up an encoder on every call, about 3 µs a record of six fields,
more than the encoding itself. fastavro still encodes for
``use.latest.version`` (a registered schema that is not ours) and decodes in
the tests.

A value of the wrong type raises TypeError, ValueError or AttributeError; the
converter then explains it with ``Schema.validate``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.converters import java

Write = Callable[[bytearray, Any], None]

_FLOAT = struct.Struct("<f").pack
_DOUBLE = struct.Struct("<d").pack
_INT32 = (-(2 ** 31), 2 ** 31)
# The zig-zag varints of 0..63 (one byte each): most lengths and many numbers.
_SMALL = [bytes([n << 1]) for n in range(64)]


def write_long(out: bytearray, n: int) -> None:
    """Avro's zig-zag varint of ``n`` (int or long)."""
    if 0 <= n < 64:
        out += _SMALL[n]
        return
    z = (n << 1) ^ (n >> 63) if n >= -(2 ** 63) else _too_wide(n)
    if z >= 2 ** 64:
        _too_wide(n)
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)


def _too_wide(n: int) -> int:
    raise ValueError(f"{n} does not fit in a 64-bit long")


def _write_int(out: bytearray, n: int) -> None:
    if not _INT32[0] <= n < _INT32[1]:
        raise ValueError(f"{n} does not fit in a 32-bit int")
    write_long(out, n)


def _write_bytes(out: bytearray, data: bytes) -> None:
    write_long(out, len(data))
    out += data


def _write_string(out: bytearray, text: str) -> None:
    data = text.encode("utf-8")
    write_long(out, len(data))
    out += data


def _write_boolean(out: bytearray, v: bool) -> None:
    if v is not True and v is not False:
        raise TypeError(f"{type(v).__name__} is not a boolean")
    out.append(1 if v else 0)


def _write_float(out: bytearray, v: float) -> None:
    out += _FLOAT(v)


def _write_double(out: bytearray, v: float) -> None:
    out += _DOUBLE(v)


def _write_raw_bytes(out: bytearray, v: Any) -> None:
    _write_bytes(out, v if type(v) is bytes else bytes(v))


def compile_writer(schema: Schema, optional_map_keys: bool = False) -> Write:
    """The writer of values of ``schema`` (see the module docstring);
    ``optional_map_keys`` is the converter's ``allow.optional.map.keys``."""
    inner = _non_null(schema, optional_map_keys)
    if not schema.optional:
        return inner
    if schema.default is not None:  # [T, "null"]: a None is the default, branch 0
        default = schema.default

        def with_default(out: bytearray, v: Any) -> None:
            out.append(0)
            inner(out, default if v is None else v)
        return with_default

    def nullable(out: bytearray, v: Any) -> None:  # ["null", T]
        if v is None:
            out.append(0)
        else:
            out.append(2)  # the zig-zag of branch 1
            inner(out, v)
    return nullable


def _non_null(schema: Schema, optional_map_keys: bool) -> Write:
    kind = schema.type
    if schema.name == DECIMAL:
        scale = schema.scale

        def decimal(out: bytearray, v: Any) -> None:
            _write_bytes(out, java.decimal_bytes(java.decimal_unscaled(v, scale)))
        return decimal
    if schema.name in (DATE, TIME):
        to_int = java.epoch_days if schema.name == DATE else java.millis_of_day
        return lambda out, v: write_long(out, to_int(v))
    if schema.name == TIMESTAMP:
        return lambda out, v: write_long(out, java.epoch_millis(v))
    simple = _SIMPLE.get(kind)
    if simple is not None:
        return simple
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return _array(compile_writer(schema.value_schema, optional_map_keys))
    if kind is SchemaType.MAP:
        return _map(schema, optional_map_keys)
    return _record(schema, optional_map_keys)


_SIMPLE: dict[SchemaType, Write] = {
    SchemaType.INT8: _write_int, SchemaType.INT16: _write_int, SchemaType.INT32: _write_int,
    SchemaType.INT64: write_long, SchemaType.FLOAT32: _write_float,
    SchemaType.FLOAT64: _write_double, SchemaType.BOOLEAN: _write_boolean,
    SchemaType.STRING: _write_string, SchemaType.BYTES: _write_raw_bytes}


def _array(item: Write) -> Write:
    def array(out: bytearray, v: Any) -> None:
        if len(v):
            write_long(out, len(v))
            for x in v:
                item(out, x)
        out.append(0)
    return array


def _map(schema: Schema, optional_map_keys: bool) -> Write:
    """An Avro map (STRING keys), or an array of MapEntry records (other keys): the
    same bytes either way, a block of keys and values."""
    keys, values = schema.key_schema, schema.value_schema
    assert keys is not None and values is not None
    value = compile_writer(values, optional_map_keys)
    key = (_write_string if keys.type is SchemaType.STRING
           and (not keys.optional or optional_map_keys)
           else compile_writer(keys, optional_map_keys))

    def entries(out: bytearray, v: Any) -> None:
        if len(v):
            write_long(out, len(v))
            for k, x in v.items():
                key(out, k)
                value(out, x)
        out.append(0)
    return entries


def _record(schema: Schema, optional_map_keys: bool) -> Write:
    fields = [(f.name, compile_writer(f.schema, optional_map_keys), f.schema.default)
              for f in schema.fields]

    def record(out: bytearray, v: Any) -> None:
        if type(v) is not Struct:
            raise TypeError(f"a struct needs a Struct, not {type(v).__name__}")
        raw = v._values  # the values as set; a None takes the field's default
        for name, write, default in fields:
            item = raw.get(name)
            write(out, default if item is None and default is not None else item)
    return record
