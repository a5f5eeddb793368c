"""Kafka Connect's ``plugin.path`` for Python connectors: importable here, shippable to Spark.

``plugin.path`` lists directories; each entry of such a directory (sorted by
name, names starting with ``.`` or ``_`` skipped, not recursive) is one plugin:

* a package directory (a folder with ``__init__.py``);
* a single module ``name.py``;
* a pure-Python wheel ``*.whl`` or a ``*.zip`` whose root holds packages and
  modules (and possibly ``*.dist-info/entry_points.txt``).

Every plugin becomes one zip file in a staging directory: wheels and zips are
copied (as ``<name>.zip``: PySpark's ``addPyFile`` puts only ``.zip``, ``.egg``
and ``.jar`` files on the executors' ``sys.path``), package directories and
modules are zipped (putting their parent directory on ``sys.path`` would expose
whatever else lies there). The same zips go on this process's ``sys.path`` and,
through ``SparkContext.addPyFile``, on the executors': the driver imports exactly
what the executors import, by one mechanism. Entry points in a wheel's
``dist-info`` are then visible to ``importlib.metadata`` like an installed one's.

Python cannot import compiled extensions (``.so``, ``.pyd``) from a zip, so a
plugin holding one is skipped with a warning: it must be installed in the
executors' environment instead (docs/configuration.md, ``plugin.path``). A
broken plugin (a bad archive, a top-level module that fails to import, a name
another plugin or the worker already uses) is skipped with a warning naming its
file; it never stops the worker.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shutil
import stat
import sys
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from connect_runtime.errors import ConfigException

log = logging.getLogger(__name__)

ARCHIVE_SUFFIXES = (".whl", ".zip")
COMPILED_SUFFIXES = (".so", ".pyd")
_NOT_MODULES = (".dist-info", ".data", ".egg-info")
_INSTALL_INSTEAD = ("install it in the executors' environment instead (the image, or "
                    "spark.archives with a packed environment; see plugin.path in "
                    "docs/configuration.md)")


@dataclass(frozen=True)
class Plugin:
    """One plugin: where it was found, its staged zip and the top-level names it provides."""

    source: Path
    archive: Path
    modules: tuple[str, ...]


@dataclass
class PluginPath:
    """The loaded plugins of ``plugin.path``; see the module docstring."""

    plugins: list[Plugin] = field(default_factory=list)

    @property
    def archives(self) -> list[Path]:
        """One zip-importable file per plugin, for ``SparkContext.addPyFile``."""
        return [p.archive for p in self.plugins]

    @property
    def modules(self) -> list[str]:
        """Top-level module and package names the plugins provide."""
        return [m for p in self.plugins for m in p.modules]

    @classmethod
    def load(cls, dirs: Sequence[str | Path], staging_dir: str | Path, *,
             allow_unsafe_permissions: bool = False) -> PluginPath:
        """Scan ``dirs``, stage every plugin as a zip in ``staging_dir`` and put it on
        ``sys.path``; broken plugins are skipped with a warning.

        Raises :class:`~connect_runtime.errors.ConfigException` (``plugin.path``)
        if another user can write in a directory, or in a plugin, that would be
        imported (see :func:`check_permissions`), unless
        ``allow_unsafe_permissions``: then it logs the same at ERROR and loads."""
        check_permissions(dirs, allow_unsafe=allow_unsafe_permissions)
        staging = Path(staging_dir)
        if dirs:
            staging.mkdir(parents=True, exist_ok=True)
        staged: list[Plugin] = []
        claimed: dict[str, Path] = {}  # top-level name -> the plugin providing it
        for directory in dirs:
            for source in _entries(Path(directory)):
                plugin = _stage_or_warn(source, staging)
                if plugin is not None and _names_are_free(plugin, claimed):
                    staged.append(plugin)
                    claimed.update(dict.fromkeys(plugin.modules, plugin.source))
                elif plugin is not None:
                    plugin.archive.unlink(missing_ok=True)
        if not staged:
            return cls([])
        # Earlier plugin.path entries first, all ahead of the environment, as
        # addPyFile does on the executors.
        sys.path[0:0] = [str(p.archive) for p in staged]
        importlib.invalidate_caches()
        # Imported only once every plugin is on sys.path: one may use another.
        loaded = [p for p in staged if _imports_cleanly(p)]
        for plugin in staged:
            if plugin not in loaded:
                _forget(plugin)
                plugin.archive.unlink(missing_ok=True)
        importlib.invalidate_caches()
        for plugin in loaded:
            log.info("Loaded plugin %s as %s (modules: %s)", plugin.source, plugin.archive,
                     ", ".join(plugin.modules))
        return cls(loaded)

    def unload(self) -> None:
        """Take the plugins off ``sys.path`` and forget their modules (tests, reloads)."""
        for plugin in self.plugins:
            _forget(plugin)
        importlib.invalidate_caches()
        self.plugins = []


def check_permissions(dirs: Sequence[str | Path], *, allow_unsafe: bool = False) -> None:
    """Refuse a ``plugin.path`` that users other than the worker's can write.

    Whatever is imported from ``plugin.path`` runs as the worker's user, with its
    session key, credentials and secrets. So each directory, and each plugin in
    it (a package's files and folders included), must not be writable by every
    user of the machine (``o+w``, sticky bit or not: a world-writable directory
    takes new plugins from anyone). A path owned by another user (not root)
    gets a WARNING: that user can change it. Group write permission is allowed:
    images run with an arbitrary user in group 0 (OpenShift, this project's
    chart) and need it. The directories above a ``plugin.path`` entry are not
    checked (/tmp is world-writable and sticky; a pod's emptyDir is 0777 and
    written only by that pod).

    Raises :class:`~connect_runtime.errors.ConfigException` naming the first such
    path, its mode and the way out, unless ``allow_unsafe`` (then ERROR, once per path).
    """
    me = os.geteuid()
    for directory in dirs:
        for path, top in _importable_paths(Path(directory)):
            try:
                st = path.stat()
            except OSError:
                continue  # vanished, or a dangling link: not importable either
            if top and st.st_uid not in (0, me):
                log.warning("plugin.path: %s is owned by user %d, not by this worker's user "
                            "(%d) or root; that user can change the code this worker runs",
                            path, st.st_uid, me)
            if not st.st_mode & stat.S_IWOTH:
                continue
            problem = (f"{path} is writable by every user of this machine (mode "
                       f"{stat.S_IMODE(st.st_mode):04o}), and whatever is imported from "
                       "plugin.path runs as this worker's user")
            if not allow_unsafe:
                raise ConfigException(
                    f"{problem}. Remove that permission (chmod o-w {path}), or set "
                    "plugin.path.allow.unsafe.permissions=true to load it anyway",
                    name="plugin.path", value=",".join(map(str, dirs)))
            log.error("%s; loading it anyway (plugin.path.allow.unsafe.permissions=true)",
                      problem)


def _importable_paths(directory: Path) -> list[tuple[Path, bool]]:
    """``directory``, its entries and every file and folder inside the entries that
    are directories, each with whether it is the directory or one of its entries."""
    out = [(directory, True)]
    for entry in _entries(directory, quiet=True):
        out.append((entry, True))
        if entry.is_dir():
            for root, dirs, files in os.walk(entry):
                out += [(Path(root) / name, False) for name in sorted(dirs + files)]
    return out


def _entries(directory: Path, *, quiet: bool = False) -> list[Path]:
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        if not quiet:
            log.warning("Skipping plugin.path entry %s: %s", directory, e)
        return []
    return [directory.resolve() / n for n in names if not n.startswith((".", "_"))]


def _stage_or_warn(source: Path, staging: Path) -> Plugin | None:
    try:
        return _stage(source, staging)
    except Exception as e:  # a broken plugin must not stop the worker
        log.warning("Skipping plugin %s: %s: %s", source, type(e).__name__, e)
        return None


def _stage(source: Path, staging: Path) -> Plugin | None:
    """The plugin ``source`` as a zip in ``staging``; None if it is no plugin (or skipped)."""
    if source.is_dir():
        if not (source / "__init__.py").is_file():
            log.debug("Ignoring %s in plugin.path: a directory without __init__.py", source)
            return None
        members = {f"{source.name}/{f.relative_to(source).as_posix()}": f
                   for f in _package_files(source)}
        return _zip_if_valid(source, source.name, members, staging)
    if source.suffix == ".py" and source.is_file():
        return _zip_if_valid(source, source.stem, {source.name: source}, staging)
    if source.suffix in ARCHIVE_SUFFIXES and source.is_file():
        with zipfile.ZipFile(source) as zf:
            names = zf.namelist()
            bad = zf.testzip()
        if bad is not None:
            raise zipfile.BadZipFile(f"corrupt member {bad}")
        modules = _top_level_modules(names)
        if not _acceptable(source, modules, names):
            return None
        archive = _staged_name(staging, source.stem)
        shutil.copyfile(source, archive)
        return Plugin(source, archive, tuple(modules))
    log.debug("Ignoring %s in plugin.path: not a package, module, wheel or zip", source)
    return None


def _zip_if_valid(source: Path, name: str, members: dict[str, Path],
                  staging: Path) -> Plugin | None:
    """Zip ``members`` (name in the zip -> file) as the plugin ``name``, if it can be one."""
    if not _acceptable(source, [name] if name.isidentifier() else [], members):
        return None
    archive = _staged_name(staging, name)
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, path in members.items():
            zf.write(path, member)
    return Plugin(source, archive, (name,))


def _acceptable(source: Path, modules: list[str], names: Iterable[str]) -> bool:
    compiled = sorted(n for n in names if n.endswith(COMPILED_SUFFIXES))
    if compiled:
        log.warning("Skipping plugin %s: it contains compiled extension modules (%s), which "
                    "Python cannot import from a zip, so it cannot be shipped to Spark "
                    "executors; %s", source, ", ".join(compiled), _INSTALL_INSTEAD)
        return False
    if not modules:
        log.warning("Skipping plugin %s: it provides no importable top-level package or "
                    "module (names must be Python identifiers)", source)
        return False
    return True


def _package_files(package: Path) -> list[Path]:
    """Every file of a package directory, sorted; caches and hidden files left out."""
    out: list[Path] = []
    for root, dirs, files in os.walk(package):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        out += [Path(root) / f for f in sorted(files)
                if not f.startswith(".") and not f.endswith((".pyc", ".pyo"))]
    return out


def _top_level_modules(names: Iterable[str]) -> list[str]:
    """Top-level packages (regular or namespace) and modules at the root of a zip."""
    found: set[str] = set()
    for name in names:
        first, sep, rest = name.partition("/")
        if sep:
            if first.isidentifier() and rest.endswith(".py"):
                found.add(first)  # *.dist-info etc. are not identifiers
        elif first.endswith(".py") and first[:-3].isidentifier() and first != "__init__.py":
            found.add(first[:-3])
    return sorted(found)


def _staged_name(staging: Path, stem: str) -> Path:
    """``<staging>/<stem>.zip``, numbered if taken: addPyFile keys files by base name."""
    candidate, n = staging / f"{stem}.zip", 1
    while candidate.exists():
        n += 1
        candidate = staging / f"{stem}-{n}.zip"
    return candidate


def _names_are_free(plugin: Plugin, claimed: dict[str, Path]) -> bool:
    for name in plugin.modules:
        if name in claimed:
            log.warning("Skipping plugin %s: module %s is already provided by plugin %s",
                        plugin.source, name, claimed[name])
            return False
        if name in sys.modules:
            # The driver would keep the module it has, the executors would import
            # the plugin's: two different codes under one name.
            log.warning("Skipping plugin %s: module %s is already imported by the worker "
                        "(from %s)", plugin.source, name,
                        getattr(sys.modules[name], "__file__", None) or "a built-in")
            return False
        if importlib.util.find_spec(name) is not None:
            log.warning("Plugin %s: its module %s shadows the one installed in the worker's "
                        "environment", plugin.source, name)
    return True


def _imports_cleanly(plugin: Plugin) -> bool:
    for name in plugin.modules:
        try:
            importlib.import_module(name)
        except Exception as e:
            log.warning("Skipping plugin %s: importing %s failed: %s: %s", plugin.source,
                        name, type(e).__name__, e)
            return False
    return True


def _forget(plugin: Plugin) -> None:
    """Off ``sys.path``, out of ``sys.modules`` and the import caches."""
    entry = str(plugin.archive)
    while entry in sys.path:
        sys.path.remove(entry)
    sys.path_importer_cache.pop(entry, None)
    for name in list(sys.modules):
        if name.split(".", 1)[0] in plugin.modules:
            del sys.modules[name]
