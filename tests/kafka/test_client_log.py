"""librdkafka's lines reach logging at the level they deserve (kafka/client_log.py):
the InitProducerId retries that restarts, fencing and the broker's producer-id
blocks cause are DEBUG, unless they last; every other line passes through unchanged."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from support.clock import FakeClock

from connect_runtime.kafka.client_log import (
    PID_RETRY_WARN_AFTER_S,
    ClientLog,
    PidRetries,
    waiting_for,
)

CLIENT = "connect-e2e-orders-0#producer-3"
# As librdkafka 2.x writes it (seen in a worker's log after a task restart).
RETRY = ("[thrd:main]: Failed to acquire transactional PID from broker TxnCoordinator/1: "
         "Broker: Producer attempted to update a transaction while another concurrent "
         "operation on the same transaction was ongoing: retrying")


# The other retry librdkafka logs, from an idempotent producer.
LOAD = ("[thrd:main]: Failed to acquire idempotence PID from broker 127.0.0.1:41899/1: "
        "Broker: Coordinator load in progress: retrying")


def test_only_the_retries_the_broker_asks_for_are_recognised() -> None:
    assert "finish the previous transaction" in (waiting_for("GETPID", RETRY) or "")
    assert "block of producer ids" in (waiting_for("GETPID", LOAD) or "")
    # A fatal answer is not retried, and says so: it stays what librdkafka made it.
    assert waiting_for("GETPID", "[thrd:main]: Failed to acquire transactional PID from "
                       "broker TxnCoordinator/1: Broker: Transactional Id authorization "
                       "failed") is None
    assert waiting_for("GETPID", RETRY.replace("concurrent operation", "other thing")) is None
    assert waiting_for("ADDPARTS", RETRY) is None


def test_retries_are_debug_until_they_last_then_a_warning_per_interval() -> None:
    retries = PidRetries()
    every = 0.5  # librdkafka's pace
    steps = int(PID_RETRY_WARN_AFTER_S / every)
    levels = [retries.level(CLIENT, i * every)[0] for i in range(steps)]
    assert levels == [logging.DEBUG] * steps
    assert retries.level(CLIENT, PID_RETRY_WARN_AFTER_S) == (logging.WARNING,
                                                             PID_RETRY_WARN_AFTER_S)
    levels = [retries.level(CLIENT, PID_RETRY_WARN_AFTER_S + i * every)[0]
              for i in range(1, steps)]
    assert levels == [logging.DEBUG] * (steps - 1)
    assert retries.level(CLIENT, 2 * PID_RETRY_WARN_AFTER_S)[0] == logging.WARNING
    # Another client's run is its own.
    assert retries.level("other#producer-4", 2 * PID_RETRY_WARN_AFTER_S)[0] == logging.DEBUG


def test_a_pause_ends_a_run_and_ended_runs_are_forgotten() -> None:
    retries = PidRetries()
    retries.level(CLIENT, 0.0)
    retries.level(CLIENT, 1.0)
    # The PID was acquired; a later restart of the same client starts afresh.
    assert retries.level(CLIENT, 4.0) == (logging.DEBUG, 0.0)
    assert retries.level(CLIENT, 8.5)[0] == logging.DEBUG  # 4.5 s into the new run
    retries.level("fence-a#producer-1", 100.0)
    assert len(retries) == 1


@pytest.fixture
def records() -> Iterator[list[logging.LogRecord]]:
    logger = logging.getLogger("test.client_log")
    kept: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = kept.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        yield kept
    finally:
        logger.removeHandler(handler)


def test_the_client_log_demotes_retries_and_passes_everything_else(
        records: list[logging.LogRecord]) -> None:
    clock = FakeClock()
    client_log = ClientLog(logging.getLogger("test.client_log"), clock)
    # As confluent-kafka calls it.
    client_log.log(logging.WARNING, "%s [%s] %s", "GETPID", CLIENT, RETRY)
    client_log.log(logging.ERROR, "%s [%s] %s", "FAIL", CLIENT, "[thrd:b]: Connect failed")
    client_log.log(logging.INFO, "plain %s", "line")
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.DEBUG, f"GETPID [{CLIENT}] {RETRY}"),
        (logging.ERROR, f"FAIL [{CLIENT}] [thrd:b]: Connect failed"),
        (logging.INFO, "plain line"),
    ]

    records.clear()
    while clock.now < PID_RETRY_WARN_AFTER_S + 1:  # librdkafka retries every 500 ms
        clock.now += 0.5
        client_log.log(logging.WARNING, "%s [%s] %s", "GETPID", CLIENT, RETRY)
    warnings = [r.getMessage() for r in records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith(
        f"{CLIENT}: still acquiring a producer id after 5 s, waiting for the transaction "
        "coordinator to finish the previous transaction of this transactional.id "
        "(CONCURRENT_TRANSACTIONS).")
    assert warnings[0].endswith(f"librdkafka: {RETRY}")

    records.clear()
    clock.now += 60  # a new run, of the other kind, on another client
    client_log.log(logging.WARNING, "%s [%s] %s", "GETPID", "status#producer-9", LOAD)
    assert [(r.levelno, r.getMessage()) for r in records] == [
        (logging.DEBUG, f"GETPID [status#producer-9] {LOAD}")]
