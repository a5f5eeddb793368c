"""The HTTP source example's own logic, against its real tiny server (no Kafka).

The task runs in the test kit (``connect_runtime.testing``): a ``TaskRunner``
drives it as the framework does, with an in-memory offsets reader and, for
``transaction.boundary=connector``, the runtime's own rules for where
transactions end. What it polls, the offsets it commits, where it resumes and
where its transactions end are the connector's decisions, tested here in
seconds. That those records and offsets reach Kafka exactly once is
``test_http_source_e2e.py``'s job.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from http_source.config import TASK_STREAMS
from http_source.connector import HttpSourceConnector
from http_source.server import EventFeed, batch_of, ends_batch, running
from http_source.server import main as server_main
from http_source.task import Event, HttpSourceTask, source_partition

from connect_runtime import (
    ConfigException,
    ConnectError,
    InvalidOffsetException,
    SourceRecord,
    schema_of,
)
from connect_runtime.testing import (
    MemoryTaskContext,
    Outcome,
    RecordingTransactionContext,
    TaskRunner,
)

HTTP_SOURCE = Path(__file__).resolve().parents[2] / "examples" / "http_source"
N = 45


def task_config(url: str, streams: str, batch_size: int = 10) -> dict[str, str]:
    """The config of the connector's one task, as the connector makes it."""
    connector = HttpSourceConnector()
    connector.start({"url": url, "streams": streams, "topic": "events",
                     "batch.size": str(batch_size), "poll.interval.ms": "10"})
    (config,) = connector.task_configs(1)
    return config


def as_committed(offsets: Mapping[str, int]) -> list[tuple[dict[str, str], dict[str, int]]]:
    """``{stream: id}`` as the committed offsets a task resumes from."""
    return [(source_partition(stream), {"after": after}) for stream, after in offsets.items()]


def by_stream(records: Iterable[SourceRecord]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for record in records:
        out.setdefault(record.key, []).append(record.value.id)
    return out


def test_a_task_emits_every_event_once_in_order_with_the_offset_of_the_next_read() -> None:
    feed = EventFeed(["orders", "refunds"], rate=0, max_events=N)
    with running(feed) as server, TaskRunner(
            HttpSourceTask, task_config(server.url, "orders,refunds")) as runner:
        runner.run(until=lambda: len(runner.committed_records()) >= 2 * N)
        assert runner.poll() == 0  # nothing new: an empty poll, after poll.interval.ms
    records = runner.committed_records()
    assert by_stream(records) == {"orders": list(range(1, N + 1)),
                                  "refunds": list(range(1, N + 1))}
    for record in records:
        stream, value = record.key, record.value
        assert record.topic == "events"
        assert record.source_partition == {"stream": stream}
        assert record.source_offset == {"after": value.id}  # the next request's ?after=
        assert value == Event(value.id, stream, ("created", "paid", "shipped")[value.id % 3],
                              Decimal(feed.event(value.id)["amount"]),
                              feed.epoch + timedelta(seconds=value.id),
                              value.id % 4 == 0 or value.id % 7 == 0 or value.id == N)
        assert record.timestamp == int(value.created_at.timestamp() * 1000)
    assert runner.offsets.items() == as_committed({"orders": N, "refunds": N})


def test_a_restarted_task_resumes_right_after_the_committed_event() -> None:
    with running(EventFeed(["orders", "refunds"], rate=0, max_events=N)) as server:
        config = task_config(server.url, "orders,refunds")
        with TaskRunner(HttpSourceTask, config, offsets=as_committed({"orders": 17})) as runner:
            runner.run(until=lambda: len(runner.committed_records()) >= 2 * N - 17)
    assert by_stream(runner.committed_records()) == {"orders": list(range(18, N + 1)),
                                                     "refunds": list(range(1, N + 1))}


def test_connector_boundaries_commit_whole_upstream_batches_of_one_stream() -> None:
    with running(EventFeed(["orders", "refunds"], rate=0, max_events=N)) as server:
        config = task_config(server.url, "orders,refunds")
        # Pages of 10 cut upstream batches (they end at ids divisible by 4 or 7): the
        # task must keep a transaction open across pages, and other streams out of it.
        # Stopped mid-batch, then a new task on the offsets the first one committed:
        with TaskRunner(HttpSourceTask, config, boundary="connector") as first:
            first.run(until=lambda: len(first.committed_records()) >= N)
        with TaskRunner(HttpSourceTask, config, boundary="connector",
                        offsets=first.offsets) as second:
            second.run(until=lambda: len(second.committed_records()) >= 2 * N - len(
                first.committed_records()))
    transactions = first.transactions + second.transactions
    committed_txns = [t for t in transactions if t.outcome is Outcome.COMMITTED]
    records = [r for t in committed_txns for r in t.records]
    assert by_stream(records) == {"orders": list(range(1, N + 1)),
                                  "refunds": list(range(1, N + 1))}  # each event once
    assert all(len(by_stream(t.records)) == 1 for t in committed_txns), \
        "a transaction mixed streams"
    assert all(t.records[-1].value.end_of_batch for t in committed_txns), \
        "a transaction ended mid-batch"
    assert [t.outcome for t in first.transactions][-1] is Outcome.DISCARDED, \
        "the stop did not cut a batch: the test would not see its events read again"
    assert any(r.value.id % 10 == 0 and not r.value.end_of_batch for r in records), \
        "no page of 10 cut a batch: the test would not see a transaction span polls"


def test_a_batch_rolled_back_while_the_task_reads_it_is_read_again_whole() -> None:
    feed = EventFeed(["orders", "refunds"], rate=0, max_events=N, rollback_every=2)
    with running(feed) as server, TaskRunner(
            HttpSourceTask, task_config(server.url, "orders,refunds"),
            boundary="connector") as runner:
        runner.run(until=lambda: len(runner.committed_records()) >= 2 * N)
    assert feed.rollbacks >= 2, "no batch was rolled back under the task: nothing tested"
    # Each rollback rewound the open transaction (its records never visible, its
    # offsets not committed) and a new instance read the batch again.
    discarded = [t for t in runner.transactions if t.outcome is Outcome.DISCARDED]
    assert runner.restarts == feed.rollbacks == len(discarded)
    assert all(t.offsets == () and not t.records[-1].value.end_of_batch for t in discarded)
    committed_txns = [t for t in runner.transactions if t.outcome is Outcome.COMMITTED]
    assert by_stream(runner.committed_records()) == {"orders": list(range(1, N + 1)),
                                                     "refunds": list(range(1, N + 1))}
    assert all(t.records[-1].value.end_of_batch for t in committed_txns)
    assert runner.offsets.items() == as_committed({"orders": N, "refunds": N})


def test_without_connector_boundaries_a_rolled_back_batch_is_read_on() -> None:
    """Under ``poll`` the batch's first pages are committed already: the task does
    not rewind (nothing it could re-read would be hidden) and skips nothing."""
    feed = EventFeed(["orders"], rate=0, max_events=N, rollback_every=1)
    with running(feed) as server, TaskRunner(
            HttpSourceTask, task_config(server.url, "orders")) as runner:
        runner.run(until=lambda: len(runner.committed_records()) >= N)
    assert feed.rollbacks >= 2 and runner.restarts == 0
    assert by_stream(runner.committed_records()) == {"orders": list(range(1, N + 1))}


def test_the_feed_rolls_back_every_kth_batch_once_under_a_reader_inside_it() -> None:
    assert [batch_of(n)[0] for n in (1, 4, 5, 7, 8, 9, 28, 29)] == [1, 1, 2, 2, 3, 4, 10, 11]
    assert batch_of(10) == (4, 9, 12) and batch_of(45, max_events=45) == (17, 45, 45)
    feed = EventFeed(["orders"], rate=0, max_events=N, rollback_every=2)
    with running(feed) as server:
        def get(after: int) -> httpx.Response:
            return httpx.get(f"{server.url}/streams/orders/events",
                             params={"after": after, "limit": 5})
        assert get(8).status_code == 200  # 8 ends a batch: the read is inside none
        assert get(1).status_code == 200  # inside 1..4, the 1st batch: not rolled back
        rolled = get(10)  # inside 9..12, the 4th batch
        assert rolled.status_code == 409
        assert rolled.json() == {
            "error": "events 9..12 of stream 'orders' were rolled back and written again "
                     "while you read them; read them again after event 8",
            "rolled_back": {"first": 9, "last": 12}}
        assert get(11).status_code == 200  # once per batch
        assert get(6).status_code == 409  # inside 5..7, the 2nd batch
    assert feed.rollbacks == 2


def test_the_task_names_the_last_record_of_each_whole_batch() -> None:
    """A test that calls poll itself: the kit's context records what the task asks."""
    transactions = RecordingTransactionContext()
    with running(EventFeed(["orders"], rate=0, max_events=N)) as server:
        config = task_config(server.url, "orders")
        task = HttpSourceTask()
        task.initialize(MemoryTaskContext(config, as_committed({"orders": 5}), transactions))
        task.start(config)
        page = task.poll()  # events 6..15; batches end at 7, 8, 12 and 14
    assert page is not None and [r.value.id for r in page] == list(range(6, 16))
    assert transactions.requests == [("commit", page[8])]  # event 14: the last whole batch


def test_a_failed_request_is_retried_without_skipping_anything() -> None:
    feed = EventFeed(["orders"], rate=0, max_events=N)
    with running(feed) as server:
        url, port = server.url, server.server_address[1]
    # The feed is down: nothing listens there now.
    with TaskRunner(HttpSourceTask, task_config(url, "orders")) as runner:
        assert runner.poll() == 0
        with running(feed, port=port):
            runner.run(until=lambda: len(runner.committed_records()) >= N)
    assert by_stream(runner.committed_records()) == {"orders": list(range(1, N + 1))}


def test_a_committed_offset_the_task_cannot_resume_from_fails_its_start() -> None:
    runner = TaskRunner(HttpSourceTask, task_config("http://127.0.0.1:9", "orders,refunds"),
                        offsets=[(source_partition("refunds"), {"after": "17"})])
    with pytest.raises(InvalidOffsetException,
                       match=r"Stream 'refunds' has the committed offset \{'after': '17'\}"):
        runner.start()


def test_a_stream_the_feed_does_not_have_fails_the_task_with_the_feeds_answer() -> None:
    with running(EventFeed(["orders"], rate=0, max_events=N)) as server:
        runner = TaskRunner(HttpSourceTask, task_config(server.url, "nosuch"))
        runner.start()
        with pytest.raises(ConnectError, match=r"Stream 'nosuch': GET .* answered 404: "
                                               r".*no stream 'nosuch'; streams: orders"):
            runner.poll()


def test_the_server_answers_pages_and_clear_errors() -> None:
    feed = EventFeed(["orders"], rate=0, max_events=N)
    with running(feed) as server:
        page = httpx.get(f"{server.url}/streams/orders/events", params={"after": 40, "limit": 3})
        assert page.json() == {"events": [feed.event(41), feed.event(42), feed.event(43)]}
        assert httpx.get(f"{server.url}/streams/nope/events").status_code == 404
        bad = httpx.get(f"{server.url}/streams/orders/events", params={"limit": 0})
        assert bad.status_code == 400 and "limit" in bad.json()["error"]
    # A live feed shows whole upstream batches only.
    live = EventFeed(["orders"], rate=1000)
    for _ in range(20):
        time.sleep(0.003)
        assert ends_batch(live.visible()) or live.visible() == 0


def test_the_feed_stamps_its_events_from_when_it_starts(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Recent times, because the record timestamp is the event's: a broker's
    time-based retention deletes records stamped older than retention.ms (7 days by
    default) minutes after they arrive."""
    before = datetime.now(UTC).replace(microsecond=0)
    feed = EventFeed(["orders"], rate=0, max_events=N)
    assert before <= feed.epoch <= datetime.now(UTC)
    assert feed.event(3)["created_at"] == (feed.epoch + timedelta(seconds=3)).isoformat()
    chosen = EventFeed(["orders"], rate=0, max_events=N,
                       epoch=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert chosen.event(1)["created_at"] == "2026-01-02T03:04:06+00:00"
    with pytest.raises(SystemExit) as exit_:
        server_main(["--epoch", "yesterday"])
    assert exit_.value.code == 2
    assert "argument --epoch: not an ISO 8601 time: 'yesterday'" in capsys.readouterr().err


def config_errors(config: dict[str, str]) -> dict[str, list[str]]:
    values = HttpSourceConnector().validate(config).config_values
    return {v.name: v.errors for v in values if v.errors}


def test_the_guides_config_is_valid_and_bad_values_are_named_by_key() -> None:
    guide = json.loads((HTTP_SOURCE / "connect-http-source.json").read_text())["config"]
    assert config_errors(guide) == {}
    assert config_errors({"url": "ftp://feed", "streams": "orders,orders", "batch.size": "0"}) == {
        "url": ["Invalid value ftp://feed for configuration url: Must be an http:// or https:// "
                "URL without a query, such as http://127.0.0.1:8000"],
        "streams": ["Invalid value orders,orders for configuration streams: Listed more than "
                    "once: orders"],
        "topic": ['Missing required configuration "topic" which has no default value.'],
        "batch.size": ["Invalid value 0 for configuration batch.size: Value must be at least 1"],
    }
    with pytest.raises(ConfigException, match="configuration streams: List at least one stream"):
        HttpSourceConnector().start({"url": "http://feed", "streams": "", "topic": "t"})


def test_each_stream_goes_to_exactly_one_task() -> None:
    connector = HttpSourceConnector()
    connector.start({"url": "http://feed", "streams": "a,b,c", "topic": "t", "tasks.max": "2"})
    assert [c[TASK_STREAMS] for c in connector.task_configs(2)] == ["a,c", "b"]
    assert [c[TASK_STREAMS] for c in connector.task_configs(8)] == ["a", "b", "c"]
    assert all(c["url"] == "http://feed" for c in connector.task_configs(8))


def test_alter_offsets_accepts_what_a_task_can_resume_from_only() -> None:
    connector = HttpSourceConnector()
    assert connector.alter_offsets({}, [({"stream": "orders"}, {"after": 5}),
                                        ({"stream": "refunds"}, None)]) is True
    with pytest.raises(InvalidOffsetException, match="Stream 'orders'"):
        connector.alter_offsets({}, [({"stream": "orders"}, {"after": -1})])
    with pytest.raises(ConfigException, match="must be"):
        connector.alter_offsets({}, [({"file": "x"}, {"after": 1})])


def test_the_event_schema_is_derived_from_the_dataclass() -> None:
    schema = schema_of(Event)
    assert [(f.name, f.schema.type.value, f.schema.name) for f in schema.fields] == [
        ("id", "int64", None), ("stream", "string", None), ("kind", "string", None),
        ("amount", "bytes", "org.apache.kafka.connect.data.Decimal"),
        ("created_at", "int64", "org.apache.kafka.connect.data.Timestamp"),
        ("end_of_batch", "boolean", None)]
