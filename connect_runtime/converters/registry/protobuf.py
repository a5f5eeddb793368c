"""Confluent's ProtobufConverter: Connect structs as Protobuf, framed with a registry id.

The bytes are Confluent's wire format: magic byte 0, the 4-byte schema id, the
message indexes (``[0]``, the file's first message, written as the single byte
0), then the message's Protobuf encoding, made by Google's ``protobuf`` library
from a descriptor built once per Connect schema.

The schema registered is a proto3 file, as Confluent's ``ProtobufData`` lays it
out with its defaults:

* the record's schema must be a STRUCT: it becomes the file's first message,
  named after the Connect schema's name (the part after the last dot; the rest
  is the ``package``), else ``ConnectDefault1`` (``ConnectDefault2``, ... for
  further unnamed structs, nested in their parent message; a nested message
  named like its field gets the suffix ``Message``);
* fields are numbered from 1 in order; INT8, INT16 and INT32 are ``int32``,
  INT64 ``int64``, FLOAT32 ``float``, FLOAT64 ``double``, BOOLEAN ``bool``,
  STRING ``string``, BYTES ``bytes``;
* ARRAY is a ``repeated`` field (of a non-array); MAP a ``map<K, V>`` (keys an
  integer type, BOOLEAN or STRING, as Protobuf requires);
* Timestamp is ``google.protobuf.Timestamp``, Date ``google.type.Date``, Time
  ``google.type.TimeOfDay``, Decimal ``confluent.type.Decimal``;
* optional fields are plain proto3 fields (Confluent's default,
  ``optional.for.nullables=false``): a null is written as the type's zero
  value, as Confluent writes it.

Confluent also records INT8/INT16 and decimal precision in field options
(``confluent/meta.proto``); this converter does not, so a Connect consumer reads
those fields back as INT32 (docs/converters.md).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.api.config_def import ConfigDef
from connect_runtime.api.schema import DATE, DECIMAL, TIME, TIMESTAMP, Schema, SchemaType, Struct
from connect_runtime.converters import java
from connect_runtime.converters.base import as_bytes
from connect_runtime.converters.registry.config import registry_config_def
from connect_runtime.converters.registry.converter import Plan, RegistryConverter
from connect_runtime.errors import DataException

DEFAULT_NAME = "ConnectDefault"
MESSAGE_INDEXES = b"\x00"  # [0]: the first message of the file, Confluent's short form
_SCALARS = {SchemaType.INT8: "int32", SchemaType.INT16: "int32", SchemaType.INT32: "int32",
            SchemaType.INT64: "int64", SchemaType.FLOAT32: "float", SchemaType.FLOAT64: "double",
            SchemaType.BOOLEAN: "bool", SchemaType.STRING: "string", SchemaType.BYTES: "bytes"}
_MAP_KEYS = {SchemaType.INT8, SchemaType.INT16, SchemaType.INT32, SchemaType.INT64,
             SchemaType.BOOLEAN, SchemaType.STRING}
# Logical types: (the message type, the file that declares it).
_WELL_KNOWN = {TIMESTAMP: ("google.protobuf.Timestamp", "google/protobuf/timestamp.proto"),
               DATE: ("google.type.Date", "google/type/date.proto"),
               TIME: ("google.type.TimeOfDay", "google/type/timeofday.proto"),
               DECIMAL: ("confluent.type.Decimal", "confluent/type/decimal.proto")}


@dataclass
class _Field:
    name: str
    number: int
    type: str  # a scalar's name or a message's (relative) name
    repeated: bool = False
    map_key: str | None = None  # map<map_key, type>


@dataclass
class _Message:
    name: str
    fields: list[_Field] = field(default_factory=list)
    nested: list[_Message] = field(default_factory=list)


class _FromConnect:
    """One conversion of a Connect STRUCT schema into a proto3 file."""

    def __init__(self) -> None:
        self.default_names = 0
        self.imports: dict[str, None] = {}

    def message(self, schema: Schema, name: str | None = None) -> _Message:
        message = _Message(name or self._name(schema))
        for number, f in enumerate(schema.fields, start=1):
            message.fields.append(self._field(message, f.name, f.schema, number))
        return message

    def _name(self, schema: Schema) -> str:
        if schema.name:
            return schema.name.rpartition(".")[2]
        self.default_names += 1
        return f"{DEFAULT_NAME}{self.default_names}"

    def _field(self, parent: _Message, name: str, schema: Schema, number: int) -> _Field:
        if not name.isidentifier():
            raise DataException(f"Field name {name!r} is not a Protobuf identifier")
        if schema.type is SchemaType.ARRAY:
            assert schema.value_schema is not None
            if schema.value_schema.type in (SchemaType.ARRAY, SchemaType.MAP):
                raise DataException(f"Field {name!r}: Protobuf has no array of arrays or maps")
            return _Field(name, number, self._type(parent, name, schema.value_schema),
                          repeated=True)
        if schema.type is SchemaType.MAP:
            keys, values = schema.key_schema, schema.value_schema
            assert keys is not None and values is not None
            if keys.type not in _MAP_KEYS or keys.name is not None:
                raise DataException(f"Field {name!r}: a Protobuf map's keys are integers, "
                                    f"booleans or strings, not {keys.type.value}")
            if values.type in (SchemaType.ARRAY, SchemaType.MAP):
                raise DataException(f"Field {name!r}: a Protobuf map's values cannot be "
                                    "arrays or maps")
            return _Field(name, number, self._type(parent, name, values),
                          map_key=_SCALARS[keys.type])
        return _Field(name, number, self._type(parent, name, schema))

    def _type(self, parent: _Message, field_name: str, schema: Schema) -> str:
        if schema.name in _WELL_KNOWN:
            type_name, path = _WELL_KNOWN[schema.name]
            self.imports[path] = None
            return "." + type_name
        if schema.type is SchemaType.STRUCT:
            name = self._name(schema)
            if name == field_name:
                name += "Message"  # Protobuf forbids a field named like a message type
            if not any(m.name == name for m in parent.nested):
                parent.nested.append(self.message(schema, name))
            return name
        return _SCALARS[schema.type]


def proto_text(package: str | None, message: _Message, imports: list[str]) -> str:
    """The proto3 file registered: syntax, package, imports, the message."""
    lines = ['syntax = "proto3";']
    if package:
        lines.append(f"package {package};")
    lines.append("")
    lines += [f'import "{path}";' for path in imports]
    if imports:
        lines.append("")
    lines += _message_lines(message, "")
    return "\n".join(lines) + "\n"


def _message_lines(message: _Message, indent: str) -> list[str]:
    out = [f"{indent}message {message.name} {{"]
    for f in message.fields:
        kind = f.type.lstrip(".")
        if f.map_key is not None:
            out.append(f"{indent}  map<{f.map_key}, {kind}> {f.name} = {f.number};")
        else:
            label = "repeated " if f.repeated else ""
            out.append(f"{indent}  {label}{kind} {f.name} = {f.number};")
    for nested in message.nested:
        out.append("")
        out += _message_lines(nested, indent + "  ")
    out.append(f"{indent}}}")
    return out


def _descriptor_proto(package: str | None, message: _Message, imports: list[str],
                      file_name: str) -> Any:
    from google.protobuf import descriptor_pb2

    fdp = descriptor_pb2.FileDescriptorProto(name=file_name, syntax="proto3",
                                             dependency=imports)
    if package:
        fdp.package = package
    _add_message(fdp.message_type.add(), message)
    return fdp


_TYPES = {"int32": 5, "int64": 3, "float": 2, "double": 1, "bool": 8, "string": 9, "bytes": 12}
_MESSAGE = 11
_OPTIONAL, _REPEATED = 1, 3


def _add_message(proto: Any, message: _Message) -> None:
    proto.name = message.name
    for nested in message.nested:
        _add_message(proto.nested_type.add(), nested)
    for f in message.fields:
        added = proto.field.add(name=f.name, number=f.number, json_name=_json_name(f.name))
        if f.map_key is not None:
            entry = proto.nested_type.add(name=_entry_name(f.name))
            entry.options.map_entry = True
            entry.field.add(name="key", number=1, label=_OPTIONAL, type=_TYPES[f.map_key],
                            json_name="key")
            value = entry.field.add(name="value", number=2, label=_OPTIONAL, json_name="value")
            _set_type(value, f.type)
            added.label = _REPEATED
            added.type = _MESSAGE
            added.type_name = entry.name
        else:
            added.label = _REPEATED if f.repeated else _OPTIONAL
            _set_type(added, f.type)


def _set_type(proto: Any, kind: str) -> None:
    if kind in _TYPES:
        proto.type = _TYPES[kind]
    else:
        proto.type = _MESSAGE
        proto.type_name = kind


def _entry_name(field_name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in field_name.split("_")) + "Entry"


def _json_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


# Values ---------------------------------------------------------------------------

Datum = Callable[[Any], Any]


def _datum(schema: Schema) -> Datum:
    """Connect value -> what the message class's constructor takes for it."""
    if schema.name == TIMESTAMP:
        return _timestamp
    if schema.name == DATE:
        return lambda v: {"year": v.year, "month": v.month, "day": v.day}
    if schema.name == TIME:
        return _time_of_day
    if schema.name == DECIMAL:
        scale = schema.scale
        precision = int((schema.parameters or {}).get("connect.decimal.precision", "0"))
        return lambda v: {"value": java.decimal_bytes(java.decimal_unscaled(v, scale)),
                          "precision": precision, "scale": scale}
    kind = schema.type
    if kind is SchemaType.BYTES:
        return as_bytes
    if kind in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        return lambda v: float(v)
    if kind.is_primitive:
        return _same
    if kind is SchemaType.ARRAY:
        assert schema.value_schema is not None
        item = _datum(schema.value_schema)
        return lambda v: [item(x) for x in v]
    if kind is SchemaType.MAP:
        assert schema.value_schema is not None
        value = _datum(schema.value_schema)
        return lambda v: {k: value(x) for k, x in v.items()}
    fields = [(f.name, _datum(f.schema), f.schema.default) for f in schema.fields]

    def struct(v: Any) -> Any:
        if type(v) is not Struct:
            raise TypeError(f"a struct needs a Struct, not {type(v).__name__}")
        raw = v._values  # the values as set; a None takes the field's default
        out = {}
        for name, convert, default in fields:
            item = raw.get(name)
            if item is None:
                item = default
            if item is not None:  # proto3: an unset field reads as its zero value
                out[name] = convert(item)
        return out
    return struct


def _same(v: Any) -> Any:
    return v


def _timestamp(v: datetime.datetime) -> dict[str, int]:
    millis = java.epoch_millis(v)
    return {"seconds": millis // 1000, "nanos": (millis % 1000) * 1_000_000}


def _time_of_day(v: datetime.time) -> dict[str, int]:
    millis = java.millis_of_day(v)
    return {"hours": millis // 3_600_000, "minutes": millis // 60_000 % 60,
            "seconds": millis // 1000 % 60, "nanos": millis % 1000 * 1_000_000}


def plan_for(schema: Schema) -> Plan:
    """Convert ``schema`` (DataException if Protobuf cannot hold it)."""
    if schema.type is not SchemaType.STRUCT:
        raise DataException(f"ProtobufConverter writes structs; this {schema.type.value} "
                            "schema has no message to become (give the record a struct "
                            "schema, or use another converter)")
    convert = _FromConnect()
    root = convert.message(schema.replace(optional=False))
    package = schema.name.rpartition(".")[0] if schema.name else None
    imports = list(convert.imports)
    text = proto_text(package, root, imports)
    message_class = _message_class(package, root, imports)
    datum = _datum(schema.replace(optional=False))
    full_name = f"{package}.{root.name}" if package else root.name
    return Plan(schema=schema, text=text, record_name=full_name,
                encode=lambda v: MESSAGE_INDEXES + message_class(**datum(v)).SerializeToString(),
                datum=datum)


def _message_class(package: str | None, root: _Message, imports: list[str]) -> Any:
    """The Python class of ``root``, from a descriptor pool of its own (with the
    well-known and Confluent types it imports)."""
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()
    for path in imports:
        pool.AddSerializedFile(_dependency(path))
    fdp = _descriptor_proto(package, root, imports, f"{package or 'default'}/{root.name}.proto")
    try:
        file = pool.Add(fdp)
    except TypeError as e:  # the descriptor pool's own word for an invalid file
        raise DataException(f"Invalid Protobuf message: {e}") from None
    del file
    name = f"{package}.{root.name}" if package else root.name
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def _dependency(path: str) -> bytes:
    if path == "google/protobuf/timestamp.proto":
        from google.protobuf import timestamp_pb2
        return bytes(timestamp_pb2.DESCRIPTOR.serialized_pb)
    if path == "google/type/date.proto":
        from google.type import date_pb2
        return bytes(date_pb2.DESCRIPTOR.serialized_pb)
    if path == "google/type/timeofday.proto":
        from google.type import timeofday_pb2
        return bytes(timeofday_pb2.DESCRIPTOR.serialized_pb)
    from confluent_kafka.schema_registry.confluent.type import decimal_pb2
    return bytes(decimal_pb2.DESCRIPTOR.serialized_pb)


class ProtobufConverter(RegistryConverter):
    """Confluent's ``io.confluent.connect.protobuf.ProtobufConverter`` (module docstring)."""

    schema_type = "PROTOBUF"
    format_name = "Protobuf"

    @staticmethod
    def config_def() -> ConfigDef:
        return registry_config_def()

    def _make_plan(self, schema: Schema) -> Plan:
        return plan_for(schema)
