"""Restarting failed tasks by themselves: ``errors.restart.*``, off by default.

Kafka Connect leaves a FAILED task FAILED until someone calls REST. With
``errors.restart.policy=on-failure`` the leader restarts it after a delay that
doubles with each consecutive failure, from ``errors.restart.backoff.initial.ms``
up to ``errors.restart.backoff.max.ms``, with jitter (each delay is drawn from
the upper half of its step, so restarts of many tasks that failed together
spread out, and the delays still never shrink). After
``errors.restart.max.attempts`` consecutive failures it gives up and the task
stays FAILED, as in Connect. A task that then runs for
``errors.restart.reset.after.ms`` has its count reset: the next failure starts
again at the initial delay.

A restart is the same as ``POST /connectors/{c}/tasks/{t}/restart``: only that
task's slot restarts its task instance, under the same generation, so its
siblings are never fenced or stopped (fencing happens once per generation).

:class:`AutoRestarts` is pure bookkeeping with an injectable clock and random
source; the herder feeds it state changes and, on its reconcile pass, restarts
what is due.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.config.connector_config import (
    ERRORS_RESTART_BACKOFF_INITIAL_CONFIG,
    ERRORS_RESTART_BACKOFF_MAX_CONFIG,
    ERRORS_RESTART_MAX_ATTEMPTS_CONFIG,
    ERRORS_RESTART_POLICY_CONFIG,
    ERRORS_RESTART_RESET_AFTER_CONFIG,
)

UNLIMITED = -1  # errors.restart.max.attempts: no limit


@dataclass(frozen=True)
class RestartPolicy:
    """A connector's ``errors.restart.*`` settings."""

    enabled: bool = False
    max_attempts: int = 10  # UNLIMITED: no limit
    backoff_initial_ms: int = 1000
    backoff_max_ms: int = 300_000
    reset_after_ms: int = 600_000

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> RestartPolicy:
        """From a connector config's parsed values (``ConnectorConfig.values``)."""
        return cls(enabled=values[ERRORS_RESTART_POLICY_CONFIG] == "on-failure",
                   max_attempts=int(values[ERRORS_RESTART_MAX_ATTEMPTS_CONFIG]),
                   backoff_initial_ms=int(values[ERRORS_RESTART_BACKOFF_INITIAL_CONFIG]),
                   backoff_max_ms=int(values[ERRORS_RESTART_BACKOFF_MAX_CONFIG]),
                   reset_after_ms=int(values[ERRORS_RESTART_RESET_AFTER_CONFIG]))

    def delay_s(self, attempt: int, draw: float) -> float:
        """The delay before restart ``attempt`` (1-based); ``draw`` in [0, 1) is the jitter."""
        step = min(self.backoff_initial_ms * 2 ** min(attempt - 1, 40), self.backoff_max_ms)
        return step * (0.5 + 0.5 * draw) / 1000.0

    def describe(self, attempt: int) -> str:
        limit = "no limit" if self.max_attempts == UNLIMITED else f"of {self.max_attempts}"
        return f"attempt {attempt} {limit}"


@dataclass(frozen=True)
class Plan:
    """What happens after a failure: a restart in ``delay_s`` (attempt ``attempt``),
    or none because ``attempt`` would exceed the limit (``gave_up``)."""

    attempt: int
    delay_s: float
    gave_up: bool
    note: str  # appended to the task's FAILED trace


@dataclass
class _Task:
    generation: int
    attempts: int = 0  # consecutive failures that were (or will be) restarted
    restarts: int = 0  # automatic restarts done, for metrics
    running_since: float | None = None
    due: float | None = None


class AutoRestarts:
    """Per task: consecutive failures, the pending restart, and totals for metrics.

    Thread-safe: state changes come from the slot registry's events thread, due
    restarts are taken by the herder's reconcile thread, metrics read it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 draw: Callable[[], float] = random.random) -> None:
        self._clock = clock
        self._draw = draw
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, int], _Task] = {}

    def _task(self, connector: str, task: int, generation: int) -> _Task:
        entry = self._tasks.get((connector, task))
        if entry is None or entry.generation != generation:  # a new generation starts over
            entry = self._tasks[(connector, task)] = _Task(generation)
        return entry

    def running(self, connector: str, task: int, generation: int) -> None:
        with self._lock:
            entry = self._task(connector, task, generation)
            if entry.running_since is None:
                entry.running_since = self._clock()

    def failed(self, connector: str, task: int, generation: int,
               policy: RestartPolicy) -> Plan | None:
        """The task failed: plan its restart (None when the policy is off)."""
        if not policy.enabled:
            return None
        with self._lock:
            entry = self._task(connector, task, generation)
            now = self._clock()
            if entry.running_since is not None and \
                    now - entry.running_since >= policy.reset_after_ms / 1000.0:
                entry.attempts = 0  # it ran long enough: a new failure starts afresh
            entry.running_since = None
            attempt = entry.attempts + 1
            if policy.max_attempts != UNLIMITED and attempt > policy.max_attempts:
                entry.due = None
                return Plan(attempt, 0.0, True, (
                    f"connect-runtime gave up restarting this task automatically after "
                    f"{entry.attempts} consecutive failed attempt(s) "
                    f"(errors.restart.max.attempts={policy.max_attempts}); restart it "
                    "through REST once the cause is fixed."))
            entry.attempts = attempt
            delay = policy.delay_s(attempt, self._draw())
            entry.due = now + delay
            return Plan(attempt, delay, False, (
                f"connect-runtime restarts this task automatically in {delay:.1f}s "
                f"({policy.describe(attempt)}; errors.restart.policy=on-failure)."))

    def due(self) -> list[tuple[str, int, int]]:
        """Tasks whose restart is due now (connector, task, generation); each once."""
        now = self._clock()
        with self._lock:
            out = []
            for (connector, task), entry in self._tasks.items():
                if entry.due is not None and entry.due <= now:
                    entry.due = None
                    entry.restarts += 1
                    out.append((connector, task, entry.generation))
            return out

    def cancel(self, connector: str, task: int) -> None:
        """A restart requested through REST replaces the pending automatic one."""
        with self._lock:
            entry = self._tasks.get((connector, task))
            if entry is not None:
                entry.due = None

    def forget(self, connector: str) -> None:
        with self._lock:
            for key in [k for k in self._tasks if k[0] == connector]:
                del self._tasks[key]

    def counts(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(automatic restarts done, consecutive attempts) per task, for metrics."""
        with self._lock:
            return {key: (e.restarts, e.attempts) for key, e in self._tasks.items()}
