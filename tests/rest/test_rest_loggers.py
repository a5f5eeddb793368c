"""``/admin/loggers``: shapes, codes and messages, as Kafka Connect 4.1.1 answered them.

The fake herder applies the real logger rules to a private logging hierarchy
(root at INFO), so these tests never change the process's loggers.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient, assert_connect_error

from connect_runtime.rest import create_app

JSON = {"Content-Type": "application/json"}


def put_level(client: AppClient, logger: str, body: Any, query: str = "") -> Any:
    return client.put(f"/admin/loggers/{logger}{query}", json=body)


def put_raw(client: AppClient, logger: str, content: str) -> Any:
    return client.put(f"/admin/loggers/{logger}", content=content, headers=JSON)


def test_listing_shows_every_logger_sorted_with_root(
    client: AppClient, herder: FakeHerder,
) -> None:
    herder.logging.getLogger("org.example").setLevel(logging.DEBUG)
    herder.logging.getLogger("a.b")
    response = client.get("/admin/loggers")
    assert response.status_code == 200
    assert list(response.json()) == ["a.b", "org.example", "root"]
    assert response.json()["org.example"] == {"level": "DEBUG", "last_modified": None}
    assert client.get("/admin/loggers/").json() == response.json()


def test_one_logger(client: AppClient, herder: FakeHerder) -> None:
    herder.logging.getLogger("org.example").setLevel(logging.WARNING)
    response = client.get("/admin/loggers/org.example")
    assert response.status_code == 200
    assert response.json() == {"level": "WARN", "last_modified": None}
    assert client.get("/admin/loggers/ROOT").json() == {"level": "INFO", "last_modified": None}


def test_unknown_logger_is_connects_404(client: AppClient) -> None:
    response = client.get("/admin/loggers/org.nonexistent")
    assert_connect_error(response, 404)
    assert response.json()["message"] == "Logger org.nonexistent not found."


def test_worker_scope_answers_the_changed_loggers_and_stamps_them(
    client: AppClient, herder: FakeHerder,
) -> None:
    herder.logging.getLogger("zz.h.a")
    herder.logging.getLogger("zz.hx").setLevel(logging.ERROR)
    response = put_level(client, "zz.h", {"level": "DEBUG"})
    assert response.status_code == 200
    assert response.json() == ["zz.h", "zz.h.a", "zz.hx"]
    stamped = {"level": "DEBUG", "last_modified": herder.now_ms}
    assert client.get("/admin/loggers/zz.hx").json() == stamped
    # Setting the same level again changes nothing.
    assert put_level(client, "zz.h", {"level": "debug"}).json() == []


@pytest.mark.parametrize("query", ["", "?scope=worker", "?scope=WORKER", "?scope=bogus",
                                   "?scope="])
def test_any_scope_but_cluster_is_worker_scope(
    client: AppClient, herder: FakeHerder, query: str,
) -> None:
    response = put_level(client, "scoped", {"level": "TRACE"}, query)
    assert response.status_code == 200
    assert response.json() == ["scoped"]
    assert herder.calls[-1] == ("set_worker_logger_level", ("scoped", "TRACE"))


@pytest.mark.parametrize("scope", ["cluster", "Cluster", "CLUSTER"])
def test_cluster_scope_is_204_without_body(
    client: AppClient, herder: FakeHerder, scope: str,
) -> None:
    response = put_level(client, "org.example", {"level": "debug"}, f"?scope={scope}")
    assert response.status_code == 204
    assert response.content == b""
    assert herder.calls[-1] == ("set_cluster_logger_level", ("org.example", "debug"))
    assert client.get("/admin/loggers/org.example").json()["level"] == "DEBUG"


@pytest.mark.parametrize("body", [{}, {"level": None}, {"other": "DEBUG"}])
def test_missing_level_is_400(client: AppClient, body: Any) -> None:
    response = put_level(client, "x", body)
    assert_connect_error(response, 400)
    assert response.json()["message"] == "Desired 'level' parameter was not specified in request."


@pytest.mark.parametrize(("level", "shown"), [
    ("bogus", "bogus"), ("WARNING", "WARNING"), ("", ""), (5, "5"), (True, "true"),
])
def test_invalid_level_is_connects_404(
    client: AppClient, herder: FakeHerder, level: Any, shown: str,
) -> None:
    for query in ("", "?scope=cluster"):
        response = put_level(client, "x", {"level": level}, query)
        assert_connect_error(response, 404)
        assert response.json()["message"] == f"invalid log level '{shown}'."
    assert "x" not in herder.logging.loggerDict


@pytest.mark.parametrize("content", ["", "null", "[]", '"DEBUG"', "notjson", '{"level": {}}',
                                     '{"level": ["DEBUG"]}'])
def test_malformed_bodies_are_400_where_connect_answers_500(
    client: AppClient, content: str,
) -> None:
    assert_connect_error(put_raw(client, "x", content), 400)


def test_a_body_without_json_content_type_is_415(client: AppClient) -> None:
    response = client.put("/admin/loggers/x", content='{"level": "DEBUG"}')
    assert_connect_error(response, 415, "HTTP 415 Unsupported Media Type")


def test_extra_fields_are_ignored(client: AppClient) -> None:
    response = put_level(client, "extra", {"level": "ERROR", "x": 1})
    assert response.status_code == 200
    assert response.json() == ["extra"]


def test_a_logger_name_is_one_path_segment(client: AppClient) -> None:
    assert_connect_error(put_level(client, "a/b", {"level": "DEBUG"}), 404, "HTTP 404 Not Found")
    response = put_level(client, "with%20space", {"level": "DEBUG"})
    assert response.json() == ["with space"]


def test_cluster_scope_on_a_follower_checks_the_level_before_forwarding() -> None:
    follower = FakeHerder(is_leader=False, leader_url=None)
    with AppClient(create_app(follower)) as client:
        bad = put_level(client, "x", {"level": "bogus"}, "?scope=cluster")
        assert_connect_error(bad, 404, "invalid log level 'bogus'.")
        # No leader known: Connect's 409, and nothing applied here.
        assert_connect_error(put_level(client, "x", {"level": "DEBUG"}, "?scope=cluster"), 409)
        # Worker scope never needs the leader.
        assert put_level(client, "x", {"level": "DEBUG"}).json() == ["x"]


def test_openapi_documents_the_real_codes(client: AppClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert set(paths["/admin/loggers"]) == {"get"}
    one = paths["/admin/loggers/{logger}"]
    assert set(one["get"]["responses"]) == {"200", "400", "404", "415"}
    assert set(one["put"]["responses"]) == {"200", "204", "400", "404", "409", "415"}
    assert one["put"]["tags"] == ["loggers"]
