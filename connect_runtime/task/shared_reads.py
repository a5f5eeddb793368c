"""Startup reads shared by the tasks of one process (``tasks.per.process`` > 1).

Each exactly-once task's startup asks the leader to fence, reads the config
topic to the end twice and reads the offsets topics once (``task/startup.py``).
Done by each of 20 tasks in a process, that is 20 fence requests, 40 config-topic
readers and 20 offsets readers, each with a consumer and an admin client of its
own, within seconds; 200 tasks on a 2-core broker stalled it. What the tasks of
one process read is the same (one process hosts one connector generation), so
they share it here, without weakening what each task is promised:

* a read (:class:`CoalescedRead`) is shared only with the tasks that asked
  before it *started*: every caller gets a result read after it asked, which is
  what "read to the end" means for it (the end offsets are listed when the read
  starts, so everything committed before the caller asked is in it);
* a fence request (:func:`fence_once`) is made once per connector generation per
  process: fencing completed for a generation stays completed (only new task
  configs, a new generation, make it pending again), and each task still checks
  it itself in its own config read (startup step 2). A failed request is not
  remembered: the next task asks again.

Everything here is per process and keyed by what is read, so a reused Python
worker that later hosts another connector does not see this one's results.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

_T = TypeVar("_T")


class CoalescedRead(Generic[_T]):
    """``read()`` run on behalf of concurrent callers, each getting a result of a
    read that started after it called :meth:`get`.

    At most one read runs at a time. A caller that arrives while one is running
    waits for it to end and then for the next, which one of the waiting callers
    runs for all of them. A read's exception is raised to every caller it served.
    """

    def __init__(self, read: Callable[[], _T]) -> None:
        self._read = read
        # Guarded by _cond: reads started so far, the number of the latest one to
        # end, whether one is running, and the latest one's result or exception.
        self._cond = threading.Condition()
        self._started = 0
        self._ended = 0
        self._running = False
        self._result: _T | None = None
        self._error: BaseException | None = None

    def get(self) -> _T:
        with self._cond:
            # The running read (if any) started before this call: it does not count.
            needed = self._started + 1
            while self._ended < needed:
                if self._running:
                    self._cond.wait()
                    continue
                self._running = True
                self._started += 1
                number = self._started
                result: _T | None = None
                error: BaseException | None = None
                self._cond.release()
                try:
                    result = self._read()
                except BaseException as e:  # handed to every caller this read served
                    error = e
                finally:
                    self._cond.acquire()
                    self._running = False
                    self._ended, self._result, self._error = number, result, error
                    self._cond.notify_all()
            result, error = self._result, self._error
        if error is not None:
            raise error
        return result  # type: ignore[return-value]  # set by a read that did not raise


class _Registry(Generic[_T]):
    """One :class:`CoalescedRead` per key, made on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _reads
        self._reads: dict[Hashable, CoalescedRead[_T]] = {}

    def get(self, key: Hashable, read: Callable[[], _T]) -> _T:
        """A result of ``read`` (or of an equal one under ``key``) that started
        after this call."""
        with self._lock:
            coalesced = self._reads.get(key)
            if coalesced is None:
                coalesced = self._reads[key] = CoalescedRead(read)
        return coalesced.get()


def settings_key(*settings: Mapping[str, Any]) -> str:
    """A hashable form of client settings for a registry key."""
    return json.dumps([sorted((str(k), str(v)) for k, v in s.items()) for s in settings])


CONFIG_READS: _Registry[Any] = _Registry()
"""Config-topic snapshots, keyed by cluster, topic and client settings."""

OFFSET_READS: _Registry[Any] = _Registry()
"""Combined offsets views, keyed by connector, topics and client settings."""


class _FencedGenerations:
    """Connector generations this process has seen fenced (see :func:`fence_once`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # guards _locks and _done
        self._locks: dict[Hashable, threading.Lock] = {}
        self._done: set[Hashable] = set()

    def once(self, key: Hashable, request: Callable[[], None]) -> None:
        with self._lock:
            if key in self._done:
                return
            per_key = self._locks.setdefault(key, threading.Lock())
        with per_key:  # siblings wait for the request in flight rather than repeat it
            with self._lock:
                if key in self._done:
                    return
            request()
            with self._lock:
                self._done.add(key)
                del self._locks[key]


_FENCED = _FencedGenerations()


def fence_once(key: Hashable, request: Callable[[], None]) -> None:
    """``request()`` (a fence request for the connector generation ``key``) unless
    one for ``key`` has already succeeded in this process; concurrent callers wait
    for the one in flight. Raises what ``request`` raises (and the next caller
    tries again)."""
    _FENCED.once(key, request)
