"""The leader's ActiveTopicRecorder against a real status topic (KIP-558)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from connect_runtime.cluster.active_topics import ActiveTopicRecorder
from connect_runtime.kafka.clients import create_admin
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.storage.status_store import StatusStore, TopicStatus


@pytest.fixture
def store(kafka_bootstrap: str, unique_name: Callable[[str], str]) -> Iterator[StatusStore]:
    admin = create_admin({"bootstrap.servers": kafka_bootstrap})
    topic = unique_name("status")
    ensure_topic(admin, topic, 5)
    status = StatusStore(kafka_bootstrap, topic, admin=admin)
    status.start(30)
    yield status
    status.stop()


def wait_for(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_new_topics_are_written_once_with_the_reporting_task(store: StatusStore) -> None:
    existing = {"c"}
    recorder = ActiveTopicRecorder(store, accepts=existing.__contains__, clock_ms=lambda: 1234)
    recorder.start()
    try:
        recorder.offer("c", 2, frozenset({"a", "b"}))
        wait_for(lambda: len(store.active_topics("c")) == 2)
        assert store.active_topics("c")["a"] == TopicStatus("a", "c", 2, 1234)
        recorder.offer("c", 0, frozenset({"a"}))  # listed already: nothing queued
        recorder.offer("gone", 0, frozenset({"a"}))  # a deleted connector: never written
        recorder.offer("c", 1, frozenset({"z"}))  # written after the two above
        wait_for(lambda: store.is_active_topic("c", "z"))
        assert store.active_topics("c")["a"].task == 2
        assert store.topic_connectors() == {"c"}
    finally:
        recorder.stop()


def test_reset_tombstones_and_drops_what_was_queued(store: StatusStore) -> None:
    recorder = ActiveTopicRecorder(store, accepts=lambda _: True)  # not started: queue only
    store.put_topic(TopicStatus("a", "c", 0, 1))
    recorder.offer("c", 0, frozenset({"b"}))
    assert recorder.reset("c") == ["a"]
    assert store.active_topics("c") == {}
    recorder.start()  # the queued "b" predates the reset: it must not come back
    try:
        recorder.offer("other", 0, frozenset({"x"}))
        wait_for(lambda: store.is_active_topic("other", "x"))
        assert store.active_topics("c") == {}
        recorder.offer("c", 0, frozenset({"b"}))  # the task produced to it again
        wait_for(lambda: store.is_active_topic("c", "b"))
    finally:
        recorder.stop()
