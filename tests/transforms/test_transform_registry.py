"""Finding and listing transformations and predicates (transforms.registry, plugins)."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest

from connect_runtime import __version__
from connect_runtime.errors import ConfigException, NotFoundException
from connect_runtime.plugins import PLUGIN_TYPE_ORDER, list_plugins, plugin_config_keys
from connect_runtime.transforms import registry
from connect_runtime.transforms.fields import InsertField
from connect_runtime.transforms.registry import PREDICATE, TRANSFORMATION

PKG = "org.apache.kafka.connect.transforms"
# What GET /connector-plugins?connectorsOnly=false lists on Kafka Connect 4.1.1.
CONNECT_TRANSFORMS = [
    *(f"{PKG}.{name}${side}" for name in (
        "Cast", "ExtractField", "Flatten", "HeaderFrom", "HoistField", "InsertField",
        "MaskField", "ReplaceField", "SetSchemaMetadata", "TimestampConverter")
      for side in ("Key", "Value")),
    *(f"{PKG}.{name}" for name in ("DropHeaders", "Filter", "InsertHeader", "RegexRouter",
                                   "TimestampRouter", "ValueToKey")),
]
CONNECT_PREDICATES = [f"{PKG}.predicates.{name}"
                      for name in ("HasHeaderKey", "RecordIsTombstone", "TopicNameMatches")]


def test_the_bundled_plugins_are_connects() -> None:
    assert list(registry.known_plugins(TRANSFORMATION)) == sorted(CONNECT_TRANSFORMS)
    assert list(registry.known_plugins(PREDICATE)) == CONNECT_PREDICATES


@pytest.mark.parametrize("name", [
    f"{PKG}.InsertField$Value", "connect_runtime.transforms.fields.InsertField.Value",
    "connect_runtime.transforms.fields:InsertField.Value", f"  {PKG}.InsertField$Value "])
def test_a_bundled_plugin_by_any_of_its_names(name: str) -> None:
    assert registry.resolve(TRANSFORMATION, name, "k") is InsertField.Value


@pytest.mark.parametrize(("alias", "kind", "connect_name"), [
    ("RegexRouter", TRANSFORMATION, f"{PKG}.RegexRouter"),
    ("Filter", TRANSFORMATION, f"{PKG}.Filter"),
    ("ValueToKey", TRANSFORMATION, f"{PKG}.ValueToKey"),
    ("TopicNameMatches", PREDICATE, f"{PKG}.predicates.TopicNameMatches"),
])
def test_connect_simple_name_aliases(alias: str, kind: registry.PluginKind,
                                     connect_name: str) -> None:
    assert registry.listed_name(registry.resolve(kind, alias, "k")) == connect_name


@pytest.mark.parametrize("name", ["InsertField$Value", "Value", "InsertField",
                                  "org.apache.kafka.connect.transforms.Nope", "nope.module.X"])
def test_names_connect_does_not_accept_either(name: str) -> None:
    with pytest.raises(ConfigException, match=f"Class {name.replace('$', '[$]')} could not be "
                                              "found.") as caught:
        registry.resolve(TRANSFORMATION, name, "transforms.a.type")
    assert caught.value.name == "transforms.a.type"


def test_the_abstract_base_of_a_key_value_pair_is_refused() -> None:
    with pytest.raises(ConfigException, match=r"use org\.apache\.kafka\.connect\.transforms\."
                                              r"InsertField\$Key or .*InsertField\$Value"):
        registry.resolve(TRANSFORMATION, "connect_runtime.transforms.fields.InsertField", "k")


def test_a_module_that_fails_to_import_is_reported_with_its_cause(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch
                                                                  ) -> None:
    (tmp_path / "broken_smt_module.py").write_text("import no_such_dependency_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigException, match="Cannot import broken_smt_module: No module "
                                              "named 'no_such_dependency_here'"):
        registry.resolve(TRANSFORMATION, "broken_smt_module.Thing", "transforms.a.type")


def write_entry_points(root: Path, group: str, entries: dict[str, str]) -> None:
    """A minimal installed distribution declaring ``entries`` in ``group``."""
    info = root / "smt_user_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: smt-user-dist\nVersion: 1.0\n")
    lines = [f"[{group}]"] + [f"{name} = {target}" for name, target in entries.items()]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")


def test_entry_point_plugins_resolve_by_name_and_are_listed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    write_entry_points(tmp_path, "connect_runtime.transforms", {
        "UpperCase": "smt_user_plugins:UpperCaseField",
        "Broken": "smt_no_such_module:Thing", "NotOne": "smt_user_plugins:NotAPlugin"})
    monkeypatch.syspath_prepend(str(tmp_path))
    with caplog.at_level(logging.WARNING, logger="connect_runtime.transforms.registry"):
        cls = registry.resolve(TRANSFORMATION, "UpperCase", "transforms.u.type")
        listed = registry.known_plugins(TRANSFORMATION)
    assert registry.listed_name(cls) == "smt_user_plugins.UpperCaseField"
    assert listed["smt_user_plugins.UpperCaseField"] is cls
    assert "Skipping transformation plugin Broken" in caplog.text
    assert "Skipping transformation plugin NotOne" in caplog.text
    plugins = {(p.class_name, p.type): p.version for p in list_plugins()}
    assert plugins[("smt_user_plugins.UpperCaseField", "transformation")] == "2.5"


def test_versions() -> None:
    assert registry.version_of(InsertField.Value) == __version__
    assert registry.version_of(registry.resolve(TRANSFORMATION, "smt_user_plugins.Failing",
                                                "k")) == "undefined"


def test_find_answers_only_for_transforms_and_predicates() -> None:
    assert registry.find("RegexRouter") == (TRANSFORMATION, registry.resolve(
        TRANSFORMATION, "RegexRouter", "k"))
    assert registry.find("smt_user_plugins.IsEven")[0] is PREDICATE  # type: ignore[index]
    for name in ("SequenceSourceConnector", "connect_runtime.connectors.sequence."
                 "SequenceSourceConnector", "org.apache.kafka.connect.json.JsonConverter"):
        assert registry.find(name) is None


def test_bundled_plugins_pickle_by_reference() -> None:
    assert pickle.loads(pickle.dumps(InsertField.Value)) is InsertField.Value


# ------------------------------------------------- GET /connector-plugins (plugins.py)


def test_the_full_plugin_listing_has_transformations_and_predicates_in_connects_order(
        ) -> None:
    plugins = list_plugins()
    types = [p.type for p in plugins]
    assert types == sorted(types, key=PLUGIN_TYPE_ORDER.index)
    assert [p.class_name for p in plugins if p.type == "transformation"] == \
        sorted(CONNECT_TRANSFORMS)
    assert [p.class_name for p in plugins if p.type == "predicate"] == CONNECT_PREDICATES
    assert {p.version for p in plugins if p.type in ("transformation", "predicate")} == \
        {__version__}


def test_plugin_config_of_transformations_and_predicates() -> None:
    keys = [k.to_info_dict() for k in plugin_config_keys(f"{PKG}.ExtractField$Value")]
    assert [k["name"] for k in keys] == ["field", "replace.null.with.default",
                                         "field.syntax.version"]
    assert keys[0] == {"name": "field", "type": "STRING", "required": True,
                       "default_value": None, "importance": "MEDIUM",
                       "documentation": "Field name to extract.", "group": None,
                       "width": "NONE", "display_name": "field", "dependents": [],
                       "order": -1}
    assert [k.name for k in plugin_config_keys("RegexRouter")] == ["regex", "replacement"]
    assert [k.name for k in plugin_config_keys("TopicNameMatches")] == ["pattern"]
    assert plugin_config_keys(f"{PKG}.Filter") == []
    assert [k.name for k in plugin_config_keys("smt_user_plugins.UpperCaseField")] == ["field"]
    with pytest.raises(NotFoundException):
        plugin_config_keys("InsertField$Value")
