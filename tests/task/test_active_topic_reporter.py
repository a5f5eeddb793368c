"""KIP-558 on the task side: which topics a task reports, and when.

The reporter's timing rules run on a fake clock; the loops run against the
real broker, since "durable" means committed (exactly-once) or acknowledged
(at-least-once) by Kafka.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import test_at_least_once_loop as alos
import test_exactly_once_loop as eos
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.clock import FakeClock

from connect_runtime.api.task import SourceTask
from connect_runtime.converters import load_converter
from connect_runtime.task.active_topics import ActiveTopicReporter
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals


def test_new_topics_go_at_once_known_ones_at_most_every_interval() -> None:
    sent: list[frozenset[str]] = []
    clock = FakeClock(50.0)
    reporter = ActiveTopicReporter(sent.append, interval_s=3.0, clock=clock)
    used = {"a"}
    reporter.durable(used)
    assert sent == [frozenset({"a"})] and used == set()  # cleared once reported
    used.add("a")
    reporter.durable(used)
    assert len(sent) == 1 and used == {"a"}  # known, not due: kept for later
    used.add("b")
    reporter.durable(used)  # a new topic does not wait for the interval
    assert sent[-1] == frozenset({"a", "b"}) and used == set()
    used.add("a")
    clock.now += 2.9
    reporter.durable(used)
    assert len(sent) == 2
    clock.now += 0.2  # due: a topic reset meanwhile is reported again
    reporter.durable(used)
    assert sent[-1] == frozenset({"a"}) and len(sent) == 3
    reporter.durable(set())  # nothing durable: nothing sent, even when due
    clock.now += 10
    reporter.durable(set())
    assert len(sent) == 3


def _deps(task: SourceTask, producer: Producer, offsets: str,
          reported: list[frozenset[str]]) -> LoopDeps:
    return LoopDeps(
        label="c-0", connector="c", task=task, producer=producer, offsets_topic=offsets,
        forbidden_topics=frozenset({offsets}), signals=LoopSignals(), on_topics=reported.append,
        key_converter=load_converter("org.apache.kafka.connect.storage.StringConverter", {},
                                     True, config_key="key.converter"),
        value_converter=load_converter("org.apache.kafka.connect.json.JsonConverter", {},
                                       False, config_key="value.converter"))


def _create(bootstrap: str, *names: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result()


def test_exactly_once_reports_committed_topics_never_aborted_ones(
        kafka_bootstrap: str, unique_name: Callable[[str], str]) -> None:
    kept, aborted, offsets = unique_name("kept"), unique_name("aborted"), unique_name("offsets")
    _create(kafka_bootstrap, kept, aborted, offsets)
    ctx = TaskTransactionContext()
    committed, dropped = eos.records(kept, 0, 3), eos.records(aborted, 3, 2)
    ctx.commit_transaction(committed[-1])
    ctx.abort_transaction(dropped[-1])
    task = eos.ScriptedTask([committed + dropped])
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": unique_name("txn"), "linger.ms": 5})
    producer.init_transactions(30)
    reported: list[frozenset[str]] = []
    loop = ExactlyOnceTaskLoop(
        _deps(task, producer, offsets, reported), boundary=BoundaryPolicy("connector", 0, ctx),
        transaction_timeout_s=30)
    # The first transaction, then the offsets-only one after the abort.
    eos.run_until(loop, lambda: task.commits >= 2)
    assert reported == [frozenset({kept})]


def test_at_least_once_reports_acknowledged_topics(
        kafka_bootstrap: str, unique_name: Callable[[str], str]) -> None:
    first, second, offsets = unique_name("first"), unique_name("second"), unique_name("offsets")
    _create(kafka_bootstrap, first, second, offsets)
    task = alos.ScriptedTask([alos.records(first, "p", 0, 3), alos.records(second, "p", 3, 2)])
    reported: list[frozenset[str]] = []
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    loop = AtLeastOnceTaskLoop(
        _deps(task, producer, offsets, reported), offset_flush_interval_s=60,
        offset_flush_timeout_s=5)
    running = alos.Running(loop)
    deadline = time.monotonic() + 30
    while len(task.acked) < 5 and time.monotonic() < deadline:  # commit_record: acknowledged
        time.sleep(0.02)
    running.stop()
    assert frozenset().union(*reported) == {first, second}
    # Each was new when reported: no topic went out twice within the interval.
    assert sum(len(r) for r in reported) <= 3
