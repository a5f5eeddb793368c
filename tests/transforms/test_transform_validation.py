"""What PUT /connector-plugins/<c>/config/validate reports for transforms and predicates.

The expected shapes are Kafka Connect 4.1.1's answers for the same configs
(captured from a Java worker; tests/e2e/test_transforms_e2e.py compares live).
"""

from __future__ import annotations

from typing import Any

import pytest

from connect_runtime import __version__
from connect_runtime.config.validation import ConfigInfos, validate_connector_config
from connect_runtime.plugins import resolve_connector_class

PKG = "org.apache.kafka.connect.transforms"
BASE = {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "name": "x", "topic": "t", "file": "/tmp/x.txt"}
VALID = {"transforms": "ins,route", "transforms.ins.type": f"{PKG}.InsertField$Value",
         "transforms.ins.static.field": "f", "transforms.ins.static.value": "v",
         "transforms.ins.predicate": "isT", "transforms.ins.negate": "true",
         "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
         "transforms.route.replacement": "$1-x",
         "predicates": "isT", "predicates.isT.type": "TopicNameMatches",
         "predicates.isT.pattern": "t.*"}
V = __version__
# (name, type, default, importance, group, order, display name), in response order.
VALID_KEYS = [
    ("transforms.ins.type", "CLASS", None, "HIGH", "Transforms: ins", 0,
     "Transformation type for ins"),
    ("transforms.ins.plugin.version", "STRING", V, "HIGH", "Transforms: ins", 1,
     "Transformation version for ins"),
    ("transforms.ins.negate", "BOOLEAN", "false", "MEDIUM", "Transforms: ins", 2, "negate"),
    ("transforms.ins.offset.field", "STRING", None, "MEDIUM", "Transforms: ins", 3,
     "offset.field"),
    ("transforms.ins.partition.field", "STRING", None, "MEDIUM", "Transforms: ins", 4,
     "partition.field"),
    ("transforms.ins.predicate", "STRING", None, "MEDIUM", "Transforms: ins", 5, "predicate"),
    ("transforms.ins.replace.null.with.default", "BOOLEAN", "true", "MEDIUM", "Transforms: ins",
     6, "replace.null.with.default"),
    ("transforms.ins.static.field", "STRING", None, "MEDIUM", "Transforms: ins", 7,
     "static.field"),
    ("transforms.ins.static.value", "STRING", None, "MEDIUM", "Transforms: ins", 8,
     "static.value"),
    ("transforms.ins.timestamp.field", "STRING", None, "MEDIUM", "Transforms: ins", 9,
     "timestamp.field"),
    ("transforms.ins.topic.field", "STRING", None, "MEDIUM", "Transforms: ins", 10,
     "topic.field"),
    ("transforms.route.type", "CLASS", None, "HIGH", "Transforms: route", 0,
     "Transformation type for route"),
    ("transforms.route.plugin.version", "STRING", V, "HIGH", "Transforms: route", 1,
     "Transformation version for route"),
    ("transforms.route.regex", "STRING", None, "HIGH", "Transforms: route", 2, "regex"),
    ("transforms.route.replacement", "STRING", None, "HIGH", "Transforms: route", 3,
     "replacement"),
    ("transforms.route.negate", "BOOLEAN", "false", "MEDIUM", "Transforms: route", 4, "negate"),
    ("transforms.route.predicate", "STRING", None, "MEDIUM", "Transforms: route", 5,
     "predicate"),
    ("predicates.isT.type", "CLASS", None, "HIGH", "Predicates: isT", 0,
     "Predicate type for isT"),
    ("predicates.isT.plugin.version", "STRING", V, "HIGH", "Predicates: isT", 1,
     "Predicate version for isT"),
    ("predicates.isT.pattern", "STRING", None, "MEDIUM", "Predicates: isT", 2, "pattern"),
]


def validate(extra: dict[str, str]) -> ConfigInfos:
    connector = resolve_connector_class(BASE["connector.class"])()
    return validate_connector_config(connector, {**BASE, **extra}, "enabled")


def plugin_configs(infos: ConfigInfos) -> list[dict[str, Any]]:
    return [c for c in infos.to_dict()["configs"]
            if c["value"]["name"].startswith(("transforms.", "predicates."))]


def errors(infos: ConfigInfos) -> dict[str, list[str]]:
    return {value.name: value.errors for _, value in infos.configs if value.errors}


def test_a_valid_config_lists_every_alias_key_like_connect() -> None:
    infos = validate(VALID)
    assert infos.error_count == 0
    assert infos.groups[-3:] == ["Transforms: ins", "Transforms: route", "Predicates: isT"]
    configs = plugin_configs(infos)
    assert [(c["definition"]["name"], c["definition"]["type"],
             c["definition"]["default_value"], c["definition"]["importance"],
             c["definition"]["group"], c["definition"]["order"],
             c["definition"]["display_name"]) for c in configs] == VALID_KEYS
    values = {c["value"]["name"]: c["value"] for c in configs}
    assert values["transforms.ins.type"]["value"] == f"{PKG}.InsertField$Value"
    assert values["transforms.route.type"]["value"] == f"{PKG}.RegexRouter"  # alias resolved
    assert len(values["transforms.ins.type"]["recommended_values"]) == 26
    assert values["predicates.isT.type"]["recommended_values"] == [
        f"{PKG}.predicates.{n}" for n in ("HasHeaderKey", "RecordIsTombstone",
                                          "TopicNameMatches")]
    assert values["transforms.ins.plugin.version"] == {
        "name": "transforms.ins.plugin.version", "value": V, "recommended_values": [V],
        "errors": [], "visible": True}
    assert values["transforms.ins.negate"]["value"] == "true"
    assert values["transforms.ins.topic.field"]["value"] is None
    definition = configs[0]["definition"]
    assert definition["documentation"] == "Class for the 'ins' transformation."
    assert definition["required"] is True and definition["width"] == "LONG"


@pytest.mark.parametrize(("extra", "expected"), [
    # The same errors Kafka Connect 4.1.1 reports.
    ({"transforms": "a", "transforms.a.type": "com.nope.Nope"}, {"transforms.a.type": [
        "Invalid value com.nope.Nope for configuration transforms.a.type: Class com.nope.Nope "
        "could not be found."]}),
    ({"transforms": "a"}, {"transforms.a.type": [
        'Missing required configuration "transforms.a.type" which has no default value.']}),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p",
      "predicates": "p"}, {"predicates.p.type": [
          'Missing required configuration "predicates.p.type" which has no default value.']}),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "true"},
     {"transforms.a.type": ["Config 'transforms.a.negate' was provided but there is no config "
                            "'transforms.a.predicate' defining a predicate to be negated."]}),
    ({"transforms": "a", "transforms.a.type": f"{PKG}.MaskField$Value"}, {"transforms.a.fields": [
        'Missing required configuration "transforms.a.fields" which has no default value.']}),
    ({"transforms": "a", "transforms.a.type": f"{PKG}.Cast$Value", "transforms.a.spec": "x:map"},
     {"transforms.a.spec": ["Cast transformation does not support casting to MAP; supported "
                            "types are [INT8, INT16, INT32, INT64, FLOAT32, FLOAT64, BOOLEAN, "
                            "STRING]"]}),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p",
      "transforms.a.negate": "maybe", "predicates": "p", "predicates.p.type": "RecordIsTombstone"},
     {"transforms.a.negate": ["Invalid value maybe for configuration transforms.a.negate: "
                              "Expected value to be either true or false"]}),
    ({"predicates": "p", "predicates.p.type": "HasHeaderKey"}, {"predicates.p.name": [
        'Missing required configuration "predicates.p.name" which has no default value.']}),
    ({"transforms": "a,a", "transforms.a.type": "Filter"}, {"transforms": [
        "Invalid value a,a for configuration transforms: Duplicate alias provided."]}),
    # Beyond Connect, which accepts these and fails the task: refused before they are stored.
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
     {"transforms.a.predicate": ["Predicate 'p' is not listed in 'predicates' (listed: none)"]}),
    ({"transforms": "a", "transforms.a.type": f"{PKG}.InsertField$Value"}, {"transforms.a.type": [
        f"transform 'a' ({PKG}.InsertField$Value): No field insertion configured"]}),
    ({"transforms": "a", "transforms.a.type": f"{PKG}.HeaderFrom$Value", "transforms.a.fields":
      "a,b", "transforms.a.headers": "h", "transforms.a.operation": "copy"},
     {"transforms.a.headers": ["Invalid value h for configuration transforms.a.headers: "
                               "'fields' config must have the same number of elements as "
                               "'headers' config."]}),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.plugin.version": "1.0"},
     {"transforms.a.plugin.version": [
         f"Plugin {PKG}.Filter not found that matches the version range [1.0], available "
         f"versions: [{V}]"]}),
])
def test_errors_sit_on_the_key_they_concern(extra: dict[str, str],
                                            expected: dict[str, list[str]]) -> None:
    infos = validate(extra)
    assert errors(infos) == expected
    assert infos.error_count == sum(len(v) for v in expected.values())


def test_a_predicate_given_as_a_transformation_is_shown_and_refused() -> None:
    infos = validate({"transforms": "a", "transforms.a.type": "TopicNameMatches"})
    (type_value,) = [c["value"] for c in plugin_configs(infos)
                     if c["value"]["name"] == "transforms.a.type"]
    assert type_value["value"] == f"{PKG}.predicates.TopicNameMatches"
    assert "does not implement the Transformation interface" in type_value["errors"][0]
    assert [c["value"]["name"] for c in plugin_configs(infos)] == [
        "transforms.a.type", "transforms.a.plugin.version"]


def test_user_plugins_show_their_own_keys_and_are_not_configured() -> None:
    infos = validate({"transforms": "u", "transforms.u.type": "smt_user_plugins.UpperCaseField",
                      "transforms.u.field": "explode"})  # configure() would raise
    assert infos.error_count == 0
    names = [c["value"]["name"] for c in plugin_configs(infos)]
    assert names == ["transforms.u.type", "transforms.u.plugin.version", "transforms.u.field",
                     "transforms.u.negate", "transforms.u.predicate"]
    version = next(c for c in plugin_configs(infos)
                   if c["value"]["name"] == "transforms.u.plugin.version")
    assert version["definition"]["default_value"] == "2.5"


def test_an_unparseable_alias_list_adds_nothing() -> None:
    infos = validate({"transforms": None})  # type: ignore[dict-item]
    assert plugin_configs(infos) == []
