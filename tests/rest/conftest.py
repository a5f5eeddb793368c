"""Fixtures for the REST layer's unit tests: a fake herder and an in-process client on it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient

from connect_runtime.cluster.herder_api import Herder
from connect_runtime.rest import create_app


@pytest.fixture
def herder() -> FakeHerder:
    """A leader herder holding one connector, ``conn``, with tasks 0 and 1."""
    fake = FakeHerder()
    fake.add("conn")
    return fake


@pytest.fixture
def client(herder: FakeHerder) -> Iterator[AppClient]:
    typed: Herder = herder  # lets mypy prove the fake satisfies the protocol
    with AppClient(create_app(typed)) as app_client:
        yield app_client
