"""Cross-site request forgery refused by the server (``rest/cross_site.py``): a
state-changing request a browser sends from another origin gets 403, unless
``access.control.allow.origin`` allows that origin; clients without ``Origin``
(curl, Java, forwarding workers) pass. The browser half is in
``tests/e2e/test_dashboard_actions.py``."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient

from connect_runtime.rest import create_app
from connect_runtime.rest.cross_site import AllowedOrigins, cross_site_refusal

EVIL = "https://evil.example.net"
NONE = AllowedOrigins.parse("")


@contextmanager
def app(allow_origin: str = "", basic_auth: dict[str, str] | None = None
        ) -> Iterator[tuple[AppClient, FakeHerder]]:
    herder = FakeHerder()
    herder.add("conn")
    with AppClient(create_app(herder, allow_origin=allow_origin,
                              basic_auth=basic_auth)) as client:
        yield client, herder


@pytest.mark.parametrize(("method", "host", "origin", "site", "refused"), [
    ("DELETE", "w1:8083", "http://w1:8083", None, False),  # the dashboard on this worker
    ("delete", "W1:8083", "https://w1:8083", "same-origin", False),
    ("POST", "w1", "http://w1:80", None, False),  # a default port is no port
    ("POST", "w1:8083", "http://w1:8084", None, True),  # another port: another origin
    ("PUT", "w1:8083", EVIL, "cross-site", True),
    ("PATCH", "w1:8083", "null", None, True),  # a sandboxed frame or a file:// page
    ("POST", None, "http://w1:8083", None, True),
    ("POST", "w1:8083", None, "cross-site", True),  # a browser that sent no Origin
    ("POST", "w1:8083", None, "same-site", True),
    ("POST", "w1:8083", None, "same-origin", False),
    ("POST", "w1:8083", None, None, False),  # curl, a Java client, a forwarding worker
    ("GET", "w1:8083", EVIL, "cross-site", False),  # reads are CORS's business
    ("OPTIONS", "w1:8083", EVIL, "cross-site", False),  # a preflight
])
def test_the_rule(method: str, host: str | None, origin: str | None, site: str | None,
                  refused: bool) -> None:
    assert (cross_site_refusal(method, host, origin, site, NONE) is not None) is refused


def test_origins_allowed_for_cors_pass() -> None:
    allowed = AllowedOrigins.parse("https://ui.example.com, https://*.tools.example.com")
    for origin, passes in (("https://ui.example.com", True), ("https://a.tools.example.com", True),
                           ("http://ui.example.com", False), (EVIL, False)):
        refusal = cross_site_refusal("DELETE", "w1:8083", origin, None, allowed)
        assert (refusal is None) is passes, origin
    assert cross_site_refusal("DELETE", "w1", "null", None, AllowedOrigins.parse("*")) is None


def test_a_forged_request_gets_connects_403_and_changes_nothing() -> None:
    with app() as (client, herder):
        r = client.delete("/connectors/conn", headers={"Origin": EVIL})
        assert r.status_code == 403
        assert r.json() == {"error_code": 403, "message": (
            f"Cross-origin request refused: Origin {EVIL} is not this worker's (testserver) "
            "and access.control.allow.origin does not allow it")}
        r = client.post("/connectors/conn/restart", headers={"Sec-Fetch-Site": "cross-site"})
        assert r.status_code == 403 and "Sec-Fetch-Site" in r.json()["message"]
        assert client.get("/connectors", headers={"Origin": EVIL}).json() == ["conn"]
        assert not [c for c in herder.calls if c[0] in ("delete_connector", "restart_connector")]
        # The dashboard's own requests, and clients that send no Origin, pass.
        assert client.put("/connectors/conn/pause",
                          headers={"Origin": "http://testserver"}).status_code == 202
        assert client.delete("/connectors/conn").status_code == 204


def test_an_origin_allowed_by_access_control_allow_origin_passes() -> None:
    with app(allow_origin="https://ui.example.com") as (client, _):
        r = client.delete("/connectors/conn", headers={"Origin": "https://ui.example.com"})
        assert r.status_code == 204
        assert r.headers["access-control-allow-origin"] == "https://ui.example.com"
        assert client.put("/connectors/x/pause", headers={"Origin": EVIL}).status_code == 403


def test_credentials_do_not_make_a_forged_request_pass() -> None:
    # What a forgery carries: the credentials the browser holds for this worker.
    auth = "Basic " + base64.b64encode(b"alice:s3cret").decode()
    with app(basic_auth={"alice": "s3cret"}) as (client, herder):
        r = client.delete("/connectors/conn", headers={"Origin": EVIL, "Authorization": auth})
        assert r.status_code == 403
        assert client.get("/connectors", headers={"Authorization": auth}).json() == ["conn"]
        assert ("delete_connector", ("conn",)) not in herder.calls
