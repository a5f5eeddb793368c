"""The guide's example, deployed as its users deploy it, survives a dead worker exactly once.

docs/writing-a-connector.md, "Testing it": the example is built into a wheel and
dropped in the worker's ``plugin.path`` (so its entry point is what the worker
finds), the feed is started with the guide's command, rolling back every third
batch under a reader inside it, and the connector is created from the guide's
JSON file, pointed at this feed and a fresh topic, with pages that cut batches.
The worker, its Spark JVM and its Python workers are SIGKILLed while events
still arrive; a new worker in the same group takes the connector back from the
config topic, and its tasks catch up page by page, rewinding their open
transaction at each rolled-back batch (the guide's ``rewind_transaction``).
Every event must then be in Kafka exactly once, in order, as a
``read_committed`` consumer sees it, and every committed transaction must end
with the last event of an upstream batch (``transaction.boundary=connector``).
Each value is the JsonConverter's envelope, its schema named by the example's
``@connect_schema`` (docs/writing-a-connector.md, "Schemas").
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from itertools import accumulate
from pathlib import Path

import pytest
from http_source.server import event
from support.kafka import free_port, transaction_sizes
from support.offsets import wait_committed
from support.workers import WorkerProcess

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "http_source"
EVENTS, RATE = 1200, 100  # per stream: 12 s of events, so the kill lands mid-run
STREAMS = ("orders", "refunds")
# Event n is stamped n seconds after the feed's epoch; a recent one, or the broker's
# 7-day retention would delete the records while the test reads them.
EPOCH = datetime.now(UTC).replace(microsecond=0)
EPOCH_MS = int(EPOCH.timestamp() * 1000)


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    """A plugin.path directory holding the example's wheel, built offline from a copy
    (a build writes build/ and *.egg-info next to the sources)."""
    source, plugins = tmp_path / "source", tmp_path / "plugins"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns(
        "__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-index",
                    "--no-build-isolation", "--disable-pip-version-check", "-w", str(plugins),
                    str(source)], check=True, capture_output=True)
    assert len(list(plugins.glob("connect_http_source_example-*.whl"))) == 1
    return plugins


@pytest.fixture
def feed_url() -> Iterator[str]:
    """The example's server, started as the guide starts it (on a free port)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "http_source.server", "--port", "0", "--streams",
         ",".join(STREAMS), "--rate", str(RATE), "--max-events", str(EVENTS),
         "--epoch", EPOCH.isoformat(), "--rollback-every", "3"],
        env={**os.environ, "PYTHONPATH": str(EXAMPLE)}, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        found = re.search(r"at (http://\S+)/streams/", proc.stdout.readline())
        assert found, "the server did not print its URL"
        yield found.group(1)
    finally:
        proc.terminate()
        proc.wait(10)


def test_every_event_reaches_kafka_exactly_once_across_a_killed_worker(
        kafka_bootstrap: str, plugin_dir: Path, feed_url: str, tmp_path: Path,
        unique_name: Callable[[str], str]) -> None:
    worker = WorkerProcess(kafka_bootstrap, unique_name("http"), free_port(), tmp_path, {
        "plugin.path": str(plugin_dir), "spark.master": "local[4]",
        # The killed worker leaves the group after this; its replacement waits for that.
        "session.timeout.ms": "6000", "heartbeat.interval.ms": "1500"})
    worker.start()
    try:
        assert {"class": "http_source.connector.HttpSourceConnector", "type": "source",
                "version": "0.1.0"} in worker.rest("GET", "/connector-plugins").json()
        # The guide's config file, pointed at this test's feed and a fresh topic.
        request = json.loads((EXAMPLE / "connect-http-source.json").read_text())
        name, topic = unique_name("http-events"), unique_name("events")
        request["name"] = name
        # Pages of 45 end inside upstream batches (which end at multiples of 4 or 7),
        # so the catching-up tasks read inside batches the feed then rolls back.
        request["config"].update({"url": feed_url, "topic": topic, "batch.size": "45"})
        # A task killed inside a transaction leaves it open until the broker aborts it
        # after transaction.timeout.ms, and the restarted worker's read_committed read of
        # the offsets topic waits for that (60 s by default): keep the test short.
        request["config"]["producer.override.transaction.timeout.ms"] = "10000"
        without_url = {k: v for k, v in request["config"].items() if k != "url"}
        refused = worker.rest("POST", "/connectors", json={"name": name, "config": without_url})
        assert refused.status_code == 400
        assert 'Missing required configuration "url" which has no default value.' in \
            refused.json()["message"]
        created = worker.rest("POST", "/connectors", json=request)
        assert created.status_code == 201, created.text

        before = wait_committed(worker, topic, 200, connector=name, interval=0.5)
        assert len(before) < 2 * EVENTS, "every event was in before the kill: nothing to prove"
        worker.signal_tree(signal.SIGKILL)  # the worker, its Spark JVM, the running tasks
        assert worker.proc is not None
        worker.proc.wait(60)
        worker.start()  # same group.id: it reads the connector back from the config topic

        records = wait_committed(worker, topic, 2 * EVENTS, 90, connector=name, interval=0.5)
    finally:
        code = worker.stop()
        # The killed worker could not remove its staged plugin zips; the second one did.
        for staging in re.findall(r"Loaded plugin \S+ as (\S+)/connect_http_source",
                                  worker.log_path.read_text()):
            shutil.rmtree(staging, ignore_errors=True)
    assert code == 0, f"worker exited with {code}:\n{worker.tail()}"
    # The example's own log lines (the guide's "Logging"), with the context the worker adds.
    log_text = worker.log_path.read_text(errors="replace")
    for stream, task in zip(STREAMS, (0, 1), strict=True):
        assert re.search(rf"^\[[\d:, -]+\] INFO \[{re.escape(name)}\|task-{task}\] Reading "
                         rf"{stream} from {re.escape(feed_url)}, after event ids "
                         rf"\{{'{stream}': \d+\}} \(http_source\.task\)$", log_text, re.M), stream
    assert re.search(rf"^\[[\d:, -]+\] INFO \[{re.escape(name)}\|worker\] Dealing 2 stream\(s\) "
                     r"to 2 task\(s\) \(http_source\.connector\)$", log_text, re.M)
    # The guide's rewinding: the task's line, then the framework's, then a new instance.
    rewinds = re.findall(rf"^\[[\d:, -]+\] INFO \[{re.escape(name)}\|task-\d\] Stream '\w+': "
                         r"GET \S+ answered 409: .*rolled back and written again.*; rewinding "
                         r"the open transaction \(http_source\.task\)$", log_text, re.M)
    assert rewinds, "no task rewound a rolled-back batch: the test proves nothing of it"
    assert log_text.count("asked to rewind (TransactionContext.rewind_transaction)") >= len(
        rewinds)

    ids: dict[str, list[int]] = {}
    partitions: dict[str, set[int]] = {}
    for r in records:
        # The guide's config asks for schemas.enable=true: Connect's envelope, whose
        # schema carries the name, version and fields the example declares.
        stream, schema, value = r["key"].decode(), r["value"]["schema"], r["value"]["payload"]
        assert (schema["type"], schema["name"], schema["version"]) == (
            "struct", "http_source.Event", 1), schema
        assert [f["field"] for f in schema["fields"]] == [
            "id", "stream", "kind", "amount", "created_at", "end_of_batch"], schema
        assert value["stream"] == stream
        # What the feed served, in the JSON the guide's config asks for: decimals as
        # numbers (value.converter.decimal.format=NUMERIC), timestamps as epoch ms.
        served = event(value["id"], EPOCH, EVENTS)
        assert value == {**served, "stream": stream, "amount": value["amount"],
                         "created_at": value["id"] * 1000 + EPOCH_MS}
        assert Decimal(str(value["amount"])) == Decimal(served["amount"])
        ids.setdefault(stream, []).append(value["id"])
        partitions.setdefault(stream, set()).add(r["partition"])
    assert set(ids) == set(STREAMS)
    for stream in STREAMS:  # every event once, in order
        got, want = ids[stream], list(range(1, EVENTS + 1))
        twice = sorted(i for i, n in Counter(got).items() if n > 1)
        assert got == want, (f"{stream}: {len(got)} events, twice: {twice[:10]}, missing: "
                             f"{sorted(set(want) - set(got))[:10]}, in order: {got == sorted(got)}")
    # Keyed by stream: one Kafka partition per stream (two here), so a partition's
    # runs of consecutive offsets are that stream's transactions (each commit
    # marker takes an offset), and each must end with the last event of a batch.
    assert sorted(p for s in STREAMS for p in partitions[s]) == [0, 1], partitions
    for partition in (0, 1):
        mine = [r for r in records if r["partition"] == partition]
        sizes = transaction_sizes([r["offset"] for r in mine])
        assert all(mine[end - 1]["value"]["payload"]["end_of_batch"]
                   for end in accumulate(sizes)), \
            f"a transaction of partition {partition} ended mid-batch"
