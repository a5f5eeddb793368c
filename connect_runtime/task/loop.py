"""What both source task loops share: their inputs, their signals and their skeleton.

A task loop drives one started :class:`~connect_runtime.api.task.SourceTask`
inside a Spark task until it is stopped, fails or (exactly-once only) is fenced.
The two loops differ only in how records and offsets become durable:

* :class:`~connect_runtime.task.exactly_once_loop.ExactlyOnceTaskLoop`
  (``TaskMode.EXACTLY_ONCE``): transactions, cut by a boundary policy (KIP-618).
* :class:`~connect_runtime.task.at_least_once_loop.AtLeastOnceTaskLoop`
  (``TaskMode.AT_LEAST_ONCE``): records as polled, offsets flushed at an interval.

:func:`connect_runtime.task.slot.loop_for` maps a
:class:`~connect_runtime.protocol.task_spec.TaskMode` to its class (there, not
here: both loop modules import this one). :class:`TaskLoop` owns the skeleton,
the same for both::

    until signals.stop:
        if signals.paused:  _before_pause(); on_paused(True);
                            until resumed or stopped: _while_paused() every
                            PAUSED_WAIT_S or on wakeup;
                            on_paused(False) unless stopping
        polled = task.poll()   records and RecordBatch columns, in any mix
        _send_polled(polled)   if it has items; returns the records it held
        _after_poll(size)      always, so time-based work runs while the task idles
        if self.rewound:       the hooks gave up the open transaction: run()
                               returns REWOUND (exactly-once only; the slot then
                               starts a new instance of the task)
    _final_commit()         graceful stop only; then run() returns STOPPED
    on an exception:        _on_failure(error) returns the outcome to return
                            (FENCED), or None to let the error propagate

The subclass owns everything inside those hooks (the module docs of the two
loops number their steps). Each ``_send_polled`` hands the polled list to
:func:`~connect_runtime.task.batches.dispatch` and sends what it hands back
through the loop's :class:`RecordSender`, which owns every produce (records
and offsets); the per-record work happens there, on attributes copied from
:class:`LoopDeps` once, here.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar, Self

from connect_runtime.api.task import SourceTask
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.task.active_topics import ActiveTopicReporter
from connect_runtime.task.record_sender import RecordSender
from connect_runtime.task.stall_watch import POLL, CallWatch

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from connect_runtime.converters import Converter, HeaderConverter
    from connect_runtime.storage.offsets.mirror import GlobalOffsetMirror
    from connect_runtime.task.error_handler import ErrorHandler
    from connect_runtime.task.metrics import TaskMetrics
    from connect_runtime.task.record_sender import TransformationChain
    from connect_runtime.task.startup import StartedTask

# How long one wait for a resume blocks before the flags are checked again (and
# the at-least-once loop serves acks); a set() on ``wakeup`` ends it at once.
PAUSED_WAIT_S = 0.5


class Outcome(Enum):
    """How a loop's ``run`` ended when it did not raise (an error raises, after
    the open transaction, if any, was aborted)."""

    STOPPED = "STOPPED"  # stop requested; the final commit or offset flush is done
    FENCED = "FENCED"  # a newer producer owns the transactional.id (exactly-once only)
    # The open transaction was aborted and none of its offsets committed
    # (TransactionContext.rewind_transaction, or an idle one near its timeout):
    # the task instance must be replaced by one that reads them again.
    REWOUND = "REWOUND"


class LoopSignals:
    """Flags another thread (the slot's control thread) sets; the loop reads them.

    Reading a bool attribute is the cheapest cross-thread check Python offers;
    the loop looks at ``stop`` once per poll.
    """

    def __init__(self) -> None:
        self.stop = False
        self.paused = False
        self.wakeup = threading.Event()

    def request_stop(self) -> None:
        self.stop = True
        self.wakeup.set()

    def set_paused(self, paused: bool) -> None:
        self.paused = paused
        self.wakeup.set()


@dataclass(frozen=True, kw_only=True, slots=True)
class LoopDeps:
    """What every task loop is built from, whatever its mode.

    ``forbidden_topics`` (the worker's internal topics), the converters,
    ``create_topic`` (KIP-158), the ``transforms`` chain and the ``errors``
    handler go to the loop's :class:`RecordSender`.
    ``offset_mirror`` copies offsets to the global offsets topic when the
    connector has its own; ``on_paused(True/False)`` reports entering and
    leaving a pause. ``on_topics`` (None: topic tracking is off) hears the
    topics the task's durable records went to (KIP-558, see
    :mod:`~connect_runtime.task.active_topics`); it must not block.
    ``metrics`` (None: not measured) is the slot's
    :class:`~connect_runtime.task.metrics.TaskMetrics`, updated per poll and commit.
    ``call_watch`` (None: a watch nobody reads) is where the loop says which call it is
    in, ``poll()`` or the commit, for the slot's stall watchdog
    (:mod:`~connect_runtime.task.stall_watch`).
    """

    label: str
    connector: str
    task: SourceTask
    producer: Producer
    offsets_topic: str
    forbidden_topics: frozenset[str]
    key_converter: Converter
    value_converter: Converter
    signals: LoopSignals
    offset_mirror: GlobalOffsetMirror | None = None
    on_paused: Callable[[bool], None] | None = None
    create_topic: Callable[[str], None] | None = None
    on_topics: Callable[[frozenset[str]], None] | None = None
    header_converter: HeaderConverter | None = None
    transforms: TransformationChain | None = None
    errors: ErrorHandler | None = None
    metrics: TaskMetrics | None = None
    call_watch: CallWatch | None = None


class TaskLoop(ABC):
    """The skeleton of the module doc; subclasses fill in the hooks.

    The constructor copies what the hooks use from :class:`LoopDeps` to
    attributes of the loop, so no hook reaches through ``deps``. ``on_paused``
    stays assignable after construction. A hook that gives up the open
    transaction sets ``rewound``; ``run`` then returns REWOUND.
    """

    mode: ClassVar[TaskMode]

    def __init__(self, deps: LoopDeps) -> None:
        self.label = deps.label
        self.connector = deps.connector
        self.task = deps.task
        self.producer = deps.producer
        self.offsets_topic = deps.offsets_topic
        self.signals = deps.signals
        self.offset_mirror = deps.offset_mirror
        self.on_paused = deps.on_paused
        self.metrics = deps.metrics
        self.call_watch = deps.call_watch if deps.call_watch is not None else CallWatch()
        self._sender = RecordSender(
            label=deps.label, producer=deps.producer, forbidden_topics=deps.forbidden_topics,
            key_converter=deps.key_converter, value_converter=deps.value_converter,
            create_topic=deps.create_topic, header_converter=deps.header_converter,
            transforms=deps.transforms, errors=deps.errors)
        # Overriding commit_record is what makes per-record metadata worth its cost.
        self._wants_metadata = type(deps.task).commit_record is not SourceTask.commit_record
        # Subclasses call durable(<topics of durable records>) where records become durable.
        self._active_topics = (None if deps.on_topics is None
                               else ActiveTopicReporter(deps.on_topics))
        self.rewound = False

    @classmethod
    @abstractmethod
    def for_started(cls, deps: LoopDeps, started: StartedTask) -> Self:
        """The loop for a task as :func:`~connect_runtime.task.startup.start_task`
        started it, with the settings of this loop's mode taken from ``started``."""

    # ------------------------------------------------------------------ loop

    def run(self) -> Outcome:
        """Poll and send until a stop is requested; see the subclass for what
        commits and when. Returns STOPPED, REWOUND (no final commit: the hooks
        already aborted what was open), or what ``_on_failure`` decides."""
        signals, metrics, clock = self.signals, self.metrics, time.perf_counter
        calls = self.call_watch
        try:
            while not signals.stop:
                if signals.paused:
                    self._pause()
                    continue
                started = clock()
                calls.current = (POLL, started)  # the stall watchdog's view (stall_watch)
                try:
                    polled = self.task.poll()
                finally:
                    calls.current = None
                size = 0
                if polled:
                    took = clock() - started
                    size = self._send_polled(polled)
                    if metrics is not None:  # Connect times batches, not empty polls
                        metrics.polled_batch(size, took)
                self._after_poll(size)
                if self.rewound:
                    return Outcome.REWOUND
            self._final_commit()
            return Outcome.STOPPED
        except BaseException as e:
            outcome = self._on_failure(e)
            if outcome is None:
                raise
            return outcome

    def _pause(self) -> None:
        """Make durable what the mode allows, then idle until resumed or stopped."""
        self._before_pause()
        signals = self.signals
        if self.on_paused:
            self.on_paused(True)
        while signals.paused and not signals.stop:
            signals.wakeup.wait(PAUSED_WAIT_S)
            signals.wakeup.clear()
            self._while_paused()
        if self.on_paused and not signals.stop:
            self.on_paused(False)

    def _tombstones_mirrored(self, written: list[tuple[bytes, bytes | None]],
                             deadline: float) -> bool:
        """False only if the global mirror exists and missed ``deadline`` writing the
        tombstones of ``written`` (see
        :meth:`~connect_runtime.storage.offsets.mirror.GlobalOffsetMirror.write_tombstones_first`);
        each loop decides what that means."""
        mirror = self.offset_mirror
        return mirror is None or mirror.write_tombstones_first(written, deadline)

    # ----------------------------------------------------------------- hooks

    @abstractmethod
    def _send_polled(self, polled: Sequence[Any]) -> int:
        """Send one non-empty polled list (the per-record hot path); returns how many
        records it held, a :class:`~connect_runtime.api.record.RecordBatch`
        counting its rows (:func:`~connect_runtime.task.batches.dispatch`)."""

    @abstractmethod
    def _after_poll(self, size: int) -> None:
        """After every poll, ``size`` records sent (0 when the task had none)."""

    @abstractmethod
    def _before_pause(self) -> None:
        """On entering a pause, before ``on_paused(True)``."""

    def _while_paused(self) -> None:  # noqa: B027 - optional hook, nothing by default
        """Once per wait while paused."""

    @abstractmethod
    def _final_commit(self) -> None:
        """On a graceful stop."""

    @abstractmethod
    def _on_failure(self, error: BaseException) -> Outcome | None:
        """``error`` ends the loop: clean up; return the outcome, or None to re-raise."""
