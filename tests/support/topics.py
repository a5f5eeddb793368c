"""The ``topics`` fixture: a fresh output topic and offsets topic on the session's broker.

Registered for the whole suite (``pytest_plugins`` in ``tests/conftest.py``); the
task-loop tests write a task's records to the first and its source offsets to the
second. The output topic has ``out_partitions`` partitions (1; a module overrides
that fixture to have more), the offsets topic one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from support.kafka import create_topic


@pytest.fixture
def out_partitions() -> int:
    """Partitions of the ``topics`` fixture's output topic."""
    return 1


@pytest.fixture
def topics(kafka_bootstrap: str, unique_name: Callable[[str], str],
           out_partitions: int) -> tuple[str, str]:
    """(output topic, offsets topic), both created, named uniquely for the test."""
    out, offsets = unique_name("out"), unique_name("offsets")
    create_topic(kafka_bootstrap, out, partitions=out_partitions)
    create_topic(kafka_bootstrap, offsets)
    return out, offsets
