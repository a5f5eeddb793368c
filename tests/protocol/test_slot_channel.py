"""The slot-channel messages: both ends parse with the same code, bad input names its field."""

from __future__ import annotations

import base64
import dataclasses
from dataclasses import replace

import orjson
import pytest

from connect_runtime.errors import BadRequestException, RequestSignatureException
from connect_runtime.log_levels import LevelSetting
from connect_runtime.protocol import signing
from connect_runtime.protocol.slot_channel import (
    KEEPALIVE_INTERVAL_S,
    LIVENESS_TIMEOUT_S,
    Command,
    InvalidSlotMessage,
    InvalidSlotMetrics,
    OffsetCommits,
    SignedHello,
    SlotAnswer,
    SlotChallenge,
    SlotHello,
    SlotMetrics,
    SlotReport,
    SlotTopics,
    TaskMetricsSnapshot,
    TaskStall,
    channel_url,
    close_code,
    parse_slot_message,
)
from connect_runtime.protocol.states import State

HELLO = SlotHello(connector="orders", task=2, run_id="abc", generation=3, attempt=1, pid=42,
                  host="exec-1")
KEY_B64 = base64.b64encode(b"k" * 32).decode("ascii")
REPORT = SlotReport(state=State.FAILED, trace="boom", restart_seq=None, fenced=False)


def test_hello_report_and_answer_round_trip() -> None:
    assert SlotHello.from_json(HELLO.to_json()) == HELLO
    assert SlotReport.from_json(REPORT.to_json()) == REPORT
    answer = SlotAnswer(Command.PAUSE, 4, session_key="a2V5", restart_pending=True,
                        session_key_id="0123456789abcdef",
                        log_levels=(LevelSetting("root", "WARN"), LevelSetting("my.conn", "DEBUG")))
    assert SlotAnswer.from_json(answer.to_json()) == answer
    assert SlotAnswer.from_json(SlotAnswer.stop(2).to_json()) == SlotAnswer(Command.STOP, 2, None)


def test_the_wire_format_is_plain_json_with_lowercase_commands() -> None:
    wire = orjson.loads(SlotAnswer(Command.RUN, 0).to_json())
    assert wire == {"command": "run", "restart_seq": 0, "session_key": None,
                    "restart_pending": False, "session_key_id": None, "log_levels": []}
    assert orjson.loads(SlotAnswer(Command.RUN, 0, log_levels=(
        LevelSetting("a.b", "TRACE"),)).to_json())["log_levels"] == [["a.b", "TRACE"]]
    assert orjson.loads(REPORT.to_json())["state"] == "FAILED"
    # An answer from a worker that predates restart_pending and log_levels still parses.
    old = SlotAnswer.from_json(b'{"command": "run", "restart_seq": 0}')
    assert not old.restart_pending and old.log_levels == ()


@pytest.mark.parametrize("levels", [
    {"a": "DEBUG"}, [["a"]], [["a", "WARNING"]], [["a", "debug"]], [[1, "INFO"]], ["a"],
])
def test_bad_log_levels_in_an_answer_are_named(levels: object) -> None:
    body = orjson.dumps({"command": "run", "restart_seq": 0, "log_levels": levels})
    with pytest.raises(InvalidSlotMessage, match="'log_levels'"):
        SlotAnswer.from_json(body)


@pytest.mark.parametrize(("change", "named"), [
    ({"state": "DANCING"}, "DANCING"),
    ({"fenced": 1}, "'fenced'"),
    ({"trace": 5}, "'trace'"),
    ({"restart_seq": True}, "'restart_seq'"),
])
def test_a_bad_report_field_is_named(change: dict[str, object], named: str) -> None:
    body = orjson.dumps({**orjson.loads(REPORT.to_json()), **change})
    with pytest.raises(InvalidSlotMessage, match=named) as raised:
        SlotReport.from_json(body)
    assert isinstance(raised.value, BadRequestException)  # refused as a 400 would be


STALL = TaskStall(call="poll()", stalled_ms=2500, since_ms=1_800_000_000_000,
                  threshold_ms=2000, stack='  File "t.py", line 9, in poll\n    s.recv(1)\n')


def test_a_stall_travels_in_the_report_and_an_older_report_has_none() -> None:
    report = dataclasses.replace(REPORT, state=State.RUNNING, trace=None, stall=STALL)
    assert SlotReport.from_json(report.to_json()) == report
    assert parse_slot_message(report.to_json()) == report
    assert orjson.loads(REPORT.to_json())["stall"] is None
    old = orjson.loads(REPORT.to_json())
    del old["stall"]  # a slot that predates stalls
    assert SlotReport.from_json(orjson.dumps(old)) == REPORT


@pytest.mark.parametrize(("stall", "named"), [
    ("stuck", "'stall'"), ({**STALL.to_object(), "stalled_ms": 2.5}, "'stalled_ms'"),
    ({**STALL.to_object(), "stack": None}, "'stack'"),
    ({k: v for k, v in STALL.to_object().items() if k != "call"}, "'call'"),
])
def test_a_bad_stall_is_named(stall: object, named: str) -> None:
    body = orjson.dumps({**orjson.loads(REPORT.to_json()), "stall": stall})
    with pytest.raises(InvalidSlotMessage, match=named):
        SlotReport.from_json(body)


def test_a_stalls_trace_says_which_call_how_long_since_when_and_where() -> None:
    assert STALL.trace("orders-0") == (
        "Task orders-0 is stuck: poll() has not returned for 2 s (since 2027-01-15T08:00:00Z; "
        "task.stall.threshold.ms=2000). Its state does not change; this trace clears when the "
        "call returns. Stack of the task thread (most recent call last):\n"
        '  File "t.py", line 9, in poll\n    s.recv(1)\n')


@pytest.mark.parametrize(("change", "named"), [
    ({"generation": "3"}, "'generation'"), ({"generation": True}, "'generation'"),
    ({"pid": None}, "'pid'"), ({"run_id": 1}, "'run_id'"),
])
def test_a_bad_hello_field_is_named(change: dict[str, object], named: str) -> None:
    with pytest.raises(InvalidSlotMessage, match=named):
        SlotHello.from_json(orjson.dumps({**orjson.loads(HELLO.to_json()), **change}))


def test_a_hello_answers_one_challenge_of_one_task_channel() -> None:
    challenge = SlotChallenge.new()
    signed = SignedHello.from_json(HELLO.answer(challenge.to_json(), KEY_B64, "HmacSHA256"))
    signing.verify(base64.b64decode(KEY_B64), ["HmacSHA256"], signed.headers, signed.body)
    assert signed.hello_for("orders", 2, challenge) == replace(HELLO, nonce=challenge.nonce)
    with pytest.raises(InvalidSlotMessage, match="another connection"):
        signed.hello_for("orders", 2, SlotChallenge.new())  # replayed on a new connection
    with pytest.raises(InvalidSlotMessage, match="not this channel's task 'orders'-1"):
        signed.hello_for("orders", 1, challenge)  # replayed on another task's channel
    assert SlotChallenge.new() != SlotChallenge.new()


def test_an_unsigned_hello_carries_no_signature_headers() -> None:
    signed = SignedHello.from_json(HELLO.answer(SlotChallenge.new().to_json(), None,
                                                "HmacSHA256"))
    assert signed.headers == {}
    with pytest.raises(RequestSignatureException, match="missing required signature"):
        signing.verify(b"k" * 32, ["HmacSHA256"], signed.headers, signed.body)


@pytest.mark.parametrize(("frame", "named"), [
    (b"[]", "expected a JSON object"), (b"{}", "'hello'"),
    (b'{"hello": "%%%"}', "not base64url"),
    (b'{"hello": "e30=", "signature": 1}', "'signature'"),
])
def test_a_garbled_hello_frame_is_refused(frame: bytes, named: str) -> None:
    with pytest.raises(InvalidSlotMessage, match=named):
        SignedHello.from_json(frame)


def test_a_garbled_challenge_is_refused() -> None:
    with pytest.raises(InvalidSlotMessage, match="slot challenge"):
        HELLO.answer(b'{"nonce": 1}', KEY_B64, "HmacSHA256")


@pytest.mark.parametrize("body", [b"", b"not json", b"[]", b"{}"])
def test_a_body_that_is_no_message_is_refused(body: bytes) -> None:
    with pytest.raises(InvalidSlotMessage, match="Invalid slot report"):
        SlotReport.from_json(body)
    with pytest.raises(InvalidSlotMessage, match="Invalid slot answer"):
        SlotAnswer.from_json(body)


def test_unknown_command_is_refused() -> None:
    with pytest.raises(InvalidSlotMessage, match="'jump'"):
        SlotAnswer.from_json(b'{"command": "jump", "restart_seq": 0}')


def test_url_follows_the_worker_scheme_and_quotes_the_connector_name() -> None:
    assert (channel_url("http://w:8083", "a b/c", 2)
            == "ws://w:8083/internal/tasks/a%20b%2Fc/2/channel")
    assert channel_url("https://w:8443", "c", 0) == "wss://w:8443/internal/tasks/c/0/channel"


def test_refusals_mirror_http_statuses_and_liveness_outlasts_keepalives() -> None:
    assert close_code(403) == 4403 and close_code(404) == 4404
    assert LIVENESS_TIMEOUT_S >= 3 * KEEPALIVE_INTERVAL_S


# ----------------------------------------------------------- active topics (KIP-558)


def test_topics_and_reports_share_the_channel_and_parse_apart() -> None:
    topics = SlotTopics(frozenset({"b", "a"}))
    assert topics.to_json() == b'{"active_topics":["a","b"]}'
    assert parse_slot_message(topics.to_json()) == topics
    assert parse_slot_message(REPORT.to_json()) == REPORT


@pytest.mark.parametrize("body", [
    b'{"active_topics":"a"}', b'{"active_topics":[1]}', b'{"active_topics":[""]}',
    b'{"active_topics":null}', b"[]", b"nope",
])
def test_bad_topics_are_refused(body: bytes) -> None:
    with pytest.raises(InvalidSlotMessage):
        parse_slot_message(body)


# ----------------------------------------------------------------------- metrics


def snapshot(**changes: object) -> TaskMetricsSnapshot:
    from connect_runtime.task.metrics import TaskMetrics

    return dataclasses.replace(TaskMetrics("exactly-once").snapshot(), **changes)


def test_metrics_share_the_channel_and_parse_apart() -> None:
    message = SlotMetrics(snapshot(poll_total=7, offsets=(
        OffsetCommits({"file": "a"}, {"line": 3}, 2), OffsetCommits({"file": "b"}, None, 1))))
    parsed = parse_slot_message(message.to_json())
    assert isinstance(parsed, SlotMetrics) and parsed == message
    assert parsed.snapshot.poll_total == 7 and parsed.snapshot.offsets[0].commits == 2


@pytest.mark.parametrize(("values", "named"), [
    ({"poll_total": "7"}, "poll_total"), ({"poll_total": True}, "poll_total"),
    ({"txn_size_avg": "big"}, "txn_size_avg"), ({"errors": {}}, "errors"),
    ({"offsets": [[{"p": 1}, {"o": 2}]]}, "offsets"), ({"mode": "sometimes"}, "mode"),
])
def test_bad_metrics_name_the_field_and_are_their_own_error(values: dict[str, object],
                                                            named: str) -> None:
    body = orjson.dumps({"metrics": {**snapshot().to_object(), **values}})
    with pytest.raises(InvalidSlotMetrics, match=f"bad or missing field\\(s\\) {named}"):
        parse_slot_message(body)
    with pytest.raises(InvalidSlotMetrics, match="'metrics' must be an object"):
        parse_slot_message(b'{"metrics": []}')
