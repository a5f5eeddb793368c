"""The worker's log formats (connect_runtime.logs), and the lifecycle events the
code logs staying the ones docs/operations.md lists."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.logs import JsonLinesFormatter, log_format, trace_headline

REPO = Path(__file__).resolve().parent.parent


def record(message: str, *args: object, exc: bool = False, **extra: object) -> logging.LogRecord:
    exc_info = None
    if exc:
        try:
            raise ValueError("bad value: ünïcode")
        except ValueError:
            exc_info = sys.exc_info()
    rec = logging.LogRecord("connect_runtime.cluster.herder", logging.INFO, __file__, 1,
                            message, args, exc_info)
    rec.__dict__.update(extra)
    rec.created = 1764000000.1234  # 2025-11-24T16:00:00.123Z
    return rec


def formatted(rec: logging.LogRecord) -> tuple[str, dict[str, object]]:
    line = JsonLinesFormatter().format(rec)
    return line, json.loads(line)


def test_a_line_is_one_object_with_the_standard_keys() -> None:
    _, entry = formatted(record("connector %s deleted", "orders"))
    assert entry == {"ts": "2025-11-24T16:00:00.123Z", "level": "INFO",
                     "logger": "connect_runtime.cluster.herder",
                     "message": "connector orders deleted"}
    assert list(entry) == ["ts", "level", "logger", "message"]


def test_event_fields_are_added_and_other_extras_are_not() -> None:
    _, entry = formatted(record("task c-0 started", event="task_started", connector="c",
                                task=0, generation=12, pid=None,
                                color_message="uvicorn's own extra"))
    assert {k: entry[k] for k in ("event", "connector", "task", "generation")} == {
        "event": "task_started", "connector": "c", "task": 0, "generation": 12}
    assert "pid" not in entry and "color_message" not in entry  # None, and not an event field


def test_an_exception_is_its_formatted_traceback() -> None:
    _, entry = formatted(record("connector c failed", exc=True))
    exc = str(entry["exc"])
    assert exc.startswith("Traceback (most recent call last):")
    assert exc.endswith("ValueError: bad value: ünïcode")


def test_newlines_quotes_and_non_ascii_stay_one_ascii_line() -> None:
    message = 'first "line"\nsecond \\ line\r\n\ttabbed \u00fcn\u00efcode \u2013 \U0001f680'
    line, entry = formatted(record(message))
    assert "\n" not in line and "\r" not in line and line.isascii()
    assert entry["message"] == message


def test_the_option_wins_over_the_variable_which_wins_over_the_default() -> None:
    assert log_format("json", {"CONNECT_LOG_FORMAT": "text"}) == "json"
    assert log_format(None, {"CONNECT_LOG_FORMAT": " JSON "}) == "json"
    assert log_format(None, {"CONNECT_LOG_FORMAT": ""}) == "text"
    assert log_format(None, {}) == "text"
    with pytest.raises(ConfigException, match=r"CONNECT_LOG_FORMAT='xml' is not a log format"):
        log_format(None, {"CONNECT_LOG_FORMAT": "xml"})


def test_a_trace_headline_is_the_exception_line_of_a_traceback() -> None:
    chained = ("Task c-0 (connector c) failed:\nTraceback (most recent call last):\n"
               '  File "a.py", line 1, in f\n    g()\nKeyError: \'x\'\n\n'
               "The above exception was the direct cause of the following exception:\n\n"
               'Traceback (most recent call last):\n  File "b.py", line 2, in poll\n'
               "    ^^^^\nRuntimeError: boom\nmore of the message\n")
    assert trace_headline(chained) == "RuntimeError: boom"  # the exception raised last
    assert trace_headline("Task c-0 lost: nothing was heard.\nmore") == \
        "Task c-0 lost: nothing was heard."
    assert trace_headline(None) == trace_headline("") == ""


def test_every_event_the_code_logs_is_documented_and_every_documented_one_is_logged() -> None:
    logged = set()
    for path in [*(REPO / "connect_runtime").rglob("*.py"), *(REPO / "rest").rglob("*.py")]:
        logged |= set(re.findall(r'"event": "(\w+)"', path.read_text()))
    # The "## Logs" section only: other sections have tables of their own (metrics).
    logs = (REPO / "docs" / "operations.md").read_text().split("\n## Logs\n", 1)[1]
    documented = set(re.findall(r"^\| `(\w+)` \|", logs.split("\n## ", 1)[0], re.MULTILINE))
    assert logged == documented
