"""Retries and error tolerance for the per-record stages, as Kafka Connect's
``RetryWithToleranceOperator`` does it for source tasks.

The stages are the transforms (one stage per transform or predicate) and the
key, value and header converters. Polling the task and producing to Kafka are
not stages: an error there fails the task whatever ``errors.tolerance`` says
(Connect's rule; a producer error must never silently lose a record).

For one stage of one record, :meth:`ErrorHandler.execute`:

1. runs the stage; a :class:`~connect_runtime.errors.RetriableException` is
   retried while ``errors.retry.timeout`` allows (0: never, -1: forever, else
   milliseconds since the first attempt), waiting 300 ms, then twice as long
   each time, at most ``errors.retry.delay.max.ms``;
2. on a final error: logs it when ``errors.log.enable`` (the record itself
   only with ``errors.log.include.messages``, since records may hold secrets);
3. with ``errors.tolerance=all`` raises :class:`RecordSkipped`: the caller
   drops the record, whose source offset still advances like any other's
   (inside the transaction under exactly-once); with ``none`` raises
   :class:`~connect_runtime.errors.ConnectError` "Tolerance exceeded in error
   handler" from the stage's error, which fails the task.

A :class:`~connect_runtime.errors.ServiceException` (a schema registry down or
refusing the credentials) is never tolerated, whatever ``errors.tolerance``
says: the record is not at fault, and skipping it would lose it. Connect skips
such records once ``errors.retry.timeout`` is spent; this is a deliberate
difference (docs/converters.md).

The counters are Connect's task error metrics (``total-record-errors``,
``total-record-failures``, ``total-records-skipped``, ``total-retries``,
``total-errors-logged``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from connect_runtime.errors import ConnectError, RetriableException, ServiceException

log = logging.getLogger(__name__)

T = TypeVar("T")

RETRY_DELAY_MIN_S = 0.3  # Connect's RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS


class RecordSkipped(ConnectError):
    """The record failed a stage and ``errors.tolerance=all`` drops it."""


@dataclass(frozen=True)
class _Failed:
    error: Exception


@dataclass
class ErrorCounts:
    """Connect's task error metrics, for this task since it started."""

    record_errors: int = 0  # records that met an error in some stage (retried or not)
    record_failures: int = 0  # failed attempts, retries included
    records_skipped: int = 0  # records dropped by errors.tolerance=all
    retries: int = 0
    errors_logged: int = 0


class ErrorHandler:
    """Runs record stages under the task's ``errors.*`` settings (see the module doc)."""

    def __init__(self, *, label: str, tolerate_all: bool = False, retry_timeout_ms: int = 0,
                 retry_delay_max_ms: int = 60000, log_enable: bool = False,
                 log_include_messages: bool = False,
                 should_stop: Callable[[], bool] = lambda: False,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.tolerate_all = tolerate_all
        self.retry_timeout_ms = retry_timeout_ms
        self.retry_delay_max_s = max(retry_delay_max_ms, 0) / 1000
        self.log_enable = log_enable
        self.log_include_messages = log_include_messages
        self.counts = ErrorCounts()
        self._should_stop = should_stop
        self._sleep = sleep
        self._clock = clock

    @classmethod
    def from_config(cls, values: Mapping[str, Any], label: str,
                    should_stop: Callable[[], bool] = lambda: False) -> ErrorHandler:
        """From parsed connector config values (``ConnectorConfig.values``)."""
        return cls(label=label,
                   tolerate_all=str(values.get("errors.tolerance", "none")) == "all",
                   retry_timeout_ms=int(values.get("errors.retry.timeout", 0)),
                   retry_delay_max_ms=int(values.get("errors.retry.delay.max.ms", 60000)),
                   log_enable=bool(values.get("errors.log.enable", False)),
                   log_include_messages=bool(values.get("errors.log.include.messages", False)),
                   should_stop=should_stop)

    @property
    def passive(self) -> bool:
        """True when every setting is Connect's default: a stage's error simply fails
        the task, so callers may run stages directly on their fast path."""
        return not (self.tolerate_all or self.retry_timeout_ms or self.log_enable)

    def count_failure(self) -> None:
        """A stage failed on the path that skips :meth:`execute` (every setting is
        the default): the task fails, and the metrics count it first."""
        self.counts.record_errors += 1
        self.counts.record_failures += 1

    def execute(self, stage: str, klass: str, record: Any, run: Callable[[], T]) -> T:
        """Steps 1-3 of the module doc for one stage (``stage`` is Connect's name, e.g.
        ``VALUE_CONVERTER``; ``klass`` the class or transform that runs it)."""
        try:
            return run()
        except Exception as first:
            self.counts.record_errors += 1
            self.counts.record_failures += 1
            error: Exception = first
            if isinstance(first, RetriableException) and self.retry_timeout_ms:
                retried = self._retry(run, first)
                if not isinstance(retried, _Failed):
                    return retried
                error = retried.error
            self._report(stage, klass, record, error)
            if self.tolerate_all and not isinstance(error, ServiceException):
                self.counts.records_skipped += 1
                raise RecordSkipped(f"{stage} failed for a record of task {self.label}") \
                    from error
            raise ConnectError(f"Tolerance exceeded in error handler: task {self.label}, stage "
                               f"{stage} ({klass}): {error}") from error

    def _retry(self, run: Callable[[], T], error: Exception) -> T | _Failed:
        """Step 1's retries: the first successful result, else the last error."""
        deadline = (None if self.retry_timeout_ms < 0
                    else self._clock() + self.retry_timeout_ms / 1000)
        delay = RETRY_DELAY_MIN_S
        while not self._should_stop():
            now = self._clock()
            if deadline is not None and now >= deadline:
                break
            wait = min(delay, self.retry_delay_max_s)
            if deadline is not None:
                wait = min(wait, deadline - now)
            self._sleep(wait)
            delay *= 2
            self.counts.retries += 1
            try:
                return run()
            except RetriableException as e:
                self.counts.record_failures += 1
                error = e
            except Exception as e:
                self.counts.record_failures += 1
                return _Failed(e)
        return _Failed(error)

    def _report(self, stage: str, klass: str, record: Any, error: Exception) -> None:
        if not self.log_enable:
            return
        self.counts.errors_logged += 1
        where = f", where source record is = {record!r}" if self.log_include_messages else ""
        log.error("Error encountered in task %s. Executing stage '%s' with class '%s'%s.",
                  self.label, stage, klass, where, exc_info=error)
