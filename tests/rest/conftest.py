"""Fixtures for the REST layer's unit tests: a fake herder and an in-process client on it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient

from connect_runtime.worker.herder_api import Herder

# This folder is named like the package it tests. Once pytest puts tests/ on
# sys.path (rootdir-relative import of tests/conftest.py), "rest" resolves to this
# folder as a namespace package, because the editable install's finder runs after
# the path finder. A regular package anywhere on sys.path beats a namespace one, so
# the repository root on sys.path makes "rest" the real package again. This runs
# before any test module (and the fixture below) imports "rest".
_REPO = str(Path(__file__).resolve().parents[2])
if _REPO not in sys.path:
    sys.path.append(_REPO)


@pytest.fixture
def herder() -> FakeHerder:
    """A leader herder holding one connector, ``conn``, with tasks 0 and 1."""
    fake = FakeHerder()
    fake.add("conn")
    return fake


@pytest.fixture
def client(herder: FakeHerder) -> Iterator[AppClient]:
    from rest import create_app  # after the sys.path repair above

    typed: Herder = herder  # lets mypy prove the fake satisfies the protocol
    with AppClient(create_app(typed)) as app_client:
        yield app_client
