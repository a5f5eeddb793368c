"""415 and Content-Type handling, as measured on Kafka Connect 4.1.1 (rest/routes/media.py)."""

from __future__ import annotations

import pytest
from fake_herder import FakeHerder
from rest_checks import AppClient, assert_connect_error

from connect_runtime.errors import BadRequestException
from connect_runtime.rest.routes.media import media_type

UNSUPPORTED = "HTTP 415 Unsupported Media Type"
CREATE = b'{"name": "new", "config": {"connector.class": "SequenceSource", "topic": "t"}}'

# Every kind of public route: reads, bodies, body-less writes, plugins, offsets.
PUBLIC_ROUTES = [
    ("GET", "/connectors"),
    ("GET", "/connectors/conn"),
    ("GET", "/connectors/conn/status"),
    ("GET", "/connectors/conn/tasks/0/status"),
    ("GET", "/connectors/conn/tasks"),
    ("GET", "/connectors/conn/offsets"),
    ("POST", "/connectors"),
    ("PUT", "/connectors/conn/config"),
    ("PATCH", "/connectors/conn/config"),
    ("PUT", "/connectors/conn/pause"),
    ("PUT", "/connectors/conn/resume"),
    ("POST", "/connectors/conn/restart"),
    ("POST", "/connectors/conn/tasks/0/restart"),
    ("DELETE", "/connectors/conn"),
    ("GET", "/connector-plugins"),
    ("GET", "/connector-plugins/SequenceSource/config"),
    ("PUT", "/connector-plugins/SequenceSource/config/validate"),
]


@pytest.mark.parametrize(("method", "path"), PUBLIC_ROUTES)
@pytest.mark.parametrize("content_type", [
    "text/plain", "application/x-www-form-urlencoded", "application/*", "*/*",
    "application/vnd.foo+json", "application/json-patch+json",
])
def test_a_content_type_other_than_json_is_415_on_every_public_route(
        client: AppClient, herder: FakeHerder, method: str, path: str,
        content_type: str) -> None:
    response = client.request(method, path, content=b"{}", headers={"content-type": content_type})
    assert_connect_error(response, 415, UNSUPPORTED)
    assert response.json()["message"] == UNSUPPORTED
    assert herder.calls == []  # refused before the herder is asked anything


def test_415_comes_before_not_found(client: AppClient) -> None:
    for path in ("/connectors/nope/status", "/connectors/nope/tasks/abc/status"):
        response = client.get(path, headers={"content-type": "text/plain"})
        assert_connect_error(response, 415, UNSUPPORTED)


def test_unknown_paths_stay_404_whatever_the_content_type(client: AppClient) -> None:
    assert_connect_error(client.get("/nosuch", headers={"content-type": "text/plain"}), 404)


@pytest.mark.parametrize("content_type", [
    "application/json", "APPLICATION/JSON", "application/json; charset=utf-8",
    "application/json;;", ' application/json ; charset="utf-8"',
])
def test_json_with_any_case_and_parameters_is_accepted(client: AppClient,
                                                       content_type: str) -> None:
    response = client.post("/connectors", content=CREATE, headers={"content-type": content_type})
    assert response.status_code == 201, response.text


def test_a_body_without_content_type_is_415(client: AppClient, herder: FakeHerder) -> None:
    for method, path, body in [("POST", "/connectors", CREATE),
                               ("PUT", "/connectors/conn/config", b"{}"),
                               ("PATCH", "/connectors/conn/config", b"{}"),
                               ("PUT", "/connector-plugins/SequenceSource/config/validate",
                                b"{}")]:
        response = client.request(method, path, content=body)
        assert "content-type" not in response.request.headers
        assert_connect_error(response, 415, UNSUPPORTED)
    assert not any(call[0] != "connectors" for call in herder.calls)


def test_an_empty_body_without_content_type_is_the_usual_400(client: AppClient) -> None:
    # Connect answers 500 (a null entity reaches its resource); we keep the 400.
    assert_connect_error(client.post("/connectors"), 400, "Request body is missing")


def test_routes_without_a_body_accept_no_content_type_even_with_a_body(
        client: AppClient) -> None:
    assert client.put("/connectors/conn/pause").status_code == 202
    assert client.put("/connectors/conn/resume", content=b"x").status_code == 202
    assert client.get("/connectors", content=b"x").status_code == 200


def test_root_health_and_fence_accept_any_content_type(client: AppClient) -> None:
    plain = {"content-type": "text/plain"}
    assert client.get("/", headers=plain).status_code == 200
    assert client.get("/health", headers=plain).status_code == 200
    # No verifier in this app: the fence answers as usual, not 415.
    assert client.put("/connectors/conn/fence", content=b"x", headers=plain).status_code == 200


@pytest.mark.parametrize("content_type", [
    "garbage", "application/", "/json", "", "application/json, text/plain",
    "application/json; charset",
])
def test_a_malformed_content_type_is_400(client: AppClient, content_type: str) -> None:
    response = client.get("/connectors", headers={"content-type": content_type})
    assert_connect_error(response, 400, "Malformed Content-Type header")


def test_media_type_drops_parameters_and_case() -> None:
    assert media_type('Application/JSON; charset="a;b"') == "application/json"
    with pytest.raises(BadRequestException):
        media_type("text")
