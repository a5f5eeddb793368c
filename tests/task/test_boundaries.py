from __future__ import annotations

import time

import pytest

from connect_runtime.api.record import SourceRecord
from connect_runtime.errors import ConnectError
from connect_runtime.task.boundaries import BoundaryPolicy, Decision, TaskTransactionContext


def rec(n: int) -> SourceRecord:
    return SourceRecord({"p": 0}, {"seq": n + 1}, "t", value=n)


def test_poll_boundary_commits_after_every_non_empty_batch() -> None:
    policy = BoundaryPolicy("poll", 1000, None)
    assert policy.after_poll(10, transaction_open=True) is Decision.COMMIT
    assert policy.after_poll(0, transaction_open=False) is Decision.NONE
    assert policy.after_record(rec(1)) is Decision.NONE


def test_interval_boundary_waits_for_the_interval() -> None:
    policy = BoundaryPolicy("interval", 50, None)
    policy.transaction_began()
    assert policy.after_poll(5, transaction_open=True) is Decision.NONE
    time.sleep(0.06)
    assert policy.after_poll(0, transaction_open=True) is Decision.COMMIT
    assert policy.after_poll(0, transaction_open=False) is Decision.NONE


def test_connector_boundary_record_and_batch_requests() -> None:
    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    a, b = rec(1), rec(2)
    ctx.commit_transaction(a)
    ctx.abort_transaction(b)
    assert policy.after_record(rec(1)) is Decision.NONE  # equal but not the same record
    assert policy.after_record(a) is Decision.COMMIT
    assert policy.after_record(a) is Decision.NONE  # consumed
    assert policy.after_record(b) is Decision.ABORT
    ctx.abort_transaction()
    assert policy.after_poll(3, transaction_open=True) is Decision.ABORT
    assert policy.after_poll(3, transaction_open=True) is Decision.NONE


def test_commit_and_abort_of_the_same_batch_or_record_is_an_error() -> None:
    ctx = TaskTransactionContext()
    ctx.commit_transaction()
    with pytest.raises(ConnectError, match="both to commit and to abort"):
        ctx.abort_transaction()
    r = rec(3)
    ctx.abort_transaction(r)
    ctx.abort_transaction(r)  # asking twice for the same thing is fine
    with pytest.raises(ConnectError, match="same record"):
        ctx.commit_transaction(r)


def test_connector_boundary_needs_a_context() -> None:
    with pytest.raises(ValueError):
        BoundaryPolicy("connector", 0, None)
    with pytest.raises(ValueError):
        BoundaryPolicy("sometimes", 0, None)


def test_a_conflict_the_task_caught_still_fails_at_the_boundary() -> None:
    """Rule 3: the second, conflicting request raises; if the task swallows that,
    the boundary check raises again (Kafka Connect's rule), so the first request
    never quietly wins."""
    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    ctx.commit_transaction()
    with pytest.raises(ConnectError):
        ctx.abort_transaction()
    with pytest.raises(ConnectError, match="both to commit and to abort"):
        policy.after_poll(1, transaction_open=True)

    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    r = rec(4)
    ctx.commit_transaction(r)
    with pytest.raises(ConnectError):
        ctx.abort_transaction(r)
    with pytest.raises(ConnectError, match="same record"):
        policy.after_record(r)


def test_a_record_request_no_record_of_the_poll_matched_fails_naming_it() -> None:
    """Rule 2: at the end of a poll, a record request still pending named no record
    of that poll's list (an earlier poll's record, or one never returned)."""
    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    sent, old = rec(5), rec(1)
    ctx.commit_transaction(sent)
    assert policy.after_record(sent) is Decision.COMMIT
    policy.after_poll(1, transaction_open=False)  # everything matched: fine
    ctx.abort_transaction(old)
    with pytest.raises(ConnectError, match=r"abort_transaction\(record\) for a record that the "
                                           r"poll\(\) did not return \(a SourceRecord for topic "
                                           r"'t', source offset \{'seq': 2\}\)"):
        policy.after_poll(0, transaction_open=True)


def test_a_request_without_a_record_is_dropped_when_nothing_is_open() -> None:
    """Rule 1: consumed at the end of the poll even with nothing open, so it never
    ends a later transaction."""
    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    ctx.abort_transaction()
    assert policy.after_poll(0, transaction_open=False) is Decision.NONE
    assert policy.after_poll(3, transaction_open=True) is Decision.NONE


def test_rewind_is_requested_once_and_stays_requested() -> None:
    ctx = TaskTransactionContext()
    policy = BoundaryPolicy("connector", 0, ctx)
    assert not policy.rewind_requested
    ctx.commit_transaction()
    ctx.rewind_transaction()
    assert policy.rewind_requested
    assert policy.rewind_requested  # not consumed: the loop ends on it
    assert not BoundaryPolicy("poll", 0, None).rewind_requested


def test_only_an_idle_connector_transaction_near_its_timeout_is_rewound() -> None:
    """Rule 6: after an empty poll, a connector-defined transaction open for 3/4 of
    transaction.timeout.ms; not while polls return records, not with nothing open,
    never for the poll and interval boundaries (they end transactions themselves)."""
    connector = BoundaryPolicy("connector", 0, TaskTransactionContext())
    assert connector.idle_too_long(0, 45.0, 60.0)
    assert not connector.idle_too_long(0, 44.9, 60.0)
    assert not connector.idle_too_long(3, 59.0, 60.0)
    assert not connector.idle_too_long(0, None, 60.0)
    assert not BoundaryPolicy("interval", 600_000, None).idle_too_long(0, 59.0, 60.0)
    assert not BoundaryPolicy("poll", 0, None).idle_too_long(0, 59.0, 60.0)
