"""Finding transformation and predicate classes by the names a connector config uses.

``transforms.<alias>.type`` (or ``predicates.<alias>.type``) may name, in this order:

1. an entry point of the group ``connect_runtime.transforms`` (or
   ``connect_runtime.predicates``), which is how installed plugins register;
2. a bundled plugin by Kafka Connect's class name
   (``org.apache.kafka.connect.transforms.InsertField$Value``), by the simple
   name Connect accepts as an alias (``RegexRouter``, ``Filter``,
   ``TopicNameMatches``: the unambiguous top-level classes; ``$Key``/``$Value``
   variants have none), or by its Python path
   (``connect_runtime.transforms.fields.InsertField.Value``);
3. any importable class path, ``pkg.mod.Class`` or ``pkg.mod:Class`` (nested
   classes too: ``pkg.mod.Outer.Inner``).

A class qualifies if it has ``configure`` and ``apply`` (a transformation) or
``configure`` and ``test`` (a predicate); see :mod:`.base`. Listings name a
bundled plugin by Connect's class name, anything else by ``module.QualName``.
Entry points are read at every call, so an install shows without a restart; one
that fails to load is skipped with a warning.
"""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from connect_runtime.api.config_def import ConfigDef
from connect_runtime.errors import ConfigException, ConnectError
from connect_runtime.transforms.base import Bundled, Sided
from connect_runtime.transforms.cast import Cast
from connect_runtime.transforms.fields import InsertField, MaskField, ReplaceField
from connect_runtime.transforms.headers import DropHeaders, HeaderFrom, InsertHeader
from connect_runtime.transforms.metadata import SetSchemaMetadata
from connect_runtime.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from connect_runtime.transforms.reshape import ExtractField, Flatten, HoistField, ValueToKey
from connect_runtime.transforms.routing import Filter, RegexRouter, TimestampRouter
from connect_runtime.transforms.timestamps import TimestampConverter

log = logging.getLogger(__name__)

UNDEFINED_VERSION = "undefined"  # Connect's version of a plugin that does not say


@dataclass(frozen=True)
class PluginKind:
    """Transformations or predicates: where they are configured, registered and listed."""

    config_key: str  # "transforms": the list of aliases, and the keys' prefix
    group: str  # validation's group of an alias's keys is "<group>: <alias>"
    plugin_type: str  # the type GET /connector-plugins shows
    title: str  # as Connect's messages and display names say it
    entry_point_group: str
    method: str  # what an implementation must have besides configure

    def prefix(self, alias: str) -> str:
        """``transforms.<alias>.``: the prefix of this alias's keys."""
        return f"{self.config_key}.{alias}."


TRANSFORMATION = PluginKind("transforms", "Transforms", "transformation", "Transformation",
                            "connect_runtime.transforms", "apply")
PREDICATE = PluginKind("predicates", "Predicates", "predicate", "Predicate",
                       "connect_runtime.predicates", "test")
KINDS = (TRANSFORMATION, PREDICATE)

_SIDED = (Cast, ExtractField, Flatten, HeaderFrom, HoistField, InsertField, MaskField,
          ReplaceField, SetSchemaMetadata, TimestampConverter)
_BUNDLED: dict[PluginKind, tuple[type[Bundled], ...]] = {
    TRANSFORMATION: (*(variant for cls in _SIDED for variant in (cls.Key, cls.Value)),
                     DropHeaders, Filter, InsertHeader, RegexRouter, TimestampRouter,
                     ValueToKey),
    PREDICATE: (HasHeaderKey, RecordIsTombstone, TopicNameMatches),
}


def _bundled_names() -> dict[str, type]:
    """Every name a bundled plugin (of either kind) answers to: Connect's, its alias, its
    Python path."""
    names: dict[str, type] = {}
    for cls in (*_BUNDLED[TRANSFORMATION], *_BUNDLED[PREDICATE]):
        simple = cls.connect_name.rpartition(".")[2]
        names[cls.connect_name] = names[qualified_name(cls)] = cls
        if "$" not in simple:
            names[simple] = cls
    return names


def qualified_name(cls: type) -> str:
    """``module.QualName``: a class's importable path."""
    return f"{cls.__module__}.{cls.__qualname__}"


def listed_name(cls: type) -> str:
    """The name listings and validation show: Connect's for a bundled plugin."""
    if issubclass(cls, Bundled) and "connect_name" in vars(cls):
        return cls.connect_name
    return qualified_name(cls)


def is_kind(cls: Any, kind: PluginKind) -> bool:
    """Whether ``cls`` is a class with ``configure`` and the kind's method."""
    return isinstance(cls, type) and all(
        callable(getattr(cls, method, None)) for method in ("configure", kind.method))


def _entry_point_plugins(kind: PluginKind) -> dict[str, type]:
    found: dict[str, type] = {}
    for ep in entry_points(group=kind.entry_point_group):
        try:
            loaded = ep.load()
        except Exception as e:  # one broken install must not hide the others
            log.warning("Skipping %s plugin %s = %s: %s: %s", kind.plugin_type, ep.name,
                        ep.value, type(e).__name__, e)
            continue
        if not is_kind(loaded, kind):
            log.warning("Skipping %s plugin %s = %s: not a %s (configure and %s needed)",
                        kind.plugin_type, ep.name, ep.value, kind.title, kind.method)
            continue
        found[ep.name] = loaded
    return found


def known_plugins(kind: PluginKind) -> dict[str, type]:
    """Listed name -> class of every bundled and entry-point plugin of ``kind``, sorted."""
    classes = {listed_name(cls): cls for cls in _BUNDLED[kind]}
    for cls in _entry_point_plugins(kind).values():
        classes.setdefault(listed_name(cls), cls)
    return dict(sorted(classes.items()))


def resolve(kind: PluginKind, name: str, key: str) -> type:
    """The class ``name`` names (see the module docstring); ConfigException naming ``key``
    if there is none or it is not of ``kind``."""
    wanted = name.strip()
    found = (_entry_point_plugins(kind).get(wanted) or _bundled_names().get(wanted)
             or _import_path(wanted, key))
    if found is None:
        raise ConfigException(f"Class {wanted} could not be found.", name=key, value=name)
    if not is_kind(found, kind):
        raise ConfigException(f"Class {wanted} does not implement the {kind.title} interface "
                              f"(it needs configure and {kind.method} methods)", name=key,
                              value=name)
    if issubclass(found, Sided) and not hasattr(found, "side"):
        pair = getattr(found, "connect_name", wanted)
        raise ConfigException(f"{wanted} works on the key or the value: use {pair}$Key or "
                              f"{pair}$Value", name=key, value=name)
    return found


def find(name: str) -> tuple[PluginKind, type] | None:
    """The transformation or predicate ``name`` names, if any (no errors: for lookups)."""
    for kind in KINDS:
        try:
            return kind, resolve(kind, name, kind.config_key)
        except ConnectError:
            continue
    return None


def _import_path(name: str, key: str) -> Any:
    """The object at ``pkg.mod.Attr[.Nested]`` or ``pkg.mod:Attr``; None if no module has it.

    A module that exists but fails to import is a ConfigException with the cause:
    "not found" would send the user looking in the wrong place.
    """
    if ":" in name:
        module_name, _, path = name.partition(":")
        candidates = [(module_name, path.split("."))]
    else:
        parts = name.split(".")
        candidates = [(".".join(parts[:i]), parts[i:]) for i in range(len(parts) - 1, 0, -1)]
    for module_name, attrs in candidates:
        try:
            found: Any = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and (module_name + ".").startswith(e.name + "."):
                continue  # no such module: try a shorter one
            raise ConfigException(f"Cannot import {module_name}: {e}", name=key,
                                  value=name) from e
        except Exception as e:
            raise ConfigException(f"Cannot import {module_name}: {type(e).__name__}: {e}",
                                  name=key, value=name) from e
        for attr in attrs:
            found = getattr(found, attr, None)
        if found is not None:
            return found
    return None


def instantiate(cls: type, key: str) -> Any:
    """``cls()``; ConfigException naming ``key`` if the constructor fails."""
    try:
        return cls()
    except Exception as e:
        raise ConfigException(f"Cannot create {listed_name(cls)}: {type(e).__name__}: {e}",
                              name=key, value=listed_name(cls)) from e


def config_def_of(plugin: Any) -> ConfigDef:
    """The plugin's ``config_def()`` (an empty one if it has none); ConfigException if it
    does not return a ConfigDef."""
    method = getattr(plugin, "config_def", None)
    if method is None:
        return ConfigDef()
    found = method()
    if not isinstance(found, ConfigDef):
        raise ConfigException(f"{listed_name(type(plugin))}.config_def() returned "
                              f"{type(found).__name__}, not a ConfigDef")
    return found


def version_of(cls: type) -> str:
    """The plugin's ``version()``, or ``undefined`` (as Connect says) without one."""
    try:
        method = getattr(cls(), "version", None)
        return str(method()) if callable(method) else UNDEFINED_VERSION
    except Exception:  # listing and validation must survive a plugin that cannot be built
        return UNDEFINED_VERSION
