"""The executor side of connector tasks: a long-running Spark task ("slot").

A slot hosts one task, or several of one connector (``tasks.per.process``), each
on a thread of its own (:func:`host_tasks`). For each task it hosts, a slot runs
task instances one after another until the driver says stop:

* It holds a channel to the worker (driver), ``protocol.slot_channel``: it
  reports its state when it changes, and the worker pushes what to do: run,
  pause or stop, and a restart counter that bumps on REST restarts. Every
  channel of the process runs on one thread, which alone owns their state
  (:mod:`~connect_runtime.task.slot_control`).
* A task that fails reports FAILED with its traceback and waits for a restart;
  the slot does not end, so Spark has nothing to re-run.
* Spark re-running a slot (attempt > 0) means the previous attempt's process
  died (e.g. SIGKILL of the Python worker or of the executor). The retry never
  silently resumes work: it reports FAILED and waits for a REST restart, as
  Connect would, unless the user already restarted the task after the worker
  declared the old process lost (``SlotAnswer.restart_pending``).
* Startup abandoned (a newer generation exists) or a fenced producer ends the
  slot quietly: the newer generation owns the work.
* The task loop follows ``exactly.once.source.support``: transactional when
  ``enabled``, at-least-once (Connect's regular source task) otherwise.
* A slot that runs as a descendant of its worker process (a local master) dies
  the moment the worker does (``worker_watch``), whatever the process
  group of the Spark JVM and PySpark's daemon.
* A loop that gave up its transaction (Outcome.REWOUND: the task called
  ``TransactionContext.rewind_transaction()``, or its transaction idled near
  ``transaction.timeout.ms``) has the task instance replaced in place
  (:func:`run_task`): stopped, and a new one started that reads the last
  committed offsets. The status stays RUNNING; the producer stays.
* A ``poll()`` or commit that has not returned for ``task.stall.threshold.ms``
  is reported with the loop thread's stack, and cleared when it returns
  (:mod:`~connect_runtime.task.stall_watch`; one watchdog per task, all
  checked by one thread per process).

Logging: the Spark Python worker running a slot logs to its stderr in the
worker's format (``TaskSpec.log_format``), every line in the task's context
(``[orders|task-0]``, :mod:`connect_runtime.logs`), at the levels the worker's
``/admin/loggers`` set (applied from the slot's answers). With a local master
that stderr is the worker's; on a cluster, the executor's log.

Errors cross the process boundary as formatted text (the traceback string), so
an exception that does not pickle still reaches the status topic intact. The
text is scrubbed first: what config providers supplied and the connector's
PASSWORD values are ``[hidden]`` (``connect_runtime.security.redaction``).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, assert_never

from connect_runtime.errors import StartupAbandoned
from connect_runtime.logs import (
    LogContext,
    configure_logging,
    log_context,
    process_log_context,
)
from connect_runtime.protocol.slot_channel import Command
from connect_runtime.protocol.states import State
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.security.redaction import Redactor
from connect_runtime.storage.offsets.mirror import GlobalOffsetMirror
from connect_runtime.task.at_least_once_loop import AtLeastOnceTaskLoop
from connect_runtime.task.exactly_once_loop import ExactlyOnceTaskLoop
from connect_runtime.task.loop import LoopDeps, LoopSignals, Outcome, TaskLoop
from connect_runtime.task.metrics import TaskMetrics
from connect_runtime.task.slot_control import SlotControl
from connect_runtime.task.stall_watch import CallWatch, StallWatchdog
from connect_runtime.task.startup import start_task
from connect_runtime.task.worker_watch import die_with_worker

if TYPE_CHECKING:
    from connect_runtime.api.task import SourceTask
    from connect_runtime.protocol.task_spec import TaskSpec
    from connect_runtime.task.startup import StartedTask

log = logging.getLogger(__name__)


def _trace(exc: BaseException, spec: TaskSpec, redactor: Redactor) -> str:
    text = redactor.format_exception(exc)
    return f"Task {spec.task_label} (connector {spec.connector}) failed:\n{text}"


def _run_instance(spec: TaskSpec, control: SlotControl, signals: LoopSignals,
                  redactor: Redactor, calls: CallWatch) -> Outcome | None:
    """One task instance (``control.begin_instance(signals)`` called): startup,
    loop, cleanup. None means startup was abandoned. ``redactor`` learns the
    instance's secrets at startup (step 0); the loop says in ``calls`` which call
    it is in (the slot's stall watchdog reads it)."""
    started = None
    mirror = None
    stops_its_tasks = False  # run_task stops the instances once it has them
    try:
        # Sign the fence request with the current key, not the one of submission time.
        current = dataclasses.replace(spec, session_key=control.session_key)
        metrics = control.metrics
        try:
            started = start_task(current, lambda: signals.stop, redactor)
        except StartupAbandoned:
            raise
        except BaseException:
            if metrics is not None:
                metrics.startup(failed=True)
            raise
        if metrics is not None:
            metrics.startup(failed=False)
            metrics.attach_errors(started.errors.counts if started.errors is not None else None)
        control.attach(signals, started.task)
        if signals.stop:
            return Outcome.STOPPED
        if started.connector_offsets_topic:
            mirror = GlobalOffsetMirror(spec.bootstrap_servers, spec.global_offsets_topic,
                                        spec.producer_overrides)
        control.report(State.PAUSED if signals.paused else State.RUNNING)
        deps = LoopDeps(
            label=spec.task_label, connector=spec.connector, task=started.task,
            producer=started.producer, offsets_topic=started.offsets_topic,
            forbidden_topics=frozenset(
                t for t in (spec.config_topic, spec.global_offsets_topic,
                            started.connector_offsets_topic, spec.status_topic) if t),
            key_converter=started.key_converter, value_converter=started.value_converter,
            signals=signals, offset_mirror=mirror, create_topic=started.create_topic,
            header_converter=started.header_converter, transforms=started.transforms,
            errors=started.errors,
            on_paused=lambda p: control.report(State.PAUSED if p else State.RUNNING),
            on_topics=control.report_topics if spec.topic_tracking else None,
            metrics=metrics, call_watch=calls,
        )
        stops_its_tasks = True
        return run_task(started, deps, lambda task: control.attach(signals, task),
                        lambda task: _quietly(spec, "stop()", task.stop, redactor))
    except StartupAbandoned as e:
        log.info("task %s: %s", spec.task_label, e)
        return None
    finally:
        control.attach(None, None)
        if started is not None:
            if not stops_its_tasks:
                _quietly(spec, "stop()", started.task.stop, redactor)
            if started.transforms is not None:
                _quietly(spec, "closing its transforms", started.transforms.close, redactor)
            _close_producer_quietly(spec, started.producer)
        if mirror is not None:
            mirror.close(10)


def run_task(started: StartedTask, deps: LoopDeps,
             attach: Callable[[SourceTask | None], None],
             stop: Callable[[SourceTask], None]) -> Outcome:
    """Run the loop of ``started`` (``deps`` built for it) until it ends for good.

    EXACTLY_ONCE (``exactly.once.source.support=enabled``): transactions;
    AT_LEAST_ONCE (``disabled`` or ``preparing``): Connect's WorkerSourceTask.
    Each time the loop ends REWOUND (it aborted the open transaction and
    committed none of its offsets), the instance is replaced: ``stop(task)``,
    then a new one is started (:meth:`~connect_runtime.task.startup.StartedTask.
    rewound`) that reads the last committed offsets, and its loop runs. If a stop
    was requested meanwhile no new instance starts: the outcome is STOPPED, and
    the next start reads the same offsets.

    ``attach(task)`` tells whoever delivers stop requests (``task.stop()``, from
    another thread) which instance is live; None while instances change. Every
    instance that started is stopped (``stop``) before this returns or raises;
    one whose ``start`` raised is not (Connect stops only started tasks).
    """
    live: SourceTask | None = started.task
    try:
        while True:
            attach(started.task)
            loop = loop_for(started.mode).for_started(
                dataclasses.replace(deps, task=started.task), started)
            outcome = loop.run()
            if outcome is not Outcome.REWOUND:
                return outcome
            if deps.signals.stop:
                return Outcome.STOPPED
            attach(None)
            live = None
            stop(started.task)
            log.info("task %s: its transaction was rewound; starting a new instance of the "
                     "task from the last committed offsets", deps.label)
            started = started.rewound()
            live = started.task
    finally:
        attach(None)
        if live is not None:
            stop(live)


def _close_producer_quietly(spec: TaskSpec, producer: Any) -> None:
    """Cleanup must never replace the error that ended the task in its trace."""
    try:
        producer.flush(5)
    except Exception:
        log.info("task %s: producer flush at close failed", spec.task_label, exc_info=True)


def _quietly(spec: TaskSpec, what: str, action: Callable[[], object],
             redactor: Redactor) -> None:
    """Cleanup must never replace the error that ended the task in its trace."""
    try:
        action()
    except Exception as e:
        redactor.log_exception(log, logging.WARNING, e, "task %s: %s raised during cleanup",
                               spec.task_label, what)


def _restarting(control: SlotControl) -> None:
    """Leave FAILED as soon as a restart is heard, not only once startup is done."""
    if control.command is not Command.STOP:
        control.report(State.RESTARTING)


def run_slot(spec: TaskSpec, attempt: int) -> str:
    """Host task ``spec`` until told to stop. Returns how the slot ended. Never raises."""
    # First: a process that outlived its worker would keep producing until fenced.
    die_with_worker(spec.worker_process)
    control = SlotControl(spec, attempt, TaskMetrics(spec.mode.value))
    # The loop runs on this thread: the watchdog takes this thread's stack.
    calls = CallWatch()
    watchdog = StallWatchdog(calls, threading.get_ident(), spec.stall_threshold_ms,
                             control.report_stall).start()
    try:
        control.wait_for_answer()
        if attempt > 0 and not control.restart_pending:
            # Read before reporting: the answer to the report may already carry a
            # restart, and waiting for a change from *that* value would wait forever.
            seen = control.restart_seq
            control.report(State.FAILED, (
                f"Task {spec.task_label}: the process running it died (Spark re-ran its slot as "
                f"attempt {attempt}); the open transaction, if any, was never committed. "
                "Restart the task to resume from its last committed offsets."))
            control.wait_for_change(seen)
            _restarting(control)
        while control.command is not Command.STOP:
            redactor = Redactor()
            watchdog.scrub = redactor.scrub  # stacks hide this instance's secrets too
            signals = LoopSignals()
            instance_seq = control.begin_instance(signals)
            try:
                outcome = _run_instance(spec, control, signals, redactor, calls)
            except Exception as e:
                control.report(State.FAILED, _trace(e, spec, redactor))
                control.wait_for_change(instance_seq)
                _restarting(control)
                continue
            if outcome is None:
                return "abandoned"
            if outcome is Outcome.FENCED:
                # Usually a newer generation fenced us, and the worker ignores reports
                # of stale generations. If not, the user must see why the task stopped.
                control.report(State.FAILED, (
                    f"Task {spec.task_label}: its producer (transactional.id "
                    f"{spec.transactional_id}) was fenced by another producer with the same "
                    "transactional.id; this instance stopped without committing."),
                    fenced=True)
                return "fenced"
            if control.command is Command.STOP:
                control.report(State.UNASSIGNED)
                return "stopped"
            control.report(State.RESTARTING)  # a restart was requested: run again
        control.report(State.UNASSIGNED)
        return "stopped"
    finally:
        watchdog.close()
        control.close()


def slot_partition(index: int, groups: Iterator[list[TaskSpec]]) -> Iterator[tuple[int, str]]:
    """Spark ``mapPartitionsWithIndex`` entry point: one group of specs per partition,
    the tasks this slot hosts (``tasks.per.process`` of them at most,
    :func:`~connect_runtime.cluster.spark_runner.slot_groups`).

    The process is a Spark Python worker, here for this slot alone: its logging is
    set up as the worker's (a no-op in a reused process). A slot of one task runs it
    on this thread, and every line the process logs meanwhile, whichever thread logs
    it, is in the task's context. A slot of several runs :func:`host_tasks`."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber() if ctx is not None else 0
    for specs in groups:
        if not specs:
            continue
        configure_logging(specs[0].log_format)
        if len(specs) == 1:
            spec = specs[0]
            with process_log_context(LogContext(spec.connector, spec.task)):
                outcome = run_slot(spec, attempt)
            yield spec.task, outcome
        else:
            yield from host_tasks(specs, attempt)


def host_tasks(specs: list[TaskSpec], attempt: int) -> list[tuple[int, str]]:
    """Run several tasks of one connector in this process, each :func:`run_slot` on a
    thread of its own, until every one has ended; their ``(task, outcome)``.

    Isolation, as far as one process gives it: each task has its own channel,
    producer (fencing is per ``transactional.id``, as ever), status, metrics, stall
    watchdog and restarts, and an exception in one task fails that task alone (its
    slot thread reports FAILED and waits for a restart while the others run). A
    task blocked in ``poll()`` blocks its own thread only. What they share: the
    GIL, so CPU-bound tasks slow each other, and the process, so a crash (SIGKILL,
    a segfault in native code, out of memory) ends every task in it; Spark then
    re-runs the slot and each of its tasks reports FAILED, as a lone task does.

    Lines a task's thread logs carry that task (``[orders|task-1]``); lines from
    threads the task's own code starts carry the process's tasks
    (``[orders|tasks-0,1,2]``)."""
    outcomes: dict[int, str] = {}
    lock = threading.Lock()  # guards outcomes

    def host(spec: TaskSpec) -> None:
        with log_context(LogContext(spec.connector, spec.task)):
            outcome = run_slot(spec, attempt)
        with lock:
            outcomes[spec.task] = outcome

    threads = [threading.Thread(target=host, args=(spec,), daemon=True,
                                name=f"task-{spec.task_label}") for spec in specs]
    shared = LogContext(specs[0].connector, shared=tuple(spec.task for spec in specs))
    with process_log_context(shared):
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    with lock:
        return [(spec.task, outcomes.get(spec.task, "lost")) for spec in specs]


def loop_for(mode: TaskMode) -> type[TaskLoop]:
    """The loop class that runs tasks of ``mode``. Here, not in ``task.loop``,
    which both loop modules import."""
    match mode:
        case TaskMode.EXACTLY_ONCE:
            return ExactlyOnceTaskLoop
        case TaskMode.AT_LEAST_ONCE:
            return AtLeastOnceTaskLoop
    assert_never(mode)
