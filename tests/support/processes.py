"""Processes as ``/proc`` shows them: liveness and trees.

Tests kill, stop and count processes (workers, Spark daemons and their Python
workers, brokers); these are the one reading of ``/proc`` they share.
"""

from __future__ import annotations

import os


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name in parentheses may hold spaces and parentheses itself.
    fields = raw[raw.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1])


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a killed child nobody has
    reaped yet is dead for every purpose of a test)."""
    stat = _stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def process_tree(root: int) -> list[int]:
    """``root`` and its live descendants, parents first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        stat = _stat(int(entry))
        if stat is not None and stat[0] not in ("Z", "X"):
            children.setdefault(stat[1], []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop(0)
        out.append(pid)
        todo.extend(sorted(children.get(pid, [])))
    return out


def descendants(root: int) -> list[int]:
    """The live descendants of ``root``, parents first, without ``root``."""
    return process_tree(root)[1:]
