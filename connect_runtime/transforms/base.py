"""What a transformation and a predicate are, and the base the bundled ones share.

:class:`Transformation` and :class:`Predicate` are the public contracts
(``connect_runtime.api.transform``, re-exported by ``connect_runtime``): Kafka
Connect's interfaces, in Python. A user's own class only has to have their
methods; subclassing nothing is required.

Invariants every implementation keeps (the contracts' docstring has them too):

* The class has a no-argument constructor; the chain makes one instance per
  stage, calls ``configure`` once with the plugin's own keys (the connector
  config's ``transforms.<alias>.*`` or ``predicates.<alias>.*``, prefix stripped,
  values as given: strings), then ``apply``/``test`` per record, then ``close``
  once when the task ends.
* ``apply`` never mutates the record it is given (the framework still holds it
  until its transaction commits): it returns a new one
  (``dataclasses.replace``), the same one unchanged, or None to drop it.
* ``config_def()`` describes every key ``configure`` reads; it is callable on
  the class or an instance, and validation (``PUT .../config/validate``) and
  ``GET /connector-plugins/<class>/config`` show it.
* Errors: a bad configuration raises :class:`ConfigException`, a record the
  plugin cannot handle raises :class:`DataException`. The chain does not catch
  either; the task's error handler decides (``errors.tolerance``).

The bundled plugins derive from :class:`Bundled` (and :class:`Sided` for the
``$Key``/``$Value`` pairs), which knows the plugin's alias once the chain has
bound it, so every error names the full key (``transforms.<alias>.<key>``) or
the alias, field and topic.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from connect_runtime import __version__
from connect_runtime.api.config_def import ConfigDef
from connect_runtime.api.schema import Struct
from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.configs import parse_prefixed

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord
    from connect_runtime.api.schema import Schema

TRANSFORMS_PACKAGE = "org.apache.kafka.connect.transforms"
PREDICATES_PACKAGE = TRANSFORMS_PACKAGE + ".predicates"


def stage_label(kind: str, alias: str, class_name: str) -> str:
    """How errors and the task's error handler name a plugin of a chain:
    ``transform 'mask' (org.apache.kafka.connect.transforms.MaskField$Value)``."""
    return f"{kind} {alias!r} ({class_name})"


class Bundled:
    """Base of the bundled transformations and predicates.

    ``connect_name`` is Kafka Connect's class name of the same plugin (what
    listings show and configs may use). ``CONFIG_DEF`` holds Connect's keys,
    defaults, validators and docs. Until the chain binds an alias
    (:meth:`bind`), errors name the bare key and the Connect class name.
    """

    connect_name: ClassVar[str]
    kind: ClassVar[str] = "transform"
    CONFIG_DEF: ClassVar[ConfigDef] = ConfigDef()

    def __init__(self) -> None:
        self.alias: str | None = None
        self.key_prefix = ""

    @classmethod
    def config_def(cls) -> ConfigDef:
        """Connect's keys for this plugin."""
        return cls.CONFIG_DEF

    def version(self) -> str:
        """The bundled plugins have the package's version."""
        return __version__

    def bind(self, alias: str, key_prefix: str) -> None:
        """Called by the chain before ``configure``: errors then name ``key_prefix + key``."""
        self.alias = alias
        self.key_prefix = key_prefix

    @property
    def label(self) -> str:
        """How messages name this plugin: ``transform 'mask' (<Connect class>)``."""
        if self.alias is None:
            return self.connect_name
        return stage_label(self.kind, self.alias, self.connect_name)

    def configure(self, configs: dict[str, str]) -> None:
        """Parse and keep the keys; subclasses read them in :meth:`configured`."""
        self.configured(parse_prefixed(self.config_def(), configs, self.key_prefix))

    def configured(self, values: dict[str, Any]) -> None:
        """Take the parsed values (every key of ``CONFIG_DEF``, defaults applied)."""

    def close(self) -> None:
        """Nothing to release."""

    def config_error(self, key: str | None, value: Any, message: str) -> ConfigException:
        """A ConfigException naming the full key (``transforms.<alias>.<key>``)."""
        if key is None:
            return ConfigException(f"{self.label}: {message}")
        return ConfigException(message, name=self.key_prefix + key, value=value)

    def data_error(self, record: SourceRecord, message: str) -> DataException:
        """A DataException naming this plugin (alias and class) and the record's topic."""
        return DataException(f"{self.label} failed on a record for topic {record.topic!r}: "
                             f"{message}")


class Side(enum.Enum):
    """Which part of the record a ``$Key`` or ``$Value`` transformation works on."""

    KEY = "Key"
    VALUE = "Value"


S = TypeVar("S", bound="Sided")


class Sided(Bundled):
    """A transformation with Connect's ``$Key`` and ``$Value`` variants.

    The base class is abstract; :func:`with_sides` makes ``Cls.Key`` and
    ``Cls.Value``, named ``<Connect name>$Key`` / ``$Value`` like Connect's.
    """

    side: ClassVar[Side]
    Key: ClassVar[type[Sided]]
    Value: ClassVar[type[Sided]]

    @property
    def part(self) -> str:
        """``key`` or ``value``, for messages."""
        return self.side.name.lower()

    def schema_of(self, record: SourceRecord) -> Schema | None:
        """The operating schema: the key's or the value's."""
        return record.key_schema if self.side is Side.KEY else record.value_schema

    def value_of(self, record: SourceRecord) -> Any:
        """The operating data: the key or the value."""
        return record.key if self.side is Side.KEY else record.value

    def updated(self, record: SourceRecord, schema: Schema | None, value: Any) -> SourceRecord:
        """A new record with the operating schema and data replaced."""
        if self.side is Side.KEY:
            return dataclasses.replace(record, key_schema=schema, key=value)
        return dataclasses.replace(record, value_schema=schema, value=value)

    def require_map(self, record: SourceRecord, value: Any, purpose: str) -> Mapping[str, Any]:
        """``value`` if it is a dict (schemaless data), else DataException (Connect's wording)."""
        if not isinstance(value, Mapping):
            raise self.data_error(record, f"only dict {self.part}s are supported without a "
                                  f"schema for [{purpose}], found: {_type_name(value)}")
        return value

    def require_struct(self, record: SourceRecord, value: Any, purpose: str) -> Struct:
        """``value`` if it is a Struct (data with a schema), else DataException."""
        if not isinstance(value, Struct):
            raise self.data_error(record, f"only Struct {self.part}s are supported for "
                                  f"[{purpose}], found: {_type_name(value)}")
        return value


def with_sides(cls: type[S]) -> type[S]:
    """Class decorator: give a :class:`Sided` class its ``Key`` and ``Value`` variants.

    They are real subclasses (``InsertField.Value``) whose qualified names make
    them importable (``connect_runtime.transforms.fields.InsertField.Value``) and
    picklable, and whose ``connect_name`` is ``...InsertField$Value``.
    """
    for side in Side:
        variant: type[S] = type(side.value, (cls,), {
            "side": side,
            "connect_name": f"{cls.connect_name}${side.value}",
            "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}.{side.value}",
            "__doc__": f"{cls.__name__} on the record {side.name.lower()}: "
                       f"{(cls.__doc__ or cls.__name__).strip().splitlines()[0]}",
        })
        setattr(cls, side.value, variant)
    return cls


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__
