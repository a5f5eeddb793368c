"""The worker's startup rules (connect_runtime.worker): which failed start attempts
are tried again, and how long the worker waits before the next one."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from connect_runtime.errors import (
    ConfigException,
    ConnectError,
    KafkaAuthenticationError,
    KafkaClientError,
    KafkaTimeoutError,
)
from connect_runtime.worker import retries_startup, startup_retry_delay


def test_retry_delays_double_from_one_second_up_to_thirty() -> None:
    assert [startup_retry_delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert startup_retry_delay(10_000) == 30


@pytest.mark.parametrize(("error", "retried"), [
    # Kafka did not answer, or not in time: wait for it.
    (KafkaTimeoutError("reading to the end of s timed out"), True),
    (KafkaClientError("no answer", code=KafkaError._ALL_BROKERS_DOWN), True),
    (KafkaClientError("refused", code=KafkaError._TRANSPORT), True),
    (KafkaClientError("unknown host", code=KafkaError._RESOLVE), True),
    (KafkaClientError("moving", code=KafkaError.NOT_COORDINATOR), True),
    (KafkaClientError("librdkafka says so", code=KafkaError.UNKNOWN, retriable=True), True),
    # No retry fixes these: the process ends, as it did before retries existed.
    (KafkaAuthenticationError("refused the admin client", code=KafkaError._TRANSPORT), False),
    (KafkaClientError("no ACL", code=KafkaError.TOPIC_AUTHORIZATION_FAILED), False),
    (KafkaClientError("bad property", code=KafkaError._INVALID_ARG), False),
    (ConfigException("must have a single partition"), False),
    (ConnectError("KafkaBasedLog thread for s has stopped"), False),
    (RuntimeError("a bug"), False),
])
def test_only_kafka_not_answering_is_retried(error: BaseException, retried: bool) -> None:
    assert retries_startup(error) is retried
