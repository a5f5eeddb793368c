"""The SQL source's configuration answers through the REST API and the real herder (its
Kafka stores and Spark runner replaced by in-memory ones: nothing here is about Kafka).

What a user sees when validating or creating the connector: each problem on the key
to change, saying what to write instead (docs/sql-source.md, "Keys" and "Modes and
exactly-once"):

* ``mode=timestamp`` with ``exactly.once.support=required`` under the default
  transaction boundary names ``transaction.boundary=connector``, on
  ``exactly.once.support``;
* ``postgres://`` names ``postgresql://``, on ``connection.url``, before any
  connection is tried and without the password.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from rest_checks import AppClient, assert_connect_error
from support.memory_herder import leading_herder

from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.rest import create_app

PLUGIN = "SqlSourceConnector"
TIMESTAMP_EOS = ("mode=timestamp is exactly once only with transaction.boundary=connector")


@pytest.fixture
def herder() -> Iterator[DistributedHerder]:
    # exactly.once.source.support is left at its default, enabled.
    herder = leading_herder()
    herder._reconciler.start()
    yield herder
    herder._reconciler.stop(timeout_s=10)


@pytest.fixture
def client(herder: DistributedHerder) -> Iterator[AppClient]:
    with AppClient(create_app(herder)) as app_client:
        yield app_client


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE orders (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                             "updated TIMESTAMP NOT NULL)"))
    engine.dispose()
    return url


def sql_config(url: str, **extra: str) -> dict[str, str]:
    return {"connector.class": PLUGIN, "connection.url": url, "mode": "timestamp",
            "timestamp.column.name": "updated", "topic.prefix": "shop-",
            "exactly.once.support": "required",
            **{k.replace("_", "."): v for k, v in extra.items()}}


def errors_by_key(body: dict[str, Any]) -> dict[str, list[str]]:
    return {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]
            if c["value"]["errors"]}


def validate(client: AppClient, config: dict[str, str]) -> dict[str, Any]:
    response = client.put(f"/connector-plugins/{PLUGIN}/config/validate",
                          json={"name": "orders", **config})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


# --- item 5: timestamp mode, exactly once, the default boundary ------------------

def test_validate_names_the_connector_boundary_on_exactly_once_support(
        client: AppClient, sqlite_url: str) -> None:
    body = validate(client, sql_config(sqlite_url))
    assert body["error_count"] == 1
    [message] = errors_by_key(body)["exactly.once.support"]
    assert TIMESTAMP_EOS in message
    assert "set transaction.boundary=connector" in message
    shown = {c["value"]["name"]: c["value"] for c in body["configs"]}["exactly.once.support"]
    assert shown["value"] == "required"  # the connector's message keeps the framework's value


def test_validate_accepts_timestamp_mode_with_the_connector_boundary(
        client: AppClient, sqlite_url: str) -> None:
    body = validate(client, sql_config(sqlite_url, transaction_boundary="connector"))
    assert errors_by_key(body) == {}


def test_create_and_update_answer_400_naming_the_connector_boundary(
        client: AppClient, herder: DistributedHerder, sqlite_url: str) -> None:
    created = client.post("/connectors", json={"name": "orders",
                                               "config": sql_config(sqlite_url)})
    message = assert_connect_error(created, 400)
    assert message.startswith("Connector configuration is invalid and contains the following "
                              "1 error(s):\n")
    assert TIMESTAMP_EOS in message and "does not support exactly-once" not in message
    assert herder.connectors() == []

    updated = client.put("/connectors/orders/config", json=sql_config(sqlite_url))
    assert TIMESTAMP_EOS in assert_connect_error(updated, 400)
    fixed = client.put("/connectors/orders/config",
                       json=sql_config(sqlite_url, transaction_boundary="connector"))
    assert fixed.status_code == 201, fixed.text


# --- item 6: postgres:// ----------------------------------------------------------

def test_a_postgres_url_is_answered_with_postgresql_before_connecting(
        client: AppClient, herder: DistributedHerder) -> None:
    # db.invalid never resolves: a connection attempt would answer "Could not connect".
    url = "postgres://alice:s3cret-pw@db.invalid:5432/shop"
    config = sql_config(url, mode="incrementing", exactly_once_support="requested")
    body = validate(client, config)
    [message] = errors_by_key(body)["connection.url"]
    assert body["error_count"] == 1
    assert "write postgresql://alice:***@db.invalid:5432/shop" in message
    assert "SQLAlchemy's name for PostgreSQL" in message
    created = client.post("/connectors", json={"name": "orders", "config": config})
    assert "write postgresql://alice:***@db.invalid:5432/shop" in assert_connect_error(
        created, 400)
    # The messages never quote the password (the value of connection.url is echoed as
    # submitted, as Connect echoes every key that is not a PASSWORD).
    assert "s3cret-pw" not in message and "s3cret-pw" not in created.text
    assert herder.connectors() == []
