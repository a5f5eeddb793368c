"""ConfigDef: parsing, validation messages and the JSON shapes Connect clients read."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from connect_runtime.api.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    Config,
    ConfigDef,
    ConfigKey,
    ConfigValue,
    Importance,
    NonEmptyString,
    Range,
    Type,
    ValidString,
    Width,
)
from connect_runtime.errors import ConfigException


def one_key(type_: Type, default: Any = NO_DEFAULT, validator: Any = None) -> ConfigDef:
    return ConfigDef().define("k", type_, default, validator)


def errors_of(d: ConfigDef, props: dict[str, Any]) -> dict[str, list[str]]:
    return {v.name: v.errors for v in d.validate(props)}


# --- define -----------------------------------------------------------------


def test_define_chains_and_keeps_definition_order() -> None:
    d = ConfigDef().define("b", Type.INT, 1).define("a", Type.STRING, None)
    assert d.names() == ["b", "a"]
    assert list(d.config_keys) == ["b", "a"]


def test_positional_define_as_worker_config_uses_it() -> None:
    d = ConfigDef().define("x", Type.INT, 3, Range.at_least(1), Importance.HIGH, "Doc.")
    key = d.config_keys["x"]
    assert (key.default, key.importance, key.documentation) == (3, Importance.HIGH, "Doc.")
    assert (key.group, key.order_in_group, key.width, key.display_name) == (
        None, -1, Width.NONE, "x")


def test_duplicate_definition_names_the_key() -> None:
    d = ConfigDef().define("dup", Type.INT, 1)
    with pytest.raises(ConfigException, match="dup"):
        d.define("dup", Type.STRING, "x")


def test_default_is_parsed_to_the_type_at_define_time() -> None:
    d = ConfigDef().define("n", Type.INT, "5").define("l", Type.LIST, "a, b")
    assert d.config_keys["n"].default == 5
    assert d.config_keys["l"].default == ["a", "b"]


def test_bad_default_fails_at_define_time() -> None:
    with pytest.raises(ConfigException, match="Value must be at least 1"):
        ConfigDef().define("n", Type.INT, 0, Range.at_least(1))
    with pytest.raises(ConfigException, match="Not a number of type INT"):
        ConfigDef().define("n", Type.INT, "many")


def test_no_default_sentinel_survives_copy_and_pickle() -> None:
    key = ConfigDef().define("r", Type.STRING).config_keys["r"]
    assert not key.has_default()
    assert not copy.deepcopy(key).has_default()
    assert pickle.loads(pickle.dumps(NO_DEFAULT)) is NO_DEFAULT


# --- parse ------------------------------------------------------------------


def test_parse_applies_defaults_and_ignores_unknown_keys() -> None:
    d = ConfigDef().define("a", Type.INT, 1).define("b", Type.STRING, None)
    assert d.parse({"zzz": "ignored"}) == {"a": 1, "b": None}


def test_parse_missing_required_names_the_key() -> None:
    d = ConfigDef().define("opt", Type.INT, 1).define("needed", Type.STRING)
    with pytest.raises(ConfigException) as info:
        d.parse({})
    assert str(info.value) == 'Missing required configuration "needed" which has no default value.'


def test_none_value_counts_as_unset() -> None:
    d = ConfigDef().define("a", Type.INT, 7).define("r", Type.STRING)
    with pytest.raises(ConfigException, match='"r"'):
        d.parse({"a": None, "r": None})
    assert d.parse({"a": None, "r": "x"}) == {"a": 7, "r": "x"}


def test_parse_wrong_type_names_key_and_value() -> None:
    with pytest.raises(ConfigException) as info:
        one_key(Type.INT).parse({"k": "abc"})
    assert str(info.value) == "Invalid value abc for configuration k: Not a number of type INT"
    assert info.value.name == "k"
    assert info.value.value == "abc"


def test_parse_validator_failure_names_key() -> None:
    with pytest.raises(ConfigException) as info:
        one_key(Type.INT, 5, Range.between(1, 10)).parse({"k": "11"})
    assert str(info.value) == "Invalid value 11 for configuration k: Value must be no more than 10"
    assert info.value.name == "k"


def test_parsed_list_default_is_a_copy() -> None:
    d = one_key(Type.LIST, "a,b")
    d.parse({})["k"].append("c")
    assert d.parse({})["k"] == ["a", "b"]


def test_parse_value_by_name_and_by_key() -> None:
    d = one_key(Type.INT, 2)
    assert d.parse_value("k", " 42 ") == 42
    assert d.parse_value(d.config_keys["k"], None) == 2
    with pytest.raises(ConfigException, match="nope"):
        d.parse_value("nope", "1")


# --- type parsing -----------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("true", True), ("FALSE", False), (" True ", True), (True, True), (False, False)],
)
def test_boolean_values(raw: Any, expected: bool) -> None:
    assert one_key(Type.BOOLEAN).parse({"k": raw})["k"] is expected


@pytest.mark.parametrize("raw", ["yes", "1", "", 1])
def test_boolean_rejects_anything_else(raw: Any) -> None:
    with pytest.raises(ConfigException, match="Expected value to be either true or false"):
        one_key(Type.BOOLEAN).parse({"k": raw})


@pytest.mark.parametrize(
    ("type_", "raw", "expected"),
    [
        (Type.INT, "2147483647", 2**31 - 1),
        (Type.INT, "-2147483648", -(2**31)),
        (Type.INT, "+12", 12),
        (Type.INT, 12, 12),
        (Type.LONG, "9223372036854775807", 2**63 - 1),
        (Type.LONG, 2**40, 2**40),
        (Type.DOUBLE, "1.5", 1.5),
        (Type.DOUBLE, "1e3", 1000.0),
        (Type.DOUBLE, 2, 2.0),
    ],
)
def test_numbers(type_: Type, raw: Any, expected: Any) -> None:
    value = one_key(type_).parse({"k": raw})["k"]
    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("type_", "raw"),
    [
        (Type.INT, "2147483648"),
        (Type.INT, "1.5"),
        (Type.INT, "1_000"),
        (Type.INT, ""),
        (Type.INT, True),
        (Type.INT, 2**31),
        (Type.INT, 1.0),
        (Type.LONG, "9223372036854775808"),
        (Type.DOUBLE, "abc"),
        (Type.DOUBLE, "1_0"),
        (Type.DOUBLE, False),
    ],
)
def test_bad_numbers(type_: Type, raw: Any) -> None:
    with pytest.raises(ConfigException) as info:
        one_key(type_).parse({"k": raw})
    assert info.value.name == "k"


def test_list_parsing() -> None:
    d = one_key(Type.LIST)
    assert d.parse({"k": " a , b,c "})["k"] == ["a", "b", "c"]
    assert d.parse({"k": ""})["k"] == []
    assert d.parse({"k": "a,,b"})["k"] == ["a", "", "b"]
    assert d.parse({"k": ["x", "y"]})["k"] == ["x", "y"]


def test_strings_are_trimmed_and_must_be_strings() -> None:
    assert one_key(Type.STRING).parse({"k": "  v  "})["k"] == "v"
    with pytest.raises(ConfigException, match="Expected value to be a string"):
        one_key(Type.STRING).parse({"k": 3})


def test_class_accepts_names_and_classes() -> None:
    d = one_key(Type.CLASS)
    assert d.parse({"k": " a.b.C "})["k"] == "a.b.C"
    assert d.parse({"k": ConfigDef})["k"] == "connect_runtime.api.config_def.ConfigDef"


# --- validators -------------------------------------------------------------


def test_range() -> None:
    r = Range.between(1, 10)
    r("k", None)
    r("k", 1)
    r("k", 10)
    with pytest.raises(ConfigException, match="at least 1"):
        r("k", 0)
    with pytest.raises(ConfigException, match="no more than 10"):
        r("k", 10.5)
    assert str(r) == "[1,...,10]"
    assert str(Range.at_least(0)) == "[0,...]"


def test_valid_string_is_case_sensitive() -> None:
    v = ValidString.in_("a", "b")
    v("k", "a")
    v("k", None)
    with pytest.raises(ConfigException, match="String must be one of: a, b"):
        v("k", "A")
    assert str(v) == "[a, b]"


def test_case_insensitive_valid_string() -> None:
    v = CaseInsensitiveValidString.in_("poll", "connector")
    v("k", "CONNECTOR")
    v("k", None)
    with pytest.raises(ConfigException, match=r"one of \(case insensitive\): poll, connector"):
        v("k", "interval")


def test_non_empty_string_after_trimming() -> None:
    d = one_key(Type.STRING, None, NonEmptyString())
    assert d.parse({})["k"] is None
    with pytest.raises(ConfigException, match="String must be non-empty"):
        d.parse({"k": "   "})


def test_plain_function_validator() -> None:
    def even(name: str, value: Any) -> None:
        if value is not None and value % 2:
            raise ConfigException("must be even", name=name, value=value)

    d = one_key(Type.INT, 2, even)
    assert errors_of(d, {"k": "3"}) == {"k": ["Invalid value 3 for configuration k: must be even"]}


# --- validate ---------------------------------------------------------------


def test_validate_collects_every_error_and_never_raises() -> None:
    d = (
        ConfigDef()
        .define("req", Type.STRING)
        .define("num", Type.INT, 1, Range.at_least(1))
        .define("flag", Type.BOOLEAN, False)
        .define("mode", Type.STRING, "a", ValidString.in_("a", "b"))
        .define("fine", Type.INT, 1)
    )
    result = d.validate({"num": "abc", "flag": "maybe", "mode": "c", "fine": "2"})
    assert [v.name for v in result] == ["req", "num", "flag", "mode", "fine"]
    assert {v.name: v.errors for v in result} == {
        "req": ['Missing required configuration "req" which has no default value.'],
        "num": ["Invalid value abc for configuration num: Not a number of type INT"],
        "flag": ["Invalid value maybe for configuration flag: "
                 "Expected value to be either true or false"],
        "mode": ["Invalid value c for configuration mode: String must be one of: a, b"],
        "fine": [],
    }
    assert result[4].value == 2
    assert result[1].value is None


def test_validate_reports_undefined_dependents() -> None:
    d = ConfigDef().define("a", Type.INT, 1, dependents=["ghost"])
    ghost = d.validate({})[-1]
    assert ghost.name == "ghost"
    assert ghost.errors == ["ghost is referred in the dependents, but not defined."]
    with pytest.raises(ConfigException, match="ghost"):
        d.parse({})


def test_password_never_shown() -> None:
    d = ConfigDef().define("pw", Type.PASSWORD, None, ValidString.in_("open-sesame"))
    assert d.parse({"pw": " open-sesame "})["pw"] == "open-sesame"  # kept...
    value = d.validate({"pw": "s3cret"})[0]
    assert value.value == "s3cret"  # ...for the connector's own cross-checks
    rendered = repr(value.to_dict(Type.PASSWORD))
    assert "s3cret" not in rendered
    assert value.to_dict(Type.PASSWORD)["value"] == "[hidden]"
    assert value.errors == [
        "Invalid value [hidden] for configuration pw: String must be one of: open-sesame"
    ]
    with_default = ConfigDef().define("pw", Type.PASSWORD, "dflt").config_keys["pw"]
    assert with_default.to_info_dict()["default_value"] == "[hidden]"


# --- JSON shapes ------------------------------------------------------------


def test_config_key_info_shape() -> None:
    d = ConfigDef().define(
        "tasks.max", Type.INT, 1, Range.at_least(1), Importance.HIGH, "Max tasks.",
        group="Common", order_in_group=3, width=Width.SHORT, display_name="Tasks max",
    ).define("needed", Type.LIST, dependents=("tasks.max",))
    assert d.config_keys["tasks.max"].to_info_dict() == {
        "name": "tasks.max",
        "type": "INT",
        "required": False,
        "default_value": "1",
        "importance": "HIGH",
        "documentation": "Max tasks.",
        "group": "Common",
        "width": "SHORT",
        "display_name": "Tasks max",
        "dependents": [],
        "order": 3,
    }
    needed = d.config_keys["needed"].to_info_dict()
    assert (needed["required"], needed["default_value"], needed["display_name"]) == (
        True, None, "needed")
    assert (needed["order"], needed["dependents"], needed["importance"]) == (
        -1, ["tasks.max"], "MEDIUM")


@pytest.mark.parametrize(
    ("type_", "default", "shown"),
    [
        (Type.BOOLEAN, True, "true"),
        (Type.LIST, "a, b", "a,b"),
        (Type.LIST, "", ""),
        (Type.STRING, None, None),
        (Type.LONG, 60000, "60000"),
        (Type.DOUBLE, 0.5, "0.5"),
    ],
)
def test_default_value_rendering(type_: Type, default: Any, shown: str | None) -> None:
    assert one_key(type_, default).config_keys["k"].to_info_dict()["default_value"] == shown


def test_config_value_info_shape() -> None:
    v = ConfigValue("k", ["a", "b"], recommended_values=[True], errors=["bad"], visible=False)
    assert v.to_dict(Type.LIST) == {
        "name": "k",
        "value": "a,b",
        "recommended_values": ["true"],
        "errors": ["bad"],
        "visible": False,
    }
    assert ConfigValue("k").to_dict()["value"] is None
    v.add_error_message("worse")
    assert v.errors == ["bad", "worse"]


def test_groups_in_first_appearance_order() -> None:
    d = (
        ConfigDef()
        .define("a", Type.INT, 1, group="G2")
        .define("b", Type.INT, 1)
        .define("c", Type.INT, 1, group="G1")
        .define("d", Type.INT, 1, group="G2")
    )
    assert d.groups() == ["G2", "G1"]


# --- merged -----------------------------------------------------------------


def test_merged_has_both_key_sets_and_leaves_originals_alone() -> None:
    a = ConfigDef().define("x", Type.INT, 1)
    b = ConfigDef().define("y", Type.STRING, None)
    m = a.merged(b)
    assert m.names() == ["x", "y"]
    assert a.names() == ["x"] and b.names() == ["y"]
    assert m.parse({"y": "v"}) == {"x": 1, "y": "v"}


def test_merged_rejects_conflicting_definitions() -> None:
    a = ConfigDef().define("x", Type.INT, 1)
    assert a.merged(ConfigDef().define("x", Type.INT, 1)).names() == ["x"]
    with pytest.raises(ConfigException, match="x"):
        a.merged(ConfigDef().define("x", Type.STRING, "1"))


def test_config_holds_values() -> None:
    values = one_key(Type.INT, 1).validate({})
    assert Config(values).config_values == [ConfigValue("k", 1)]
    assert isinstance(ConfigDef().define("k", Type.INT, 1).config_keys["k"], ConfigKey)
