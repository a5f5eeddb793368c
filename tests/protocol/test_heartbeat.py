"""The heartbeat messages: both ends parse with the same code, bad input names its field."""

from __future__ import annotations

import orjson
import pytest

from connect_runtime.errors import BadRequestException
from connect_runtime.protocol.heartbeat import (
    Command,
    InvalidHeartbeat,
    SlotAnswer,
    SlotReport,
    heartbeat_url,
)
from connect_runtime.protocol.states import State

REPORT = SlotReport(run_id="abc", generation=3, state=State.FAILED, trace="boom", attempt=1,
                    restart_seq=None, fenced=False, pid=42, host="exec-1")


def test_report_and_answer_round_trip() -> None:
    assert SlotReport.from_json(REPORT.to_json()) == REPORT
    answer = SlotAnswer(Command.PAUSE, 4, session_key="a2V5")
    assert SlotAnswer.from_json(answer.to_json()) == answer
    assert SlotAnswer.from_json(SlotAnswer.stop(2).to_json()) == SlotAnswer(Command.STOP, 2, None)


def test_the_wire_format_is_plain_json_with_lowercase_commands() -> None:
    wire = orjson.loads(SlotAnswer(Command.RUN, 0).to_json())
    assert wire == {"command": "run", "restart_seq": 0, "session_key": None}
    assert orjson.loads(REPORT.to_json())["state"] == "FAILED"


@pytest.mark.parametrize(("change", "named"), [
    ({"generation": "3"}, "'generation'"),
    ({"generation": True}, "'generation'"),
    ({"state": "DANCING"}, "DANCING"),
    ({"fenced": 1}, "'fenced'"),
    ({"trace": 5}, "'trace'"),
    ({"pid": None}, "'pid'"),
])
def test_a_bad_report_field_is_named(change: dict[str, object], named: str) -> None:
    body = orjson.dumps({**orjson.loads(REPORT.to_json()), **change})
    with pytest.raises(InvalidHeartbeat, match=named) as raised:
        SlotReport.from_json(body)
    assert isinstance(raised.value, BadRequestException)  # a 400 on the REST side


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b"{}"])
def test_a_body_that_is_no_message_is_refused(body: bytes) -> None:
    with pytest.raises(InvalidHeartbeat, match="Invalid heartbeat"):
        SlotReport.from_json(body)
    with pytest.raises(InvalidHeartbeat, match="Invalid heartbeat answer"):
        SlotAnswer.from_json(body)


def test_unknown_command_is_refused() -> None:
    with pytest.raises(InvalidHeartbeat, match="'jump'"):
        SlotAnswer.from_json(b'{"command": "jump", "restart_seq": 0}')


def test_url_quotes_the_connector_name() -> None:
    assert (heartbeat_url("http://w:8083", "a b/c", 2)
            == "http://w:8083/internal/tasks/a%20b%2Fc/2/heartbeat")
