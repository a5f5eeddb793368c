"""A task process dies with its worker, where it can see the worker die.

With a local master (``local[N]``) a task's Python process descends from the
worker process: worker -> Spark's JVM (started through py4j) -> PySpark's daemon
-> the Python worker running the slot. The daemon puts itself and its children
in a process group of their own, so a SIGKILL of the worker's process group
misses them; they learn of the worker's death only down that chain (the JVM sees
its stdin close and exits, running its shutdown hooks; the daemon sees its own
stdin close and sends its group SIGHUP). Until then (30-130 ms measured on an
idle machine, up to a second seen under load, and as long as the JVM's shutdown
hooks take) a task keeps polling and producing into a transaction that nobody
will commit. Its next instance's fencing aborts it (KIP-618), so no record of
that window is ever read committed (an at-least-once task's are visible, and
sent again by its next instance), but the work is wasted and the task's source
(a database cursor, a file lock) stays in use.

:func:`die_with_worker` closes the gap. When the slot's process descends from the
worker named in its spec (:class:`~connect_runtime.protocol.task_spec.WorkerProcess`:
pid and start time, so a reused pid is not mistaken for it), a daemon thread
waits on a pidfd of the worker (``os.pidfd_open``, Linux 5.3+) and SIGKILLs its
own process the moment the worker is gone: no cleanup, nothing more produced,
exactly as if it had been killed with the worker.

Where it does not apply, and why that is safe:

* executors of a cluster master (standalone, Kubernetes, YARN) run elsewhere
  and do not descend from the worker; their cluster manager stops them when the
  application ends, and fencing keeps their records out until then;
* kernels without pidfds (before 5.3, or not Linux): the chain above is all
  there is, and fencing again.

``PR_SET_PDEATHSIG`` would not do: it follows the direct parent (PySpark's
daemon, which outlives the worker), not the worker.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
from collections.abc import Iterable, Iterator

from connect_runtime.protocol.task_spec import WorkerProcess
from connect_runtime.tempdirs import proc_stat

log = logging.getLogger(__name__)

# Ancestors looked at before giving up: worker -> JVM -> daemon -> slot is 3 deep,
# with a launcher shell or two in between at most.
MAX_DEPTH = 16

_lock = threading.Lock()
"""Guards ``_watched``: slots of one Python worker may start on several threads."""
_watched: set[WorkerProcess] = set()
"""Workers this process already watches (a reused Python worker hosts slot after slot)."""


def descends_from(worker: WorkerProcess, ancestors: Iterable[tuple[int, int | None]]) -> bool:
    """Whether ``worker`` is one of ``ancestors``, ``(pid, start_ticks)`` pairs: the
    same pid *and* the same start time, so a process that got the worker's pid
    after it died is not taken for it."""
    return any(pid == worker.pid and ticks == worker.start_ticks for pid, ticks in ancestors)


def die_with_worker(worker: WorkerProcess | None) -> bool:
    """If this process descends from ``worker``, SIGKILL it as soon as ``worker``
    ends (a daemon thread waits for that). Returns whether this process watches
    ``worker`` (now or since an earlier call); False when it does not descend
    from it, ``worker`` is None, or the platform has no pidfds. Never raises."""
    if worker is None or not hasattr(os, "pidfd_open"):
        return False
    with _lock:
        if worker in _watched:
            return True
        if not descends_from(worker, _ancestors(os.getppid())):
            return False
        try:
            fd = os.pidfd_open(worker.pid)
        except ProcessLookupError:
            _die()  # it was our ancestor a moment ago: it has just died
            return True
        except OSError as e:  # no pidfds in this kernel (ENOSYS), or not allowed
            log.info("cannot watch worker process %d, so this task process will not die "
                     "with it (fencing still stops its writes): %s", worker.pid, e)
            return False
        if proc_stat(worker.pid)[1] != worker.start_ticks:
            _die()  # the pid was reused between the check and the open: the worker died
            return True
        threading.Thread(target=_wait_then_die, args=(fd,), daemon=True,
                         name=f"worker-watch-{worker.pid}").start()
        _watched.add(worker)
        return True


def _wait_then_die(pidfd: int) -> None:
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)  # readable once the process has ended
    poller.poll()  # no timeout: blocks until then (interrupted calls are retried)
    _die()


def _die() -> None:
    # SIGKILL, not an exit: nothing may run after the worker is gone (no flush of
    # the producer, no task.stop() that could write), as if killed along with it.
    os.kill(os.getpid(), signal.SIGKILL)


def _ancestors(pid: int) -> Iterator[tuple[int, int | None]]:
    """``(pid, start_ticks)`` of ``pid`` and its ancestors, nearest first."""
    for _ in range(MAX_DEPTH):
        if pid <= 1:
            return
        parent, ticks = proc_stat(pid)
        yield pid, ticks
        if parent is None:
            return
        pid = parent
