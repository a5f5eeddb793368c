"""Resolving connector.class the way Connect does, and listing connector plugins."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

import connect_runtime
from connect_runtime import plugins
from connect_runtime.api.task import SourceTask
from connect_runtime.connectors.sequence import SequenceSourceConnector
from connect_runtime.errors import ConfigException
from connect_runtime.plugins import (
    ENTRY_POINT_GROUP,
    PluginInfo,
    list_connector_plugins,
    resolve_connector_class,
)


class LocalConnector(SequenceSourceConnector):
    """Importable by path, not registered as an entry point."""


class UnbuildableConnector(SequenceSourceConnector):
    def __init__(self) -> None:
        raise RuntimeError("needs a database")


class NotAConnector:
    pass


@pytest.mark.parametrize(
    "name",
    [
        "SequenceSourceConnector",  # entry point name
        "connect_runtime.connectors.sequence.SequenceSourceConnector",  # module path
        "connect_runtime.connectors.sequence:SequenceSourceConnector",  # entry point syntax
        "SequenceSource",  # alias without the Connector suffix
        "  SequenceSource  ",
    ],
)
def test_resolves_the_sequence_connector(name: str) -> None:
    assert resolve_connector_class(name) is SequenceSourceConnector


def test_resolves_an_unregistered_class_by_path() -> None:
    assert resolve_connector_class(f"{__name__}.LocalConnector") is LocalConnector


def test_unknown_name_lists_available_connectors() -> None:
    with pytest.raises(ConfigException) as info:
        resolve_connector_class("JdbcSource")
    assert info.value.name == "connector.class"
    message = str(info.value)
    assert ("Failed to find any class that implements SourceConnector and which name "
            "matches JdbcSource") in message
    assert ("available connectors are: connect_runtime.connectors.file.FileStreamSourceConnector, "
            "connect_runtime.connectors.sequence.SequenceSourceConnector") in message


def test_class_that_is_not_a_source_connector() -> None:
    with pytest.raises(ConfigException, match="does not extend SourceConnector") as info:
        resolve_connector_class(f"{__name__}.NotAConnector")
    assert info.value.name == "connector.class"


def test_module_that_fails_to_import_reports_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "exploding_plugin.py").write_text("raise RuntimeError('bad plugin init')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "exploding_plugin", raising=False)
    with pytest.raises(ConfigException, match="bad plugin init") as info:
        resolve_connector_class("exploding_plugin.Connector")
    assert info.value.name == "connector.class"


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, **targets: str) -> None:
    eps = [EntryPoint(name, value, ENTRY_POINT_GROUP) for name, value in targets.items()]
    monkeypatch.setattr(plugins, "entry_points", lambda group: eps)


def test_ambiguous_alias_asks_for_the_full_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "other_sequence.py").write_text(
        "from connect_runtime.connectors.sequence import SequenceSourceConnector as Base\n"
        "class SequenceSourceConnector(Base):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake_entry_points(monkeypatch,
                      A="connect_runtime.connectors.sequence:SequenceSourceConnector",
                      B="other_sequence:SequenceSourceConnector")
    with pytest.raises(ConfigException, match="More than one connector matches alias"):
        resolve_connector_class("SequenceSource")
    assert resolve_connector_class("B").__module__ == "other_sequence"


def test_broken_entry_points_are_skipped(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    fake_entry_points(monkeypatch,
                      Gone="no_such_module_for_tests:Thing",
                      Wrong=f"{__name__}:NotAConnector",
                      Seq="connect_runtime.connectors.sequence:SequenceSourceConnector")
    assert resolve_connector_class("SequenceSource") is SequenceSourceConnector
    assert "Gone" in caplog.text and "Wrong" in caplog.text


def test_list_connector_plugins() -> None:
    found = list_connector_plugins()
    assert PluginInfo("connect_runtime.connectors.sequence.SequenceSourceConnector", "source",
                      connect_runtime.__version__) in found
    assert [p.class_name for p in found] == sorted(p.class_name for p in found)
    assert found[0].to_dict().keys() == {"class", "type", "version"}


def test_listing_survives_a_connector_that_cannot_be_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_entry_points(monkeypatch,
                      Unbuildable=f"{__name__}:UnbuildableConnector",
                      Seq="connect_runtime.connectors.sequence:SequenceSourceConnector",
                      SeqAgain="connect_runtime.connectors.sequence:SequenceSourceConnector")
    found = list_connector_plugins()
    assert [(p.class_name.rsplit(".", 1)[-1], p.version) for p in found] == [
        ("SequenceSourceConnector", connect_runtime.__version__),
        ("UnbuildableConnector", "unknown"),
    ]
    assert issubclass(SequenceSourceConnector().task_class(), SourceTask)
