"""The worker's log formats (connect_runtime.logs) with the connector and task
context, and the lifecycle events the code logs staying the ones
docs/operations.md lists."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
import threading
from pathlib import Path

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.logs import (
    TEXT_FORMAT,
    ContextFilter,
    JsonLinesFormatter,
    LogContext,
    current_log_context,
    log_context,
    log_format,
    process_log_context,
    process_log_format,
    thread_in_context,
    trace_headline,
)

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


# ------------------------------------------------------- connector and task context


def handled(log_format: str, message: str = "polled %d", *args: object,
            **extra: object) -> str:
    """``message`` formatted as the handler configure_logging installs would write it."""
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(JsonLinesFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT, defaults={"connector_context": ""}))
    handler.addFilter(ContextFilter())
    logger = logging.Logger("my_connector.task")  # not in the process's hierarchy
    logger.addHandler(handler)
    logger.warning(message, *args or (3,), extra=extra or None)
    stream = handler.stream
    assert isinstance(stream, io.StringIO)
    return stream.getvalue().rstrip("\n")


def test_a_task_line_carries_connects_prefix_in_text_and_fields_in_json() -> None:
    with log_context(LogContext("orders", 2)):
        text, line = handled("text"), json.loads(handled("json"))
    assert re.fullmatch(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] WARNING "
                        r"\[orders\|task-2\] polled 3 \(my_connector\.task\)", text), text
    assert (line["level"], line["logger"], line["message"]) == (
        "WARNING", "my_connector.task", "polled 3")
    assert (line["connector"], line["task"]) == ("orders", 2)


def test_a_connector_line_on_the_worker_says_worker_and_has_no_task() -> None:
    with log_context(LogContext("orders")):
        text, line = handled("text"), json.loads(handled("json"))
    assert "WARNING [orders|worker] polled 3 (my_connector.task)" in text
    assert line["connector"] == "orders" and "task" not in line


def test_without_a_context_a_line_is_as_before() -> None:
    assert re.fullmatch(r"\[[\d:, -]+\] WARNING polled 3 \(my_connector\.task\)",
                        handled("text"))
    assert "connector" not in json.loads(handled("json"))


def test_a_lifecycle_lines_own_fields_win_over_the_context() -> None:
    with log_context(LogContext("orders", 0)):
        line = json.loads(handled("json", "task %s started", "other-1",
                                  connector="other", task=1))
    assert (line["connector"], line["task"]) == ("other", 1)


def test_a_threads_context_stays_on_that_thread_and_a_process_one_reaches_all() -> None:
    seen: list[LogContext | None] = []

    def other_thread() -> None:
        seen.append(current_log_context())
    with log_context(LogContext("orders")):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        assert current_log_context() == LogContext("orders")
    with process_log_context(LogContext("orders", 1)):
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        with log_context(LogContext("inner")):  # a thread's own context wins
            assert current_log_context() == LogContext("inner")
    assert seen == [None, LogContext("orders", 1)]
    assert current_log_context() is None


def test_a_shared_process_line_names_its_tasks_and_helper_threads_keep_their_task() -> None:
    """Several tasks in one process (tasks.per.process): each task thread's helpers
    (thread_in_context) log as that task; other threads as the process's tasks."""
    seen: list[LogContext | None] = []

    def other_thread() -> None:
        seen.append(current_log_context())
    with process_log_context(LogContext("orders", shared=(0, 1, 2))):
        with log_context(LogContext("orders", 1)):
            helper = thread_in_context(other_thread, name="helper")
            plain = threading.Thread(target=other_thread)
        for thread in (helper, plain):
            thread.start()
            thread.join()
        text = handled("text")
    assert helper.daemon
    assert seen == [LogContext("orders", 1), LogContext("orders", shared=(0, 1, 2))]
    assert "WARNING [orders|tasks-0,1,2] polled 3 (my_connector.task)" in text


def test_the_process_log_format_is_read_off_the_root_handlers() -> None:
    root = logging.getLogger()
    handler = logging.NullHandler()
    handler.setFormatter(JsonLinesFormatter())
    assert process_log_format() == "text"
    root.addHandler(handler)
    try:
        assert process_log_format() == "json"
    finally:
        root.removeHandler(handler)
