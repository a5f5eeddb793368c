"""RegexRouter, TimestampRouter, Filter (connect_runtime.transforms.routing)."""

from __future__ import annotations

import pytest
from smt_records import OFFSET, PARTITION, configured, record

from connect_runtime.errors import ConfigException, DataException
from connect_runtime.transforms.routing import Filter, RegexRouter, TimestampRouter


@pytest.mark.parametrize(("regex", "replacement", "topic", "routed"), [
    ("foo", "bar", "foo", "bar"),
    ("foo", "bar", "foo-suffix", "foo-suffix"),  # the whole topic must match
    ("(.*)-suffix", "$1", "foo-suffix", "foo"),
    ("(.*)-(.*)", "$2_$1", "a-b", "b_a"),
    ("(?<base>.*)-raw", "${base}-clean", "orders-raw", "orders-clean"),
    ("(.*)", "prefix-$1", "orders", "prefix-orders"),
    ("(.*)", "\\$1-literal", "x", "$1-literal"),
    ("(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)", "$10", "abcdefghij", "j"),
    ("(a)", "$10", "a", "a0"),  # Java: "$1" then "0", there is no group 10
    ("(a)|(b)", "[$2]", "a", "[]"),  # an unmatched group inserts nothing
    ("(.*?)x", "y", "ax", "y"),
    ("\\Qa.b\\E(.*)", "c$1", "a.bd", "cd"),
    ("\\p{Lower}+", "lower", "abc", "lower"),
])
def test_regex_router_follows_java_matches_and_replace_first(
        regex: str, replacement: str, topic: str, routed: str) -> None:
    xform = configured(RegexRouter, {"regex": regex, "replacement": replacement})
    out = xform.apply(record({"v": 1}, topic=topic))
    assert out.topic == routed
    assert (out.value, out.source_partition, out.source_offset) == ({"v": 1}, PARTITION, OFFSET)


def test_regex_router_returns_the_same_record_when_nothing_matches() -> None:
    original = record(topic="other")
    assert configured(RegexRouter, {"regex": "foo", "replacement": "bar"}).apply(original) \
        is original


@pytest.mark.parametrize(("configs", "key", "message"), [
    ({"regex": "(", "replacement": "x"}, "transforms.r.regex", "Invalid regex"),
    ({"regex": "(a)", "replacement": "$2"}, "transforms.r.replacement", "No group 2"),
    ({"regex": "(a)", "replacement": "${nope}"}, "transforms.r.replacement",
     "No group with name {nope}"),
    ({"regex": "(a)", "replacement": "x\\"}, "transforms.r.replacement",
     "character to be escaped is missing"),
    ({"regex": "a"}, "transforms.r.replacement", "Missing required configuration"),
    ({"regex": "[a-z&&[^b]]", "replacement": "x"}, "transforms.r.regex",
     "intersections are not supported"),
])
def test_regex_router_config_errors(configs: dict[str, str], key: str, message: str) -> None:
    xform = RegexRouter()
    xform.bind("r", "transforms.r.")
    with pytest.raises(ConfigException, match=message) as caught:
        xform.configure(configs)
    assert key in str(caught.value)


def test_timestamp_router_defaults_and_custom_formats() -> None:
    stamp = 1_483_425_001_864  # 2017-01-03T06:30:01.864Z
    default = configured(TimestampRouter)
    assert default.apply(record(topic="test", timestamp=stamp)).topic == "test-20170103"
    custom = configured(TimestampRouter, {"topic.format": "${timestamp}.${topic}.${topic}",
                                          "timestamp.format": "yyyy-MM-dd'T'HH"})
    assert custom.apply(record(topic="t", timestamp=stamp)).topic == "2017-01-03T06.t.t"


def test_timestamp_router_needs_a_timestamp() -> None:
    xform = configured(TimestampRouter)
    xform.bind("daily", "transforms.daily.")
    with pytest.raises(DataException, match=r"transform 'daily'.*topic 'orders': the record "
                                            r"has no timestamp"):
        xform.apply(record())


def test_timestamp_router_bad_pattern_is_a_config_error() -> None:
    xform = TimestampRouter()
    xform.bind("daily", "transforms.daily.")
    with pytest.raises(ConfigException, match="Unterminated quote") as caught:
        xform.configure({"timestamp.format": "yyyy'"})
    assert caught.value.name == "transforms.daily.timestamp.format"


def test_filter_drops_every_record() -> None:
    assert configured(Filter).apply(record({"v": 1})) is None
    assert Filter.config_def().config_keys == {}
