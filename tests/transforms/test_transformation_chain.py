"""TransformationChain (connect_runtime.transforms.chain): building, running, closing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import smt_user_plugins
from smt_records import record

from connect_runtime.api.record import SourceRecord
from connect_runtime.errors import ConfigException
from connect_runtime.transforms import TransformationChain

INSERT = "org.apache.kafka.connect.transforms.InsertField$Value"
RENAME = "org.apache.kafka.connect.transforms.ReplaceField$Value"


@pytest.fixture(autouse=True)
def _no_closed_plugins() -> Iterator[None]:
    smt_user_plugins.closed.clear()
    yield
    smt_user_plugins.closed.clear()


def chain(**config: str) -> TransformationChain:
    """A chain from keyword keys: ``transforms__a__type`` is ``transforms.a.type``."""
    return TransformationChain.from_config({k.replace("__", "."): v for k, v in config.items()})


def test_no_transforms_is_an_empty_chain_that_passes_records() -> None:
    empty = TransformationChain.from_config({"name": "c", "connector.class": "X"})
    original = record({"a": 1})
    assert not empty and len(empty) == 0
    assert empty.apply(original) is original


def test_stages_run_in_the_order_of_transforms() -> None:
    config = {"transforms": "ins, ren", "transforms.ins.type": INSERT,
              "transforms.ins.static.field": "origin", "transforms.ins.static.value": "db",
              "transforms.ren.type": RENAME, "transforms.ren.renames": "origin:source"}
    assert TransformationChain.from_config(config).apply(record({"a": 1})).value == \
        {"a": 1, "source": "db"}
    reversed_order = {**config, "transforms": "ren,ins"}
    assert TransformationChain.from_config(reversed_order).apply(record({"a": 1})).value == \
        {"a": 1, "origin": "db"}


def filtered(negate: str | None) -> TransformationChain:
    config = {"transforms": "drop", "transforms.drop.type": "Filter",
              "transforms.drop.predicate": "even", "predicates": "even",
              "predicates.even.type": "smt_user_plugins.IsEven"}
    if negate is not None:
        config["transforms.drop.negate"] = negate
    return TransformationChain.from_config(config)


def test_a_predicate_gates_its_stage_and_negate_inverts_it() -> None:
    odd, even = record({"n": 1}), record({"n": 2})
    plain, negated = filtered(None), filtered("true")
    assert plain.apply(odd) is odd and plain.apply(even) is None
    assert negated.apply(odd) is None and negated.apply(even) is even
    assert filtered("false").apply(even) is None


def test_a_dropped_record_stops_the_chain() -> None:
    dropping = chain(transforms="drop,fail", transforms__drop__type="Filter",
                     transforms__fail__type="smt_user_plugins.Failing")
    assert dropping.apply(record({"a": 1})) is None


def test_run_wraps_every_stage_with_its_label_and_the_chain_catches_nothing() -> None:
    config = chain(transforms="up,fail", transforms__up__type="smt_user_plugins.UpperCaseField",
                   transforms__up__field="name",
                   transforms__fail__type="smt_user_plugins.Failing")
    calls: list[str] = []

    def run(label: str, stage: Callable[[], Any]) -> Any:
        calls.append(label)
        try:
            return stage()
        except ValueError:
            return None  # what errors.tolerance=all does: the record is dropped

    assert config.apply(record({"name": "pen"}), run=run) is None
    assert calls == ["transform 'up' (smt_user_plugins.UpperCaseField)",
                     "transform 'fail' (smt_user_plugins.Failing)"]
    with pytest.raises(ValueError, match="cannot handle orders"):
        config.apply(record({"name": "pen"}))
    with pytest.raises(ValueError):
        config.apply(record({"name": "pen"}), run=lambda label, stage: stage())


def test_run_also_wraps_the_predicate_test() -> None:
    failed_in: list[str] = []

    def run(label: str, stage: Callable[[], SourceRecord | None]) -> SourceRecord | None:
        try:
            return stage()
        except TypeError:
            failed_in.append(label)
            raise

    broken = record({"n": "two"})  # IsEven's test fails on a string
    with pytest.raises(TypeError):
        filtered(None).apply(broken, run=run)
    assert failed_in == ["transform 'drop' (org.apache.kafka.connect.transforms.Filter)"]


def test_user_transforms_by_import_path_and_their_labels() -> None:
    for type_name in ("smt_user_plugins.UpperCaseField", "smt_user_plugins:UpperCaseField"):
        built = chain(transforms="up", transforms__up__type=type_name,
                      transforms__up__field="name")
        assert built.apply(record({"name": "pen"})).value == {"name": "PEN"}
        assert built.stages[0].label == "transform 'up' (smt_user_plugins.UpperCaseField)"


def test_close_closes_every_stage_and_predicate_and_reports_the_first_error() -> None:
    built = chain(transforms="a,fail,b", transforms__a__type="smt_user_plugins.UpperCaseField",
                  transforms__a__field="x", transforms__a__predicate="even",
                  transforms__fail__type="smt_user_plugins.Failing",
                  transforms__b__type="smt_user_plugins.UpperCaseField",
                  transforms__b__field="y", predicates="even",
                  predicates__even__type="smt_user_plugins.IsEven")
    with pytest.raises(RuntimeError, match="close failed"):
        built.close()
    assert smt_user_plugins.closed == ["UpperCaseField(x)", "IsEven", "UpperCaseField(y)"]


@pytest.mark.parametrize(("config", "key", "message"), [
    ({"transforms": "a,a", "transforms.a.type": "Filter"}, "transforms",
     "Duplicate alias provided."),
    ({"transforms": "a"}, "transforms.a.type",
     'Missing required configuration "transforms.a.type" which has no default value.'),
    ({"transforms": "a", "transforms.a.type": "com.example.Nope"}, "transforms.a.type",
     "Class com.example.Nope could not be found."),
    ({"transforms": "a", "transforms.a.type": "TopicNameMatches"}, "transforms.a.type",
     "does not implement the Transformation interface"),
    ({"transforms": "a", "transforms.a.type": "smt_user_plugins.NotAPlugin"},
     "transforms.a.type", "does not implement the Transformation interface"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p"},
     "transforms.a.predicate", "Predicate 'p' is not listed in 'predicates' (listed: none)"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p",
      "predicates": "p"}, "predicates.p.type", "Missing required configuration"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.negate": "true"},
     "transforms.a.negate", "Config 'transforms.a.negate' was provided but there is no config "
     "'transforms.a.predicate' defining a predicate to be negated."),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.predicate": "p",
      "transforms.a.negate": "maybe", "predicates": "p",
      "predicates.p.type": "RecordIsTombstone"}, "transforms.a.negate",
     "Expected value to be either true or false"),
    ({"transforms": "m", "transforms.m.type": "org.apache.kafka.connect.transforms.MaskField$Key"},
     "transforms.m.fields", "Missing required configuration"),
    ({"transforms": "r", "transforms.r.type": "RegexRouter", "transforms.r.regex": "(",
      "transforms.r.replacement": "x"}, "transforms.r.regex", "Invalid regex"),
    ({"transforms": "u", "transforms.u.type": "smt_user_plugins.UpperCaseField"},
     "transforms.u.field", "Missing required configuration"),
    ({"transforms": "u", "transforms.u.type": "smt_user_plugins.UpperCaseField",
      "transforms.u.field": "forbidden"}, "transforms.u.field", "may not be changed"),
    ({"transforms": "u", "transforms.u.type": "smt_user_plugins.UpperCaseField",
      "transforms.u.field": "explode"}, "transforms.u.type",
     "UpperCaseField.configure failed: RuntimeError: boom"),
    ({"transforms": "a", "transforms.a.type": "Filter", "transforms.a.plugin.version": "9.9"},
     "transforms.a.plugin.version", "Plugin org.apache.kafka.connect.transforms.Filter not "
     "found that matches the version range [9.9], available versions: [0.1.0]"),
    ({"predicates": "p", "predicates.p.type": "TopicNameMatches"}, "predicates.p.pattern",
     "Missing required configuration"),  # listed predicates are checked even if unused
])
def test_config_errors_name_the_key(config: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigException) as caught:
        TransformationChain.from_config(config)
    assert caught.value.name == key
    assert message in str(caught.value)


def test_a_failed_build_closes_what_it_had_built() -> None:
    with pytest.raises(ConfigException):
        chain(transforms="ok,bad", transforms__ok__type="smt_user_plugins.UpperCaseField",
              transforms__ok__field="x", transforms__bad__type="Nope")
    assert smt_user_plugins.closed == ["UpperCaseField(x)"]


def test_each_stage_has_its_own_predicate_instance() -> None:
    built = chain(transforms="a,b", transforms__a__type="Filter",
                  transforms__a__predicate="p", transforms__b__type="Filter",
                  transforms__b__predicate="p", predicates="p",
                  predicates__p__type="RecordIsTombstone")
    assert built.stages[0].predicate is not built.stages[1].predicate
    assert built.stages[0].predicate.alias == "p"
