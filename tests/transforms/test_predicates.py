"""TopicNameMatches, HasHeaderKey, RecordIsTombstone (connect_runtime.transforms.predicates)."""

from __future__ import annotations

import pytest
from smt_records import configured, record

from connect_runtime.errors import ConfigException
from connect_runtime.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches


def test_topic_name_matches_the_whole_topic_with_a_java_regex() -> None:
    predicate = configured(TopicNameMatches, {"pattern": "my-prefix-.*"})
    assert predicate.test(record(topic="my-prefix-orders"))
    assert not predicate.test(record(topic="other-my-prefix-orders"))
    assert not predicate.test(record(topic="my-prefix"))
    named = configured(TopicNameMatches, {"pattern": "(?<env>dev|prod)\\.\\p{Alpha}+"})
    assert named.test(record(topic="dev.orders")) and not named.test(record(topic="qa.orders"))


@pytest.mark.parametrize(("pattern", "message"), [
    ("", "String must be non-empty"), ("[", "Invalid regex"),
])
def test_topic_name_matches_config_errors(pattern: str, message: str) -> None:
    predicate = TopicNameMatches()
    predicate.bind("p", "predicates.p.")
    with pytest.raises(ConfigException, match=message) as caught:
        predicate.configure({"pattern": pattern})
    assert caught.value.name == "predicates.p.pattern"


def test_has_header_key() -> None:
    predicate = configured(HasHeaderKey, {"name": "trace"})
    assert predicate.test(record(headers=[("other", b"1"), ("trace", None)]))
    assert not predicate.test(record(headers=[("other", b"1")]))
    assert not predicate.test(record(headers=None))
    with pytest.raises(ConfigException, match="String must be non-empty"):
        configured(HasHeaderKey, {"name": ""})


def test_record_is_tombstone() -> None:
    predicate = configured(RecordIsTombstone)
    assert predicate.test(record(None, key="k"))
    assert not predicate.test(record({"a": 1}))
    assert not predicate.test(record(0))
    assert RecordIsTombstone.config_def().config_keys == {}
