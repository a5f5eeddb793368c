"""Converters turn a record's key or value into the bytes written to Kafka.

They run once per record on the executor, so ``from_connect`` does the least
work it can: no per-call config lookups, no copies of the value.

Python records carry no Connect schema, so the JSON converter is schemaless by
default (``schemas.enable=false``); with ``schemas.enable=true`` it writes
Connect's envelope with a null schema, which Connect's own JsonConverter reads.

Invariants:

* ``from_connect(topic, schema, None)`` is ``None`` for every converter: a null value
  stays a tombstone. (The task loops rely on it and do not call a converter
  for a None key or value at all.)
* ``bytes`` pass through unchanged: a task that already serialized its data is
  never serialized twice.
* A value a converter cannot encode raises :class:`DataException` naming the
  topic, which fails the task (the open transaction is aborted).
"""

from __future__ import annotations

import codecs
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import orjson

from connect_runtime import __version__
from connect_runtime.api.config_def import ConfigDef, Importance, Type, Width
from connect_runtime.errors import ConfigException, DataException

if TYPE_CHECKING:
    from connect_runtime.api.schema import Schema


@runtime_checkable
class Converter(Protocol):
    """Serializes record keys or values. Must have a no-argument constructor."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        """``configs`` is the converter's sub-config, e.g. ``schemas.enable``."""
        ...

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Bytes for Kafka, or None for a null key/value. ``schema`` is the record's
        key or value schema (None: schemaless); ``value`` is valid for it."""
        ...


_dumps = orjson.dumps
_BYTES_LIKE = (bytes, bytearray, memoryview)

Encoder = Callable[[Any], bytes]


def fast_encoder(converter: Converter) -> Encoder | None:
    """A C function equal to ``converter.from_connect`` for the values it accepts.

    Internal to the task loop's hot path, where a Python call per record costs
    as much as the encoding itself; built-in converters offer one. It returns
    what ``from_connect`` would for every non-None value it accepts and raises
    for every value it does not (bytes to pass through, a value to reject), so
    the caller falls back to ``from_connect``. None for converters without one.
    """
    offer = getattr(converter, "_fast_encoder", None)
    return offer() if callable(offer) else None


def _parse_bool(configs: dict[str, str], key: str, default: bool) -> bool:
    raw = configs.get(key)
    if raw is None:
        return default
    folded = str(raw).strip().lower()
    if folded not in ("true", "false"):
        raise ConfigException("Expected value to be either true or false", name=key, value=raw)
    return folded == "true"


class JsonConverter:
    """JSON via orjson; ``schemas.enable`` (default false) wraps values in an envelope."""

    def __init__(self) -> None:
        self._schemas_enable = False

    @staticmethod
    def config_def() -> ConfigDef:
        """The one key this converter reads. Connect's default is true: see the module docstring."""
        return ConfigDef().define(
            "schemas.enable", Type.BOOLEAN, False, importance=Importance.HIGH,
            documentation="Include schemas within each of the serialized values and keys. "
            "Python records carry no schema, so true writes Connect's envelope with a "
            "null schema.", group="Schemas", order_in_group=0, width=Width.MEDIUM,
            display_name="Enable Schemas")

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        self._schemas_enable = _parse_bool(configs, "schemas.enable", False)

    def _fast_encoder(self) -> Encoder | None:
        # orjson raises TypeError for bytes and for anything it cannot encode.
        return None if self._schemas_enable else _dumps

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if self._schemas_enable and not isinstance(value, _BYTES_LIKE):
            value = {"schema": None, "payload": value}
        try:
            return _dumps(value)
        except TypeError as e:  # orjson.JSONEncodeError is a TypeError
            # Bytes are rare here, so they are handled off the hot path: orjson
            # refuses them, and a task that serialized its own data wants them as is.
            if isinstance(value, _BYTES_LIKE):
                return value if type(value) is bytes else bytes(value)
            raise DataException(
                f"Converting {type(value).__name__} to JSON for topic {topic} failed: {e}"
            ) from e


class StringConverter:
    """``str(value)`` encoded with ``converter.encoding`` (default UTF-8)."""

    def __init__(self) -> None:
        self._encoding = "utf-8"

    @staticmethod
    def config_def() -> ConfigDef:
        """The one key this converter reads, as Connect's StringConverter defines it."""
        return ConfigDef().define(
            "converter.encoding", Type.STRING, "UTF-8", importance=Importance.HIGH,
            documentation="The name of the character set to use for encoding strings as "
            "byte arrays.", width=Width.MEDIUM, display_name="Encoding")

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        encoding = configs.get("converter.encoding", "utf-8").strip()
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise ConfigException("Unknown encoding", name="converter.encoding",
                                  value=encoding) from None
        self._encoding = encoding

    def _fast_encoder(self) -> Encoder | None:
        # str.encode raises TypeError for anything but a str (bytes, numbers, ...).
        return str.encode if codecs.lookup(self._encoding).name == "utf-8" else None

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if type(value) is bytes:
            return value
        try:
            return (value if type(value) is str else str(value)).encode(self._encoding)
        except UnicodeEncodeError as e:
            raise DataException(f"Cannot encode a value for topic {topic} as "
                                f"{self._encoding}: {e}") from e


class ByteArrayConverter:
    """Passes bytes through; accepts bytes, bytearray, memoryview or None."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        pass

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None or type(value) is bytes:
            return value
        if isinstance(value, _BYTES_LIKE):
            return bytes(value)
        raise DataException(f"ByteArrayConverter is not compatible with objects of type "
                            f"{type(value).__name__} (topic {topic})")


_BUILTIN: dict[str, type[Any]] = {
    "connect_runtime.converters.JsonConverter": JsonConverter,
    "connect_runtime.converters.StringConverter": StringConverter,
    "connect_runtime.converters.ByteArrayConverter": ByteArrayConverter,
    # Connect's class names, so an existing connector config works unchanged.
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    # Connect also accepts a plugin's simple class name, and that name without
    # its "Converter" suffix, as aliases.
    "JsonConverter": JsonConverter,
    "StringConverter": StringConverter,
    "ByteArrayConverter": ByteArrayConverter,
    "Json": JsonConverter,
    "String": StringConverter,
    "ByteArray": ByteArrayConverter,
}


def _builtin_converters() -> list[type[Any]]:
    """The converter classes this package ships (each once, whatever its aliases)."""
    return list(dict.fromkeys(_BUILTIN.values()))


def _connect_class_name(cls: type[Any]) -> str | None:
    """Connect's Java class name of built-in converter ``cls``: how listings show it."""
    return next((name for name, found in _BUILTIN.items()
                 if found is cls and name.startswith("org.apache.kafka.")), None)


def listed_converter_names() -> list[str]:
    """The built-in converters as listings name them (Connect's class name, else
    ``module.Class``), sorted: ``GET /connector-plugins`` and validate's choices."""
    return sorted(_connect_class_name(c) or f"{c.__module__}.{c.__qualname__}"
                  for c in _builtin_converters())


def converter_class_named(name: str) -> type[Any] | None:
    """The built-in converter ``name`` (a class path, a Connect class name or an alias)."""
    return _BUILTIN.get(name.strip())


def converter_version(name: str) -> str | None:
    """The version of converter ``name``: the package's for a built-in, else None (unknown)."""
    return __version__ if converter_class_named(name) is not None else None


def converter_config_def(cls: type[Any]) -> ConfigDef:
    """The keys converter ``cls`` reads (its ``config_def()``; empty if it has none).

    Like Connect's ``Converter.config()``, for ``GET /connector-plugins/<converter>/config``.
    """
    config_def = getattr(cls, "config_def", None)
    found = config_def() if callable(config_def) else None
    return found if isinstance(found, ConfigDef) else ConfigDef()


def resolve_converter_class(class_name: str, config_key: str) -> type[Any]:
    """The converter class named ``class_name``: a built-in or alias, or ``module.Class``.

    Raises ConfigException naming ``config_key`` (``key.converter`` or
    ``value.converter``) if it cannot be found or is not a converter.
    """
    name = class_name.strip()
    if name in _BUILTIN:
        return _BUILTIN[name]
    module_name, _, attr = name.rpartition(".")
    cls: Any = None
    if module_name:
        try:
            cls = getattr(importlib.import_module(module_name), attr, None)
        except ImportError:
            cls = None
    if cls is None:
        available = ", ".join(sorted({f"{c.__module__}.{c.__qualname__}"
                                      for c in _BUILTIN.values()}))
        raise ConfigException(
            f"Failed to find any class that implements Converter and which name matches "
            f"{name}, available converters are: {available}", name=config_key, value=name)
    if not isinstance(cls, type) or not issubclass(cls, Converter):
        raise ConfigException(f"{name} is not a Converter (it needs configure and "
                              "from_connect methods)", name=config_key, value=name)
    return cls


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
