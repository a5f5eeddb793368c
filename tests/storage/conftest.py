"""Fixtures shared by the storage tests, which all run against the real broker."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from connect_runtime.kafka.clients import create_admin


@pytest.fixture
def admin(kafka_bootstrap: str) -> AdminClient:
    """An admin client of the session's broker."""
    return create_admin({"bootstrap.servers": kafka_bootstrap})
