"""The internal fence endpoint, request verification, and what OpenAPI shows."""

from __future__ import annotations

import base64

import pytest
from fake_herder import FakeHerder
from fastapi import APIRouter, Request
from rest_checks import AppClient, assert_connect_error

from connect_runtime.errors import BadRequestException, RequestSignatureException
from connect_runtime.protocol import signing
from connect_runtime.rest import create_app
from connect_runtime.rest.errors import HttpError

KEY = b"k" * 32


def _signature_verifier(request: Request, raw_body: bytes) -> None:
    """What the lead's verifier will look like: signing.verify, errors as HttpError."""
    try:
        signing.verify(KEY, ["HmacSHA256"], dict(request.headers), raw_body)
    except RequestSignatureException as exc:
        raise HttpError(exc.status, str(exc)) from exc


def test_fence_without_verifier_answers_200_empty(client: AppClient, herder: FakeHerder) -> None:
    response = client.put("/connectors/conn/fence")
    assert response.status_code == 200
    assert response.content == b""
    assert herder.calls[-1] == ("fence_zombies", ("conn",))


def test_fence_unknown_connector_is_404(client: AppClient) -> None:
    assert_connect_error(client.put("/connectors/nope/fence"), 404, "nope")


def test_fence_passes_the_raw_body_and_headers_to_the_verifier(herder: FakeHerder) -> None:
    seen: list[tuple[str | None, bytes]] = []

    def verifier(request: Request, raw_body: bytes) -> None:
        seen.append((request.headers.get("x-connect-authorization"), raw_body))

    with AppClient(create_app(herder, internal_request_verifier=verifier)) as client:
        response = client.put("/connectors/conn/fence", content=b'{"raw": 1}',
                              headers={"X-Connect-Authorization": "sig"})
    assert response.status_code == 200
    assert seen == [("sig", b'{"raw": 1}')]


def test_correctly_signed_fence_is_accepted(herder: FakeHerder) -> None:
    body = b""
    headers = signing.sign_headers(base64.b64encode(KEY).decode("ascii"), "HmacSHA256", body)
    with AppClient(create_app(herder, internal_request_verifier=_signature_verifier)) as client:
        response = client.put("/connectors/conn/fence", content=body, headers=headers)
    assert response.status_code == 200
    assert herder.calls[-1] == ("fence_zombies", ("conn",))


@pytest.mark.parametrize(("headers", "status", "message"), [
    ({}, 400, "missing required signature"),
    ({signing.AUTH_HEADER: "Zm9yZ2Vk", signing.ALGORITHM_HEADER: "HmacSHA256"}, 403,
     "does not match"),
    ({signing.AUTH_HEADER: "x", signing.ALGORITHM_HEADER: "HmacMD5"}, 400, "not one of"),
])
def test_refused_fence_never_reaches_the_herder(herder: FakeHerder, headers: dict[str, str],
                                                status: int, message: str) -> None:
    with AppClient(create_app(herder, internal_request_verifier=_signature_verifier)) as client:
        response = client.put("/connectors/conn/fence", headers=headers)
    assert_connect_error(response, status, message)
    assert not any(call[0] == "fence_zombies" for call in herder.calls)


@pytest.mark.parametrize(("exc", "status"), [(HttpError(503, "no session key yet"), 503),
                                             (BadRequestException("bad signature"), 400)])
def test_verifier_exceptions_map_like_any_other(herder: FakeHerder, exc: Exception,
                                                status: int) -> None:
    def verifier(request: Request, raw_body: bytes) -> None:
        raise exc

    with AppClient(create_app(herder, internal_request_verifier=verifier)) as client:
        assert_connect_error(client.put("/connectors/conn/fence"), status, str(exc))


# -- OpenAPI ------------------------------------------------------------------------


def _slots_router() -> APIRouter:
    router = APIRouter(prefix="/internal")

    @router.get("/tasks/{slot}")
    def slot(slot: str) -> dict[str, str]:
        return {"slot": slot}

    return router


def test_openapi_lists_public_routes_and_hides_internal_ones(herder: FakeHerder) -> None:
    app = create_app(herder, extra_routers=[_slots_router()])
    with AppClient(app) as client:
        paths = client.get("/openapi.json").json()["paths"]
        assert client.get("/internal/tasks/3").json() == {"slot": "3"}  # mounted, though
    assert "/connectors/{name}/fence" not in paths
    assert not any(path.startswith("/internal") for path in paths)
    for public in ("/", "/health", "/connectors", "/connectors/{name}",
                   "/connectors/{name}/config", "/connectors/{name}/status",
                   "/connectors/{name}/restart", "/connectors/{name}/tasks/{task}/status",
                   "/connectors/{name}/tasks/{task}/restart", "/connectors/{name}/offsets",
                   "/connector-plugins", "/connector-plugins/{plugin}/config/validate"):
        assert public in paths, public
    assert set(paths["/connectors/{name}/config"]) == {"get", "put", "patch"}
    # The hop counter is internal too.
    for operations in paths.values():
        for operation in operations.values():
            names = [p["name"] for p in operation.get("parameters", [])]
            assert "forward" not in names
