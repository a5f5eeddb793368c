"""Connect schemas for record keys and values: Kafka Connect's data model in Python.

A record may carry a :class:`Schema` for its key and value (``SourceRecord``'s
``key_schema`` / ``value_schema``); converters such as ``JsonConverter`` with
``schemas.enable=true`` write it next to the value, exactly as Kafka Connect
does, and transforms such as ``Cast`` or ``ReplaceField`` rewrite it.

The types are Connect's: ``INT8``..``INT64``, ``FLOAT32``/``FLOAT64``,
``BOOLEAN``, ``STRING``, ``BYTES``, ``ARRAY``, ``MAP``, ``STRUCT``, each
optional or not, with a default, a name, a version, a doc and parameters; and
the logical types Decimal, Date, Time and Timestamp (a named schema over a
primitive, with Connect's names so other Connect tools read them).

Python value of each type (what :meth:`Schema.validate` accepts):

=================  =================================================
INT8..INT64        ``int`` within the type's range (not ``bool``)
FLOAT32, FLOAT64   ``float`` (an ``int`` is accepted)
BOOLEAN            ``bool``
STRING             ``str``
BYTES              ``bytes`` (``bytearray`` and ``memoryview`` accepted)
ARRAY              ``list`` (``tuple`` accepted)
MAP                ``dict`` (any ``Mapping``)
STRUCT             :class:`Struct`
Decimal            ``decimal.Decimal`` (at most ``scale`` decimal places)
Date               ``datetime.date``
Time               ``datetime.time``
Timestamp          ``datetime.datetime``; naive means UTC
=================  =================================================

Declaring a schema: most connectors describe a row as a dataclass and call
:func:`schema_of`, which reads the field annotations (``int`` is INT64,
``str | None`` an optional STRING, ``Annotated[Decimal, Schema.decimal(2)]`` a
Decimal of scale 2, ...). A record whose value is a dataclass instance needs no
schema at all: the framework derives it. :func:`connect_schema` above the
``@dataclass`` gives the derived schema Connect's name, version and doc.
Schemas known only at run time (a database table's columns) are built with
:meth:`Schema.struct` and friends.
Dataclasses were chosen over a builder because they are how Python authors
already describe a row: type-checked, with defaults, and the same class makes
the values.

Invariants:

* Schemas are immutable and compare by value; build a changed copy with
  :meth:`Schema.replace`.
* A STRUCT's fields have unique names and ``Field.index`` equal to their
  position. A MAP has ``key_schema`` and ``value_schema``, an ARRAY
  ``value_schema``; other types have neither.
* A default, when set, is a valid value of its schema.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from enum import StrEnum
from typing import Any, ClassVar, TypeVar

from connect_runtime.errors import DataException

DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
SCALE = "scale"
"""The Decimal parameter that holds the scale (Connect's ``Decimal.SCALE_FIELD``)."""


class SchemaType(StrEnum):
    """Connect's ``Schema.Type``; the value is the name Connect's JSON uses."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        """True for every type but ARRAY, MAP and STRUCT."""
        return self not in (SchemaType.ARRAY, SchemaType.MAP, SchemaType.STRUCT)


_INT_BITS = {SchemaType.INT8: 8, SchemaType.INT16: 16, SchemaType.INT32: 32, SchemaType.INT64: 64}
_BYTES_LIKE = (bytes, bytearray, memoryview)


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a STRUCT schema: its name, position and schema."""

    name: str
    index: int
    schema: Schema


@dataclasses.dataclass(frozen=True)
class Schema:
    """A Connect schema (see the module docstring for types, values and invariants)."""

    type: SchemaType
    optional: bool = False
    # Not hashed: a default may be a list or dict (equal schemas still hash alike).
    default: Any = dataclasses.field(default=None, hash=False)
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: Mapping[str, str] | None = None
    fields: tuple[Field, ...] = ()
    key_schema: Schema | None = None
    value_schema: Schema | None = None

    # Connect's ready-made schemas (Schema.INT8_SCHEMA, Schema.OPTIONAL_INT8_SCHEMA, ...).
    INT8: ClassVar[Schema]
    INT16: ClassVar[Schema]
    INT32: ClassVar[Schema]
    INT64: ClassVar[Schema]
    FLOAT32: ClassVar[Schema]
    FLOAT64: ClassVar[Schema]
    BOOLEAN: ClassVar[Schema]
    STRING: ClassVar[Schema]
    BYTES: ClassVar[Schema]
    OPTIONAL_INT8: ClassVar[Schema]
    OPTIONAL_INT16: ClassVar[Schema]
    OPTIONAL_INT32: ClassVar[Schema]
    OPTIONAL_INT64: ClassVar[Schema]
    OPTIONAL_FLOAT32: ClassVar[Schema]
    OPTIONAL_FLOAT64: ClassVar[Schema]
    OPTIONAL_BOOLEAN: ClassVar[Schema]
    OPTIONAL_STRING: ClassVar[Schema]
    OPTIONAL_BYTES: ClassVar[Schema]

    def __post_init__(self) -> None:
        if not isinstance(self.type, SchemaType):
            object.__setattr__(self, "type", SchemaType(self.type))
        if self.parameters is not None and not isinstance(self.parameters, _FrozenParams):
            object.__setattr__(self, "parameters", _FrozenParams(self.parameters))
        if self.type is SchemaType.STRUCT:
            names = [f.name for f in self.fields]
            if len(set(names)) != len(names):
                raise DataException(f"Struct schema {self.name or ''} has duplicate field names: "
                                    f"{names}")
            if any(f.index != i for i, f in enumerate(self.fields)):
                raise DataException("A struct field's index must be its position")
        elif self.fields:
            raise DataException(f"Only struct schemas have fields, not {self.type.value}")
        if self.type is SchemaType.MAP and (self.key_schema is None or self.value_schema is None):
            raise DataException("A map schema needs a key schema and a value schema")
        if self.type is SchemaType.ARRAY and self.value_schema is None:
            raise DataException("An array schema needs a value schema")
        if self.default is not None:
            _validate(self, self.default, "", "default value")

    # Builders -----------------------------------------------------------------

    @staticmethod
    def struct(fields: Mapping[str, Schema] | Iterable[tuple[str, Schema]], **meta: Any) -> Schema:
        """A STRUCT with ``fields`` in the order given (a mapping or ``(name, schema)`` pairs)."""
        pairs = fields.items() if isinstance(fields, Mapping) else fields
        built = tuple(Field(name, i, schema) for i, (name, schema) in enumerate(pairs))
        return Schema(SchemaType.STRUCT, fields=built, **meta)

    @staticmethod
    def array(items: Schema, **meta: Any) -> Schema:
        """An ARRAY whose elements are ``items``."""
        return Schema(SchemaType.ARRAY, value_schema=items, **meta)

    @staticmethod
    def map(keys: Schema, values: Schema, **meta: Any) -> Schema:
        """A MAP from ``keys`` to ``values``."""
        return Schema(SchemaType.MAP, key_schema=keys, value_schema=values, **meta)

    @staticmethod
    def decimal(scale: int, **meta: Any) -> Schema:
        """Connect's Decimal: BYTES holding the unscaled value, ``scale`` in the parameters."""
        params = {SCALE: str(scale), **dict(meta.pop("parameters", None) or {})}
        return Schema(SchemaType.BYTES, name=DECIMAL, version=1, parameters=params, **meta)

    @staticmethod
    def date(**meta: Any) -> Schema:
        """Connect's Date: INT32 days since the epoch."""
        return Schema(SchemaType.INT32, name=DATE, version=1, **meta)

    @staticmethod
    def time(**meta: Any) -> Schema:
        """Connect's Time: INT32 milliseconds since midnight."""
        return Schema(SchemaType.INT32, name=TIME, version=1, **meta)

    @staticmethod
    def timestamp(**meta: Any) -> Schema:
        """Connect's Timestamp: INT64 milliseconds since the epoch."""
        return Schema(SchemaType.INT64, name=TIMESTAMP, version=1, **meta)

    def replace(self, **changes: Any) -> Schema:
        """A copy with ``changes`` applied (``schema.replace(optional=True)``)."""
        return dataclasses.replace(self, **changes)

    # Queries ------------------------------------------------------------------

    def field(self, name: str) -> Field | None:
        """The STRUCT field ``name``, or None if there is none."""
        return next((f for f in self.fields if f.name == name), None)

    @property
    def scale(self) -> int:
        """A Decimal's scale (DataException if this is not a Decimal schema)."""
        try:
            return int((self.parameters or {})[SCALE])
        except (KeyError, ValueError):
            raise DataException(f"Invalid Decimal schema: parameter {SCALE!r} is missing or not "
                                "an integer") from None

    def validate(self, value: Any) -> None:
        """Raise DataException unless ``value`` is a valid value of this schema.

        The message names the offending place, e.g. ``field 'lines[2].price'``.
        """
        _validate(self, value, "")


class _FrozenParams(dict[str, str]):
    """Schema parameters: a read-only dict, so a Schema stays hashable and immutable."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items())))

    def _immutable(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("Schema parameters are read-only; use Schema.replace")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _immutable  # type: ignore[assignment]


for _t in SchemaType:
    if _t.is_primitive:
        setattr(Schema, _t.name, Schema(_t))
        setattr(Schema, f"OPTIONAL_{_t.name}", Schema(_t, optional=True))


def _place(path: str, what: str = "value") -> str:
    """How a message names the place ``path`` ('' is the value itself)."""
    return f"field '{path}'" if path else what


def _validate(schema: Schema, value: Any, where: str, what: str = "value") -> None:
    """``where`` is the path inside the value being validated ('' for the value)."""
    if value is None:
        if schema.optional or schema.default is not None:
            return
        raise DataException(f"Invalid {_place(where, what)}: null for a required "
                            f"{_describe(schema)}")
    check = _LOGICAL_CHECKS.get(schema.name or "")
    if check is not None:
        check(schema, value, _place(where, what))
        return
    kind = schema.type
    if kind in _INT_BITS:
        bits = _INT_BITS[kind]
        if type(value) is bool or not isinstance(value, int):
            _mismatch(schema, value, _place(where, what))
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            raise DataException(f"Invalid {_place(where, what)}: {value} is out of range for "
                                f"{kind.value}")
    elif kind in (SchemaType.FLOAT32, SchemaType.FLOAT64):
        if type(value) is bool or not isinstance(value, float | int):
            _mismatch(schema, value, _place(where, what))
    elif kind is SchemaType.BOOLEAN:
        if not isinstance(value, bool):
            _mismatch(schema, value, _place(where, what))
    elif kind is SchemaType.STRING:
        if not isinstance(value, str):
            _mismatch(schema, value, _place(where, what))
    elif kind is SchemaType.BYTES:
        if not isinstance(value, _BYTES_LIKE):
            _mismatch(schema, value, _place(where, what))
    elif kind is SchemaType.ARRAY:
        _validate_array(schema, value, where, what)
    elif kind is SchemaType.MAP:
        _validate_map(schema, value, where, what)
    else:
        _validate_struct(schema, value, where, what)


def _validate_array(schema: Schema, value: Any, where: str, what: str) -> None:
    if not isinstance(value, list | tuple):
        _mismatch(schema, value, _place(where, what))
    items = schema.value_schema
    assert items is not None
    for i, item in enumerate(value):
        _validate(items, item, f"{where}[{i}]", what)


def _validate_map(schema: Schema, value: Any, where: str, what: str) -> None:
    if not isinstance(value, Mapping):
        _mismatch(schema, value, _place(where, what))
    keys, values = schema.key_schema, schema.value_schema
    assert keys is not None and values is not None
    for k, v in value.items():
        _validate(keys, k, f"{where}[{k!r}] (its key)", what)
        _validate(values, v, f"{where}[{k!r}]", what)


def _validate_struct(schema: Schema, value: Any, where: str, what: str) -> None:
    if not isinstance(value, Struct):
        _mismatch(schema, value, _place(where, what))
    # Fields, name and version make a Struct's type; optional and default do not
    # (or a struct schema could never have a Struct of itself as its default).
    if value.schema is not schema and (value.schema.fields, value.schema.name,
                                       value.schema.version) != (schema.fields, schema.name,
                                                                 schema.version):
        raise DataException(f"Invalid {_place(where, what)}: a Struct of schema "
                            f"{_describe(value.schema)} where {_describe(schema)} is expected")
    value._validate(where, what)


def _check_decimal(schema: Schema, value: Any, where: str) -> None:
    if not isinstance(value, decimal.Decimal) or not value.is_finite():
        _mismatch(schema, value, where)
    exponent = value.as_tuple().exponent
    if isinstance(exponent, int) and -exponent > schema.scale and value != value.quantize(
            decimal.Decimal(1).scaleb(-schema.scale)):
        raise DataException(f"Invalid {where}: {value} has more than {schema.scale} decimal "
                            "places (the schema's scale)")


def _check_type(expected: type | tuple[type, ...]) -> Any:
    def check(schema: Schema, value: Any, where: str) -> None:
        if not isinstance(value, expected):
            _mismatch(schema, value, where)
    return check


def _check_date(schema: Schema, value: Any, where: str) -> None:
    # A datetime is a date subclass, but Connect's Date has no time of day.
    if not isinstance(value, datetime.date) or isinstance(value, datetime.datetime):
        _mismatch(schema, value, where)


_LOGICAL_CHECKS = {
    DECIMAL: _check_decimal,
    DATE: _check_date,
    TIME: _check_type(datetime.time),
    TIMESTAMP: _check_type(datetime.datetime),
}

_LOGICAL_PYTHON = {DECIMAL: "decimal.Decimal", DATE: "datetime.date", TIME: "datetime.time",
                   TIMESTAMP: "datetime.datetime"}


def _describe(schema: Schema) -> str:
    logical = (schema.name or "").rpartition(".")[2] if schema.name in _LOGICAL_CHECKS else None
    label = logical or schema.type.value
    return f"{label} schema{f' {schema.name!r}' if schema.name and not logical else ''}"


def _mismatch(schema: Schema, value: Any, where: str) -> typing.NoReturn:
    expected = _LOGICAL_PYTHON.get(schema.name or "") or {
        SchemaType.STRUCT: "Struct", SchemaType.ARRAY: "list", SchemaType.MAP: "dict",
        SchemaType.BYTES: "bytes", SchemaType.STRING: "str", SchemaType.BOOLEAN: "bool",
    }.get(schema.type, "int" if schema.type in _INT_BITS else "float")
    raise DataException(f"Invalid {where}: {type(value).__name__} {_short(value)} does not "
                        f"match {_describe(schema)} (expected {expected})")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Struct:
    """A value of a STRUCT schema: field values by name, checked against the schema.

    Unset fields read as None (``struct[name]``) or their default (``get``).
    Setting or reading a field the schema lacks raises DataException; types are
    checked by :meth:`validate` (which converters call), not on every set.
    """

    __slots__ = ("_values", "schema")

    def __init__(self, schema: Schema, values: Mapping[str, Any] | None = None, /,
                 **kw: Any) -> None:
        if schema.type is not SchemaType.STRUCT:
            raise DataException(f"A Struct needs a struct schema, not {_describe(schema)}")
        self.schema = schema
        self._values: dict[str, Any] = {}
        for name, value in (*(values or {}).items(), *kw.items()):
            self[name] = value

    def _field(self, name: str) -> Field:
        found = self.schema.field(name)
        if found is None:
            known = ", ".join(f.name for f in self.schema.fields)
            raise DataException(f"{name!r} is not a field of {_describe(self.schema)} "
                                f"(fields: {known})")
        return found

    def __getitem__(self, name: str) -> Any:
        self._field(name)
        return self._values.get(name)

    def get(self, name: str) -> Any:
        """The value set for ``name``, else the field's default."""
        field = self._field(name)
        value = self._values.get(name)
        return field.schema.default if value is None else value

    def __setitem__(self, name: str, value: Any) -> None:
        self._field(name)
        self._values[name] = value

    def put(self, name: str, value: Any) -> Struct:
        """Set ``name`` and return this Struct, for chaining."""
        self[name] = value
        return self

    def validate(self) -> None:
        """DataException unless every field's value matches its schema (required ones set)."""
        self._validate("", "value")

    def _validate(self, where: str, what: str) -> None:
        prefix = f"{where}." if where else ""
        for field in self.schema.fields:
            _validate(field.schema, self._values.get(field.name), prefix + field.name, what)

    def as_dict(self) -> dict[str, Any]:
        """Field name -> value (or default), in schema order; nested Structs stay Structs."""
        return {f.name: self.get(f.name) for f in self.schema.fields}

    def __iter__(self) -> Iterator[str]:
        return iter(f.name for f in self.schema.fields)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Struct) and self.schema == other.schema
                and self.as_dict() == other.as_dict())

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"Struct{{{inner}}}"


# Deriving schemas from Python classes ------------------------------------------

_PLAIN: dict[Any, Schema] = {
    int: Schema.INT64, float: Schema.FLOAT64, bool: Schema.BOOLEAN, str: Schema.STRING,
    bytes: Schema.BYTES, datetime.date: Schema.date(), datetime.time: Schema.time(),
    datetime.datetime: Schema.timestamp(),
}
_derived: dict[type, Schema] = {}
_T = TypeVar("_T", bound=type)


@dataclasses.dataclass(frozen=True)
class _Naming:
    """What :func:`connect_schema` put on one class."""

    name: str
    version: int | None
    doc: str | None


# In the class's own __dict__, so a subclass (other fields, another schema) does
# not inherit its base's name.
_NAMING_ATTR = "__connect_schema__"


def connect_schema(name: str, *, version: int | None = None,
                   doc: str | None = None) -> Callable[[_T], _T]:
    """Give the Connect schema of a ``@dataclass`` (or ``TypedDict``) class a name,
    and optionally a version and a doc, as Kafka Connect's ``SchemaBuilder.name``,
    ``version`` and ``doc`` do::

        @connect_schema("com.example.orders.Order", version=2, doc="A placed order")
        @dataclass
        class Order:
            id: int

    Contract:

    * It goes above ``@dataclass``, on the class itself. The schema the
      framework derives for an instance used as a record's key or value, a
      nested field of this class, and ``schema_of(Order)`` all carry the name,
      version and doc; ``schema_of``'s own ``name``/``version``/``doc``
      arguments win over them.
    * Converters write them as Connect does: ``JsonConverter`` with
      ``schemas.enable=true`` puts ``"name"``, ``"version"`` and ``"doc"`` in the
      envelope's schema, so a Connect sink or a schema-aware consumer sees the
      type by name.
    * The class keeps them; a subclass does not (it has other fields, hence
      another schema) unless it is decorated itself.
    * ``name`` is a non-empty ``str`` other than the names of Connect's logical
      types (``org.apache.kafka.connect.data.Decimal`` and the like: a struct
      under such a name would be read as that type); ``version`` an ``int``;
      ``doc`` a ``str``. Anything else raises TypeError or ValueError naming
      the class, when the class is defined.
    """
    def name_schema(cls: _T) -> _T:
        owner = _class_name(cls)
        if not isinstance(cls, type) or not (dataclasses.is_dataclass(cls)
                                             or typing.is_typeddict(cls)):
            raise TypeError(f"@connect_schema({name!r}) on {owner}: it names the schema of a "
                            "dataclass or TypedDict class; put it above @dataclass")
        _check_naming(owner, name, version, doc, name_required=True)
        setattr(cls, _NAMING_ATTR, _Naming(name, version, doc))
        _derived.pop(cls, None)
        return cls
    return name_schema


def _class_name(cls: object) -> str:
    """``module.QualifiedName`` of a class, for messages (repr for anything else)."""
    qualname = getattr(cls, "__qualname__", None)
    return f"{getattr(cls, '__module__', '?')}.{qualname}" if qualname else repr(cls)


def _check_naming(owner: str, name: object, version: object, doc: object, *,
                  name_required: bool = False) -> None:
    """TypeError or ValueError, naming ``owner``, unless these make a valid schema name,
    version and doc (None is valid for each, but for a required name)."""
    where = f"The Connect schema of {owner}"
    if name is not None or name_required:
        if not isinstance(name, str):
            raise TypeError(f"{where}: the name must be a str, not {type(name).__name__} "
                            f"{_short(name)}")
        if not name.strip():
            raise ValueError(f"{where}: the name must not be empty, got {name!r}")
        if name in _LOGICAL_CHECKS:
            raise ValueError(f"{where}: {name!r} is the name of Connect's logical type "
                             f"{name.rpartition('.')[2]}; converters would read the struct as "
                             "one. Choose a name of your own, such as 'com.example.Order'")
    if version is not None and (type(version) is bool or not isinstance(version, int)):
        raise TypeError(f"{where}: the version must be an int, not {type(version).__name__} "
                        f"{_short(version)}")
    if doc is not None and not isinstance(doc, str):
        raise TypeError(f"{where}: the doc must be a str, not {type(doc).__name__} "
                        f"{_short(doc)}")


def schema_of(tp: type, *, name: str | None = None, version: int | None = None,
              doc: str | None = None, optional: bool = False) -> Schema:
    """The STRUCT schema of a ``@dataclass`` or ``TypedDict`` class, from its annotations.

    ``int`` -> INT64, ``float`` -> FLOAT64, ``bool``, ``str``, ``bytes``;
    ``datetime.date`` / ``time`` / ``datetime`` -> Date / Time / Timestamp;
    ``X | None`` -> optional; ``list[X]`` -> ARRAY; ``dict[K, V]`` -> MAP; a
    nested dataclass or TypedDict -> STRUCT; ``Annotated[T, schema]`` -> that
    schema (for INT32, FLOAT32, a Decimal's scale, a doc). A dataclass field's
    default becomes the schema default; a TypedDict key that is not required is
    optional. The name, version and doc are the arguments', else what
    :func:`connect_schema` put on the class, else None. Raises TypeError naming
    the field it cannot map, and TypeError or ValueError naming the class for a
    name, version or doc that is not one.
    """
    cacheable = name is None and version is None and doc is None and not optional
    if cacheable and tp in _derived:
        return _derived[tp]
    _check_naming(_class_name(tp), name, version, doc)
    naming = getattr(tp, "__dict__", {}).get(_NAMING_ATTR)
    if isinstance(naming, _Naming):
        name = naming.name if name is None else name
        version = naming.version if version is None else version
        doc = naming.doc if doc is None else doc
    hints = typing.get_type_hints(tp, include_extras=True)
    fields: list[tuple[str, Schema]] = []
    if dataclasses.is_dataclass(tp):
        for f in dataclasses.fields(tp):
            schema = _schema_for(hints[f.name], f"{tp.__qualname__}.{f.name}")
            default = f.default if f.default is not dataclasses.MISSING else None
            if default is not None:
                schema = schema.replace(default=default)
            fields.append((f.name, schema))
    elif typing.is_typeddict(tp):
        # With string annotations, Python 3.11 cannot see NotRequired when it builds
        # __required_keys__, so the marker on the resolved hint also counts.
        required = getattr(tp, "__required_keys__", frozenset(hints))
        for key, hint in hints.items():
            schema = _schema_for(hint, f"{tp.__qualname__}.{key}")
            marker = typing.get_origin(hint)
            if marker is typing.NotRequired or (key not in required
                                                and marker is not typing.Required):
                schema = schema.replace(optional=True)
            fields.append((key, schema))
    else:
        raise TypeError(f"schema_of needs a dataclass or a TypedDict class, not {tp!r}")
    built = Schema.struct(fields, name=name, version=version, doc=doc, optional=optional)
    if cacheable:
        _derived[tp] = built
    return built


def _schema_for(hint: Any, where: str) -> Schema:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Required, typing.NotRequired):  # TypedDict markers; total decides
        return _schema_for(args[0], where)
    if origin is typing.Annotated:
        declared = next((a for a in args[1:] if isinstance(a, Schema)), None)
        return declared if declared is not None else _schema_for(args[0], where)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"{where}: a union maps to a schema only as 'X | None', not {hint}")
        return _schema_for(rest[0], where).replace(optional=True)
    if origin in (list, tuple, typing.Sequence, Iterable) or hint in (list,):
        if not args:
            raise TypeError(f"{where}: say the element type, e.g. list[int]")
        return Schema.array(_schema_for(args[0], f"{where}[]"))
    if origin in (dict, Mapping):
        if len(args) != 2:
            raise TypeError(f"{where}: say the key and value types, e.g. dict[str, int]")
        return Schema.map(_schema_for(args[0], f"{where} keys"),
                          _schema_for(args[1], f"{where} values"))
    if hint is decimal.Decimal:
        raise TypeError(f"{where}: a Decimal needs its scale: "
                        "Annotated[Decimal, Schema.decimal(2)]")
    if hint in _PLAIN:
        return _PLAIN[hint]
    if isinstance(hint, type) and (dataclasses.is_dataclass(hint) or typing.is_typeddict(hint)):
        return schema_of(hint)
    raise TypeError(f"{where}: no Connect schema for {hint!r}; annotate it with "
                    "Annotated[T, Schema...]")


def to_struct(value: Any, schema: Schema) -> Any:
    """``value`` as the framework hands it to transforms and converters: a dataclass
    instance (at any depth) becomes a Struct of ``schema``. Internal."""
    if schema.type is SchemaType.STRUCT and dataclasses.is_dataclass(value) \
            and not isinstance(value, type):
        return Struct(schema, {f.name: to_struct(getattr(value, f.name), f.schema)
                               for f in schema.fields})
    if schema.type is SchemaType.ARRAY and isinstance(value, list | tuple):
        items = schema.value_schema
        assert items is not None
        return [to_struct(v, items) for v in value]
    if schema.type is SchemaType.MAP and isinstance(value, Mapping):
        values = schema.value_schema
        assert values is not None
        return {k: to_struct(v, values) for k, v in value.items()}
    return value


def infer(value: Any) -> tuple[Schema | None, Any]:
    """(schema, value) for a value given without a schema: a dataclass instance gets
    its derived schema and becomes a Struct; anything else stays schemaless. Internal."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        schema = schema_of(type(value))
        return schema, to_struct(value, schema)
    return None, value
