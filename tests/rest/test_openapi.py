"""``/openapi.json`` tells the truth, and a 405's ``Allow`` names every method of its path."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from rest_checks import AppClient, assert_connect_error

from connect_runtime.rest.routes.params import CONNECTOR_NAME_SCHEMA

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


# -- the document states what the server checks ---------------------------------------

NAMES = ["conn", "  padded\t", "a b", "\u0001lead", "trail\u0005", "é", "", " ", "\t\n",
         "a\u0001b", "\u007f", "x\u0085", "a\u009fb", "\u0000", "ok\u00a0", "a\u0020\u0020b"]


def _create_body(schema: dict[str, Any]) -> dict[str, Any]:
    return dict(schema["paths"]["/connectors"]["post"]["requestBody"]["content"][
        "application/json"]["schema"])


@pytest.mark.parametrize("name", NAMES)
def test_the_documented_names_are_the_names_the_server_accepts(
        schema: dict[str, Any], client: AppClient, name: str) -> None:
    """``name`` of a create and the name in ``PUT .../config``'s path: the document's
    pattern admits exactly the names the server does not refuse as names."""
    body_name = _create_body(schema)["properties"]["name"]
    assert body_name == CONNECTOR_NAME_SCHEMA
    documented = re.search(body_name["pattern"], name) is not None and len(name) >= 1
    response = client.post("/connectors", json={
        "name": name, "config": {"connector.class": "SequenceSourceConnector"}})
    refused_as_name = response.status_code == 400 and "Connector name" in response.text
    assert documented == (not refused_as_name), (name, response.text)

    path_name = schema["paths"]["/connectors/{name}/config"]["put"]["parameters"][0]["schema"]
    in_path = re.search(path_name["pattern"], name) is not None
    response = client.put(f"/connectors/{quote(name, safe='')}/config",
                          json={"connector.class": "SequenceSourceConnector"})
    refused_as_name = response.status_code == 400 and "Connector name" in response.text
    if name:  # an empty path segment is another route
        assert in_path == (not refused_as_name), (name, response.text)


def test_a_config_without_connector_class_is_documented_and_refused(
        schema: dict[str, Any], client: AppClient) -> None:
    put = schema["paths"]["/connectors/{name}/config"]["put"]["requestBody"]["content"][
        "application/json"]["schema"]
    for config in (_create_body(schema)["properties"]["config"], put):
        assert config["required"] == ["connector.class"]
        assert config["additionalProperties"] == {"type": "string"}  # any key, as in Connect
    response = client.post("/connectors", json={"name": "n", "config": {"topic": "t"}})
    assert_connect_error(response, 400, "Connector config is missing connector.class")


def test_unknown_top_level_fields_are_documented_where_refused(schema: dict[str, Any],
                                                                client: AppClient) -> None:
    create = _create_body(schema)
    assert create["additionalProperties"] is False
    assert set(create["properties"]) == {"name", "config", "initial_state", "initial_offsets"}
    response = client.post("/connectors", json={"name": "n", "config": {}, "extra": 1})
    assert_connect_error(response, 400, "Unrecognized field(s) 'extra' in request body; "
                                        "expected name, config, initial_state, initial_offsets")
    # A config may hold any key: validate and PUT .../config document no such limit.
    validate = schema["paths"]["/connector-plugins/{plugin}/config/validate"]["put"][
        "requestBody"]["content"]["application/json"]["schema"]
    assert validate["additionalProperties"] == {"type": "string"}


@pytest.mark.parametrize("page", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_no_api_page_loads_scripts_from_a_cdn(client: AppClient, page: str) -> None:
    """FastAPI's /docs and /redoc pull Swagger UI and ReDoc from a public CDN into
    the worker's origin: not served. /openapi.json stays."""
    assert_connect_error(client.get(page), 404)
    assert client.get("/openapi.json").status_code == 200
