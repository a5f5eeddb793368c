"""The worker's startup rules (connect_runtime.worker): which failed start attempts
are tried again, how long the worker waits before the next one, and where it
keeps its temporary files."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import (
    ConfigException,
    ConnectError,
    KafkaAuthenticationError,
    KafkaClientError,
    KafkaTimeoutError,
)
from connect_runtime.tempdirs import MARKER, Owner, current_space
from connect_runtime.worker import Worker, retries_startup, startup_retry_delay


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


def test_a_worker_sweeps_dead_workers_roots_and_removes_its_own_when_it_stops(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No Kafka, no Spark: building a Worker sweeps and makes its root; stop() removes it."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # what TMPDIR sets
    dead = tmp_path / "connect-runtime-5-dead"
    dead.mkdir()
    # The lock is free and the owner had taken one: gone.
    (dead / MARKER).write_text(Owner(5, None, current_space(), locked=True).to_json())
    worker = Worker(WorkerConfig({"group.id": "g", "config.storage.topic": "c",
                                  "offset.storage.topic": "o", "status.storage.topic": "s"}))
    try:
        assert not dead.exists()
        [root] = tmp_path.iterdir()
        assert (root / "plugins").is_dir()
        # The Spark driver's java.io.tmpdir (tests/cluster/test_small_rules.py).
        assert worker.runner._driver_tmpdir == root / "spark"
    finally:
        worker.stop()
    assert list(tmp_path.iterdir()) == []
