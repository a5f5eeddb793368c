"""Finding connector classes, the way Kafka Connect resolves ``connector.class``.

Installed plugins register their :class:`SourceConnector` classes as entry
points in the group ``connect_runtime.connectors``. Those, plus the concrete
SourceConnector subclasses defined in the modules of ``plugin.path``
(:func:`register_plugin_modules`, subpackages included), are the *known*
plugins (listed by ``GET /connector-plugins``). ``connector.class`` may name:

1. an entry point name (``SequenceSourceConnector``);
2. an importable ``module.Class`` path (known or not);
3. the simple class name or its alias without the ``Connector`` suffix
   (``SequenceSource``) of a known plugin, if exactly one plugin matches;
4. Kafka Connect's Java class name of a bundled connector that does the same
   job (``org.apache.kafka.connect.file.FileStreamSourceConnector``), so a
   config written for Connect works unchanged.

Listings show such a plugin under Connect's name: it is the name existing
clients look for and create connectors with, and a config using it works on
both runtimes. The Python class that runs stays accepted everywhere.

:func:`list_plugins` adds the transformations and predicates
(``connect_runtime.transforms.registry``) and the converters
(``connect_runtime.converters``) to the connectors, in Connect's order of
plugin types.

A plugin whose module fails to import is skipped with a warning, so one broken
install does not take every other connector down with it.

Entry points are read at every call (an install shows up without a restart);
``plugin.path`` modules are scanned once, when registered.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import pkgutil
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from connect_runtime import __version__
from connect_runtime.api.config_def import ConfigKey
from connect_runtime.api.connector import SourceConnector
from connect_runtime.config.connector_config import connector_config_def
from connect_runtime.converters import (
    converter_class_named,
    converter_config_def,
    header_converter_class_named,
    listed_converter_names,
    listed_header_converter_names,
)
from connect_runtime.errors import ConfigException, ConnectError, NotFoundException
from connect_runtime.transforms import registry as transforms

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "connect_runtime.connectors"
_KEY = "connector.class"

# plugin.path classes: ``module.Class`` -> class (see register_plugin_modules).
_path_plugins: dict[str, type[SourceConnector]] = {}
# The plugin.path directories those came from, for "not found" messages.
_searched_dirs: tuple[str, ...] = ()
_registry_lock = threading.Lock()

# Connect's class name -> the bundled connector (``module.Class``) doing the same job.
# The sequence connector has no Java counterpart.
_CONNECT_CLASS_NAMES = {
    "org.apache.kafka.connect.file.FileStreamSourceConnector":
        "connect_runtime.connectors.file.FileStreamSourceConnector",
}

# Connect's plugin types, in the order its GET /connector-plugins lists them.
PLUGIN_TYPE_ORDER = ("sink", "source", "transformation", "predicate", "converter",
                     "header_converter")


def qualified_name(cls: type) -> str:
    """``module.Class``: the name REST shows and the config may use."""
    return f"{cls.__module__}.{cls.__qualname__}"


def _aliases(cls: type) -> set[str]:
    simple = cls.__name__
    pruned = simple.removesuffix("Connector")
    return {simple, pruned} if pruned else {simple}


def _load_entry_point(ep: EntryPoint) -> type | None:
    try:
        loaded = ep.load()
    except Exception as e:  # a broken plugin must not hide the others
        log.warning("Skipping connector plugin %s = %s: %s: %s", ep.name, ep.value,
                    type(e).__name__, e)
        return None
    if not isinstance(loaded, type):
        log.warning("Skipping connector plugin %s = %s: not a class", ep.name, ep.value)
        return None
    return loaded


def _known_plugins() -> dict[str, type[SourceConnector]]:
    """Entry point name -> class, for every loadable SourceConnector entry point, then
    ``module.Class`` -> class for the plugin.path classes."""
    found: dict[str, type[SourceConnector]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        cls = _load_entry_point(ep)
        if cls is None:
            continue
        if not issubclass(cls, SourceConnector):
            log.warning("Skipping connector plugin %s = %s: not a SourceConnector",
                        ep.name, ep.value)
            continue
        found[ep.name] = cls
    with _registry_lock:
        for name, cls in _path_plugins.items():
            found.setdefault(name, cls)
    return found


def register_plugin_modules(modules: Iterable[str], searched: Iterable[str] = ()) -> None:
    """Make the SourceConnector classes defined in ``modules`` known plugins.

    ``modules`` are top-level names (``PluginPath.modules``); packages are walked
    with their subpackages. Everything is imported now, so a module that fails
    to import is logged (once) at worker startup and skipped. ``searched`` are
    the ``plugin.path`` directories scanned for them, which a ``connector.class``
    found nowhere is reported against. Replaces an earlier registration; empty
    ``modules`` and ``searched`` clear it.
    """
    global _searched_dirs
    found: dict[str, type[SourceConnector]] = {}
    for top in modules:
        for module in _walk(top):
            for cls in _connectors_defined_in(module):
                found.setdefault(qualified_name(cls), cls)
    with _registry_lock:
        _path_plugins.clear()
        _path_plugins.update(found)
        _searched_dirs = tuple(str(d) for d in searched)
    if found:
        log.info("Connector plugins from plugin.path: %s", ", ".join(sorted(found)))


def _walk(top: str) -> Iterator[ModuleType]:
    """``top`` and, for a package, every submodule that imports."""
    module = _import_or_warn(top)
    if module is None:
        return
    yield module
    path = getattr(module, "__path__", None)
    if path is None:
        return
    # walk_packages imports subpackages itself to look inside them; its failures
    # are the ones _import_or_warn has just logged.
    for info in pkgutil.walk_packages(path, prefix=f"{top}.", onerror=lambda name: None):
        sub = _import_or_warn(info.name)
        if sub is not None:
            yield sub


def _import_or_warn(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except Exception as e:  # a broken module must not hide the others
        log.warning("Skipping plugin module %s: %s: %s", name, type(e).__name__, e)
        return None


def _connectors_defined_in(module: ModuleType) -> list[type[SourceConnector]]:
    """Concrete SourceConnector subclasses whose home is ``module`` (not re-exports)."""
    return [obj for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, SourceConnector)
            and obj.__module__ == module.__name__ and not inspect.isabstract(obj)]


def _import_path(name: str) -> type | None:
    """The class at ``module.Class`` (or ``module:Class``); None if there is no such module.

    A module that exists but fails to import raises ConfigException with the
    cause: "not found" would send the user looking in the wrong place.
    """
    module_name, sep, attr = name.rpartition(":") if ":" in name else name.rpartition(".")
    if not sep or not module_name or not attr:
        return None
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is not None and (module_name + ".").startswith(e.name + "."):
            return None  # the named module (or its package) does not exist
        raise ConfigException(f"Cannot import {module_name}: {e}", name=_KEY,
                              value=name) from e
    except Exception as e:
        raise ConfigException(f"Cannot import {module_name}: {type(e).__name__}: {e}",
                              name=_KEY, value=name) from e
    found = getattr(module, attr, None)
    return found if isinstance(found, type) else None


def _require_source_connector(name: str, cls: type) -> type[SourceConnector]:
    if not issubclass(cls, SourceConnector):
        raise ConfigException(f"Class {qualified_name(cls)} does not extend SourceConnector",
                              name=_KEY, value=name)
    return cls


@dataclass(slots=True)
class PluginInfo:
    """One row of ``GET /connector-plugins``."""

    class_name: str
    type: str
    version: str

    def to_dict(self) -> dict[str, Any]:
        return {"class": self.class_name, "type": self.type, "version": self.version}


def resolve_connector_class(name: str) -> type[SourceConnector]:
    """The SourceConnector class ``name`` refers to (see the module docstring for the rules).

    Raises ConfigException naming ``connector.class`` if nothing matches, if an
    alias is ambiguous, or if the class is not a SourceConnector.
    """
    wanted = name.strip()
    known = _known_plugins()
    if wanted in known:
        return known[wanted]
    wanted = _CONNECT_CLASS_NAMES.get(wanted, wanted)
    imported = _import_path(wanted)
    if imported is not None:
        return _require_source_connector(wanted, imported)
    matches = {qualified_name(c): c for c in known.values() if wanted in _aliases(c)}
    if len(matches) == 1:
        return next(iter(matches.values()))
    available = ", ".join(sorted({qualified_name(c) for c in known.values()})) or "(none)"
    if matches:
        raise ConfigException(
            f"More than one connector matches alias {wanted}. Please use the full module "
            f"and class name instead. Classes found: {', '.join(sorted(matches))}",
            name=_KEY, value=name)
    raise ConfigException(
        f"Failed to find any class that implements SourceConnector and which name matches "
        f"{wanted}, available connectors are: {available}. {_where_searched()}",
        name=_KEY, value=name)


def _where_searched() -> str:
    """Where a connector class was looked for: the worker's environment and plugin.path."""
    with _registry_lock:
        dirs = _searched_dirs
    if not dirs:
        return "Searched the worker's installed packages; plugin.path is empty"
    return f"Searched the worker's installed packages and plugin.path: {', '.join(dirs)}"


def _version(cls: type[SourceConnector]) -> str:
    try:
        return str(cls().version())
    except Exception:  # listing plugins must survive a connector that cannot be built
        return "unknown"


def connector_version(name: str) -> str | None:
    """The version of the connector ``name`` resolves to; None if it resolves to nothing."""
    try:
        return _version(resolve_connector_class(name))
    except ConnectError:
        return None


def _listed_name(cls: type) -> str:
    """The name listings show: Connect's for a bundled counterpart, else ``module.Class``."""
    name = qualified_name(cls)
    return next((java for java, ours in _CONNECT_CLASS_NAMES.items() if ours == name), name)


def list_connector_plugins() -> list[PluginInfo]:
    """Every known connector plugin, sorted by listed name, as ``GET /connector-plugins``
    shows (see the module docstring for the names)."""
    classes = {_listed_name(c): c for c in _known_plugins().values()}
    return [PluginInfo(class_name=name, type="source", version=_version(cls))
            for name, cls in sorted(classes.items())]


def list_plugins() -> list[PluginInfo]:
    """Every plugin this runtime has, as ``GET /connector-plugins?connectorsOnly=false`` shows:
    grouped by type in :data:`PLUGIN_TYPE_ORDER`, sorted by class name within a type.

    Only what really runs is listed: source connectors, transformations and
    predicates (bundled ones under Connect's class names, with the package's
    version), the built-in converters and header converters. There are no sink
    connectors.
    """
    plugins = list_connector_plugins()
    for kind in transforms.KINDS:
        plugins += [PluginInfo(class_name=name, type=kind.plugin_type,
                               version=transforms.version_of(cls))
                    for name, cls in transforms.known_plugins(kind).items()]
    plugins += [PluginInfo(class_name=name, type="converter", version=__version__)
                for name in listed_converter_names()]
    return plugins + [PluginInfo(class_name=name, type="header_converter", version=__version__)
                      for name in listed_header_converter_names()]


def plugin_config_keys(plugin: str) -> list[ConfigKey]:
    """The keys ``GET /connector-plugins/<plugin>/config`` describes, for any name of a plugin.

    A connector: its own keys, then the framework's that it does not redefine
    (Connect 4.1 does the same). A converter, transformation or predicate: the
    keys it reads. Raises NotFoundException if no plugin has that name.
    """
    converter = converter_class_named(plugin) or header_converter_class_named(plugin)
    if converter is not None:
        return list(converter_config_def(converter).config_keys.values())
    found = transforms.find(plugin)
    if found is not None:
        instance = transforms.instantiate(found[1], "plugin")
        return list(transforms.config_def_of(instance).config_keys.values())
    try:
        cls = resolve_connector_class(plugin)
    except ConnectError as e:
        raise NotFoundException(str(e)) from e
    keys = dict(cls().config_def().config_keys)
    # connector.plugin.version shows the installed version as its default, as in Connect.
    framework = connector_config_def({"connector": _version(cls)})
    for name, key in framework.config_keys.items():
        keys.setdefault(name, key)
    return list(keys.values())
