"""Kafka Connect's JsonConverter, byte for byte.

For a value and its schema this writes exactly the bytes Connect 4.1's
``org.apache.kafka.connect.json.JsonConverter`` writes (Jackson, compact), which
``tests/converters/vectors/json.json`` checks against the Java converter:

* ``schemas.enable=true``: ``{"schema":...,"payload":...}``; the schema in
  Connect's JSON form, keys in Connect's order (``type``; ``items`` or ``keys``
  and ``values`` or ``fields``; ``optional``, ``name``, ``version``, ``doc``,
  ``parameters``, ``default``; a struct field's ``field`` last). False (this
  project's default; Connect's is true): the payload alone.
* Payload: ints as digits; FLOAT64 as ``Double.toString`` and FLOAT32 as
  ``Float.toString`` (``1.0E10``, ``1.0E-4``, ``0.1``), NaN and the infinities
  as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``; bytes as base64;
  Decimal as base64 of its unscaled two's complement (``decimal.format=BASE64``)
  or as a number at the schema's scale (``NUMERIC``); Date as days, Time as
  milliseconds of the day, Timestamp as epoch milliseconds; a map with string
  keys as an object, any other map as an array of ``[key, value]`` pairs; a
  null field with a default as the default (``replace.null.with.default``);
  strings escaped as Jackson does (``\\b \\t \\n \\f \\r``, other control
  characters as ``\\u001F`` with upper-case hex, a character beyond U+FFFF as
  its two UTF-16 surrogates ``\\uD83D\\uDE00``, a lone surrogate as
  ``\\uD800``; everything else, from U+007F up, as UTF-8).
* Without a schema, values are typed as Connect types Java values: ``dict`` a
  Map (pairs once a key is not a ``str``), ``list``/``tuple`` a List, ``str``,
  ``int`` a Long, ``float`` a Double, ``bool``, ``bytes`` a byte[]. A Struct,
  or a dataclass instance, is written with its own schema. Python values
  Connect has no schemaless form for are written as orjson always wrote them
  (datetime/date/time as ISO 8601, UUID as text, an Enum as its value); a
  Decimal needs a schema.

The schemaless path is the task loop's hot path: orjson writes the bytes in C,
and the output is checked with six C-level byte tests (``46 in out``: one
``memchr`` each) for the only things orjson writes differently from Jackson (a
float outside [1e-3, 1e7), ``null`` that may be a NaN, a control character
escape, a character beyond U+FFFF); a regex then looks closer, and only a real
difference has the value written again by the exact encoder. A bytes value
without a schema passes through (the package invariant; Connect would write it
as a base64 string). Values with a schema are compiled once per schema
(``schemas.cache.size``) into nested closures that build a tree orjson writes,
with Java's number text as ``orjson.Fragment``.

A value that does not match its schema raises DataException naming the topic
and the place (``Invalid field 'lines[1].price': ...``, from
:meth:`Schema.validate`).
"""

from __future__ import annotations

import binascii
import dataclasses
import datetime
import decimal
import enum
import math
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from connect_runtime.api.config_def import CaseInsensitiveValidString, ConfigDef, Importance, Width
from connect_runtime.api.config_def import Type as ConfigType
from connect_runtime.api.schema import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    Schema,
    SchemaType,
    Struct,
    infer,
)
from connect_runtime.converters import java
from connect_runtime.converters.base import BYTES_LIKE, Encoder, as_bytes
from connect_runtime.errors import DataException

SCHEMAS_ENABLE = "schemas.enable"
SCHEMAS_CACHE_SIZE = "schemas.cache.size"
DECIMAL_FORMAT = "decimal.format"
REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"

_dumps = orjson.dumps
_Fragment = orjson.Fragment
# Values that need the schema path (a dataclass gets its derived schema) or a
# decision of the exact encoder raise in the fast path instead of being written.
_FAST_OPTIONS = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
# orjson accepts integers up to 64 bits unsigned; larger ones are written as text.
_ORJSON_INTS = range(-(1 << 63), 1 << 64)

# Where orjson's output can differ from Jackson's. Each pattern starts with a
# literal, which keeps the regex engine fast, and runs only when a C byte test
# (`46 in out` and friends, below) has seen its first character.
_PLAIN_FLOAT = re.compile(rb"\.(?:(?<=\d{8}\.)|(?<=[^\d]0\.)000|(?<=^0\.)000)")  # >=1e7, <1e-3
_EXPONENT_PLUS = re.compile(rb"e\+(?<=\de\+)\d")  # orjson's 1e+16 (Java: 1.0E16)
_EXPONENT_MINUS = re.compile(rb"e-(?<=\de-)\d")  # orjson's 1e-7 (Java: 1.0E-7)
_NULL = re.compile(rb"null")  # None, or a NaN/infinity orjson wrote as null (Java: "NaN")
_LOWER_HEX_ESCAPE = re.compile(rb"\\u00[01][a-f]")  # Jackson writes \u001F
# A character beyond U+FFFF (4 bytes of UTF-8): Jackson writes its UTF-16 surrogates
# as escapes, \uD83D\uDE00 (JsonWriteFeature.COMBINE_UNICODE_SURROGATES_IN_UTF8 is off).
_ASTRAL = re.compile(rb"[\xf0-\xf4][\x80-\xbf]{3}")
_ESCAPE = re.compile(rb"\\(\\|u00[01][a-f])")  # an escaped backslash, or a fixable escape


def _upper_escape(match: re.Match[bytes]) -> bytes:
    found = match.group(1)
    return match.group(0) if found == b"\\" else b"\\u00" + found[3:].upper()


def _surrogate_escapes(code: int) -> str:
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def _escape_astral(match: re.Match[bytes]) -> bytes:
    return _surrogate_escapes(ord(match.group(0).decode())).encode("ascii")


def _schemaless_fast(value: Any, _dumps: Any = _dumps, _options: int = _FAST_OPTIONS) -> bytes:
    """The schemaless payload of ``value`` (the fast encoder of a JsonConverter
    with ``schemas.enable=false``); TypeError for what orjson refuses."""
    out: bytes = _dumps(value, None, _options)
    # One C test per byte that starts a difference: . - l \ +, and any non-ASCII.
    if 46 in out or 45 in out or 108 in out or 92 in out or 43 in out or not out.isascii():
        return _checked(out, value)
    return out


def _checked(out: bytes, value: Any) -> bytes:
    """``out`` if it is what Jackson writes for ``value``, else the exact encoding."""
    differs = (
        (46 in out and _PLAIN_FLOAT.search(out) is not None)
        or (45 in out and _EXPONENT_MINUS.search(out) is not None)
        or (43 in out and _EXPONENT_PLUS.search(out) is not None)
        or (92 in out and _LOWER_HEX_ESCAPE.search(out) is not None)
        or (not out.isascii() and _ASTRAL.search(out) is not None)
        or (108 in out and _NULL.search(out) is not None and _has_nonfinite(value)))
    return _finish(_plain(value, None)) if differs else out


_SCALARS = frozenset({str, int, bool, type(None)})


def _has_nonfinite(value: Any) -> bool:
    """Whether a NaN or an infinity hides in a value orjson accepted (it writes them
    as null, like None)."""
    kind = type(value)
    if kind is dict or (kind is not list and isinstance(value, Mapping)):
        items: Any = value.values()
    elif kind is list or isinstance(value, list | tuple):
        items = value
    elif isinstance(value, enum.Enum):
        return _has_nonfinite(value.value)
    else:
        return isinstance(value, float) and not math.isfinite(value)
    for item in items:
        kind = type(item)
        if kind is float:
            if item - item != 0.0:  # NaN and the infinities give NaN
                return True
        elif kind not in _SCALARS and _has_nonfinite(item):
            return True
    return False


def _finish(tree: Any) -> bytes:
    """The JSON of a tree of JSON-ready values, escaped as Jackson escapes."""
    try:
        out: bytes = _dumps(tree)
    except orjson.JSONEncodeError as e:
        if "surrogates" not in str(e):
            raise _Mismatch(f"cannot be written as JSON: {e}") from None
        out = _dumps(_escape_surrogates(tree))
    if 92 in out and _LOWER_HEX_ESCAPE.search(out) is not None:
        out = _ESCAPE.sub(_upper_escape, out)
    if not out.isascii():
        out = _ASTRAL.sub(_escape_astral, out)
    return out


def _escape_surrogates(tree: Any) -> Any:
    """``tree`` with each string holding a lone surrogate as a Fragment of Jackson's text."""
    if isinstance(tree, str):
        try:
            tree.encode()
        except UnicodeEncodeError:
            return _Fragment(_jackson_string(tree))
        return tree
    if isinstance(tree, dict):
        for key in tree:
            try:
                key.encode()
            except UnicodeEncodeError:
                raise _Mismatch(f"map key {key!r} holds a lone surrogate") from None
        return {k: _escape_surrogates(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [_escape_surrogates(v) for v in tree]
    return tree


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n",
                  "\f": "\\f", "\r": "\\r"}


def _jackson_string(text: str) -> str:
    """A JSON string literal as Jackson writes it, for text with lone surrogates."""
    # Pairs of surrogates are one character to Java: join them first.
    text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04X}")
        elif code > 0xFFFF:
            out.append(_surrogate_escapes(code))
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def _base64(raw: Any) -> str:
    return binascii.b2a_base64(raw, newline=False).decode("ascii")


def _double_node(x: float) -> Any:
    """A FLOAT64 (Java Double) for the tree: orjson writes this range as Java does."""
    if 1e-3 <= x < 1e7 or -1e7 < x <= -1e-3 or x == 0.0:
        return x
    text = java.double_text(x)
    return text if text in ("NaN", "Infinity", "-Infinity") else _Fragment(text)


def _float_node(x: float) -> Any:
    """A FLOAT32 (Java Float) for the tree; OverflowError beyond its range."""
    text = java.float_text(x)
    return text if text in ("NaN", "Infinity", "-Infinity") else _Fragment(text)


class _Mismatch(DataException):
    """A value does not fit its schema; the path grows as it propagates outwards."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = []

    def at(self, segment: str) -> _Mismatch:
        self.path.insert(0, segment)
        return self

    def place(self) -> str:
        text = ""
        for segment in self.path:
            text += segment if segment.startswith("[") or not text else "." + segment
        return f"field '{text}'" if text else "value"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _mismatch(schema: Schema, value: Any) -> _Mismatch:
    kind = (schema.name or "").rpartition(".")[2] if schema.name in _LOGICAL else \
        schema.type.value
    return _Mismatch(f"{type(value).__name__} {_short(value)} does not match a {kind} schema")


Node = Callable[[Any], Any]
"""A compiled encoder: a value of its schema (or None) -> a tree orjson writes."""

_INT_RANGES = {SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32,
               SchemaType.INT64: 64}
_LOGICAL = (DECIMAL, DATE, TIME, TIMESTAMP)


class _Compiler:
    """Turns schemas into encoders for one converter's settings (cached by identity)."""

    def __init__(self, numeric_decimals: bool, replace_null: bool) -> None:
        self.numeric_decimals = numeric_decimals
        self.replace_null = replace_null
        self._nodes: dict[int, tuple[Schema, Node]] = {}

    def clear(self) -> None:
        self._nodes.clear()

    def node(self, schema: Schema) -> Node:
        found = self._nodes.get(id(schema))
        if found is not None and found[0] is schema:
            return found[1]
        null_cell: list[Callable[[], Any]] = []
        built = self._build(schema, lambda: null_cell[0]())
        null_cell.append(self._null_policy(schema, built))
        self._nodes[id(schema)] = (schema, built)
        return built

    def _null_policy(self, schema: Schema, built: Node) -> Callable[[], Any]:
        """What a None of ``schema`` becomes: its default, null, or an error (Connect's order)."""
        if schema.default is not None and self.replace_null:
            default = built(schema.default)
            return lambda: default
        if schema.optional:
            return lambda: None
        why = (" (replace.null.with.default=false ignores its default)"
               if schema.default is not None else "")
        message = f"null for a required {schema.type.value} schema{why}"

        def refuse() -> Any:
            raise _Mismatch(message)
        return refuse

    def _build(self, schema: Schema, null: Callable[[], Any]) -> Node:
        if schema.name in _LOGICAL:  # Connect picks logical converters by name alone
            return self._logical(schema, null)
        kind = schema.type
        if kind in _INT_RANGES:
            return _int_node(schema, null)
        if kind is SchemaType.FLOAT64:
            return _float64_node(schema, null)
        if kind is SchemaType.FLOAT32:
            return _float32_node(schema, null)
        if kind is SchemaType.ARRAY:
            return self._array(schema, null)
        if kind is SchemaType.MAP:
            return self._map(schema, null)
        if kind is SchemaType.STRUCT:
            return self._struct(schema, null)
        return _simple_node(schema, null)

    def _logical(self, schema: Schema, null: Callable[[], Any]) -> Node:
        if schema.name == DECIMAL:
            scale, numeric = schema.scale, self.numeric_decimals

            def encode_decimal(v: Any) -> Any:
                if isinstance(v, decimal.Decimal):
                    try:
                        unscaled = java.decimal_unscaled(v, scale)
                    except ValueError as e:
                        raise _Mismatch(str(e)) from None
                    return (_Fragment(java.decimal_text(unscaled, scale)) if numeric
                            else _base64(java.decimal_bytes(unscaled)))
                if v is None:
                    return null()
                raise _mismatch(schema, v)
            return encode_decimal
        if schema.name == DATE:
            def encode_date(v: Any) -> Any:
                if type(v) is datetime.date or (isinstance(v, datetime.date)
                                                and not isinstance(v, datetime.datetime)):
                    return java.epoch_days(v)
                if v is None:
                    return null()
                raise _mismatch(schema, v)
            return encode_date
        kind = datetime.time if schema.name == TIME else datetime.datetime
        to_number = java.millis_of_day if schema.name == TIME else java.epoch_millis

        def encode_time(v: Any) -> Any:
            if isinstance(v, kind):
                return to_number(v)  # type: ignore[arg-type]
            if v is None:
                return null()
            raise _mismatch(schema, v)
        return encode_time

    def _array(self, schema: Schema, null: Callable[[], Any]) -> Node:
        assert schema.value_schema is not None
        item = self.node(schema.value_schema)

        def encode_array(v: Any) -> Any:
            if isinstance(v, list | tuple):
                try:
                    return [item(x) for x in v]
                except _Mismatch as e:
                    raise _locate(e, ((f"[{i}]", x) for i, x in enumerate(v)), item) from None
            if v is None:
                return null()
            raise _mismatch(schema, v)
        return encode_array

    def _map(self, schema: Schema, null: Callable[[], Any]) -> Node:
        assert schema.key_schema is not None and schema.value_schema is not None
        key, value = self.node(schema.key_schema), self.node(schema.value_schema)
        as_object = schema.key_schema.type is SchemaType.STRING

        def encode_map(v: Any) -> Any:
            if isinstance(v, Mapping):
                try:
                    if as_object:  # Jackson's asText() of the key: a null key is "null"
                        return {_text(key(k)): value(x) for k, x in v.items()}
                    return [[key(k), value(x)] for k, x in v.items()]
                except _Mismatch as e:
                    raise _locate_in_map(e, v, key, value) from None
            if v is None:
                return null()
            raise _mismatch(schema, v)
        return encode_map

    def _struct(self, schema: Schema, null: Callable[[], Any]) -> Node:
        fields = [(f.name, self.node(f.schema)) for f in schema.fields]

        def encode_struct(v: Any) -> Any:
            if type(v) is Struct and (v.schema is schema or v.schema == schema):
                # The values as set, without defaults: null fields follow replace.null.with.default.
                raw = v._values
                try:
                    return {name: encode(raw.get(name)) for name, encode in fields}
                except _Mismatch as e:
                    raise _locate(e, ((n, raw.get(n)) for n, _ in fields),
                                  dict(fields)) from None
            if v is None:
                return null()
            if isinstance(v, Struct):
                raise _Mismatch("a Struct of another schema (Connect: Mismatching schema.)")
            raise _mismatch(schema, v)
        return encode_struct


def _text(node: Any) -> Any:
    return "null" if node is None else node


def _locate(error: _Mismatch, items: Any, encode: Any) -> _Mismatch:
    """Add to ``error`` the first of ``(segment, value)`` that fails again."""
    for segment, item in items:
        try:
            (encode[segment] if isinstance(encode, dict) else encode)(item)
        except _Mismatch:
            return error.at(segment)
    return error


def _locate_in_map(error: _Mismatch, value: Mapping[Any, Any], key: Node,
                   encode: Node) -> _Mismatch:
    for k, v in value.items():
        for what, check, item in (("[{!r}] (its key)", key, k), ("[{!r}]", encode, v)):
            try:
                check(item)
            except _Mismatch:
                return error.at(what.format(k))
    return error


def _int_node(schema: Schema, null: Callable[[], Any]) -> Node:
    bits = _INT_RANGES[schema.type]
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def encode_int(v: Any) -> Any:
        if type(v) is int and low <= v <= high:
            return v
        if v is None:
            return null()
        if isinstance(v, int) and not isinstance(v, bool):
            if low <= v <= high:
                return int(v)
            raise _Mismatch(f"{v} is out of range for {schema.type.value}")
        raise _mismatch(schema, v)
    return encode_int


def _float64_node(schema: Schema, null: Callable[[], Any]) -> Node:
    def encode_double(v: Any) -> Any:
        if type(v) is float and (1e-3 <= v < 1e7 or -1e7 < v <= -1e-3):
            return v
        if v is None:
            return null()
        if isinstance(v, float | int) and not isinstance(v, bool):
            try:
                return _double_node(float(v))
            except OverflowError:
                raise _Mismatch(f"{v} is out of range for float64") from None
        raise _mismatch(schema, v)
    return encode_double


def _float32_node(schema: Schema, null: Callable[[], Any]) -> Node:
    def encode_float(v: Any) -> Any:
        if v is None:
            return null()
        if isinstance(v, float | int) and not isinstance(v, bool):
            try:
                return _float_node(float(v))
            except OverflowError:
                raise _Mismatch(f"{v} is out of range for float32") from None
        raise _mismatch(schema, v)
    return encode_float


def _simple_node(schema: Schema, null: Callable[[], Any]) -> Node:
    kind = schema.type
    if kind is SchemaType.BOOLEAN:
        def encode_boolean(v: Any) -> Any:
            if v is True or v is False:
                return v
            if v is None:
                return null()
            raise _mismatch(schema, v)
        return encode_boolean
    if kind is SchemaType.STRING:
        def encode_string(v: Any) -> Any:
            if isinstance(v, str):
                return v
            if v is None:
                return null()
            raise _mismatch(schema, v)
        return encode_string

    def encode_bytes(v: Any) -> Any:
        if isinstance(v, BYTES_LIKE):
            return _base64(v)
        if v is None:
            return null()
        raise _mismatch(schema, v)
    return encode_bytes


_SCHEMA_TYPE_NAMES = {
    SchemaType.INT8: "int8", SchemaType.INT16: "int16", SchemaType.INT32: "int32",
    SchemaType.INT64: "int64", SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double",
    SchemaType.BOOLEAN: "boolean", SchemaType.STRING: "string", SchemaType.BYTES: "bytes",
    SchemaType.ARRAY: "array", SchemaType.MAP: "map", SchemaType.STRUCT: "struct",
}


def _schema_tree(schema: Schema, compiler: _Compiler) -> dict[str, Any]:
    """Connect's JSON form of ``schema`` (``JsonConverter.asJsonSchema``), keys in its order."""
    tree: dict[str, Any] = {"type": _SCHEMA_TYPE_NAMES[schema.type]}
    if schema.type is SchemaType.ARRAY:
        assert schema.value_schema is not None
        tree["items"] = _schema_tree(schema.value_schema, compiler)
    elif schema.type is SchemaType.MAP:
        assert schema.key_schema is not None and schema.value_schema is not None
        tree["keys"] = _schema_tree(schema.key_schema, compiler)
        tree["values"] = _schema_tree(schema.value_schema, compiler)
    elif schema.type is SchemaType.STRUCT:
        tree["fields"] = [{**_schema_tree(f.schema, compiler), "field": f.name}
                          for f in schema.fields]
    tree["optional"] = schema.optional
    if schema.name is not None:
        tree["name"] = schema.name
    if schema.version is not None:
        tree["version"] = schema.version
    if schema.doc is not None:
        tree["doc"] = schema.doc
    if schema.parameters is not None:
        tree["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        tree["default"] = compiler.node(schema)(schema.default)
    return tree


@dataclasses.dataclass
class _Plan:
    """What a converter keeps per schema: its encoder and, once asked, its JSON."""

    schema: Schema
    encode: Node
    compiler: _Compiler
    _json: bytes | None = None

    def schema_json(self) -> bytes:
        if self._json is None:
            self._json = _finish(_schema_tree(self.schema, self.compiler))
        return self._json


StructPayload = Callable[[Schema, Any], Any]


def _plain(value: Any, struct_payload: StructPayload | None) -> Any:
    """The tree of a schemaless value, typed as Connect types Java values."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is int:
        return value if value in _ORJSON_INTS else _Fragment(str(value))
    if kind is float:
        return _double_node(value)
    if kind is dict:
        return _plain_map(value, struct_payload)
    if kind is list or kind is tuple:
        return [_plain(v, struct_payload) for v in value]
    return _plain_other(value, struct_payload)


def _plain_map(value: Mapping[Any, Any], struct_payload: StructPayload | None) -> Any:
    # Connect writes a schemaless Map as an object only when every key is a String.
    if all(isinstance(k, str) for k in value):
        return {str(k): _plain(v, struct_payload) for k, v in value.items()}
    return [[_plain(k, struct_payload), _plain(v, struct_payload)] for k, v in value.items()]


def _plain_other(value: Any, struct_payload: StructPayload | None) -> Any:
    if isinstance(value, BYTES_LIKE):
        return _base64(value)
    if isinstance(value, Struct) or (dataclasses.is_dataclass(value)
                                     and not isinstance(value, type)):
        if struct_payload is None:
            raise _Mismatch(f"a {type(value).__name__} needs its schema")
        schema, struct = (value.schema, value) if isinstance(value, Struct) else infer(value)
        assert schema is not None
        return struct_payload(schema, struct)
    if isinstance(value, enum.Enum):
        return _plain(value.value, struct_payload)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return _plain(int(value), struct_payload)
    if isinstance(value, float):
        return _double_node(float(value))
    if isinstance(value, Mapping):
        return _plain_map(value, struct_payload)
    if isinstance(value, list | tuple):
        return [_plain(v, struct_payload) for v in value]
    if isinstance(value, datetime.date | datetime.time | uuid.UUID):
        return value  # orjson's ISO 8601 / text, as before schemas existed
    if isinstance(value, decimal.Decimal):
        raise _Mismatch("a Decimal needs a schema (Schema.decimal(scale)): Connect has no "
                        "schemaless decimal")
    raise _Mismatch(f"{type(value).__name__} {_short(value)} has no JSON form without a "
                    "schema")


class JsonConverter:
    """Connect's JsonConverter (see the module docstring); ``schemas.enable`` defaults to false."""

    def __init__(self) -> None:
        self._schemas_enable = False
        self._cache_size = 1000
        self._compiler = _Compiler(numeric_decimals=False, replace_null=True)
        self._plans: dict[int, _Plan] = {}

    @staticmethod
    def config_def() -> ConfigDef:
        """Connect's JsonConverterConfig keys; only ``schemas.enable``'s default differs."""
        return (
            ConfigDef()
            .define(SCHEMAS_ENABLE, ConfigType.BOOLEAN, False, importance=Importance.HIGH,
                    documentation="Include schemas within each of the serialized values and "
                    "keys. Kafka Connect's default is true; connect-runtime's is false, "
                    "because most Python records carry no schema (docs/converters.md).",
                    group="Schemas", order_in_group=0, width=Width.MEDIUM,
                    display_name="Enable Schemas")
            .define(SCHEMAS_CACHE_SIZE, ConfigType.INT, 1000, importance=Importance.HIGH,
                    documentation="The maximum number of schemas that can be cached in this "
                    "converter instance.", group="Schemas", order_in_group=1,
                    width=Width.MEDIUM, display_name="Schema Cache Size")
            .define(DECIMAL_FORMAT, ConfigType.STRING, "BASE64",
                    CaseInsensitiveValidString.in_("BASE64", "NUMERIC"), Importance.LOW,
                    "Controls which format this converter will serialize decimals in. This "
                    "value is case insensitive and can be either 'BASE64' (default) or "
                    "'NUMERIC'", group="Serialization", order_in_group=0, width=Width.MEDIUM,
                    display_name="Decimal Format")
            .define(REPLACE_NULL_WITH_DEFAULT, ConfigType.BOOLEAN, True,
                    importance=Importance.LOW, documentation="Whether to replace fields that "
                    "have a default value and that are null to the default value. When set to "
                    "true, the default value is used, otherwise null is used.",
                    group="Serialization", order_in_group=1, width=Width.MEDIUM,
                    display_name="Replace null with default")
        )

    def configure(self, configs: dict[str, str], is_key: bool = False) -> None:
        values = self.config_def().parse(configs)
        self._schemas_enable = bool(values[SCHEMAS_ENABLE])
        self._cache_size = int(values[SCHEMAS_CACHE_SIZE])
        self._compiler = _Compiler(
            numeric_decimals=str(values[DECIMAL_FORMAT]).upper() == "NUMERIC",
            replace_null=bool(values[REPLACE_NULL_WITH_DEFAULT]))
        self._plans.clear()

    def _fast_encoder(self) -> Encoder | None:
        return None if self._schemas_enable else _schemaless_fast

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is not None:
            return self._with_schema(topic, schema, value)
        try:
            payload = _schemaless_fast(value)
        except (TypeError, _Mismatch):  # orjson.JSONEncodeError is a TypeError
            return self._schemaless(topic, value)
        if self._schemas_enable:
            return b'{"schema":null,"payload":' + payload + b"}"
        return payload

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None,
                            value: Any) -> bytes | None:
        """As ``from_connect``: Connect's JsonConverter is a header converter too."""
        return self.from_connect(topic, schema, value)

    def _schemaless(self, topic: str, value: Any) -> bytes:
        """A schemaless value the fast path refused: rare values, off the hot path."""
        # Bytes already serialized by the task pass through; a Struct or a
        # dataclass is written with its schema.
        if isinstance(value, BYTES_LIKE):
            return as_bytes(value)
        if isinstance(value, Struct):
            return self._with_schema(topic, value.schema, value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            schema, struct = infer(value)
            assert schema is not None
            return self._with_schema(topic, schema, struct)
        payload = self._exact(topic, None, value, lambda: _plain(value, self._payload))
        if self._schemas_enable:
            return b'{"schema":null,"payload":' + payload + b"}"
        return payload

    def _with_schema(self, topic: str, schema: Schema, value: Any) -> bytes:
        plan = self._plan(topic, schema)
        payload = self._exact(topic, schema, value, lambda: plan.encode(value))
        if not self._schemas_enable:
            return payload
        return b'{"schema":' + plan.schema_json() + b',"payload":' + payload + b"}"

    def _payload(self, schema: Schema, value: Any) -> Any:
        """The payload tree of a Struct found inside a schemaless value."""
        return self._compiler.node(schema)(value)

    def _exact(self, topic: str, schema: Schema | None, value: Any,
               tree: Callable[[], Any]) -> bytes:
        what = f"Converting {type(value).__name__} to JSON for topic {topic} failed"
        try:
            return _finish(tree())
        except _Mismatch as e:
            raise DataException(f"{what}: {_explain(schema, value, e)}") from None
        except RecursionError:
            raise DataException(f"{what}: it nests too deeply (or contains itself)") from None

    def _plan(self, topic: str, schema: Schema) -> _Plan:
        found = self._plans.get(id(schema))
        if found is not None and found.schema is schema:
            return found
        if len(self._plans) >= self._cache_size:
            self._plans.clear()
            self._compiler.clear()
        try:
            plan = _Plan(schema, self._compiler.node(schema), self._compiler)
        except DataException as e:
            raise DataException(f"Cannot convert values of this schema for topic {topic!r} "
                                f"to JSON: {e}") from e
        self._plans[id(schema)] = plan
        return plan


def _explain(schema: Schema | None, value: Any, error: _Mismatch) -> str:
    """Schema.validate's message for ``value`` where it has one, else the encoder's."""
    if schema is not None:
        try:
            schema.validate(value)
        except DataException as invalid:
            return str(invalid)
    return f"Invalid {error.place()}: {error.message}"

