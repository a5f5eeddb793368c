"""Cross-origin requests: Kafka Connect's ``access.control.allow.origin`` and
``access.control.allow.methods``, with Jetty's defaults when methods are unset."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from fake_herder import FakeHerder
from rest_checks import AppClient

from connect_runtime.rest import create_app

ALLOW_ORIGIN = "access-control-allow-origin"
ALLOW_METHODS = "access-control-allow-methods"


@contextmanager
def app(allow_origin: str = "", allow_methods: str = "") -> Iterator[AppClient]:
    herder = FakeHerder()
    herder.add("conn")
    with AppClient(create_app(herder, allow_origin=allow_origin,
                              allow_methods=allow_methods)) as client:
        yield client


def preflight(client: AppClient, origin: str, method: str) -> tuple[int, dict[str, str]]:
    r = client.request("OPTIONS", "/connectors", headers={
        "Origin": origin, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": "Content-Type"})
    return r.status_code, dict(r.headers)


def test_without_the_key_no_cross_origin_header_is_sent() -> None:
    with app() as client:
        r = client.get("/connectors", headers={"Origin": "https://ui.example.com"})
        assert r.status_code == 200 and ALLOW_ORIGIN not in r.headers
        status, headers = preflight(client, "https://ui.example.com", "GET")
        assert ALLOW_ORIGIN not in headers and status == 405  # no preflight answered


def test_an_allowed_origin_gets_the_header_and_the_default_methods() -> None:
    with app("https://ui.example.com") as client:
        r = client.get("/connectors", headers={"Origin": "https://ui.example.com"})
        assert r.status_code == 200 and r.headers[ALLOW_ORIGIN] == "https://ui.example.com"
        assert ALLOW_ORIGIN not in client.get(
            "/connectors", headers={"Origin": "https://evil.example.net"}).headers
        status, headers = preflight(client, "https://ui.example.com", "POST")
        assert status == 200 and set(headers[ALLOW_METHODS].split(", ")) == {
            "GET", "POST", "HEAD"}
        assert preflight(client, "https://ui.example.com", "DELETE")[0] == 400


def test_methods_any_origin_and_wildcard_origins() -> None:
    with app("*", "GET,DELETE") as client:
        r = client.get("/connectors", headers={"Origin": "https://anywhere.test"})
        assert r.headers[ALLOW_ORIGIN] == "*"
        status, headers = preflight(client, "https://anywhere.test", "DELETE")
        assert status == 200 and set(headers[ALLOW_METHODS].split(", ")) == {"GET", "DELETE"}
        assert preflight(client, "https://anywhere.test", "POST")[0] == 400
    with app("https://*.example.com, http://localhost:3000") as client:
        for origin, allowed in (("https://ui.example.com", True),
                                ("http://localhost:3000", True),
                                ("https://example.com.evil.net", False),
                                ("http://ui.example.com", False)):
            r = client.get("/connectors", headers={"Origin": origin})
            assert (r.headers.get(ALLOW_ORIGIN) == origin) is allowed, origin
