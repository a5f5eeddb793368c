"""Every failure answers Connect's ``{"error_code", "message"}`` body with the right status.

Covers the herder's exception tree, routing errors, malformed bodies and a sweep
over every route proving no 422 (FastAPI's default) and no 500 for bad input.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from fake_herder import SEQUENCE_CLASS, FakeHerder
from fastapi import APIRouter, FastAPI
from pydantic import BaseModel
from rest_checks import AppClient, assert_connect_error
from starlette.types import Message

from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConfigException,
    ConflictException,
    ConnectError,
    KafkaTimeoutError,
    NotFoundException,
    NotLeaderException,
)
from connect_runtime.rest import create_app
from connect_runtime.rest.errors import HttpError

CONFIG = {"connector.class": SEQUENCE_CLASS, "topic": "out"}
# Connect answers 415 to a body without this header (see test_media_types.py).
JSON_HEADERS = {"content-type": "application/json"}


# -- the herder's exceptions ------------------------------------------------------------


@pytest.mark.parametrize(("exc", "status"), [
    (NotFoundException("Connector conn not found"), 404),
    (AlreadyExistsException("Connector conn already exists"), 409),
    (ConflictException("Task configs changed"), 409),
    (BadRequestException("Bad thing"), 400),
    (ConfigException("must be positive", name="tasks.max", value="-1"), 400),
    (HttpError(403, "Internal request signature does not match"), 403),
    (ConnectError("Something broke in the runtime"), 500),
    (KafkaTimeoutError("list_offsets: timed out"), 500),
    (RuntimeError("unexpected bug"), 500),
])
def test_herder_exceptions_map_to_connect_errors(client: AppClient, herder: FakeHerder,
                                                 exc: Exception, status: int) -> None:
    herder.fail["connector_info"] = exc
    assert_connect_error(client.get("/connectors/conn"), status, str(exc))


def test_500_logs_the_traceback(client: AppClient, herder: FakeHerder,
                                caplog: pytest.LogCaptureFixture) -> None:
    herder.fail["connector_status"] = ValueError("boom")
    with caplog.at_level(logging.ERROR, logger="connect_runtime.rest.errors"):
        assert_connect_error(client.get("/connectors/conn/status"), 500, "boom")
    record = next(r for r in caplog.records if r.name == "connect_runtime.rest.errors")
    assert record.exc_info is not None and record.exc_info[0] is ValueError
    assert "/connectors/conn/status" in record.getMessage()


def test_a_client_gone_before_its_body_is_read_is_no_error(
        herder: FakeHerder, caplog: pytest.LogCaptureFixture) -> None:
    # A task whose fence request timed out hangs up mid-request: nothing is
    # answered (no one is there) and nothing is logged as an error.
    app = create_app(herder)
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "PUT", "scheme": "http", "path": "/connectors/conn/config",
             "raw_path": b"/connectors/conn/config", "root_path": "", "query_string": b"",
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"40")],
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8083)}
    with caplog.at_level(logging.INFO, logger="connect_runtime.rest.errors"):
        asyncio.run(app(scope, receive, send))
    assert sent == []
    records = [r for r in caplog.records if r.name == "connect_runtime.rest.errors"]
    assert [r.levelno for r in records] == [logging.INFO], records
    assert "disconnected" in records[0].getMessage()


def test_exception_without_message_still_says_something(client: AppClient,
                                                        herder: FakeHerder) -> None:
    herder.fail["connector_info"] = RuntimeError()
    assert_connect_error(client.get("/connectors/conn"), 500, "RuntimeError")


def test_real_not_found_from_the_herder(client: AppClient) -> None:
    assert_connect_error(client.get("/connectors/missing"), 404, "missing")
    assert_connect_error(client.patch("/connectors/missing/config", json={"a": "b"}), 404)
    assert_connect_error(client.get("/connectors/conn/tasks/7/status"), 404, "conn-7")


def test_create_existing_is_409(client: AppClient) -> None:
    response = client.post("/connectors", json={"name": "conn", "config": CONFIG})
    assert_connect_error(response, 409, "already exists")


def test_not_leader_without_known_leader_is_409(client: AppClient, herder: FakeHerder) -> None:
    herder.is_leader = False
    response = client.put("/connectors/conn/pause")
    assert_connect_error(response, 409, "no known leader URL")


# -- routing ------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/nope", "/connectors/conn/bogus", "/connectors/a/b/c/d/e"])
def test_unknown_route_is_jersey_404(client: AppClient, path: str) -> None:
    assert assert_connect_error(client.get(path), 404) == "HTTP 404 Not Found"


@pytest.mark.parametrize(("method", "path"), [("DELETE", "/"), ("POST", "/connectors/conn"),
                                              ("GET", "/connectors/conn/restart"),
                                              ("PATCH", "/connector-plugins")])
def test_wrong_method_is_jersey_405(client: AppClient, method: str, path: str) -> None:
    response = client.request(method, path)
    assert assert_connect_error(response, 405) == "HTTP 405 Method Not Allowed"
    assert response.headers["allow"]


@pytest.mark.parametrize("task", ["x", "1.0", "0x1", "2147483648", " 1", "1_0", "٣"])
def test_non_integer_task_is_404(client: AppClient, herder: FakeHerder, task: str) -> None:
    calls = len(herder.calls)
    for response in (client.get(f"/connectors/conn/tasks/{task}/status"),
                     client.post(f"/connectors/conn/tasks/{task}/restart")):
        assert assert_connect_error(response, 404) == "HTTP 404 Not Found"
    assert len(herder.calls) == calls  # never reached the herder


def test_signed_task_numbers_parse_like_java_integers(client: AppClient,
                                                      herder: FakeHerder) -> None:
    assert client.get("/connectors/conn/tasks/+1/status").status_code == 200
    assert client.get("/connectors/conn/tasks/007/status").status_code == 404  # task 7
    assert herder.calls[-1] == ("task_status", ("conn", 7))


# -- malformed bodies ---------------------------------------------------------------


@pytest.mark.parametrize(("body", "message"), [
    ("", "Request body is missing"),
    ("{not json", "Request body is not valid JSON"),
    ('{"name": "x", "config": {}', "Request body is not valid JSON"),
    ('{"name": "x", "config": {"a": NaN}}', "Request body is not valid JSON"),
    ("[]", "Request body must be a JSON object, got an array"),
    ("5", "Request body must be a JSON object, got a number"),
    ('"text"', "Request body must be a JSON object, got a string"),
    ("null", "Request body must be a JSON object, got null"),
])
def test_create_with_malformed_body(client: AppClient, body: str, message: str) -> None:
    response = client.post("/connectors", content=body,
                           headers={"content-type": "application/json"})
    assert_connect_error(response, 400, message)


def test_body_that_is_not_utf8(client: AppClient) -> None:
    response = client.put("/connectors/conn/config", content=b'{"a": "\xff"}',
                          headers=JSON_HEADERS)
    assert_connect_error(response, 400, "not valid UTF-8")


def deep(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize(("method", "path", "body", "message"), [
    ("POST", "/connectors", '{"name": "x", "config": ' + deep(1000) + "}",
     "nested deeper than 64 levels"),
    ("POST", "/connectors", '{"name": "x", "config": ' + deep(100_000) + "}",
     "nested deeper than 64 levels"),
    ("PUT", "/connector-plugins/SequenceSourceConnector/config/validate", deep(1000),
     "nested deeper than 64 levels"),
    ("PATCH", "/connectors/conn/offsets", '{"offsets": ' + deep(1000) + "}",
     "nested deeper than 64 levels"),
    ("POST", "/connectors", '{"name": "a\\ud800b", "config": {"connector.class": "x"}}',
     "not valid Unicode at $.name"),
    ("PUT", "/connectors/conn/config", '{"connector.class": "x", "k": "\\udfff"}',
     "not valid Unicode at $.k"),
    ("PUT", "/connectors/conn/config", '{"\\ud800": "v"}', "not valid Unicode at a key"),
    ("PATCH", "/connectors/conn/offsets",
     '{"offsets": [{"partition": {"p": 1}, "offset": {"n": ' + "9" * 5001 + "}}]}",
     "a number of 5001 digits"),
])
def test_bodies_nothing_downstream_can_hold_are_400(
        client: AppClient, herder: FakeHerder, method: str, path: str, body: str,
        message: str) -> None:
    """JSON that parses but that recursion, encoders or ``int`` would fail on:
    each answered 400 naming why, never 500, and the herder never called."""
    before = len(herder.calls)
    response = client.request(method, path, content=body, headers=JSON_HEADERS)
    assert_connect_error(response, 400, message)
    assert herder.calls[before:] == []


@pytest.mark.parametrize(("body", "message"), [
    ({"config": CONFIG}, "Connector name may not be empty"),
    ({"name": "", "config": CONFIG}, "Connector name may not be empty"),
    ({"name": "   ", "config": CONFIG}, "Connector name may not be empty"),
    ({"name": None, "config": CONFIG}, "Connector name may not be empty"),
    ({"name": "a\u0085b", "config": CONFIG},
     "Connector name should not contain ISO control characters"),
    ({"name": "a\x7fb", "config": CONFIG},
     "Connector name should not contain ISO control characters"),
    ({"name": {"x": 1}, "config": CONFIG},
     "Invalid value for field 'name': expected a string, got an object"),
    ({"name": "x"}, "Missing required field 'config'"),
    ({"name": "x", "config": None}, "Missing required field 'config'"),
    ({"name": "x", "config": "a=b"},
     "Invalid value for field 'config': expected an object of strings, got a string"),
    ({"name": "x", "config": {"nested": {"a": "b"}}},
     "Invalid value for field 'config': expected an object of strings, "
     "but key 'nested' has an object value"),
    ({"name": "x", "config": {"list": ["a"]}}, "key 'list' has an array value"),
    ({"name": "x", "config": {"gone": None}}, "key 'gone' has null value"),
    ({"name": "x", "config": {**CONFIG, "name": "y"}},
     "Connector name configuration (y) doesn't match connector name in the URL (x)"),
    ({"name": "x", "config": CONFIG, "initial_state": "SLEEPING"},
     "Invalid value for field 'initial_state': expected one of RUNNING, PAUSED, STOPPED"),
    ({"name": "x", "config": CONFIG, "initial_state": ["RUNNING"]},
     "Invalid value for field 'initial_state': expected a string, got an array"),
    ({"name": "x", "config": CONFIG, "initialState": "PAUSED"},
     "Unrecognized field(s) 'initialState'"),
])
def test_create_with_invalid_fields(client: AppClient, herder: FakeHerder,
                                    body: dict[str, object], message: str) -> None:
    assert_connect_error(client.post("/connectors", json=body), 400, message)
    assert not any(call[0] == "create_connector" for call in herder.calls)


def test_numeric_name_is_coerced_like_jackson(client: AppClient) -> None:
    response = client.post("/connectors", json={"name": 42, "config": CONFIG})
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/42"


@pytest.mark.parametrize(("method", "path"), [
    ("PUT", "/connectors/conn/config"),
    ("PATCH", "/connectors/conn/config"),
    ("PUT", "/connector-plugins/SequenceSourceConnector/config/validate"),
])
@pytest.mark.parametrize(("body", "message"), [
    ("[1, 2]", "Invalid request body: expected an object of strings, got an array"),
    ('{"a": {"b": "c"}}', "Invalid request body: expected an object of strings, "
                          "but key 'a' has an object value"),
    ("{", "Request body is not valid JSON"),
])
def test_config_map_bodies_refuse_wrong_types(client: AppClient, method: str, path: str,
                                              body: str, message: str) -> None:
    assert_connect_error(client.request(method, path, content=body, headers=JSON_HEADERS),
                         400, message)


def test_put_config_refuses_null_values_but_patch_takes_them(client: AppClient) -> None:
    response = client.put("/connectors/conn/config", json={**CONFIG, "topic": None})
    assert_connect_error(response, 400, "key 'topic' has null value")
    assert client.patch("/connectors/conn/config", json={"topic": None}).status_code == 200


def test_put_config_with_mismatched_name(client: AppClient) -> None:
    response = client.put("/connectors/conn/config", json={**CONFIG, "name": "other"})
    assert_connect_error(
        response, 400,
        "Connector name configuration (other) doesn't match connector name in the URL (conn)")


def test_put_config_refuses_control_characters_in_the_path_name(client: AppClient) -> None:
    response = client.put("/connectors/bad%0Aname/config", json=CONFIG)
    assert_connect_error(response, 400, "ISO control characters")


@pytest.mark.parametrize("included", ["org.example.FileStreamSinkConnector", "Other",
                                      "SequenceSinkConnector"])
def test_validate_with_mismatched_connector_class(client: AppClient, herder: FakeHerder,
                                                  included: str) -> None:
    response = client.put("/connector-plugins/SequenceSourceConnector/config/validate",
                          json={"connector.class": included})
    assert_connect_error(
        response, 400,
        f"Included connector type {included} does not match request type "
        "SequenceSourceConnector")
    assert not any(call[0] == "validate_connector_config" for call in herder.calls)


def test_validate_unknown_plugin_propagates_herder_404(client: AppClient,
                                                       herder: FakeHerder) -> None:
    herder.fail["validate_connector_config"] = NotFoundException("Unknown plugin Nope")
    response = client.put("/connector-plugins/Nope/config/validate", json={})
    assert_connect_error(response, 404, "Unknown plugin Nope")


def test_plugin_config_unknown_plugin_is_404(client: AppClient) -> None:
    assert_connect_error(client.get("/connector-plugins/Nope/config"), 404, "Nope")


# -- the sweep: no 422, no 500, always Connect's shape ------------------------------------


_BAD_BODIES = [b"", b"{", b"[]", b"null", b"7", b'"s"', b'{"config": 5}', b'{"name": []}',
               b'{"name": "n", "config": {"k": {}}}', b'{"k": [1]}', b"\xff\xfe{"]
_BAD_PARAMS = {"expand": "", "includeTasks": "maybe", "onlyFailed": "[]",
               "connectorsOnly": "2", "forward": "true"}


def _concrete(path: str) -> list[str]:
    path = path.replace("{name}", "conn").replace("{plugin}", "SequenceSourceConnector")
    if "{task}" in path:
        return [path.replace("{task}", t) for t in ("0", "abc", "-1", "99999999999")]
    return [path]


def _all_routes(app: FastAPI) -> list[tuple[str, str]]:
    # Every documented operation, plus the internal ones that OpenAPI hides.
    documented = [(method.upper(), path) for path, operations in app.openapi()["paths"].items()
                  for method in operations]
    return [*documented, ("PUT", "/connectors/{name}/fence")]


def test_no_route_ever_answers_422_or_500_for_bad_input(herder: FakeHerder) -> None:
    app = create_app(herder)
    routes = [(method, path) for method, template in _all_routes(app)
              for path in _concrete(template)]
    assert len(routes) >= 20
    with AppClient(app) as client:
        for method, path in routes:
            for body in _BAD_BODIES:
                herder.add("conn")  # a DELETE earlier in the sweep may have removed it
                response = client.request(method, path, content=body, params=_BAD_PARAMS,
                                          headers=JSON_HEADERS)
                where = f"{method} {path} body={body!r}"
                assert response.status_code != 422, where
                assert response.status_code < 500, (where, response.text)
                if response.status_code >= 400:
                    body_json = response.json()
                    assert set(body_json) == {"error_code", "message"}, where
                    assert body_json["error_code"] == response.status_code, where


def test_forward_param_values_never_fail_validation(client: AppClient) -> None:
    for value in ("", "maybe", "1"):
        response = client.get(f"/connectors?forward={value}")
        assert response.status_code == 200


class Assignment(BaseModel):
    generation: int


def test_fastapi_validation_errors_from_extra_routers_become_400(herder: FakeHerder) -> None:
    # A lead-style internal router whose typed parameters FastAPI validates itself.
    router = APIRouter()

    @router.post("/internal/assign/{slot}")
    def assign(slot: int, assignment: Assignment) -> dict[str, int]:
        return {"slot": slot, "generation": assignment.generation}

    with AppClient(create_app(herder, extra_routers=[router])) as client:
        ok = client.post("/internal/assign/3", json={"generation": 2})
        assert ok.json() == {"slot": 3, "generation": 2}
        bad = client.post("/internal/assign/x", json={"generation": "two"})
        message = assert_connect_error(bad, 400, "Invalid request")
        assert "slot" in message and "generation" in message


def test_not_leader_exception_from_any_route_is_handled(herder: FakeHerder) -> None:
    herder.fail["connector_info"] = NotLeaderException("ask the leader", None)
    with AppClient(create_app(herder)) as client:
        assert_connect_error(client.get("/connectors/conn"), 409, "no known leader URL")
