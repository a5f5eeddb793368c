"""``/openapi.json`` tells the truth, and a 405's ``Allow`` names every method of its path."""

from __future__ import annotations

from typing import Any

import pytest
from rest_checks import AppClient, assert_connect_error

_METHODS = ("get", "put", "post", "delete", "patch")


def _operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, item[method])
            for path, item in schema["paths"].items() for method in _METHODS if method in item]


@pytest.fixture
def schema(client: AppClient) -> dict[str, Any]:
    response = client.get("/openapi.json")
    assert response.status_code == 200
    return dict(response.json())


def test_no_operation_documents_a_422(schema: dict[str, Any]) -> None:
    documenting = [f"{m} {p}" for m, p, op in _operations(schema) if "422" in op["responses"]]
    assert documenting == []
    assert not {"HTTPValidationError", "ValidationError"} & set(schema["components"]["schemas"])


def test_errors_are_documented_with_connects_body(schema: dict[str, Any]) -> None:
    assert schema["components"]["schemas"]["ErrorBody"]["required"] == ["error_code", "message"]
    create = schema["paths"]["/connectors"]["post"]["responses"]
    assert {"201", "400", "409", "415"} <= set(create)
    assert create["409"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/ErrorBody"}
    assert "404" in schema["paths"]["/connectors/{name}"]["get"]["responses"]


def test_success_codes_are_the_real_ones(schema: dict[str, Any]) -> None:
    restart = schema["paths"]["/connectors/{name}/restart"]["post"]["responses"]
    assert {"202", "204"} <= set(restart) and "200" not in restart
    pause = schema["paths"]["/connectors/{name}/pause"]["put"]["responses"]
    assert "content" not in pause["202"]  # 202 with an empty body
    assert "content" not in schema["paths"]["/connectors/{name}"]["delete"]["responses"]["204"]


def test_optional_query_parameters_are_plain_strings(schema: dict[str, Any]) -> None:
    (expand,) = schema["paths"]["/connectors"]["get"]["parameters"]
    assert expand["schema"]["type"] == "array" and "anyOf" not in expand["schema"]


def test_internal_routes_stay_hidden(schema: dict[str, Any]) -> None:
    assert not [p for p in schema["paths"] if p.endswith("/fence") or p.startswith("/internal")]


@pytest.mark.parametrize(("method", "path", "allow"), [
    ("DELETE", "/connectors", {"GET", "POST"}),
    ("POST", "/connectors/conn", {"GET", "DELETE"}),
    # Three routes share this path; Starlette alone would name only the first's method.
    ("POST", "/connectors/conn/config", {"GET", "PUT", "PATCH"}),
])
def test_405_allow_lists_every_method_of_the_path(client: AppClient, method: str, path: str,
                                                  allow: set[str]) -> None:
    response = client.request(method, path)
    assert_connect_error(response, 405, "HTTP 405 Method Not Allowed")
    assert set(response.headers["allow"].split(", ")) == allow
