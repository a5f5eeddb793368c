"""Where a process tree's CPU goes, thread by thread (issue 49: the idle task's cost).

    .venv/bin/python -m bench.threads --pid PID [--window 20] [--tasks N]

``bench.density --threads`` takes the same profile over its window.

The kernel counts each thread's time on a CPU in nanoseconds
(``/proc/PID/task/TID/schedstat``) and its user and system time in clock ticks
(``.../stat``); two readings a window apart give every thread's CPU over the
window. The total comes from the nanoseconds: 40 threads that each ran 5 ms in
a window would count 0 ticks each. The ticks only split it into user and system. Threads are
named by what started them:

* Python threads by their ``threading`` name, which the kernel does not know:
  ``py-spy dump`` lists each Python thread with its native id (``py-spy`` comes
  with the ``bench`` extra; without it, or where it may not ptrace, Python
  threads keep the process's name);
* the others by their kernel name: librdkafka's ``rdk:main``, ``rdk:broker1``,
  the JVM's ``C2 CompilerThre``, ``GC Thread#0``.

Names are folded into groups: digits become ``#`` (``rdk:broker#``), and the task
a runtime thread serves becomes ``<task>`` (``task-<task>``), so 40 tasks'
threads add up to one row each. A thread that started or ended inside the window
counts with what it used inside it (its first reading is taken as zero).
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from bench.common import process_tree
from bench.profile import py_spy

# Runtime threads named after the task they serve (task/slot.py, task/slot_control.py).
_PER_TASK = re.compile(r"^(task|slot-stop)-.+$")
_PY_SPY_THREAD = re.compile(r'^Thread (\d+) \((?:idle|active|gil)[^)]*\): "(.*)"$')


@dataclass(frozen=True)
class ThreadTime:
    group: str
    process: str  # the process's kernel name (python3, java, pyspark.daemon)
    cpu_ns: int
    user_ticks: int
    system_ticks: int


def group_of(name: str) -> str:
    """The row a thread named ``name`` adds to."""
    match = _PER_TASK.match(name)
    if match:
        return f"{match.group(1)}-<task>"
    return re.sub(r"\d+", "#", name)


def _python_names(pid: int) -> dict[int, str]:
    """Native thread id -> ``threading`` name, for a Python process (empty otherwise)."""
    tool = py_spy()
    if tool is None:
        return {}
    try:
        done = subprocess.run([tool, "dump", "--nonblocking", "--pid", str(pid)],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for line in done.stdout.splitlines():
        match = _PY_SPY_THREAD.match(line.strip())
        if match:
            names[int(match.group(1))] = match.group(2)
    return names


def _comm(path: Path) -> str:
    try:
        return (path / "comm").read_text().strip()
    except OSError:
        return "?"


def snapshot(root: int, named: dict[tuple[int, int], str] | None = None
             ) -> dict[tuple[int, int], ThreadTime]:
    """(pid, tid) -> its name group and CPU ticks so far, for every thread of the
    tree. ``named`` caches Python thread names between snapshots (filled here)."""
    named = {} if named is None else named
    out: dict[tuple[int, int], ThreadTime] = {}
    for pid in process_tree(root):
        process = _comm(Path(f"/proc/{pid}"))
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue
        if "python" in process or "pyspark" in process:
            missing = [t for t in tids if (pid, t) not in named]
            if missing:
                for tid, name in _python_names(pid).items():
                    named[(pid, tid)] = name
        for tid in tids:
            path = Path(f"/proc/{pid}/task/{tid}")
            try:
                fields = (path / "stat").read_text().rsplit(")", 1)[1].split()
                cpu_ns = int((path / "schedstat").read_text().split()[0])
            except (OSError, IndexError, ValueError):
                continue
            name = named.get((pid, tid)) or _comm(path)
            # utime and stime are fields 14 and 15 (1-based) of the stat line.
            out[(pid, tid)] = ThreadTime(group_of(name), process, cpu_ns, int(fields[11]),
                                         int(fields[12]))
    return out


@dataclass(frozen=True)
class Row:
    process: str
    group: str
    threads: int
    ms_per_s: float
    system_share: float  # of ms_per_s

    def to_dict(self) -> dict[str, object]:
        return {"process": self.process, "group": self.group, "threads": self.threads,
                "ms_per_s": round(self.ms_per_s, 2), "system_share": round(self.system_share, 2)}


def rows(before: dict[tuple[int, int], ThreadTime], after: dict[tuple[int, int], ThreadTime],
         seconds: float) -> list[Row]:
    """CPU ms per second of the window by (process, group), busiest first."""
    cpu_ns: dict[tuple[str, str], int] = collections.Counter()
    user: dict[tuple[str, str], int] = collections.Counter()
    system: dict[tuple[str, str], int] = collections.Counter()
    threads: dict[tuple[str, str], int] = collections.Counter()
    for key, now in after.items():
        then = before.get(key)
        row = (now.process, now.group)
        threads[row] += 1
        cpu_ns[row] += now.cpu_ns - (then.cpu_ns if then else 0)
        user[row] += now.user_ticks - (then.user_ticks if then else 0)
        system[row] += now.system_ticks - (then.system_ticks if then else 0)
    out = []
    for row, count in threads.items():
        total = cpu_ns[row] / 1e6 / seconds
        share = system[row] / (user[row] + system[row]) if user[row] + system[row] else 0.0
        out.append(Row(row[0], row[1], count, total, share))
    return sorted(out, key=lambda r: (-r.ms_per_s, r.process, r.group))


def markdown(table: list[Row], tasks: int | None, top: int = 25) -> str:
    per_task = tasks is not None and tasks > 0
    lines = ["| process | threads | count | CPU ms/s | system | "
             + ("ms/s per task |" if per_task else ""),
             "|---|---|---|---|---|" + ("---|" if per_task else "")]
    for r in table[:top]:
        cells = [r.process, f"`{r.group}`", str(r.threads), f"{r.ms_per_s:.1f}",
                 f"{r.system_share:.0%}"]
        if per_task:
            assert tasks is not None
            cells.append(f"{r.ms_per_s / tasks:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    total = sum(r.ms_per_s for r in table)
    lines.append(f"\nAll threads: {total:.1f} ms/s"
                 + (f", {total / tasks:.2f} ms/s per task" if per_task and tasks else ""))
    return "\n".join(lines)


def profile(root: int, window_s: float) -> list[Row]:
    """The tree's per-thread CPU over ``window_s`` seconds from now."""
    named: dict[tuple[int, int], str] = {}
    before, t0 = snapshot(root, named), time.monotonic()
    time.sleep(window_s)
    after, t1 = snapshot(root, named), time.monotonic()
    return rows(before, after, t1 - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pid", type=int, required=True, help="the tree's root process")
    parser.add_argument("--window", type=float, default=20.0, help="seconds")
    parser.add_argument("--tasks", type=int, default=None,
                        help="tasks the tree hosts, for a per-task column")
    args = parser.parse_args(argv)
    print(markdown(profile(args.pid, args.window), args.tasks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
