"""Fixtures shared by the storage tests, which all run against the real broker."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.kafka.clients import create_admin, create_producer


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    """An admin client of the session's broker."""
    return create_admin({"bootstrap.servers": kafka_bootstrap})


@pytest.fixture
def producers(kafka_bootstrap: str) -> Iterator[Callable[..., Producer]]:
    """``make(transactional_id=None)``: a producer of the session's broker (its
    transactions initialized if it has an id). Producers made through this fixture
    are flushed (or aborted) at teardown: what they still queue is purged."""
    made: list[Producer] = []

    def make(transactional_id: str | None = None) -> Producer:
        producer = create_producer({"bootstrap.servers": kafka_bootstrap},
                                   transactional_id=transactional_id)
        if transactional_id:
            producer.init_transactions(30)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        producer.purge()
        producer.flush(1)
