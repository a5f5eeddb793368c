"""The slot heartbeat route against a real SlotRegistry: signed, parsed, answered."""

from __future__ import annotations

import base64
from dataclasses import replace

import httpx
import orjson
from fake_herder import FakeHerder
from fastapi import Request
from rest_checks import AppClient, assert_connect_error

from connect_runtime.cluster.slot_registry import SlotRegistry
from connect_runtime.protocol import signing
from connect_runtime.protocol.heartbeat import Command, SlotAnswer, SlotReport, heartbeat_url
from connect_runtime.protocol.states import State
from connect_runtime.rest import create_app
from connect_runtime.rest.routes.slots import slots_router

KEY = b"s" * 32
KEY_B64 = base64.b64encode(KEY).decode("ascii")
REPORT = SlotReport(run_id="r", generation=5, state=State.RUNNING, trace=None, attempt=0,
                    restart_seq=None, fenced=False, pid=7, host="h")


class _Host:
    def __init__(self) -> None:
        self.registry = SlotRegistry(lambda c, t, s, tr: None)
        self.worker_url = "http://testserver"
        self.is_leader = True

    def leader_url(self) -> str | None:
        return self.worker_url

    def session_key_b64(self) -> str | None:
        return KEY_B64


def _verify(request: Request, raw_body: bytes) -> None:
    signing.verify(KEY, ["HmacSHA256"], dict(request.headers), raw_body)


def _client(host: _Host) -> AppClient:
    app = create_app(FakeHerder(), extra_routers=[slots_router(host)],
                     internal_request_verifier=_verify)
    return AppClient(app)


def _post(client: AppClient, body: bytes, key: str = KEY_B64) -> httpx.Response:
    path = heartbeat_url("", "conn", 0)
    return client.post(path, content=body, headers=signing.sign_headers(key, "HmacSHA256", body))


def test_signed_report_is_recorded_and_answered_with_command_and_key() -> None:
    host = _Host()
    host.registry.open("conn", generation=5, task_count=1, paused=True)
    with _client(host) as client:
        response = _post(client, REPORT.to_json())
    assert response.status_code == 200
    assert SlotAnswer.from_json(response.content) == SlotAnswer(Command.PAUSE, 0, KEY_B64)
    view = host.registry.slot("conn", 0)
    assert view is not None and view.state is State.RUNNING and view.pid == 7


def test_report_of_an_old_generation_is_told_to_stop() -> None:
    host = _Host()
    host.registry.open("conn", generation=5, task_count=1, paused=False)
    with _client(host) as client:
        response = _post(client, replace(REPORT, generation=4).to_json())
    assert SlotAnswer.from_json(response.content).command is Command.STOP


def test_forged_or_unsigned_heartbeats_are_refused_like_other_internal_requests() -> None:
    host = _Host()
    host.registry.open("conn", generation=5, task_count=1, paused=False)
    with _client(host) as client:
        forged = _post(client, REPORT.to_json(), key=base64.b64encode(b"x" * 32).decode())
        assert_connect_error(forged, 403, "signature")
        unsigned = client.post(heartbeat_url("", "conn", 0), content=REPORT.to_json())
        assert unsigned.status_code == 400
    view = host.registry.slot("conn", 0)
    assert view is not None and view.state is State.UNASSIGNED  # nothing recorded


def test_a_malformed_report_is_a_400_naming_the_field() -> None:
    host = _Host()
    host.registry.open("conn", generation=5, task_count=1, paused=False)
    with _client(host) as client:
        no_state = {k: v for k, v in orjson.loads(REPORT.to_json()).items() if k != "state"}
        assert_connect_error(_post(client, orjson.dumps(no_state)), 400, "'state'")
        assert_connect_error(_post(client, b"[1]"), 400, "JSON object")
