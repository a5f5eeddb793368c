"""Confluent's AvroConverter: Connect data as Avro, framed with a Schema Registry id.

The bytes are Confluent's wire format (:mod:`.wire`): magic byte 0, the schema
id (4 bytes, big-endian), then the Avro binary encoding of the value. The
schema is what Confluent's ``AvroData.fromConnectSchema`` makes of the Connect
schema, written as Avro's Java ``Schema.toString()`` writes it (the text
registered), so a connector moved between Kafka Connect with Confluent's
converter and this runtime registers the same schema under the same subject
and finds the same id, instead of a new version:

* a STRUCT is a ``record`` named after the Connect schema's name (split at the
  last dot into namespace and name), else ``io.confluent.connect.avro.ConnectDefault``
  (``ConnectDefault2``, ``3``, ... for further unnamed structs of one schema);
* INT8 and INT16 are ``int`` with ``"connect.type"``; INT32 ``int``, INT64
  ``long``, FLOAT32 ``float``, FLOAT64 ``double``, BOOLEAN, STRING, BYTES alike;
* ARRAY is ``array``; MAP with STRING keys ``map``, with other keys an array of
  ``io.confluent.connect.avro.MapEntry`` records (``key``, ``value``);
* an optional schema is a union with ``"null"``: first (field default null)
  unless it has a default, then last (field default the default);
* Decimal is ``bytes`` with ``logicalType`` ``decimal`` (``precision`` from the
  ``connect.decimal.precision`` parameter, else 64); Date ``int`` ``date``;
  Time ``int`` ``time-millis``; Timestamp ``long`` ``timestamp-millis``;
* with ``connect.meta.data=true`` (the default) each type carries the Connect
  schema's doc, version, parameters, default and name as ``connect.doc``,
  ``connect.version``, ``connect.parameters``, ``connect.default`` and
  ``connect.name``, so a Connect consumer gets the exact schema back;
* parameters starting with ``avro`` become Avro properties; a record's doc comes
  from the ``io.confluent.connect.avro.record.doc`` parameter and a field's from
  ``io.confluent.connect.avro.field.doc.<field>`` (or from the Connect docs with
  ``discard.type.doc.default=true``), as Confluent's converter reads them back;
* a name Avro does not allow fails, naming it, unless ``scrub.invalid.names=true``
  rewrites it as Confluent does (URL-encoded, other characters ``_``).

Values: the schema's, as :mod:`connect_runtime.api.schema` lists them; a null
field with a default is written as the default (Connect's ``Struct.get``). The
binary encoding is compiled once per Connect schema (:mod:`.avro_writer`); with
``use.latest.version`` fastavro writes the values with the registered schema. A
value that does not fit raises DataException naming the topic, the record's key
or value and the field path (``Schema.validate``'s words).

Not written: schemaless values (other than ``bytes``, which pass through as
with every converter here). Confluent wraps them in its ``Anything`` record;
this converter asks for a schema instead (docs/converters.md).
"""

from __future__ import annotations

import decimal
import io
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type, Width
from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.converters import java
from connect_runtime.converters.base import as_bytes
from connect_runtime.converters.json import _double_node, _finish, _float_node
from connect_runtime.converters.registry.avro_writer import compile_writer
from connect_runtime.converters.registry.config import registry_config_def
from connect_runtime.converters.registry.converter import Plan, RegistryConverter
from connect_runtime.errors import DataException

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
MAP_ENTRY = "MapEntry"
RECORD_DOC = NAMESPACE + ".record.doc"
FIELD_DOC_PREFIX = NAMESPACE + ".field.doc."
FIELD_DEFAULT_FLAG = NAMESPACE + ".field.default"
PRECISION_PARAM = "connect.decimal.precision"
PRECISION_DEFAULT = 64

ENHANCED = "enhanced.avro.schema.support"
CONNECT_META_DATA = "connect.meta.data"
SCRUB_INVALID_NAMES = "scrub.invalid.names"
DISCARD_TYPE_DOC_DEFAULT = "discard.type.doc.default"
ALLOW_OPTIONAL_MAP_KEYS = "allow.optional.map.keys"

_AVRO_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PRIMITIVE = {SchemaType.INT8: "int", SchemaType.INT16: "int", SchemaType.INT32: "int",
              SchemaType.INT64: "long", SchemaType.FLOAT32: "float",
              SchemaType.FLOAT64: "double", SchemaType.BOOLEAN: "boolean",
              SchemaType.STRING: "string", SchemaType.BYTES: "bytes"}
_LOGICAL = {DATE: "date", TIME: "time-millis", TIMESTAMP: "timestamp-millis"}
_NO_DEFAULT = object()


# The Avro schema, as a small tree that keeps Java's order of properties ---------

@dataclass(eq=False)
class _Type:
    """A primitive, array or map: ``type`` and, for the last two, ``items``/``values``."""

    type: str
    props: dict[str, Any] = field(default_factory=dict)
    items: _Node | None = None
    values: _Node | None = None


@dataclass(eq=False)
class _Field:
    name: str
    schema: _Node
    doc: str | None = None
    default: Any = _NO_DEFAULT


@dataclass(eq=False)
class _Record:
    """A named record; one object per record type, so a second use is a name reference."""

    name: str
    space: str | None
    doc: str | None = None
    fields: list[_Field] = field(default_factory=list)
    props: dict[str, Any] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.space}.{self.name}" if self.space else self.name


@dataclass(eq=False)
class _Union:
    branches: list[_Node]


_Node = _Type | _Record | _Union


@dataclass(frozen=True)
class AvroOptions:
    """The Avro keys of the converter (Confluent's AvroDataConfig)."""

    connect_meta_data: bool = True
    scrub_invalid_names: bool = False
    discard_type_doc_default: bool = False
    allow_optional_map_keys: bool = False


class _FromConnect:
    """One conversion of a Connect schema (Confluent's ``FromConnectContext``)."""

    def __init__(self, options: AvroOptions) -> None:
        self.options = options
        self.default_names = 0
        # Non-optional Connect schemas already converted: one Avro type each.
        self.seen: dict[Schema, _Node] = {}

    def node(self, schema: Schema) -> _Node:
        if not schema.optional:
            found = self.seen.get(schema)
            if found is not None:
                return found
        base = self._base(schema)
        if not isinstance(base, _Union):
            self._metadata(schema, base)
        result: _Node = base
        if schema.optional and not isinstance(base, _Union):
            result = _Union([base, _Type("null")] if schema.default is not None
                            else [_Type("null"), base])
        if not schema.optional:
            self.seen[schema] = result
        return result

    def _base(self, schema: Schema) -> _Node:
        kind = schema.type
        if kind in _PRIMITIVE:
            base = _Type(_PRIMITIVE[kind])
            if schema.name == DECIMAL:
                params = schema.parameters or {}
                base.props["scale"] = int(params.get("scale", "0"))
                base.props["precision"] = int(params.get(PRECISION_PARAM, PRECISION_DEFAULT))
            return base
        if kind is SchemaType.ARRAY:
            assert schema.value_schema is not None
            return _Type("array", items=self.node(schema.value_schema))
        if kind is SchemaType.MAP:
            return self._map(schema)
        if schema.optional:  # an optional struct: a union around the non-optional record
            inner = self.node(schema.replace(optional=False))
            return _Union([_Type("null"), inner])
        return self._record(schema)

    def _map(self, schema: Schema) -> _Node:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        if keys.type is SchemaType.STRING and (not keys.optional
                                               or self.options.allow_optional_map_keys):
            return _Type("map", values=self.node(values))
        if schema.name is None:
            entry = _Record(MAP_ENTRY, NAMESPACE)
        else:
            space, name = self._split(schema.name)
            entry = _Record(name, space, props={"connect.internal.type": MAP_ENTRY})
        entry.fields = [self._field("key", keys, None), self._field("value", values, None)]
        return _Type("array", items=entry)

    def _record(self, schema: Schema) -> _Record:
        if schema.name is not None:
            space, name = self._split(schema.name)
        else:
            self.default_names += 1
            space = NAMESPACE
            name = DEFAULT_NAME + (str(self.default_names) if self.default_names > 1 else "")
        params = schema.parameters or {}
        doc_key = "connect.record.doc" if self.options.discard_type_doc_default else RECORD_DOC
        record = _Record(name, space, doc=params.get(doc_key))
        for f in schema.fields:
            doc = (None if self.options.discard_type_doc_default
                   else params.get(FIELD_DOC_PREFIX + f.name))
            record.fields.append(self._field(self._scrub(f.name), f.schema, doc))
        return record

    def _field(self, name: str, schema: Schema, doc: str | None) -> _Field:
        if not _AVRO_NAME.match(name):
            raise DataException(f"Field name {name!r} is not a valid Avro name "
                                "([A-Za-z_][A-Za-z0-9_]*); rename it, or set "
                                "scrub.invalid.names=true to have it rewritten")
        if schema.default is not None:
            default: Any = _default_json(schema, schema.default, self.options)
        elif schema.optional:
            default = None
        else:
            default = _NO_DEFAULT
        node = self.node(schema)
        if (isinstance(node, _Union) and default not in (None, _NO_DEFAULT)
                and isinstance(node.branches[0], _Type) and node.branches[0].type == "null"):
            # Avro refuses a default its union's first branch cannot hold (an
            # optional struct's union starts with null): Java then drops it.
            default = _NO_DEFAULT
        if self.options.discard_type_doc_default:
            doc = schema.doc
        return _Field(name, node, doc, default)

    def _metadata(self, schema: Schema, base: _Type | _Record) -> None:
        """Java's order: connect.doc, .version, .parameters, .default, .name, .type;
        then the logical type; then ``avro*`` parameters."""
        props = base.props
        if self.options.connect_meta_data:
            if schema.doc is not None:
                props.setdefault("connect.doc", schema.doc)
            if schema.version is not None:
                props.setdefault("connect.version", schema.version)
            params = {k: v for k, v in (schema.parameters or {}).items()
                      if self.options.discard_type_doc_default or k != FIELD_DEFAULT_FLAG}
            if params:
                props.setdefault("connect.parameters", params)
            if schema.default is not None and (self.options.discard_type_doc_default or
                                               FIELD_DEFAULT_FLAG not in (schema.parameters
                                                                          or {})):
                props.setdefault("connect.default",
                                 _default_json(schema, schema.default, self.options))
            if schema.name is not None:
                props.setdefault("connect.name", schema.name)
            if schema.type in (SchemaType.INT8, SchemaType.INT16):
                props.setdefault("connect.type", schema.type.value)
        if schema.name == DECIMAL:
            props.setdefault("logicalType", "decimal")
        elif schema.name in _LOGICAL:
            props.setdefault("logicalType", _LOGICAL[schema.name])
        for key, value in (schema.parameters or {}).items():
            if key.startswith("avro"):
                props.setdefault(key, value)

    def _split(self, full_name: str) -> tuple[str | None, str]:
        parts = [self._scrub(p) for p in full_name.split(".")]
        for part in parts:
            if not _AVRO_NAME.match(part):
                raise DataException(f"Schema name {full_name!r} is not a valid Avro name "
                                    "(dot-separated [A-Za-z_][A-Za-z0-9_]* parts); rename "
                                    "it, or set scrub.invalid.names=true to have it "
                                    "rewritten")
        return (".".join(parts[:-1]) or None), parts[-1]

    def _scrub(self, name: str) -> str:
        return scrub_name(name) if self.options.scrub_invalid_names else name


def scrub_name(name: str) -> str:
    """Confluent's ``doScrubName``: a valid Avro name for ``name``, unchanged if it is one."""
    if not name or _AVRO_NAME.match(name):
        return name
    encoded = urllib.parse.quote_plus(name, safe="*")  # Java's URLEncoder
    if encoded[0].isdigit():
        encoded = "x" + encoded
    return re.sub(r"[^A-Za-z0-9_]", "_", encoded)


def _default_json(schema: Schema, value: Any, options: AvroOptions) -> Any:
    """Confluent's ``defaultValueFromConnect``: the default as Avro JSON."""
    if value is None:
        return None
    kind = schema.type
    if schema.name is not None and schema.name in (DECIMAL, DATE, TIME, TIMESTAMP):
        value = _logical(schema)(value)
    if kind is SchemaType.BYTES:
        return as_bytes(value).decode("latin-1")
    if kind is SchemaType.FLOAT32:
        return _float_node(float(value))
    if kind is SchemaType.FLOAT64:
        return _double_node(float(value))
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        return [_default_json(schema.value_schema, v, options) for v in value]
    if kind is SchemaType.MAP:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        if keys.type is SchemaType.STRING and (not keys.optional
                                               or options.allow_optional_map_keys):
            return {k: _default_json(values, v, options) for k, v in value.items()}
        return [[_default_json(keys, k, options), _default_json(values, v, options)]
                for k, v in value.items()]
    if kind is SchemaType.STRUCT:
        return {f.name: _default_json(f.schema, value.get(f.name), options)
                for f in schema.fields}
    return value


def _logical(schema: Schema) -> Callable[[Any], Any]:
    """The Connect logical value -> its Avro primitive (Connect's ``fromLogical``)."""
    if schema.name == DECIMAL:
        scale = schema.scale
        return lambda v: java.decimal_bytes(java.decimal_unscaled(_decimal(v), scale))
    if schema.name == DATE:
        return java.epoch_days
    if schema.name == TIME:
        return java.millis_of_day
    return java.epoch_millis


def _decimal(value: Any) -> decimal.Decimal:
    if not isinstance(value, decimal.Decimal):
        raise TypeError(f"a Decimal field needs decimal.Decimal, not {type(value).__name__}")
    return value


# Java's Schema.toString() --------------------------------------------------------

def schema_text(node: _Node) -> str:
    """The compact JSON Avro's Java ``Schema.toString()`` writes for ``node``."""
    return _finish(_JavaJson().tree(node)).decode("utf-8")


class _JavaJson:
    """Avro Java's ``toJson``: a record once in full, then by name (qualified only
    outside its namespace); ``namespace`` only where it differs from the enclosing one."""

    def __init__(self) -> None:
        self.space: str | None = None
        self.written: set[int] = set()

    def tree(self, node: _Node) -> Any:
        if isinstance(node, _Union):
            return [self.tree(b) for b in node.branches]
        if isinstance(node, _Record):
            return self._record(node)
        if not node.props and node.items is None and node.values is None:
            return node.type
        out: dict[str, Any] = {"type": node.type}
        if node.items is not None:
            out["items"] = self.tree(node.items)
        if node.values is not None:
            out["values"] = self.tree(node.values)
        out.update(node.props)
        return out

    def _record(self, record: _Record) -> Any:
        if id(record) in self.written:
            return record.name if record.space == self.space else record.full_name
        self.written.add(id(record))
        saved = self.space
        out: dict[str, Any] = {"type": "record", "name": record.name}
        if record.space is not None:
            if record.space != self.space:
                out["namespace"] = record.space
        elif self.space is not None:
            out["namespace"] = ""
        self.space = record.space
        if record.doc is not None:
            out["doc"] = record.doc
        out["fields"] = [self._field(f) for f in record.fields]
        out.update(record.props)
        self.space = saved
        return out

    def _field(self, f: _Field) -> Any:
        out: dict[str, Any] = {"name": f.name, "type": self.tree(f.schema)}
        if f.doc is not None:
            out["doc"] = f.doc
        if f.default is not _NO_DEFAULT:
            out["default"] = f.default
        return out


def record_name(node: _Node) -> str:
    """The full name RecordNameStrategy uses: a record's, else the type's name."""
    candidates = node.branches if isinstance(node, _Union) else [node]
    for candidate in candidates:
        if isinstance(candidate, _Record):
            return candidate.full_name
    return next((c.type for c in reversed(candidates)
                 if isinstance(c, _Type) and c.type != "null"), "null")


# Values ---------------------------------------------------------------------------

Datum = Callable[[Any], Any]


def _datum(schema: Schema, options: AvroOptions) -> Datum:
    """Connect value -> the value fastavro writes for the registered schema (its
    Avro primitives: a Decimal's bytes, a Date's days, ...)."""
    inner = _datum_non_null(schema, options)
    if schema.optional:
        return lambda v: None if v is None else inner(v)
    return inner


def _datum_non_null(schema: Schema, options: AvroOptions) -> Datum:
    kind = schema.type
    if schema.name in (DECIMAL, DATE, TIME, TIMESTAMP):
        return _logical(schema)
    if kind is SchemaType.BYTES:
        return as_bytes
    if kind in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return lambda v: float(v) if type(v) is int else v
    if kind.is_primitive:
        return _same
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        item = _datum(schema.value_schema, options)
        return lambda v: [item(x) for x in v]
    if kind is SchemaType.MAP:
        keys, values = schema.key_schema, schema.value_schema
        assert keys is not None and values is not None
        value = _datum(values, options)
        if keys.type is SchemaType.STRING and (not keys.optional
                                               or options.allow_optional_map_keys):
            return lambda v: {k: value(x) for k, x in v.items()}
        key = _datum(keys, options)
        return lambda v: [{"key": key(k), "value": value(x)} for k, x in v.items()]
    return _struct_datum(schema, options)


def _same(v: Any) -> Any:
    return v


def _struct_datum(schema: Schema, options: AvroOptions) -> Datum:
    names = [(f.name, scrub_name(f.name) if options.scrub_invalid_names else f.name)
             for f in schema.fields]
    defaults = {f.name: f.schema.default for f in schema.fields
                if f.schema.default is not None}
    datums = {f.name: _datum(f.schema, options) for f in schema.fields}
    plain = all(a == b for a, b in names)

    def convert(v: Any) -> Any:
        if type(v) is not Struct:
            raise TypeError(f"a struct field needs a Struct, not {type(v).__name__}")
        raw = v._values  # the values as set; a None takes the field's default (Struct.get)
        if defaults:
            raw = {**raw, **{k: d for k, d in defaults.items() if raw.get(k) is None}}
        if plain:
            return {n: datums[n](raw.get(n)) for n, _ in names}
        return {avro: datums[n](raw.get(n)) for n, avro in names}
    return convert


def plan_for(schema: Schema, options: AvroOptions) -> Plan:
    """Convert ``schema`` (DataException if Avro cannot hold it)."""
    node = _FromConnect(options).node(schema)
    write = compile_writer(schema, options.allow_optional_map_keys)

    def encode(value: Any) -> bytes:
        out = bytearray()
        write(out, value)
        return bytes(out)
    return Plan(schema=schema, text=schema_text(node), record_name=record_name(node),
                encode=encode, datum=_datum(schema, options))


def _avro_bytes(writer: Any, datum: Any) -> bytes:
    from fastavro import schemaless_writer

    out = io.BytesIO()
    schemaless_writer(out, writer, datum)
    return out.getvalue()


def avro_config_def() -> ConfigDef:
    """The AvroConverter's keys: the registry's, then Confluent's AvroDataConfig."""
    d = registry_config_def()
    for order, (name, default, doc) in enumerate((
            (ENHANCED, False, "Confluent's enhanced Avro schema support (Avro enum and "
             "package names kept in Connect parameters). Accepted for configs written for "
             "Confluent's converter; a Connect schema written here has no Avro enum."),
            (CONNECT_META_DATA, True, "Write the Connect schema's doc, version, parameters, "
             "default and name into the Avro schema (connect.* properties)."),
            (SCRUB_INVALID_NAMES, False, "Rewrite names Avro does not allow, as "
             "Confluent's converter does, instead of failing."),
            (DISCARD_TYPE_DOC_DEFAULT, False, "Take field docs from the Connect schema's "
             "doc instead of io.confluent.connect.avro.field.doc.* parameters."),
            (ALLOW_OPTIONAL_MAP_KEYS, False, "Write maps with optional string keys as Avro "
             "maps."))):
        d.define(name, Type.BOOLEAN, default, None, Importance.LOW, doc, group="Avro",
                 order_in_group=order, width=Width.SHORT, display_name=name)
    return d


class AvroConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.avro.AvroConverter`` (see the module docstring)."""

    schema_type = "AVRO"
    format_name = "Avro"

    def __init__(self) -> None:
        super().__init__()
        self._options = AvroOptions()

    @staticmethod
    def config_def() -> ConfigDef:
        return avro_config_def()

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        self._options = AvroOptions(
            connect_meta_data=bool(values[CONNECT_META_DATA]),
            scrub_invalid_names=bool(values[SCRUB_INVALID_NAMES]),
            discard_type_doc_default=bool(values[DISCARD_TYPE_DOC_DEFAULT]),
            allow_optional_map_keys=bool(values[ALLOW_OPTIONAL_MAP_KEYS]))

    def _make_plan(self, schema: Schema) -> Plan:
        return plan_for(schema, self._options)

    def _latest_encoder(self, plan: Plan, text: str) -> Callable[[Any], bytes]:
        """Values written with the subject's latest schema: fastavro matches the record's
        fields by name, and fills a field the value lacks with its default."""
        import orjson
        from fastavro import parse_schema

        writer = parse_schema(orjson.loads(text))
        datum = plan.datum
        assert datum is not None
        return lambda v: _avro_bytes(writer, datum(v))
