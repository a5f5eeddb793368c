"""plugin.path: staging plugins as zips, importing them, and finding their connectors.

No Kafka, no Spark: what executors get is checked by importing the staged zips
in a fresh interpreter that has only them on its path.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
import textwrap
import uuid
import zipfile
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from connect_runtime import plugins
from connect_runtime.errors import ConfigException
from connect_runtime.plugin_path import PluginPath
from connect_runtime.plugins import (
    ENTRY_POINT_GROUP,
    list_connector_plugins,
    register_plugin_modules,
    resolve_connector_class,
)


def connector_code(name: str) -> str:
    """A module body defining ``<name>Connector`` and its task (records 0..2 per task)."""
    return textwrap.dedent(f"""
        from connect_runtime import SourceConnector, SourceRecord, SourceTask


        class {name}Task(SourceTask):
            def version(self):
                return "1.0"

            def start(self, config):
                self.left = 3

            def poll(self):
                if not self.left:
                    return None
                self.left -= 1
                return [SourceRecord(None, None, "t", value=self.left)]

            def stop(self):
                pass


        class {name}Connector(SourceConnector):
            def version(self):
                return "{name}-1.0"

            def start(self, config):
                self.config = config

            def task_class(self):
                return {name}Task

            def task_configs(self, max_tasks):
                return [dict(self.config)] * max_tasks

            def stop(self):
                pass
        """)


def write_wheel(path: Path, package: str, body: str, *, entry_point: str | None = None,
                extra: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel as pip would read it: the package plus its dist-info."""
    dist = f"{package}-1.0.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(f"{package}/__init__.py", body)
        zf.writestr(f"{dist}/METADATA",
                    f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.0\n")
        zf.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        if entry_point:
            zf.writestr(f"{dist}/entry_points.txt",
                        f"[{ENTRY_POINT_GROUP}]\n{entry_point}\n")
        for name, text in (extra or {}).items():
            zf.writestr(name, text)
    return path


@pytest.fixture
def tag() -> Iterator[str]:
    """A suffix making this test's module names unique; everything they touched is undone."""
    tag = uuid.uuid4().hex[:8]
    path_before = list(sys.path)
    try:
        yield tag
    finally:
        sys.path[:] = path_before
        for name in [m for m in sys.modules if tag in m.split(".", 1)[0]]:
            del sys.modules[name]
        register_plugin_modules(())
        importlib.invalidate_caches()


@pytest.fixture
def plugin_dir(tmp_path: Path, tag: str) -> Path:
    """One directory with every kind of plugin, plus things that are not (or broken) ones."""
    d = tmp_path / "plugins"
    pkg = d / f"pkgdir_{tag}"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text(connector_code("DirSource"))
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "deep.py").write_text(connector_code("DeepSource"))
    (pkg / "broken_part.py").write_text("raise RuntimeError('half-written plugin module')\n")
    (pkg / "data.json").write_text("{}")  # data files travel with the package
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    (d / f"single_{tag}.py").write_text(connector_code("SingleSource"))
    write_wheel(d / f"wheelpkg_{tag}-1.0-py3-none-any.whl", f"wheelpkg_{tag}",
                connector_code("WheelSource"),
                entry_point=f"WheelEP{tag} = wheelpkg_{tag}:WheelSourceConnector")
    (d / "broken.zip").write_bytes(b"this is not a zip file")
    native = d / f"native_{tag}"
    native.mkdir()
    (native / "__init__.py").write_text(connector_code("NativeSource"))
    (native / "_speedups.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\x7fELF")
    (d / f"failing_{tag}.py").write_text("raise ImportError('needs a missing library')\n")
    (d / "README.txt").write_text("not a plugin")
    (d / f".hidden_{tag}.py").write_text(connector_code("Hidden"))
    (d / f"_private_{tag}.py").write_text(connector_code("Private"))
    return d


def test_every_kind_of_plugin_is_staged_as_a_zip_and_importable(
    plugin_dir: Path, tmp_path: Path, tag: str, caplog: pytest.LogCaptureFixture
) -> None:
    staging = tmp_path / "staging"
    with caplog.at_level(logging.WARNING):
        loaded = PluginPath.load([str(plugin_dir)], staging)

    assert loaded.modules == [f"pkgdir_{tag}", f"single_{tag}", f"wheelpkg_{tag}"]
    assert [a.name for a in loaded.archives] == [
        f"pkgdir_{tag}.zip", f"single_{tag}.zip", f"wheelpkg_{tag}-1.0-py3-none-any.zip"]
    assert all(a.parent == staging and zipfile.is_zipfile(a) for a in loaded.archives)
    assert sorted(p.name for p in staging.iterdir()) == sorted(a.name for a in loaded.archives)
    with zipfile.ZipFile(loaded.archives[0]) as zf:  # the package dir, zipped
        assert sorted(zf.namelist()) == [
            f"pkgdir_{tag}/__init__.py", f"pkgdir_{tag}/broken_part.py",
            f"pkgdir_{tag}/data.json", f"pkgdir_{tag}/sub/__init__.py",
            f"pkgdir_{tag}/sub/deep.py"]

    # Imported from the zips (the same files the executors get), not from plugin_dir.
    for module, archive in zip(loaded.modules, loaded.archives, strict=True):
        assert str(archive) in sys.path
        assert importlib.import_module(module).__file__.startswith(str(archive))
    assert importlib.import_module(f"pkgdir_{tag}.sub.deep").DeepSourceConnector

    for skipped in (f"native_{tag}", f"failing_{tag}", f"hidden_{tag}", f"private_{tag}"):
        assert not any(skipped in m for m in loaded.modules)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"native_{tag}")
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"failing_{tag}")

    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 3, warnings
    broken, native, failing = (next(w for w in warnings if str(plugin_dir / name) in w)
                               for name in ("broken.zip", f"native_{tag}", f"failing_{tag}.py"))
    assert "BadZipFile" in broken
    assert "compiled extension" in native and "_speedups.cpython" in native
    assert "executors' environment" in native
    assert "needs a missing library" in failing


def test_wheel_entry_points_are_visible_once_loaded(plugin_dir: Path, tmp_path: Path,
                                                    tag: str) -> None:
    assert f"WheelEP{tag}" not in entry_points(group=ENTRY_POINT_GROUP).names
    PluginPath.load([plugin_dir], tmp_path / "staging")
    (ep,) = entry_points(group=ENTRY_POINT_GROUP, name=f"WheelEP{tag}")
    assert ep.value == f"wheelpkg_{tag}:WheelSourceConnector"
    assert resolve_connector_class(f"WheelEP{tag}").__module__ == f"wheelpkg_{tag}"


def test_connectors_in_plugin_modules_are_listed_and_resolvable(
    plugin_dir: Path, tmp_path: Path, tag: str, caplog: pytest.LogCaptureFixture
) -> None:
    loaded = PluginPath.load([plugin_dir], tmp_path / "staging")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        register_plugin_modules(loaded.modules)
        listed = {p.class_name: p.version for p in list_connector_plugins()}
        expected = {
            f"pkgdir_{tag}.DirSourceConnector": "DirSource-1.0",
            f"pkgdir_{tag}.sub.deep.DeepSourceConnector": "DeepSource-1.0",
            f"single_{tag}.SingleSourceConnector": "SingleSource-1.0",
            f"wheelpkg_{tag}.WheelSourceConnector": "WheelSource-1.0",
        }
        assert expected.items() <= listed.items()
        assert "connect_runtime.connectors.sequence.SequenceSourceConnector" in listed
        for qualified in expected:
            simple = qualified.rsplit(".", 1)[1]
            for name in (qualified, simple, simple.removesuffix("Connector")):
                assert plugins.qualified_name(resolve_connector_class(name)) == qualified
        list_connector_plugins()
    # The broken submodule is skipped, and said so once (at registration), not per lookup.
    broken = [r.getMessage() for r in caplog.records if "broken_part" in r.getMessage()]
    assert len(broken) == 1 and "half-written plugin module" in broken[0]


def test_a_class_found_nowhere_names_the_plugin_path_searched(
    plugin_dir: Path, tmp_path: Path, tag: str
) -> None:
    """What an operator reads when an image lacks the connector: the class, what
    there is, and the directories looked in (a plugin image copied elsewhere, a
    plugin.path that misses a directory)."""
    other = tmp_path / "plugins-from-images"
    other.mkdir()
    loaded = PluginPath.load([plugin_dir, other], tmp_path / "staging")
    register_plugin_modules(loaded.modules, searched=[str(plugin_dir), str(other)])
    with pytest.raises(ConfigException) as info:
        resolve_connector_class(f"pkgdir_{tag}.NoSuchConnector")
    assert info.value.name == "connector.class"
    message = str(info.value)
    assert (f"Failed to find any class that implements SourceConnector and which name "
            f"matches pkgdir_{tag}.NoSuchConnector, available connectors are: ") in message
    assert message.endswith(f"{tag}.WheelSourceConnector. Searched the worker's installed "
                            f"packages and plugin.path: {plugin_dir}, {other}"), message
    assert f"pkgdir_{tag}.DirSourceConnector" in str(info.value)
    # A registration without plugin.path says so.
    register_plugin_modules(())
    with pytest.raises(ConfigException) as info:
        resolve_connector_class("NoSuchConnector")
    assert str(info.value).endswith(
        "Searched the worker's installed packages; plugin.path is empty"), str(info.value)


def test_the_staged_zips_alone_are_enough_for_an_executor(
    plugin_dir: Path, tmp_path: Path, tag: str
) -> None:
    """What an executor gets from addPyFile: the zips on sys.path, nothing else."""
    loaded = PluginPath.load([plugin_dir], tmp_path / "staging")
    script = textwrap.dedent(f"""
        import sys
        from importlib.metadata import entry_points
        sys.path[1:1] = {[str(a) for a in loaded.archives]!r}
        from pkgdir_{tag}.sub.deep import DeepSourceTask
        from single_{tag} import SingleSourceTask
        from wheelpkg_{tag} import WheelSourceTask
        print(sorted(e.name for e in entry_points(group="{ENTRY_POINT_GROUP}")))
        """)
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert f"WheelEP{tag}" in out


def test_the_same_module_from_two_plugins_keeps_the_first(
    tmp_path: Path, tag: str, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    for d, version in ((first, "first"), (second, "second")):
        d.mkdir()
        (d / f"dup_{tag}.py").write_text(f"VERSION = {version!r}\n")
    with caplog.at_level(logging.WARNING):
        loaded = PluginPath.load([first, second], tmp_path / "staging")
    assert loaded.modules == [f"dup_{tag}"]
    assert importlib.import_module(f"dup_{tag}").VERSION == "first"
    assert f"already provided by plugin {first / f'dup_{tag}.py'}" in caplog.text
    assert str(second / f"dup_{tag}.py") in caplog.text
    assert len(list((tmp_path / "staging").iterdir())) == 1


def test_a_plugin_may_import_another(tmp_path: Path, tag: str) -> None:
    """Every plugin is on sys.path before any is imported, whatever the name order."""
    (tmp_path / f"a_uses_{tag}.py").write_text(f"from z_lib_{tag} import VALUE\n")
    (tmp_path / f"z_lib_{tag}.py").write_text("VALUE = 42\n")
    loaded = PluginPath.load([tmp_path], tmp_path / ".staging")
    assert loaded.modules == [f"a_uses_{tag}", f"z_lib_{tag}"]
    assert importlib.import_module(f"a_uses_{tag}").VALUE == 42


def test_a_module_the_worker_already_imported_is_not_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "orjson.py").write_text("raise RuntimeError('must never be imported')\n")
    with caplog.at_level(logging.WARNING):
        loaded = PluginPath.load([tmp_path], tmp_path / ".staging")
    assert loaded.archives == [] and "orjson is already imported" in caplog.text
    assert importlib.import_module("orjson").dumps(1) == b"1"


def test_unload_undoes_load(plugin_dir: Path, tmp_path: Path, tag: str) -> None:
    loaded = PluginPath.load([plugin_dir], tmp_path / "staging")
    importlib.import_module(f"pkgdir_{tag}.sub.deep")
    loaded.unload()
    assert not any(tag in p for p in sys.path)
    assert not any(tag in m for m in sys.modules)
    assert loaded.archives == [] and loaded.modules == []


def test_no_plugin_path_changes_nothing(tmp_path: Path) -> None:
    path_before = list(sys.path)
    loaded = PluginPath.load([], tmp_path / "staging")
    assert (loaded.archives, loaded.modules) == ([], [])
    assert sys.path == path_before and not (tmp_path / "staging").exists()


def test_registering_nothing_forgets_plugin_path_connectors(
    plugin_dir: Path, tmp_path: Path, tag: str
) -> None:
    register_plugin_modules(PluginPath.load([plugin_dir], tmp_path / "staging").modules)
    assert resolve_connector_class("DirSource").__module__ == f"pkgdir_{tag}"
    register_plugin_modules(())
    # Still on sys.path: only the wheel's entry point keeps naming one of its classes.
    assert [p.class_name for p in list_connector_plugins() if tag in p.class_name] == [
        f"wheelpkg_{tag}.WheelSourceConnector"]


@pytest.mark.parametrize("where", ["directory", "module", "package file", "package folder"])
def test_a_plugin_path_others_can_write_stops_the_worker(
        plugin_dir: Path, tmp_path: Path, tag: str, where: str,
        caplog: pytest.LogCaptureFixture) -> None:
    """Issue 48, item 7: a file dropped in a world-writable plugin.path by any user
    was imported by the worker at its next start, with only an INFO line."""
    unsafe = {"directory": plugin_dir, "module": plugin_dir / f"single_{tag}.py",
              "package file": plugin_dir / f"pkgdir_{tag}" / "sub" / "deep.py",
              "package folder": plugin_dir / f"pkgdir_{tag}" / "sub"}[where]
    unsafe.chmod(0o1777 if unsafe.is_dir() else 0o666)
    path_before = list(sys.path)
    with pytest.raises(ConfigException) as info:
        PluginPath.load([plugin_dir], tmp_path / "staging")
    assert info.value.name == "plugin.path"
    mode = "1777" if unsafe.is_dir() else "0666"
    assert (f"{unsafe} is writable by every user of this machine (mode {mode}), and whatever "
            "is imported from plugin.path runs as this worker's user. Remove that permission "
            f"(chmod o-w {unsafe}), or set plugin.path.allow.unsafe.permissions=true to load "
            "it anyway") in str(info.value)
    assert sys.path == path_before and not (tmp_path / "staging").exists()  # nothing loaded
    assert f"single_{tag}" not in sys.modules

    caplog.set_level(logging.ERROR, "connect_runtime.plugin_path")
    loaded = PluginPath.load([plugin_dir], tmp_path / "staging",
                             allow_unsafe_permissions=True)
    assert f"single_{tag}" in loaded.modules
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [
        f"{unsafe} is writable by every user of this machine (mode {mode}), and whatever is "
        "imported from plugin.path runs as this worker's user; loading it anyway "
        "(plugin.path.allow.unsafe.permissions=true)"]


def test_group_write_is_allowed_and_hidden_entries_are_not_looked_at(
        plugin_dir: Path, tmp_path: Path, tag: str) -> None:
    """Images running an arbitrary user in group 0 (OpenShift, the chart) need g+w;
    entries the loader skips cannot run, whatever their mode."""
    plugin_dir.chmod(0o2775)
    (plugin_dir / f".hidden_{tag}.py").chmod(0o666)
    (plugin_dir / f"_private_{tag}").mkdir(mode=0o777)
    (plugin_dir / f"_private_{tag}").chmod(0o777)
    assert f"single_{tag}" in PluginPath.load([plugin_dir], tmp_path / "staging").modules


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_plugin_owned_by_another_user_is_loaded_with_a_warning(
        plugin_dir: Path, tmp_path: Path, tag: str, caplog: pytest.LogCaptureFixture) -> None:
    module = plugin_dir / f"single_{tag}.py"
    os.chown(module, 65534, 65534)  # nobody
    caplog.set_level(logging.WARNING, "connect_runtime.plugin_path")
    assert f"single_{tag}" in PluginPath.load([plugin_dir], tmp_path / "staging").modules
    assert (f"plugin.path: {module} is owned by user 65534, not by this worker's user (0) or "
            "root; that user can change the code this worker runs") in caplog.messages
