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
