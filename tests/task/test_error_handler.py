"""errors.* semantics of the per-record stages (pure logic: a fake clock and sleep)."""

from __future__ import annotations

import logging

import pytest
from support.clock import FakeClock

from connect_runtime.errors import ConnectError, DataException, RetriableException
from connect_runtime.task.error_handler import ErrorHandler, RecordSkipped


def handler(clock: FakeClock, **kw: object) -> ErrorHandler:
    return ErrorHandler(label="c-0", sleep=clock.sleep, clock=lambda: clock.now, **kw)  # type: ignore[arg-type]


def failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def run() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "ok"
    return calls, run


def test_defaults_fail_the_task_on_the_first_error_without_retrying() -> None:
    clock = FakeClock()
    h = handler(clock)
    assert h.passive
    calls, run = failing(1, RetriableException("flaky"))
    with pytest.raises(ConnectError, match=r"Tolerance exceeded in error handler.*VALUE_CONVERTER"):
        h.execute("VALUE_CONVERTER", "JsonConverter", None, run)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.sleeps == []
    assert (h.counts.record_errors, h.counts.record_failures, h.counts.records_skipped) == (1, 1, 0)


def test_retriable_errors_are_retried_with_doubling_delays_until_the_timeout() -> None:
    clock = FakeClock()
    h = handler(clock, retry_timeout_ms=5000, retry_delay_max_ms=1000)
    _, run = failing(3, RetriableException("flaky"))
    assert h.execute("TRANSFORMATION", "t", None, run) == "ok"  # type: ignore[arg-type]
    assert clock.sleeps == [0.3, 0.6, 1.0]  # 300 ms, doubled, capped at the max delay
    assert (h.counts.retries, h.counts.record_failures, h.counts.record_errors) == (3, 3, 1)

    clock2 = FakeClock()
    h2 = handler(clock2, retry_timeout_ms=1000)
    _, always = failing(100, RetriableException("down"))
    with pytest.raises(ConnectError, match="down"):
        h2.execute("TRANSFORMATION", "t", None, always)  # type: ignore[arg-type]
    assert sum(clock2.sleeps) == pytest.approx(1.0)  # never waits past the timeout


def test_non_retriable_errors_are_not_retried_and_tolerance_all_skips_the_record(
        caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    h = handler(clock, retry_timeout_ms=-1, tolerate_all=True, log_enable=True)
    calls, run = failing(1, DataException("bad value"))
    with caplog.at_level(logging.ERROR), pytest.raises(RecordSkipped):
        h.execute("VALUE_CONVERTER", "org.apache.kafka.connect.json.JsonConverter",
                  {"secret": "s3cr3t"}, run)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.sleeps == []
    assert (h.counts.records_skipped, h.counts.errors_logged) == (1, 1)
    line = caplog.records[-1].getMessage()
    assert line == ("Error encountered in task c-0. Executing stage 'VALUE_CONVERTER' with class "
                    "'org.apache.kafka.connect.json.JsonConverter'.")
    assert "s3cr3t" not in caplog.text  # records are logged only with include.messages


def test_include_messages_logs_the_record() -> None:
    clock = FakeClock()
    h = handler(clock, tolerate_all=True, log_enable=True, log_include_messages=True)
    _, run = failing(1, DataException("bad"))
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    logger = logging.getLogger("connect_runtime.task.error_handler")
    keep = Keep()
    logger.addHandler(keep)
    try:
        with pytest.raises(RecordSkipped):
            h.execute("KEY_CONVERTER", "k", {"id": 7}, run)  # type: ignore[arg-type]
    finally:
        logger.removeHandler(keep)
    assert "where source record is = {'id': 7}" in records[-1].getMessage()


def test_a_stop_request_ends_infinite_retries() -> None:
    clock = FakeClock()
    stop = {"now": False}

    def sleep(s: float) -> None:
        clock.sleep(s)
        stop["now"] = len(clock.sleeps) >= 4

    h = ErrorHandler(label="c-0", retry_timeout_ms=-1, sleep=sleep, clock=lambda: clock.now,
                     should_stop=lambda: stop["now"])
    _, always = failing(100, RetriableException("down"))
    with pytest.raises(ConnectError):
        h.execute("TRANSFORMATION", "t", None, always)  # type: ignore[arg-type]
    assert len(clock.sleeps) == 4
