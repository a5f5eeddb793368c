"""The config writer heals itself: a leader whose producer a failed write dropped
claims it again before its next write, and says so in /health while it cannot.

The store is a fake (the logic here is the writer's); tests/storage and
tests/e2e/test_oversized_input.py run the real store against the broker.
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from connect_runtime.cluster.config_writer import ConfigWriter
from connect_runtime.errors import ConflictException, KafkaClientError, ProducerFencedError
from connect_runtime.storage.config_store import ConfigStore


class FakeStore:
    """Holds a producer or not; ``claim_fails`` makes the next claims raise."""

    def __init__(self) -> None:
        self.has_write_privileges = True
        self.claims = 0
        self.claim_fails: str | None = None
        self.written: list[str] = []

    def claim_write_privileges(self) -> None:
        self.claims += 1
        if self.claim_fails is not None:
            raise KafkaClientError(self.claim_fails)
        self.has_write_privileges = True

    def write(self, what: str) -> None:
        assert self.has_write_privileges, "wrote without a producer"
        self.written.append(what)

    def fenced(self) -> None:
        self.has_write_privileges = False
        raise ProducerFencedError("fenced by a newer producer")


def writer(store: FakeStore, member_leader: bool = True) -> ConfigWriter:
    return ConfigWriter(cast(ConfigStore, store), cast(Any, None), cast(Any, None),
                        is_leader=lambda: True, is_member_leader=lambda: member_leader,
                        wake=lambda: None)


def test_a_dropped_producer_is_claimed_again_before_the_next_write() -> None:
    store = FakeStore()
    configs = writer(store)
    with pytest.raises(ConflictException, match="fenced"):
        configs.write("set a", store.fenced)
    assert store.claims == 0  # nothing claimed behind the caller's back
    configs.write("set b", lambda: store.write("b"))
    assert store.claims == 1 and store.written == ["b"]
    assert configs.cannot_write is None


def test_a_failed_claim_answers_the_write_and_is_reported_until_one_succeeds() -> None:
    store = FakeStore()
    store.has_write_privileges = False
    store.claim_fails = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED: not allowed"
    configs = writer(store)
    with pytest.raises(KafkaClientError, match="not allowed"):
        configs.write("set a", lambda: store.write("a"))
    assert configs.cannot_write is not None and "not allowed" in configs.cannot_write
    store.claim_fails = None
    configs.write("set b", lambda: store.write("b"))
    assert configs.cannot_write is None and store.written == ["b"]


def test_a_worker_the_group_no_longer_assigns_the_config_topic_does_not_claim() -> None:
    """Claiming would fence the real leader: the write fails as the store says."""
    store = FakeStore()
    store.has_write_privileges = False
    configs = writer(store, member_leader=False)
    with pytest.raises(AssertionError, match="without a producer"):
        configs.write("set a", lambda: store.write("a"))
    assert store.claims == 0
