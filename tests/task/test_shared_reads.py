"""The startup reads shared by the tasks of one process (pure logic, fake reads)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from connect_runtime.task.shared_reads import CoalescedRead, _FencedGenerations


class Clock:
    """A shared sequence: callers take a ticket before asking, reads when they start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = itertools.count()

    def tick(self) -> int:
        with self._lock:
            return next(self._count)


def wait_for_waiters(read: CoalescedRead[int], n: int) -> None:
    """Until ``n`` callers wait on ``read`` (CPython's Condition keeps its waiters)."""
    deadline = time.monotonic() + 10
    while len(read._cond._waiters) < n:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "callers never waited"
        time.sleep(0.005)


def test_each_caller_gets_a_read_that_started_after_it_asked() -> None:
    clock = Clock()
    reads: list[int] = []
    release_first = threading.Event()

    def read() -> int:
        started = clock.tick()
        reads.append(started)
        if len(reads) == 1:
            release_first.wait(10)
        return started

    coalesced: CoalescedRead[int] = CoalescedRead(read)
    results: dict[int, tuple[int, int]] = {}

    def caller(i: int) -> None:
        asked = clock.tick()
        results[i] = (asked, coalesced.get())

    first = threading.Thread(target=caller, args=(0,))
    first.start()
    while not reads:
        time.sleep(0.005)
    # Ten more ask while the first read runs: it started before them, so it is
    # not theirs; one read started after all of them serves them all.
    late = [threading.Thread(target=caller, args=(i,)) for i in range(1, 11)]
    for t in late:
        t.start()
    wait_for_waiters(coalesced, 10)
    release_first.set()
    for t in [first, *late]:
        t.join(10)
    assert len(results) == 11
    for i, (asked, read_started) in results.items():
        assert read_started > asked, f"caller {i} got a read that started before it asked"
    assert len(reads) == 2
    assert results[0][1] == reads[0]
    assert {r for _, r in (results[i] for i in range(1, 11))} == {reads[1]}


def test_a_caller_alone_reads_afresh_every_time() -> None:
    count = itertools.count(1)
    coalesced = CoalescedRead(lambda: next(count))
    assert [coalesced.get() for _ in range(3)] == [1, 2, 3]


def test_a_failed_read_fails_the_callers_it_served_and_the_next_call_reads_again() -> None:
    attempts: list[int] = []
    release = threading.Event()

    def read() -> str:
        attempts.append(1)
        if len(attempts) == 2:
            release.wait(10)
            raise OSError("broker down")
        return "ok"

    coalesced = CoalescedRead(read)
    assert coalesced.get() == "ok"
    errors: list[BaseException] = []

    def caller() -> None:
        try:
            coalesced.get()
        except OSError as e:
            errors.append(e)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    threads[0].start()
    while len(attempts) < 2:
        time.sleep(0.005)
    for t in threads[1:]:
        t.start()
    wait_for_waiters(coalesced, 2)
    release.set()
    for t in threads:
        t.join(10)
    # The first waiter's read failed it; the two that asked during that read got
    # a read of their own, after it (the third attempt, which succeeded).
    assert len(errors) == 1 and str(errors[0]) == "broker down"
    assert len(attempts) == 3
    assert coalesced.get() == "ok"


def test_a_generation_is_fenced_once_and_a_failure_is_not_remembered() -> None:
    fenced = _FencedGenerations()
    calls: list[str] = []

    def fail() -> None:
        calls.append("fail")
        raise RuntimeError("leader said 409")

    with pytest.raises(RuntimeError, match="409"):
        fenced.once(("c", 7), fail)
    fenced.once(("c", 7), lambda: calls.append("ok"))
    fenced.once(("c", 7), lambda: calls.append("again"))
    fenced.once(("c", 8), lambda: calls.append("next generation"))
    assert calls == ["fail", "ok", "next generation"]


def test_siblings_wait_for_the_fence_request_in_flight() -> None:
    fenced = _FencedGenerations()
    release = threading.Event()
    calls: list[int] = []

    def request() -> None:
        calls.append(1)
        release.wait(10)

    threads = [threading.Thread(target=fenced.once, args=(("c", 1), request))
               for _ in range(5)]
    for t in threads:
        t.start()
    while not calls:
        time.sleep(0.005)
    time.sleep(0.05)
    release.set()
    for t in threads:
        t.join(10)
    assert calls == [1]
