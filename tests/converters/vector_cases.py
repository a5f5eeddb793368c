"""The converter test cases, defined once: generate_vectors.py runs each through
Kafka Connect's own converter and stores the bytes next to the case in
``vectors/*.json``; test_connect_vectors.py runs the same case through ours.

A case is ``(name, schema, value)`` in the interchange form of
:mod:`vector_interchange`, plus the converter class and the configs to run it with.
The random floats are drawn from a fixed seed, so regenerating gives the same cases.
"""

from __future__ import annotations

import base64
import random
import struct as _struct
from collections.abc import Iterator
from typing import Any

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY = "org.apache.kafka.connect.converters.ByteArrayConverter"
SIMPLE_HEADER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"
NUMBER_CONVERTERS = {
    "org.apache.kafka.connect.converters.ShortConverter": "int16",
    "org.apache.kafka.connect.converters.IntegerConverter": "int32",
    "org.apache.kafka.connect.converters.LongConverter": "int64",
    "org.apache.kafka.connect.converters.FloatConverter": "float",
    "org.apache.kafka.connect.converters.DoubleConverter": "double",
    "org.apache.kafka.connect.converters.BooleanConverter": "boolean",
}

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"

Case = dict[str, Any]
RAISES = "raises DataException"
UNCHANGED = "returns the bytes unchanged"

SCHEMAS_ON = {"schemas.enable": "true"}
SCHEMAS_OFF = {"schemas.enable": "false"}
BOTH = [SCHEMAS_ON, SCHEMAS_OFF]
NUMERIC = [{**c, "decimal.format": "NUMERIC"} for c in BOTH]
KEEP_NULLS = [{**c, "replace.null.with.default": "false"} for c in BOTH]


def s(kind: str, optional: bool = False, **meta: Any) -> dict[str, Any]:
    """A schema node: ``s("int32")``, ``s("string", True, doc="...")``."""
    node: dict[str, Any] = {"type": kind, "optional": optional}
    node.update({k: v for k, v in meta.items() if v is not None})
    return node


def decimal(scale: int, optional: bool = False, **meta: Any) -> dict[str, Any]:
    params = {"scale": str(scale), **meta.pop("parameters", {})}
    return s("bytes", optional, name=DECIMAL, version=1, parameters=params, **meta)


def logical(kind: str, name: str, optional: bool = False, **meta: Any) -> dict[str, Any]:
    return s(kind, optional, name=name, version=1, **meta)


def array(items: dict[str, Any], optional: bool = False, **meta: Any) -> dict[str, Any]:
    return {"type": "array", "items": items, "optional": optional, **meta}


def map_of(keys: dict[str, Any], values: dict[str, Any], optional: bool = False,
           **meta: Any) -> dict[str, Any]:
    return {"type": "map", "keys": keys, "values": values, "optional": optional, **meta}


def struct(fields: dict[str, dict[str, Any]], optional: bool = False,
           **meta: Any) -> dict[str, Any]:
    return {"type": "struct", "fields": [{**f, "field": n} for n, f in fields.items()],
            "optional": optional, **{k: v for k, v in meta.items() if v is not None}}


def case(name: str, schema: dict[str, Any] | None, value: Any, *, cls: str = JSON,
         configs: list[dict[str, str]] | None = None, kind: str = "converter",
         header_key: str = "h", deviation: dict[str, str] | None = None) -> Case:
    """A case. ``deviation`` marks a documented difference (docs/converters.md):
    ``{"reason": why, "ours": RAISES or UNCHANGED}`` says what ours does instead."""
    return {"name": name, "class": cls, "kind": kind, "schema": schema, "value": value,
            "configs": configs if configs is not None else ([{}] if cls != JSON else BOTH),
            "header_key": header_key, "deviation": deviation}


def b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


EDGE_DOUBLES = [
    0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 100.0, 1234567.0, 9999999.0, 9999999.999999998, 1e7,
    -1e7, 12345678.0, 123456789.125, 1e15, 1e16, 1.0e22, 1.0e23, 2e23, 1.5e300,
    1.7976931348623157e308, 1e-3, 0.0009999999999999998, -1e-3, 1e-4, 1.2345e-4, 1e-5, 1e-7,
    1.5e-10, 2.2250738585072014e-308, 2.225073858507201e-308, 5e-324, 1e-323, 4.5e-323,
    1 / 3, 2 / 3, 0.30000000000000004, 3.141592653589793, 2.718281828459045, 1e21, 123e18,
]
SPECIAL = ["NaN", "Infinity", "-Infinity"]
EDGE_FLOATS = [
    0.0, -0.0, 0.1, 1.0, 0.33333334, 1e7, 9999999.0, 16777216.0, 1e10, 123456.79, 1e-3,
    1e-4, 1.0e-5, 3.4028234663852886e38, 1.17549435e-38, 1.401298464324817e-45, 1e-45,
    2.8e-45, 1.0e-40, 3.1415927, 0.2, 0.7, 1e-10, 8.589973e9, 2e-3,
]


def _random_doubles(seed: int, count: int) -> list[float]:
    rng = random.Random(seed)
    out: list[float] = []
    while len(out) < count:
        x = _struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if x == x and abs(x) != float("inf"):
            out.append(x)
    return out


def _random_scaled_doubles(seed: int, count: int) -> list[float]:
    """Doubles spread over the magnitudes where the notation switches (1e-5..1e9)."""
    rng = random.Random(seed)
    return [rng.choice((1, -1)) * rng.random() * 10 ** rng.uniform(-5, 9) for _ in range(count)]


def _random_floats(seed: int, count: int) -> list[float]:
    """Float32 values (as the doubles they are exactly), all exponents."""
    rng = random.Random(seed)
    out: list[float] = []
    while len(out) < count:
        x = _struct.unpack("<f", rng.getrandbits(32).to_bytes(4, "little"))[0]
        if x == x and abs(x) != float("inf"):
            out.append(x)
    return out


STRINGS = [
    "", "hello", "héllo wörld", "☃ snow", "emoji 😀 and 中文", "\x00\x01\x02\x07\x08",
    "\t\n\x0b\x0c\r\x0e\x0f\x10\x1a\x1b\x1f", "\x7f\x80\x9f", "quote \" backslash \\ slash /",
    "line\u2028sep\u2029para", "\ufeffbom", "</script>", "literal \\u001f text",
    "tab\there", "a\\nb",
]


def _json_primitive_cases() -> Iterator[Case]:
    for kind, values in [("int8", [-128, -1, 0, 127]), ("int16", [-32768, 32767]),
                         ("int32", [-2147483648, 0, 2147483647]),
                         ("int64", [-9223372036854775808, 9223372036854775807, 1234567890123])]:
        for v in values:
            yield case(f"{kind} {v}", s(kind), v)
    for v in EDGE_DOUBLES:
        yield case(f"double {v!r}", s("double"), v)
    for v in SPECIAL:
        yield case(f"double {v}", s("double"), v)
    for v in EDGE_FLOATS:
        yield case(f"float {v!r}", s("float"), v)
    for v in SPECIAL:
        yield case(f"float {v}", s("float"), v)
    for v in (True, False):
        yield case(f"boolean {v}", s("boolean"), v)
    for i, text in enumerate(STRINGS):
        yield case(f"string {i}: {text!r}", s("string"), text)
    yield case("string with a lone surrogate", s("string"), "a\ud800b")
    for raw in (b"", b"\x00\x01\xfe\xff", bytes(range(256))):
        yield case(f"bytes of {len(raw)}", s("bytes"), b64(raw))
    yield case("optional int32 with metadata", s("int32", True, name="my.Int", version=7,
                                                 doc="a doc", parameters={"z": "1", "a": "2"}),
               42)


def _json_float_sweeps() -> Iterator[Case]:
    for i in range(4):
        values = _random_doubles(1000 + i, 50)
        yield case(f"random doubles {i}", array(s("double")), values)
    for i in range(4):
        values = _random_scaled_doubles(2000 + i, 50)
        yield case(f"random doubles near the notation switch {i}", array(s("double")), values)
    for i in range(4):
        values = _random_floats(3000 + i, 50)
        yield case(f"random floats {i}", array(s("float")), values)


def _json_logical_cases() -> Iterator[Case]:
    for scale, values in [(2, ["1.50", "-1.50", "0.00", "12345678901234567890.12", "0.01",
                               "-0.01", "1.28", "-1.28", "327.68"]),
                          (0, ["0", "127", "128", "-128", "-129", "255", "256", "-1"]),
                          (20, ["0.00000000000000000001", "1.00000000000000000000"]),
                          (-2, ["1.2E+3", "0E+2"]), (5, ["-0.00001", "99999.99999"])]:
        for v in values:
            yield case(f"decimal({scale}) {v}", decimal(scale), v, configs=BOTH + NUMERIC)
    for v in ["1970-01-01", "2024-02-29", "1969-12-31", "1582-10-15", "1000-06-15",
              "0001-01-01", "9999-12-31"]:
        yield case(f"date {v}", logical("int32", DATE), v)
    for v in ["00:00:00", "23:59:59.999", "12:34:56.789", "01:02:03.456789"]:
        yield case(f"time {v}", logical("int32", TIME), v)
    for v in ["1970-01-01T00:00:00Z", "2024-01-02T03:04:05.678Z", "1969-12-31T23:59:59.999Z",
              "1000-01-01T00:00:00Z", "2262-04-11T23:47:16.854Z", "2024-06-30T12:00:00.000999Z"]:
        yield case(f"timestamp {v}", logical("int64", TIMESTAMP), v)


ORDER = struct({
    "id": s("int64"),
    "customer": s("string", doc="who \"ordered\"\n(a doc with escapes) ☃"),
    "placed": logical("int64", TIMESTAMP),
    "ship_on": logical("int32", DATE, True),
    "lines": array(struct({
        "sku": s("string"),
        "qty": s("int32"),
        "price": decimal(2),
        "weight": s("float", True),
    }, name="com.example.Line")),
    "tags": map_of(s("string"), s("string")),
    "counts": map_of(s("int32"), s("double")),
    "flags": map_of(s("boolean"), array(s("string", True)), True),
    "note": s("string", True),
    "raw": s("bytes", True),
}, name="com.example.Order", version=3, doc="An order", parameters={"b": "2", "a": "1"})

ORDER_VALUE = {
    "id": 1, "customer": "Zoë", "placed": "2024-01-02T03:04:05.678Z", "ship_on": "2024-01-05",
    "lines": [{"sku": "a-1", "qty": 2, "price": "9.99", "weight": 0.1},
              {"sku": "b\"2", "qty": 1, "price": "1234567.00"}],
    "tags": [["k", "v"], ["z", "ü"], ["a", "\x01"]],
    "counts": [[3, 1e7], [-1, 0.5], [0, 1e-4]],
    "flags": [[True, ["x", None]], [False, []]],
    "note": None, "raw": b64(b"\xff\x00"),
}

WITH_DEFAULTS = struct({
    "n": s("int32", default=7),
    "opt_n": s("int32", True, default=8),
    "text": s("string", default="dflt"),
    "price": decimal(2, default="3.50"),
    "day": logical("int32", DATE, default="2024-01-01"),
    "list": array(s("int64"), default=[1, 2]),
    "map": map_of(s("string"), s("double"), default=[["x", 1e10]]),
    "ratio": s("float", True, default=0.1),
    "plain": s("string", True),
})


def _json_struct_cases() -> Iterator[Case]:
    yield case("order", ORDER, ORDER_VALUE, configs=BOTH + NUMERIC)
    yield case("defaults, nothing set", WITH_DEFAULTS, {}, configs=BOTH + NUMERIC + KEEP_NULLS)
    yield case("defaults, all set", WITH_DEFAULTS, {
        "n": 1, "opt_n": 2, "text": "t", "price": "0.01", "day": "2000-01-01", "list": [],
        "map": [], "ratio": 2.5, "plain": "p"}, configs=BOTH + KEEP_NULLS)
    yield case("required field unset", struct({"a": s("int32")}), {})
    yield case("required field with default unset, keeping nulls",
               struct({"a": s("int32", default=1)}), {}, configs=KEEP_NULLS)
    yield case("empty struct", struct({}), {})
    nested = struct({"inner": struct({"x": s("double"), "y": s("double", True)}, True,
                                     name="Inner"),
                     "items": array(array(s("int8", True)))}, name="Outer", version=1)
    yield case("nested struct set", nested, {"inner": {"x": 1e-7, "y": None},
                                             "items": [[1, None, -1], []]})
    yield case("nested struct unset", nested, {"items": []})
    yield case("optional struct inside an array", array(struct({"a": s("int32")}, True)),
               [{"a": 1}, None])
    yield case("map of string to struct", map_of(s("string"), struct({"a": s("string")})),
               [["k1", {"a": "v1"}], ["k2", {"a": "v2"}]])
    yield case("map with int64 keys", map_of(s("int64"), s("string", True)),
               [[1, "a"], [-2, None], [9223372036854775807, "max"]])
    yield case("map with decimal keys", map_of(decimal(1), s("int32")), [["1.5", 1]],
               configs=BOTH + NUMERIC)
    yield case("map with date keys", map_of(logical("int32", DATE), s("boolean")),
               [["2024-01-01", True]])
    yield case("empty maps", struct({"a": map_of(s("string"), s("int32")),
                                     "b": map_of(s("int32"), s("int32"))}),
               {"a": [], "b": []})
    yield case("array of optional doubles", array(s("double", True)),
               [1e7, None, -0.0, "NaN"])
    yield case("array of decimals", array(decimal(3)), ["1.000", "-0.001"],
               configs=BOTH + NUMERIC)
    yield case("array of bytes", array(s("bytes")), [b64(b"a"), b64(b"")])


def _json_schemaless_cases() -> Iterator[Case]:
    yield case("schemaless sequence record", None,
               {"partition": 0, "seq": 123, "task": 0, "pad": "x" * 60})
    yield case("schemaless mixed", None, {
        "a": [1, 2.5, None, "x"], "b": {"c": True, "d": False}, "e": "", "f": -7,
        "g": 9223372036854775807, "h": [], "i": {}})
    for v in EDGE_DOUBLES:
        yield case(f"schemaless double {v!r}", None, {"x": v})
    for v in SPECIAL:
        yield case(f"schemaless {v}", None, {"x": {"$float": v}, "y": None})
    for i, values in enumerate([_random_doubles(4000, 50), _random_scaled_doubles(4001, 50)]):
        yield case(f"schemaless random doubles {i}", None, values)
    for i, text in enumerate(STRINGS):
        yield case(f"schemaless string {i}: {text!r}", None, {text: text})
    yield case("schemaless top-level string", None, "just text")
    yield case("schemaless top-level int", None, 42)
    yield case("schemaless top-level double", None, 1e10)
    yield case("schemaless top-level small double", None, 0.0001)
    yield case("schemaless top-level boolean", None, True)
    yield case("schemaless top-level list", None, [1, "two", [3.0]])
    yield case("schemaless bytes", None, {"$bytes": b64(b"\x00\x01binary")}, deviation={
        "reason": "bytes without a schema are already serialized: they pass through",
        "ours": UNCHANGED})
    yield case("schemaless nested bytes", None, {"b": {"$bytes": b64(b"hi")}})
    yield case("schemaless map with int keys", None, {"$map": [[1, "a"], [2, {"$float": "NaN"}]]})
    yield case("schemaless map with mixed keys", None,
               {"$map": [["s", 1], [2, 2], [None, 3], [True, 4], [1.5, 5]]})
    yield case("schemaless map with list keys", None, {"$map": [[[1, 2], "pair"]]})
    yield case("schemaless nested non-string keys", None,
               {"outer": {"$map": [[1, {"inner": {"$map": [[2.0, "x"]]}}]]}})
    yield case("schemaless null values", None, {"a": None, "b": [None]})
    yield case("schemaless negative numbers and dates in text", None,
               {"n": -5, "when": "2024-01-02", "id": "3e4f-12", "e": "1e-7 in text"})


def json_cases() -> list[Case]:
    return [*_json_primitive_cases(), *_json_float_sweeps(), *_json_logical_cases(),
            *_json_struct_cases(), *_json_schemaless_cases()]


def _number_values(kind: str) -> list[Any]:
    return {
        "int16": [0, 1, -1, 32767, -32768, 256],
        "int32": [0, 1, -1, 2147483647, -2147483648, 65536],
        "int64": [0, -1, 9223372036854775807, -9223372036854775808, 4294967296],
        "float": [0.0, -0.0, 0.1, 1e10, 3.4028234663852886e38, 1.401298464324817e-45, "NaN",
                  "Infinity", "-Infinity"],
        "double": [0.0, -0.0, 0.1, 1e300, 5e-324, "NaN", "Infinity", "-Infinity"],
        "boolean": [True, False],
    }[kind]


def primitive_cases() -> list[Case]:
    out: list[Case] = []
    for cls, kind in NUMBER_CONVERTERS.items():
        short = cls.rpartition(".")[2]
        for v in _number_values(kind):
            out.append(case(f"{short} {v!r}", s(kind), v, cls=cls))
    out.append(case("BooleanConverter with a string schema", s("string"), "true",
                    cls="org.apache.kafka.connect.converters.BooleanConverter"))
    out.append(case("BooleanConverter with an optional boolean schema", s("boolean", True),
                    True, cls="org.apache.kafka.connect.converters.BooleanConverter"))
    out.append(case("ByteArrayConverter with a bytes schema", s("bytes"), b64(b"\x00raw"),
                    cls=BYTE_ARRAY))
    out.append(case("ByteArrayConverter schemaless", None, {"$bytes": b64(b"abc")},
                    cls=BYTE_ARRAY))
    out.append(case("ByteArrayConverter with a decimal schema", decimal(2), "1.00",
                    cls=BYTE_ARRAY))
    out.append(case("ByteArrayConverter with a string schema", s("string"), "text",
                    cls=BYTE_ARRAY))
    out.extend(_string_converter_cases())
    return out


def _string_converter_cases() -> list[Case]:
    row = struct({"a": s("int32"), "b": s("string", True), "c": s("double", True),
                  "d": array(s("string", True), True), "e": s("int32", True, default=5),
                  "f": struct({"g": s("boolean")}, True)})
    values: list[tuple[str, dict[str, Any] | None, Any]] = [
        ("string", s("string"), "héllo ☃"),
        ("schemaless string", None, "plain"),
        ("int64", s("int64"), -42),
        ("schemaless int", None, 42),
        ("int8", s("int8"), 7),
        ("double 1e10", s("double"), 1e10),
        ("double 0.1", s("double"), 0.1),
        ("double NaN", s("double"), "NaN"),
        ("schemaless double 1e-5", None, 1e-5),
        ("float 0.1", s("float"), 0.1),
        ("float 1e10", s("float"), 1e10),
        ("boolean", s("boolean"), True),
        ("decimal", decimal(2), "1.50"),
        ("decimal scale 20", decimal(20), "0.00000000000000000001"),
        ("list", array(s("string", True)), ["a", None, "b c"]),
        ("schemaless list", None, [1, "x", None, 2.5, True, [1, 2], {"k": "v"}]),
        ("map", map_of(s("string"), s("int32")), [["a", 1], ["b", 2]]),
        ("schemaless map", None, {"k": [1, 2], "n": None, "f": 1e7}),
        ("struct", row, {"a": 1, "b": "x", "d": ["p", None], "f": {"g": True}}),
        ("struct, nothing optional set", row, {"a": 2}),
        ("date", logical("int32", DATE), "2024-01-02"),
        ("date before the Gregorian switch", logical("int32", DATE), "1000-06-15"),
        ("time", logical("int32", TIME), "12:34:56.789"),
        ("timestamp", logical("int64", TIMESTAMP), "2024-07-08T09:10:11.012Z"),
        ("timestamp before 1970", logical("int64", TIMESTAMP), "1969-07-20T20:17:40Z"),
    ]
    out = [case(f"StringConverter {name}", schema, v, cls=STRING) for name, schema, v in values]
    for encoding in ("UTF-16", "UTF-16LE", "UTF-16BE", "ISO-8859-1", "UTF-32", "utf8"):
        out.append(case(f"StringConverter {encoding}", s("string"), "héllo",
                        cls=STRING, configs=[{"converter.encoding": encoding}]))
    out.append(case("StringConverter US-ASCII with a character it lacks", s("string"), "héllo",
                    cls=STRING, configs=[{"converter.encoding": "US-ASCII"}],
                    deviation={"reason": "Java writes '?' for a character the charset lacks",
                               "ours": RAISES}))
    return out


def header_cases() -> list[Case]:
    row = struct({"a": s("int32"), "b": s("string", True), "c": s("double", True, default=0.5),
                  "d": array(s("string", True), True)}, name="Row")
    values: list[tuple[str, dict[str, Any] | None, Any]] = [
        ("string", None, "plain text"),
        ("string with quotes and backslashes", None, 'a "quoted" \\ text'),
        ("empty string", None, ""),
        ("unicode", None, "héllo ☃ 😀"),
        ("int", None, 42),
        ("negative int64", s("int64"), -9223372036854775808),
        ("int8", s("int8"), -5),
        ("double", None, 1.5),
        ("double 1e10", None, 1e10),
        ("double 1e-4", s("double"), 1e-4),
        ("double NaN", None, {"$float": "NaN"}),
        ("float 0.1", s("float"), 0.1),
        ("boolean", None, True),
        ("boolean false", s("boolean"), False),
        ("decimal", decimal(2), "12.50"),
        ("decimal scale -2", decimal(-2), "1.2E+3"),
        ("list", None, [1, "two", None, True, 2.5, [3], {"k": "v"}]),
        ("list of strings with quotes", array(s("string")), ['a"b', "c\\d", "e,f"]),
        ("map", None, {"a": 1, "b": 'x"y', "c": None, "d": [1, 2]}),
        ("map with int keys", None, {"$map": [[1, "one"], [2, None]]}),
        ("typed map", map_of(s("int32"), s("string")), [[1, "a"], [2, "b"]]),
        ("struct", row, {"a": 1, "b": "x", "d": ["p", None]}),
        ("struct with unset optional fields", row, {"a": 2}),
        ("nested bytes", None, [{"$bytes": b64(b"\x00\x01")}]),
        ("date", logical("int32", DATE), "2024-01-02"),
        ("date 1970-01-01", logical("int32", DATE), "1970-01-01"),
        ("date before 1970", logical("int32", DATE), "1969-12-31"),
        ("date before the Gregorian switch", logical("int32", DATE), "1000-06-15"),
        ("time", logical("int32", TIME), "12:34:56.789"),
        ("time midnight", logical("int32", TIME), "00:00:00"),
        ("timestamp", logical("int64", TIMESTAMP), "2024-07-08T09:10:11.012Z"),
        ("timestamp at midnight", logical("int64", TIMESTAMP), "2024-07-08T00:00:00Z"),
        ("timestamp on the first day", logical("int64", TIMESTAMP), "1970-01-01T05:00:00Z"),
        ("timestamp before 1970", logical("int64", TIMESTAMP), "1969-07-20T20:17:40.123Z"),
        ("timestamp in year 9999", logical("int64", TIMESTAMP), "9999-12-31T23:59:59.999Z"),
    ]
    out = [case(f"SimpleHeaderConverter {name}", schema, v, cls=SIMPLE_HEADER, kind="header")
           for name, schema, v in values]
    out.append(case("JsonConverter as header converter", struct({"a": s("int32")}), {"a": 1},
                    cls=JSON, kind="header", configs=BOTH))
    out.append(case("JsonConverter as header converter, schemaless", None, {"x": 1e7},
                    cls=JSON, kind="header", configs=BOTH))
    out.append(case("StringConverter as header converter", s("double"), 1e-7, cls=STRING,
                    kind="header"))
    out.append(case("IntegerConverter as header converter", s("int32"), 7,
                    cls="org.apache.kafka.connect.converters.IntegerConverter", kind="header"))
    return out


GROUPS = {"json": json_cases, "primitives": primitive_cases, "headers": header_cases}
"""Vector file name (``vectors/<name>.json``) -> its cases."""
