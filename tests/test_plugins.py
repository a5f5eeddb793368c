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
from connect_runtime.errors import ConfigException, NotFoundException
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


# --- Connect's names, every plugin type, every name of a plugin ----------------------

FILE_SOURCE = "connect_runtime.connectors.file.FileStreamSourceConnector"
FILE_SOURCE_NAMES = [
    "org.apache.kafka.connect.file.FileStreamSourceConnector",  # Connect's class name
    FILE_SOURCE, "FileStreamSourceConnector", "FileStreamSource",
]


@pytest.mark.parametrize("name", FILE_SOURCE_NAMES)
def test_the_file_connector_answers_to_connects_names(name: str) -> None:
    assert plugins.qualified_name(resolve_connector_class(name)) == FILE_SOURCE


def test_a_connect_name_without_a_counterpart_is_still_unknown() -> None:
    with pytest.raises(ConfigException, match="FileStreamSinkConnector"):
        resolve_connector_class("org.apache.kafka.connect.file.FileStreamSinkConnector")


def test_list_plugins_has_connectors_then_converters_as_connect_orders_types() -> None:
    rows = [p.to_dict() for p in plugins.list_plugins()]
    version = connect_runtime.__version__
    # Connect's names where this runtime has a counterpart: what clients look for.
    converters = [row for row in rows if row["type"] == "converter"]
    assert converters == [
        {"class": f"io.confluent.connect.{name}", "type": "converter", "version": version}
        for name in ("avro.AvroConverter", "json.JsonSchemaConverter",
                     "protobuf.ProtobufConverter")] + [
        {"class": f"org.apache.kafka.connect.{name}", "type": "converter", "version": version}
        for name in ("converters.BooleanConverter", "converters.ByteArrayConverter",
                     "converters.DoubleConverter", "converters.FloatConverter",
                     "converters.IntegerConverter", "converters.LongConverter",
                     "converters.ShortConverter", "json.JsonConverter",
                     "storage.StringConverter")]
    assert {"class": FILE_SOURCE_NAMES[0], "type": "source", "version": version} in rows
    assert {"class": "connect_runtime.connectors.sequence.SequenceSourceConnector",
            "type": "source", "version": version} in rows  # no Java counterpart
    types = [row["type"] for row in rows]
    assert types == sorted(types, key=plugins.PLUGIN_TYPE_ORDER.index)
    assert [p.to_dict() for p in list_connector_plugins()] == [
        row for row in rows if row["type"] == "source"]


@pytest.mark.parametrize("name", FILE_SOURCE_NAMES)
def test_plugin_config_answers_for_every_name_of_a_connector(name: str) -> None:
    keys = [key.name for key in plugins.plugin_config_keys(name)]
    # The plugin's own keys first, then the framework's, as Connect 4.1 lists them.
    assert keys[:2] == ["topic", "file"]
    assert keys[-3:] == ["transaction.boundary", "transaction.boundary.interval.ms",
                         "offsets.storage.topic"]
    assert "transforms" in keys and "connector.plugin.version" in keys


# Connect's JsonConverterConfig keys, in its order (it also lists converter.type).
JSON_CONVERTER_KEYS = ["schemas.enable", "schemas.cache.size", "decimal.format",
                       "replace.null.with.default"]


@pytest.mark.parametrize(("name", "keys"), [
    ("org.apache.kafka.connect.storage.StringConverter", ["converter.encoding"]),
    ("String", ["converter.encoding"]),
    ("connect_runtime.converters.JsonConverter", JSON_CONVERTER_KEYS),
    ("org.apache.kafka.connect.json.JsonConverter", JSON_CONVERTER_KEYS),
    ("ByteArrayConverter", []),
    ("org.apache.kafka.connect.converters.IntegerConverter", []),
])
def test_plugin_config_of_converters_lists_the_keys_they_read(name: str,
                                                              keys: list[str]) -> None:
    assert [key.name for key in plugins.plugin_config_keys(name)] == keys


def test_plugin_config_of_an_unknown_plugin_is_not_found() -> None:
    with pytest.raises(NotFoundException, match="Nope"):
        plugins.plugin_config_keys("Nope")


def test_plugin_config_shows_the_installed_version_as_the_pin_default() -> None:
    keys = {key.name: key for key in plugins.plugin_config_keys("FileStreamSource")}
    assert keys["connector.plugin.version"].default == connect_runtime.__version__
    assert keys["key.converter"].default is None  # the worker's applies; shown when validating
