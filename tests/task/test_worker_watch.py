"""A task process dies with the worker process it descends from (task/worker_watch.py).

The real chain (worker -> Spark's JVM -> PySpark's daemon -> the slot) is tested
end to end in tests/e2e/test_worker_process.py; here plain Python processes
stand in for it, shaped the same way: the "daemon" moves to a process group of
its own and ignores SIGCHLD, as PySpark's does, so a kill of the worker's group
misses the task.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.kafka import wait_for
from support.processes import alive

from connect_runtime.protocol.task_spec import WorkerProcess
from connect_runtime.task.worker_watch import descends_from

# The stand-ins, as `python -c` programs, each handed the next one's text. The
# worker starts the daemon in a process group of its own; the daemon starts the
# task; the task watches the worker named on its command line (pid, start ticks
# plus an offset: not 0 makes it a reused pid) and prints its pid, its parent's
# and whether it watches, then waits to be killed.
WORKER_PROGRAM = """
import os, subprocess, sys, time
from connect_runtime.tempdirs import start_ticks
ticks = start_ticks(os.getpid()) + int(sys.argv[1])
subprocess.Popen([sys.executable, "-c", sys.argv[2], sys.argv[3], str(os.getpid()), str(ticks)],
                 process_group=0)
time.sleep(600)
"""
DAEMON_PROGRAM = """
import signal, subprocess, sys, time
signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # reaps its children, as PySpark's daemon
subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]])
time.sleep(600)
"""
TASK_PROGRAM = """
import os, sys, time
from connect_runtime.protocol.task_spec import WorkerProcess
from connect_runtime.task.worker_watch import die_with_worker
watched = die_with_worker(WorkerProcess(int(sys.argv[1]), int(sys.argv[2])))
again = die_with_worker(WorkerProcess(int(sys.argv[1]), int(sys.argv[2])))
print(os.getpid(), os.getppid(), watched, again, flush=True)
time.sleep(600)
"""


def test_descends_from_needs_the_pid_and_the_start_time() -> None:
    worker = WorkerProcess(pid=40, start_ticks=7000)
    assert descends_from(worker, [(52, 9000), (41, 7100), (40, 7000), (1, 2)])
    assert not descends_from(worker, [(52, 9000), (40, 8000)])  # the pid, reused
    assert not descends_from(worker, [(52, 9000), (41, 7000)])
    assert not descends_from(worker, [(40, None)])  # gone: its start time unreadable
    assert not descends_from(worker, [])


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


Chain = tuple[subprocess.Popen[bytes], int, int, bool, bool]


@pytest.fixture
def chain(tmp_path: Path) -> Iterator[Callable[[int], Chain]]:
    """Starts worker -> daemon -> task; yields a function (ticks offset) -> (worker
    Popen, task pid, daemon pid, watched, watched again); kills what is left."""
    started: list[int] = []

    def start(ticks_offset: int) -> Chain:
        out = tmp_path / f"task-{len(started)}.out"
        with out.open("wb") as sink:
            worker = subprocess.Popen(
                [sys.executable, "-c", WORKER_PROGRAM, str(ticks_offset), DAEMON_PROGRAM,
                 TASK_PROGRAM], stdout=sink, start_new_session=True)
        started.append(worker.pid)
        line = wait_for(lambda: out.read_text().strip() or None, 30, "the task to start")
        pid, daemon_pid, watched, again = line.split()
        started.extend((int(pid), int(daemon_pid)))
        return worker, int(pid), int(daemon_pid), watched == "True", again == "True"

    yield start
    for pid in started:
        kill(pid)


def test_a_task_dies_with_the_worker_it_descends_from(
        chain: Callable[[int], Chain]) -> None:
    worker, task, daemon, watched, again = chain(0)
    assert watched and again  # the second call finds the watch already running
    os.killpg(worker.pid, signal.SIGKILL)  # the worker's group: not the daemon's
    worker.wait(10)
    wait_for(lambda: not alive(task), 10, "the task process to die with its worker")
    assert alive(daemon)  # only the task killed itself; PySpark ends its daemon


def test_a_process_with_another_start_time_is_not_the_worker(
        chain: Callable[[int], Chain]) -> None:
    worker, task, _, watched, _ = chain(1)
    assert not watched
    os.killpg(worker.pid, signal.SIGKILL)
    worker.wait(10)
    time.sleep(1.0)  # what a watch would have needed, many times over
    assert alive(task)
