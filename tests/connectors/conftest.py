"""Fixtures for the SQL source's tests: one real database per test, SQLite or PostgreSQL.

``database`` is parametrized over both: a SQLite file in the test's tmp dir, or
a fresh database on the session's PostgreSQL server (``tests/conftest.py``).
``Database`` creates tables with SQLAlchemy Core, so one test body runs on
both (``support.postgres.Database``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.postgres import Database, PostgresServer


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'source.db'}"
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        url = server.create_database("sql")
    db = Database(url)
    try:
        yield db
    finally:
        db.engine.dispose()


@pytest.fixture
def sqlite_database(tmp_path: Path) -> Iterator[Database]:
    db = Database(f"sqlite:///{tmp_path / 'source.db'}")
    try:
        yield db
    finally:
        db.engine.dispose()


@pytest.fixture
def postgres_database(postgres: PostgresServer) -> Iterator[Database]:
    db = Database(postgres.create_database("sql"))
    try:
        yield db
    finally:
        db.engine.dispose()
