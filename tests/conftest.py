"""Fixtures shared by the whole suite.

* ``kafka_bootstrap``: one real Apache Kafka broker per test session, started
  with ``deploy/kafka.sh`` on free loopback ports and stopped at the end. Set
  ``CONNECT_TEST_BOOTSTRAP=host:port`` to reuse a broker you already run.
* ``unique_name``: a fresh name per test, for topics, group ids and connectors,
  so tests sharing the broker never see each other's data.
* ``postgres``: one real PostgreSQL server per test session, started on first use
  (``support.postgres``); tests take a database each with ``create_database()``.
* ``schema_registry``: one real Schema Registry (Apicurio, Confluent's API) per
  test session, started on first use (``support.registry``); tests use unique
  subjects (their topics'), so they share it.
* At the end of the session, the temporary roots of workers the tests SIGKILLed
  are swept as the next worker's start would sweep them
  (``connect_runtime.tempdirs``): a killed worker cannot remove its own.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.kafka import Broker, free_port_pair
from support.postgres import PostgresServer, postgres_server
from support.registry import SchemaRegistry

from connect_runtime.tempdirs import sweep_stale_roots

# The suite's lanes, their order and the time table printed at the end of every
# run (support/lanes.py); the topics fixture (support/topics.py).
pytest_plugins = ["support.lanes", "support.topics"]


@pytest.fixture(scope="session", autouse=True)
def _sweep_killed_workers_temp_roots() -> Iterator[None]:
    yield
    sweep_stale_roots()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    existing = os.environ.get("CONNECT_TEST_BOOTSTRAP")
    if existing:
        yield existing
        return
    data_dir = Path(tempfile.mkdtemp(prefix="connect-test-kafka-"))
    broker = Broker(data_dir, free_port_pair())
    broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()
        shutil.rmtree(data_dir, ignore_errors=True)  # its logs and data: leave nothing behind


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[SchemaRegistry]:
    data_dir = Path(tempfile.mkdtemp(prefix="connect-test-registry-"))
    registry = SchemaRegistry(data_dir)
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_name("out")`` -> ``"out-test_foo-1a2b3c"``, distinct per call."""
    test = request.node.name.replace("[", "-").replace("]", "").replace("/", "-")[:40]

    def make(prefix: str) -> str:
        return f"{prefix}-{test}-{uuid.uuid4().hex[:8]}"

    return make
