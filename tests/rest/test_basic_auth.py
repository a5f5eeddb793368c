"""HTTP Basic authentication as Connect's extension applies it: 401 with Connect's
body, internal signed routes exempt, credentials forwarded with the request."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager

from fake_herder import FakeHerder
from rest_checks import AppClient

from connect_runtime.rest import create_app

USERS = {"alice": "s3cret", "bob": "pa:ss"}


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


@contextmanager
def app(users: dict[str, str] | None = USERS, **kwargs: str) -> Iterator[AppClient]:
    herder = FakeHerder()
    herder.add("conn")
    with AppClient(create_app(herder, basic_auth=users, **kwargs)) as client:
        yield client


def test_requests_without_good_credentials_get_connects_401() -> None:
    with app() as client:
        for headers in ({}, basic("alice", "wrong"), basic("carol", "s3cret"),
                        {"Authorization": "Bearer abc"}, {"Authorization": "Basic !!!"},
                        {"Authorization": "Basic " + base64.b64encode(b"alice").decode()}):
            r = client.get("/connectors", headers=headers)
            assert r.status_code == 401, headers
            assert r.text == "User cannot access the resource."
            assert r.headers["www-authenticate"].startswith("Basic")
        assert client.get("/connectors", headers=basic("alice", "s3cret")).status_code == 200
        assert client.get("/connectors", headers=basic("bob", "pa:ss")).status_code == 200


def test_internal_signed_routes_and_health_are_exempt_the_rest_is_not() -> None:
    with app() as client:
        # Reach their handlers (which check the KIP-507 signature), not the 401.
        assert client.put("/connectors/conn/fence").status_code != 401
        assert client.post("/connectors/conn/tasks", json=[]).status_code != 401
        assert client.get("/health").status_code == 200
        for path in ("/internal/tasks", "/internal/leader", "/metrics", "/ui",
                     "/connectors/conn/status", "/connector-plugins"):
            assert client.get(path).status_code == 401, path
        # The exemption is for those methods only.
        assert client.get("/connectors/conn/tasks").status_code == 401
        assert client.delete("/connectors/conn/fence").status_code == 401


def test_an_empty_credentials_file_lets_everything_through_and_none_turns_it_off() -> None:
    with app({}) as client:
        assert client.get("/connectors").status_code == 200
    with app(None) as client:
        assert client.get("/connectors").status_code == 200


def test_a_browser_preflight_needs_no_credentials() -> None:
    with app(allow_origin="https://ui.example.com") as client:
        r = client.request("OPTIONS", "/connectors", headers={
            "Origin": "https://ui.example.com", "Access-Control-Request-Method": "GET"})
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "https://ui.example.com"
