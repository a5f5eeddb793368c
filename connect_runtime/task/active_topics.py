"""Which topics a task instance produced to, told to its worker (KIP-558 active topics).

Kafka Connect records a topic as active for a connector the first time one of
its tasks sends a record there successfully, and again after a user reset the
next time a task sends there. Here the leader writes those records (it has the
status topic's view); a task only says which topics its durable records went to.

Contract of :class:`ActiveTopicReporter`:

* The task loop calls :meth:`~ActiveTopicReporter.durable` on its own thread
  with the set of topics whose records are durable (exactly-once: committed;
  at-least-once: acknowledged) since the set was last cleared; the reporter
  clears it when it reports, and otherwise lets it accumulate.
* A topic this instance has never reported is reported at once.
* Otherwise topics are reported at most every ``interval_s``: a topic whose
  record a user reset reappears within that long of the task producing to it
  again, while a task producing to known topics costs one set comparison per
  call and one small message per interval.
* ``report`` must not block (the slot hands the topics to its channel thread).
"""

from __future__ import annotations

import time
from collections.abc import Callable

# How often a task re-reports topics it keeps producing to. Short enough that a
# reset topic reappears soon after the task uses it again; as rare as a keepalive.
REPORT_INTERVAL_S = 3.0


class ActiveTopicReporter:
    """Decides when a task's durable topics go to the worker (see the module doc).

    Not thread-safe: called from the task loop's thread only.
    """

    def __init__(self, report: Callable[[frozenset[str]], None], *,
                 interval_s: float = REPORT_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._report = report
        self._interval_s = interval_s
        self._clock = clock
        self._reported: set[str] = set()
        self._next_report = 0.0

    def durable(self, topics: set[str]) -> None:
        """``topics`` now have durable records; report them if due, then clear them."""
        if not topics:
            return
        now = self._clock()
        if now < self._next_report and topics <= self._reported:
            return
        self._report(frozenset(topics))
        self._reported |= topics
        topics.clear()
        self._next_report = now + self._interval_s
