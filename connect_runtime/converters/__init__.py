"""Converters turn a record's key, value or header values into the bytes written to Kafka.

Every built-in converter writes exactly the bytes its Kafka Connect 4.1
namesake writes for the same schema and value (``tests/converters/vectors/``
holds Connect's own output for each case; docs/converters.md says how to
regenerate it), so a Connect consumer, sink or tool reads what this runtime
writes. Where Connect's behaviour depends on the JVM (time zone, JDK version)
ours is Connect on JDK 19+ in UTC. The few deliberate differences are listed
in docs/converters.md.

The package, one job per module:

* :mod:`.base`: the ``Converter`` and ``HeaderConverter`` protocols, ``fast_encoder``.
* :mod:`.json`: ``JsonConverter`` (``schemas.enable`` defaults to false here).
* :mod:`.string`: ``StringConverter``; :mod:`.header`: ``SimpleHeaderConverter``.
* :mod:`.primitives`: the number converters, ``BooleanConverter``, ``ByteArrayConverter``.
* :mod:`.java`: Java's text of numbers and dates, shared by the three above.
* :mod:`.registry`: the Schema Registry converters under Confluent's class names
  (``io.confluent.connect.avro.AvroConverter``,
  ``io.confluent.connect.json.JsonSchemaConverter``,
  ``io.confluent.connect.protobuf.ProtobufConverter``); key and value converters only.
* this module: the registry of names and aliases, and the loaders.

They run once per record on the executor, so ``from_connect`` does the least
work it can: no per-call config lookups, no copies of the value.

Invariants:

* ``from_connect(topic, schema, None)`` is ``None`` for every converter: a null value
  stays a tombstone. (The task loops rely on it and do not call a converter
  for a None key or value at all.) Likewise a None header value stays None.
* ``bytes`` without a schema pass through unchanged: a task that already
  serialized its data is never serialized twice. The same holds for header
  values, which the record sender does not even hand to the header converter.
* A value a converter cannot encode raises :class:`DataException` naming the
  topic (and, for a value that does not match its schema, the place in it),
  which fails the task (the open transaction is aborted).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

from connect_runtime import __version__
from connect_runtime.api.config_def import ConfigDef
from connect_runtime.converters.base import Converter, Encoder, HeaderConverter, fast_encoder
from connect_runtime.converters.header import SimpleHeaderConverter
from connect_runtime.converters.json import JsonConverter
from connect_runtime.converters.primitives import (
    BooleanConverter,
    ByteArrayConverter,
    DoubleConverter,
    FloatConverter,
    IntegerConverter,
    LongConverter,
    ShortConverter,
)
from connect_runtime.converters.registry.avro import AvroConverter
from connect_runtime.converters.registry.json_schema import JsonSchemaConverter
from connect_runtime.converters.registry.protobuf import ProtobufConverter
from connect_runtime.converters.string import StringConverter
from connect_runtime.errors import ConfigException

__all__ = [
    "AvroConverter",
    "BooleanConverter",
    "ByteArrayConverter",
    "Converter",
    "DoubleConverter",
    "Encoder",
    "FloatConverter",
    "HeaderConverter",
    "IntegerConverter",
    "JsonConverter",
    "JsonSchemaConverter",
    "LongConverter",
    "ProtobufConverter",
    "ShortConverter",
    "SimpleHeaderConverter",
    "StringConverter",
    "converter_class_named",
    "converter_config_def",
    "converter_version",
    "fast_encoder",
    "header_converter_class_named",
    "listed_converter_names",
    "listed_header_converter_names",
    "load_converter",
    "load_header_converter",
    "resolve_converter_class",
    "resolve_header_converter_class",
]

HEADER_CONVERTER_CONFIG = "header.converter"

# Connect's class name of each built-in.
_CONNECT_NAMES: dict[type[Any], str] = {
    JsonConverter: "org.apache.kafka.connect.json.JsonConverter",
    StringConverter: "org.apache.kafka.connect.storage.StringConverter",
    ByteArrayConverter: "org.apache.kafka.connect.converters.ByteArrayConverter",
    BooleanConverter: "org.apache.kafka.connect.converters.BooleanConverter",
    ShortConverter: "org.apache.kafka.connect.converters.ShortConverter",
    IntegerConverter: "org.apache.kafka.connect.converters.IntegerConverter",
    LongConverter: "org.apache.kafka.connect.converters.LongConverter",
    FloatConverter: "org.apache.kafka.connect.converters.FloatConverter",
    DoubleConverter: "org.apache.kafka.connect.converters.DoubleConverter",
    SimpleHeaderConverter: "org.apache.kafka.connect.storage.SimpleHeaderConverter",
    AvroConverter: "io.confluent.connect.avro.AvroConverter",
    JsonSchemaConverter: "io.confluent.connect.json.JsonSchemaConverter",
    ProtobufConverter: "io.confluent.connect.protobuf.ProtobufConverter",
}


def _names(cls: type[Any], suffix: str) -> dict[str, type[Any]]:
    """Every name of built-in ``cls``: our class path (also the old one of the single
    ``converters`` module), Connect's class name, and Connect's aliases: the simple
    class name, and that name without ``suffix``."""
    simple = cls.__name__
    names = {f"connect_runtime.converters.{simple}": cls, f"{cls.__module__}.{simple}": cls,
             _CONNECT_NAMES[cls]: cls, simple: cls}
    if simple.endswith(suffix) and simple != suffix:
        names[simple.removesuffix(suffix)] = cls
    return names


# Connect's own converters: each is a header converter too.
_CONNECT_CONVERTERS = [JsonConverter, StringConverter, ByteArrayConverter, BooleanConverter,
                       ShortConverter, IntegerConverter, LongConverter, FloatConverter,
                       DoubleConverter]
# Confluent's Schema Registry converters: key and value converters only (Confluent's
# do not implement HeaderConverter).
_REGISTRY_CONVERTERS = [AvroConverter, JsonSchemaConverter, ProtobufConverter]
_CONVERTERS = _CONNECT_CONVERTERS + _REGISTRY_CONVERTERS

_BUILTIN: dict[str, type[Any]] = {
    name: cls for converter in _CONVERTERS for name, cls in _names(converter, "Converter").items()}
"""Key and value converters by every name a config may use."""

# Every built-in converter is a header converter too (Connect's implement
# HeaderConverter); SimpleHeaderConverter is only one. Connect prunes
# "HeaderConverter" from a header converter's alias ("Simple").
_BUILTIN_HEADER: dict[str, type[Any]] = {
    **{name: cls for converter in _CONNECT_CONVERTERS
       for name, cls in _names(converter, "Converter").items()},
    **_names(SimpleHeaderConverter, "HeaderConverter")}
"""Header converters by every name a config may use."""


def listed_converter_names() -> list[str]:
    """The built-in converters as listings name them (Connect's class name), sorted:
    ``GET /connector-plugins`` and validate's choices for key/value.converter."""
    return sorted(_CONNECT_NAMES[c] for c in _CONVERTERS)


def listed_header_converter_names() -> list[str]:
    """The built-in header converters by Connect's class names, sorted (Connect lists
    every converter that implements HeaderConverter, and SimpleHeaderConverter)."""
    return sorted(_CONNECT_NAMES[c] for c in [*_CONNECT_CONVERTERS, SimpleHeaderConverter])


def converter_class_named(name: str) -> type[Any] | None:
    """The built-in converter ``name`` (a class path, a Connect class name or an alias)."""
    return _BUILTIN.get(name.strip())


def header_converter_class_named(name: str) -> type[Any] | None:
    """The built-in header converter ``name`` (a class path, Connect's name or an alias)."""
    return _BUILTIN_HEADER.get(name.strip())


def converter_version(name: str) -> str | None:
    """The version of (header) converter ``name``: the package's for a built-in, else
    None (unknown)."""
    return __version__ if header_converter_class_named(name) is not None else None


def converter_config_def(cls: type[Any]) -> ConfigDef:
    """The keys (header) converter ``cls`` reads (its ``config_def()``; empty if none).

    Like Connect's ``Converter.config()``, for ``GET /connector-plugins/<converter>/config``.
    """
    config_def = getattr(cls, "config_def", None)
    found = config_def() if callable(config_def) else None
    return found if isinstance(found, ConfigDef) else ConfigDef()


def _import_class(name: str) -> Any:
    module_name, _, attr = name.rpartition(".")
    if not module_name:
        return None
    try:
        return getattr(importlib.import_module(module_name), attr, None)
    except ImportError:
        return None


def _resolve(name: str, config_key: str, builtin: Mapping[str, type[Any]], protocol: type,
             kind: str, plural: str, listed: Callable[[], list[str]],
             methods: str) -> type[Any]:
    """The ``kind`` class named ``name``: a built-in or alias from ``builtin``, else an
    importable ``module.Class`` that has ``protocol``'s methods. Errors name ``config_key``."""
    name = name.strip()
    if name in builtin:
        return builtin[name]
    cls = _import_class(name)
    if cls is None:
        raise ConfigException(
            f"Failed to find any class that implements {kind} and which name matches "
            f"{name}, available {plural} are: {', '.join(listed())}",
            name=config_key, value=name)
    if not isinstance(cls, type) or not issubclass(cls, protocol):
        raise ConfigException(f"{name} is not a {kind} (it needs {methods} methods)",
                              name=config_key, value=name)
    return cls


def resolve_converter_class(class_name: str, config_key: str) -> type[Any]:
    """The converter class named ``class_name``: a built-in or alias, or ``module.Class``.

    Raises ConfigException naming ``config_key`` (``key.converter`` or
    ``value.converter``) if it cannot be found or is not a converter.
    """
    return _resolve(class_name, config_key, _BUILTIN, Converter, "Converter", "converters",
                    listed_converter_names, "configure and from_connect")


def resolve_header_converter_class(class_name: str,
                                   config_key: str = HEADER_CONVERTER_CONFIG) -> type[Any]:
    """The header converter class named ``class_name`` (a built-in, alias or
    ``module.Class``). Raises ConfigException naming ``config_key``."""
    return _resolve(class_name, config_key, _BUILTIN_HEADER, HeaderConverter,
                    "HeaderConverter", "header converters", listed_header_converter_names,
                    "configure and from_connect_header")


def load_converter(
    class_name: str, configs: dict[str, str], is_key: bool, config_key: str | None = None
) -> Converter:
    """Instantiate and configure the converter ``class_name``.

    ``configs`` is the converter's sub-config with the ``key.converter.`` /
    ``value.converter.`` prefix already stripped. Errors name ``config_key``,
    by default ``key.converter`` or ``value.converter`` according to ``is_key``.
    """
    config_key = config_key or ("key.converter" if is_key else "value.converter")
    cls = resolve_converter_class(class_name, config_key)
    converter: Converter = cls()
    converter.configure(dict(configs), is_key)
    return converter


def load_header_converter(class_name: str, configs: dict[str, str],
                          config_key: str = HEADER_CONVERTER_CONFIG) -> HeaderConverter:
    """Instantiate and configure the header converter ``class_name``.

    ``configs`` is its sub-config with the ``header.converter.`` prefix stripped;
    the converter's ``configure(configs)`` gets it (Connect's
    ``Configurable.configure``). Errors name ``config_key``.
    """
    cls = resolve_header_converter_class(class_name, config_key)
    converter: HeaderConverter = cls()
    converter.configure(dict(configs))
    return converter
