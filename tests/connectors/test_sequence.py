"""SequenceSourceConnector/Task driven with in-memory fakes of the task contexts."""

from __future__ import annotations

import threading
import time
from typing import Any

import orjson
import pytest
from support.fakes import FakeReader

import connect_runtime
from connect_runtime.api.connector import ConnectorTransactionBoundaries, ExactlyOnceSupport
from connect_runtime.api.record import RecordBatch, SourceRecord
from connect_runtime.config.validation import validate_connector_config
from connect_runtime.connectors.sequence import (
    SequenceSourceConnector,
    SequenceSourceTask,
    assign_partitions,
    expected_aborted,
)
from connect_runtime.errors import ConfigException, InvalidOffsetException
from connect_runtime.task.batches import check, expand
from connect_runtime.task.startup import TaskContext


class FakeTransactions:
    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []

    def commit_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self.requests.append(("commit", record))

    def abort_transaction(self, record: SourceRecord | RecordBatch | None = None) -> None:
        self.requests.append(("abort", record))


CONNECTOR = {"name": "seq", "connector.class": "SequenceSource", "topic": "out"}


def task_config(partitions: str = "0", **overrides: str) -> dict[str, str]:
    return {**CONNECTOR, "sequence.partitions": partitions, "task.id": "0", **overrides}


def started(config: dict[str, str], offsets: dict[int, dict[str, Any] | None] | None = None,
            txn: FakeTransactions | None = None) -> SequenceSourceTask:
    task = SequenceSourceTask()
    reader = FakeReader(offsets, key=lambda p: p["sequence.partition"])
    task.initialize(TaskContext(config, reader, txn))
    task.start(config)
    return task


def seqs(records: list[SourceRecord]) -> list[tuple[int, int]]:
    return [(r.value["partition"], r.value["seq"]) for r in records]


def rows(polled: list[RecordBatch] | None) -> list[SourceRecord]:
    """The records a poll's batches stand for (each row carries its batch's offset)."""
    out: list[SourceRecord] = []
    for batch in polled or []:
        check(batch, "seq-0")
        out += expand(batch)
    return out


def drain_batches(task: SequenceSourceTask, polls: int) -> list[RecordBatch]:
    return [batch for _ in range(polls) for batch in task.poll() or []]


def drain(task: SequenceSourceTask, polls: int) -> list[SourceRecord]:
    return rows(drain_batches(task, polls))


def last_seq(batch: RecordBatch) -> int:
    return int(batch.values[-1]["seq"])


# --- connector --------------------------------------------------------------


def test_assign_partitions_round_robin() -> None:
    assert assign_partitions(5, 2) == [[0, 2, 4], [1, 3]]
    assert assign_partitions(2, 4) == [[0], [1]]  # no task without partitions
    assert assign_partitions(3, 3) == [[0], [1], [2]]


def test_task_configs_carry_framework_keys_partitions_and_ids() -> None:
    connector = SequenceSourceConnector()
    connector.start({**CONNECTOR, "tasks.max": "3", "partitions": "4"})
    configs = connector.task_configs(3)
    assert [(c["sequence.partitions"], c["task.id"]) for c in configs] == [
        ("0,3", "0"), ("1", "1"), ("2", "2")]
    assert all(c["name"] == "seq" and c["tasks.max"] == "3" for c in configs)
    assert all(isinstance(v, str) for c in configs for v in c.values())


def test_zero_partitions_means_one_per_task() -> None:
    connector = SequenceSourceConnector()
    connector.start(CONNECTOR)
    assert [c["sequence.partitions"] for c in connector.task_configs(2)] == ["0", "1"]


def test_connector_requires_a_topic() -> None:
    with pytest.raises(ConfigException, match='"topic"'):
        SequenceSourceConnector().start({"name": "seq"})


def test_connector_answers_kip_618_questions_and_passes_preflight() -> None:
    connector = SequenceSourceConnector()
    assert connector.exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED
    assert connector.can_define_transaction_boundaries({}) is (
        ConnectorTransactionBoundaries.SUPPORTED)
    assert connector.version() == connect_runtime.__version__
    infos = validate_connector_config(connector, {
        **CONNECTOR, "exactly.once.support": "required", "transaction.boundary": "connector",
    }, "enabled")
    assert infos.error_count == 0, infos.error_messages()


# --- task: records and offsets ---------------------------------------------


def test_record_shape_and_offsets_point_at_the_next_record() -> None:
    task = started(task_config("3", **{"batch.size": "2", "record.size.bytes": "200"}))
    before = time.time() * 1000
    polled = task.poll() or []
    assert len(polled) == 1 and isinstance(polled[0], RecordBatch)
    first, second = rows(polled)
    assert first.topic == "out" and first.key == "3" and first.partition is None
    assert first.source_partition == {"sequence.partition": 3}
    # One offset per batch: the seq after its last row.
    assert polled[0].source_offset == {"seq": 2} and polled[0].source_offsets is None
    assert second.source_offset == {"seq": 2} and second.value["seq"] == 1
    assert {k: v for k, v in first.value.items() if k != "pad"} == {
        "partition": 3, "seq": 0, "task": 0}
    assert abs(len(orjson.dumps(first.value)) - 200) <= 2
    assert first.timestamp is not None and before - 1 <= first.timestamp <= time.time() * 1000


def test_resumes_from_committed_offsets() -> None:
    reader_offsets: dict[int, dict[str, Any] | None] = {0: {"seq": 42}, 1: None}
    task = started(task_config("0,1", **{"batch.size": "3"}), reader_offsets)
    assert seqs(drain(task, 2)) == [(0, 42), (0, 43), (0, 44), (1, 0), (1, 1), (1, 2)]
    reader = task.context.offset_storage_reader
    assert isinstance(reader, FakeReader)
    assert reader.asked == [{"sequence.partition": 0}, {"sequence.partition": 1}]


@pytest.mark.parametrize("offset", [{"seq": "7"}, {"other": 1}, {"seq": -1}, {"seq": True}])
def test_malformed_committed_offset_fails_start(offset: dict[str, Any]) -> None:
    with pytest.raises(InvalidOffsetException, match=r"sequence\.partition"):
        started(task_config("0"), {0: offset})


def test_batches_rotate_over_partitions() -> None:
    task = started(task_config("0,1,2", **{"batch.size": "4"}))
    batches = [seqs(rows(task.poll())) for _ in range(4)]
    assert [len(b) for b in batches] == [4, 4, 4, 4]
    assert [{p for p, _ in b} for b in batches] == [{0}, {1}, {2}, {0}]
    assert batches[3] == [(0, 4), (0, 5), (0, 6), (0, 7)]


def test_max_records_per_partition_then_idle() -> None:
    task = started(task_config("0,1", **{"batch.size": "4", "max.records": "5",
                                         "poll.idle.ms": "1"}))
    records = drain(task, 10)
    assert sorted(seqs(records)) == [(p, s) for p in (0, 1) for s in range(5)]
    assert task.poll() is None


def test_bad_task_partition_list_names_the_key() -> None:
    with pytest.raises(ConfigException, match=r"sequence\.partitions"):
        started(task_config("0,x"))


# --- task: connector-defined transactions -----------------------------------


@pytest.mark.parametrize(
    ("seq", "aborted"),
    [(0, False), (9, False), (19, False), (20, True), (29, True), (30, False), (59, True)],
)
def test_expected_aborted_formula(seq: int, aborted: bool) -> None:
    assert expected_aborted(seq, commit_every=10, abort_every=3) is aborted
    assert expected_aborted(seq, commit_every=10, abort_every=0) is False


def transactions(batches: list[RecordBatch], txn: FakeTransactions) -> list[tuple[str, list]]:
    """Split batches the way the framework would, after the requested batches."""
    ends = {id(r): kind for kind, r in txn.requests if r is not None}
    out: list[tuple[str, list]] = []
    current: list[tuple[int, int]] = []
    for batch in batches:
        current += seqs(rows([batch]))
        if id(batch) in ends:
            out.append((ends[id(batch)], current))
            current = []
    assert not current, "records left in an open transaction"
    return out


def test_connector_boundaries_commit_and_abort_whole_groups_of_one_partition() -> None:
    txn = FakeTransactions()
    config = task_config("0,1", **{"batch.size": "7", "commit.every.records": "10",
                                   "abort.every.transactions": "3", "max.records": "60",
                                   "poll.idle.ms": "1"})
    batches = drain_batches(started(config, txn=txn), 40)
    assert len(rows(batches)) == 120
    assert all(kind and isinstance(batch, RecordBatch) for kind, batch in txn.requests)
    for kind, members in transactions(batches, txn):
        partitions = {p for p, _ in members}
        groups = {s // 10 for _, s in members}
        assert len(partitions) == 1 and len(groups) == 1, members
        assert [s for _, s in members] == list(range(min(groups) * 10, min(groups) * 10 + 10))
        assert (kind == "abort") is expected_aborted(members[0][1], 10, 3)
    aborted = sorted(last_seq(r) for kind, r in txn.requests if kind == "abort" and r)
    assert aborted == [29, 29, 59, 59]


def test_empty_commits_follow_only_polls_whose_last_record_ended_a_transaction() -> None:
    txn = FakeTransactions()
    config = task_config("0,1", **{"batch.size": "5", "commit.every.records": "10",
                                   "abort.every.transactions": "3", "max.records": "60",
                                   "poll.idle.ms": "1", "empty.commits": "true"})
    task = started(config, txn=txn)
    polls = [task.poll() for _ in range(60)]
    empties = 0
    for i, polled in enumerate(polls):
        if polled is None:
            continue
        asked = [(kind, r) for kind, r in txn.requests if r is polled[-1]]
        follows = polls[i + 1] if i + 1 < len(polls) else ...
        if asked:  # the poll's last record ended a transaction: nothing is open after it
            assert follows is None, f"poll {i} ended a transaction; the next one must be empty"
            empties += 1
        else:
            assert follows is not None, f"poll {i} left a transaction open; no empty commit"
    assert [kind for kind, r in txn.requests if r is None] == ["commit"] * empties
    assert empties == 12  # batches of 5 end every group, the last ones included
    # The groups are as without empty commits: whole, one partition each.
    batches = [b for polled in polls for b in polled or []]
    groups = transactions(batches, txn)
    assert len(rows(batches)) == 120 and len(groups) == 12
    assert all(len({p for p, _ in members}) == 1 and len(members) == 10
               for _, members in groups)


def test_connector_boundary_at_max_records_inside_a_group() -> None:
    txn = FakeTransactions()
    config = task_config("0", **{"batch.size": "100", "commit.every.records": "10",
                                 "abort.every.transactions": "3", "max.records": "25",
                                 "poll.idle.ms": "1"})
    records = drain(started(config, txn=txn), 5)
    assert [(kind, last_seq(r)) for kind, r in txn.requests if r] == [
        ("commit", 9), ("commit", 19), ("abort", 24)]
    assert len(records) == 25


def test_resume_mid_group_ends_the_group_at_its_boundary() -> None:
    txn = FakeTransactions()
    config = task_config("0", **{"batch.size": "100", "commit.every.records": "10"})
    task = started(config, {0: {"seq": 15}}, txn)
    batch = rows(task.poll())
    assert batch[0].value["seq"] == 15
    assert [(kind, last_seq(r)) for kind, r in txn.requests if r][:2] == [
        ("commit", 19), ("commit", 29)]


def test_no_transaction_requests_without_a_transaction_context() -> None:
    task = started(task_config("0", **{"batch.size": "50", "commit.every.records": "10"}))
    assert len(rows(task.poll())) == 50  # and nothing to call: poll/interval boundaries


# --- task: rate limit and stop ----------------------------------------------


def test_rate_limit_caps_throughput_without_spinning() -> None:
    task = started(task_config("0", **{"rate.per.sec": "200", "batch.size": "1000",
                                       "poll.idle.ms": "20"}))
    started_at = time.monotonic()
    count = polls = 0
    while time.monotonic() - started_at < 0.5:
        count += len(rows(task.poll()))
        polls += 1
    elapsed = time.monotonic() - started_at
    assert count <= 200 * elapsed + 1
    assert count >= 200 * 0.5 * 0.5
    assert polls <= elapsed / 0.02 + 5  # each poll slept ~poll.idle.ms, no busy loop


def poll_in_thread(task: SequenceSourceTask) -> tuple[threading.Thread, list[float]]:
    took: list[float] = []

    def run() -> None:
        t0 = time.monotonic()
        task.poll()
        took.append(time.monotonic() - t0)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, took


@pytest.mark.parametrize(
    "overrides",
    [
        {"rate.per.sec": "0.01", "poll.idle.ms": "30000"},  # blocked on the rate limit
        {"max.records": "1", "poll.idle.ms": "30000"},  # idle after max.records
    ],
)
def test_stop_from_another_thread_wakes_a_blocked_poll(overrides: dict[str, str]) -> None:
    task = started(task_config("0", **overrides))
    if "max.records" in overrides:
        assert len(rows(task.poll())) == 1
    thread, took = poll_in_thread(task)
    time.sleep(0.1)
    assert thread.is_alive(), "poll should be blocked"
    task.stop()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert took[0] < 2
    assert task.poll() is None  # and stays stopped
