"""Driver-side view of the task slots running on Spark executors.

Slots heartbeat to the worker (:mod:`connect_runtime.protocol.heartbeat`); the
registry records what they report, tells the herder about state changes (which
it writes to the status topic), and answers with what the slot should do.

A heartbeat from a slot of an older generation, or of a connector no longer
hosted here, is answered "stop" and its reports are ignored: only the current
generation speaks for a task's status.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connect_runtime.protocol.heartbeat import Command, SlotAnswer, SlotReport
from connect_runtime.protocol.states import State

StateListener = Callable[[str, int, State, "str | None"], None]


@dataclass
class SlotView:
    connector: str
    task: int
    generation: int
    restart_seq: int = 0
    state: State = State.UNASSIGNED
    trace: str | None = None
    pid: int | None = None
    host: str | None = None
    attempt: int = 0
    last_seen: float = 0.0
    # The slot's producer was fenced by another producer with its transactional.id.
    fenced: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "connector": self.connector, "task": self.task, "generation": self.generation,
            "state": self.state.value, "pid": self.pid, "host": self.host,
            "attempt": self.attempt, "restart_seq": self.restart_seq, "fenced": self.fenced,
            "last_seen_ms_ago": int((time.monotonic() - self.last_seen) * 1000)
            if self.last_seen else None,
        }


class SlotRegistry:
    """The slots of the connectors this worker hosts, keyed by (connector, task).

    Thread-safe: REST heartbeats, the herder's reconcile thread and status reads
    call it concurrently. ``on_state_change`` is called outside the lock.
    """

    def __init__(self, on_state_change: StateListener) -> None:
        self._on_state_change = on_state_change
        self._lock = threading.Lock()
        self._generation: dict[str, int] = {}
        self._command: dict[str, Command] = {}
        self._slots: dict[tuple[str, int], SlotView] = {}

    def open(self, connector: str, generation: int, task_count: int, paused: bool) -> None:
        """A new generation of ``connector`` is being submitted to Spark."""
        with self._lock:
            self._drop(connector)
            self._generation[connector] = generation
            self._command[connector] = Command.PAUSE if paused else Command.RUN
            for task in range(task_count):
                self._slots[(connector, task)] = SlotView(connector, task, generation)

    def set_paused(self, connector: str, paused: bool) -> None:
        with self._lock:
            if connector in self._command:
                self._command[connector] = Command.PAUSE if paused else Command.RUN

    def close(self, connector: str) -> None:
        """Ask every slot of ``connector`` to stop; later heartbeats are answered "stop"."""
        with self._lock:
            self._drop(connector)

    def _drop(self, connector: str) -> None:
        self._generation.pop(connector, None)
        self._command.pop(connector, None)
        for key in [k for k in self._slots if k[0] == connector]:
            del self._slots[key]

    def restart(self, connector: str, task: int) -> bool:
        """Bump the task's restart counter; False if no slot of it is hosted here."""
        with self._lock:
            slot = self._slots.get((connector, task))
            if slot is None:
                return False
            slot.restart_seq += 1
            # The herder has written RESTARTING; whatever the slot reports next is news,
            # even the same FAILED trace as before.
            slot.state, slot.trace = State.RESTARTING, None
            return True

    def slot(self, connector: str, task: int) -> SlotView | None:
        with self._lock:
            slot = self._slots.get((connector, task))
            return None if slot is None else SlotView(**slot.__dict__)

    def slots(self) -> list[SlotView]:
        with self._lock:
            return [SlotView(**s.__dict__) for s in self._slots.values()]

    def heartbeat(self, connector: str, task: int, report: SlotReport) -> SlotAnswer:
        """Record a slot's report and answer with its command (no session key:
        the route adds it)."""
        changed: tuple[State, str | None] | None = None
        with self._lock:
            slot = self._slots.get((connector, task))
            if slot is None or report.generation != slot.generation:
                return SlotAnswer.stop()
            slot.last_seen = time.monotonic()
            slot.pid, slot.host, slot.attempt = report.pid, report.host, report.attempt
            state, trace = report.state, report.trace
            slot.fenced = report.fenced
            seen = report.restart_seq
            # A report sent before the slot heard of a restart describes the instance
            # being restarted (typically its FAILED state): it must not overwrite
            # the RESTARTING the herder just recorded.
            stale = seen is not None and seen < slot.restart_seq
            if not stale and (state, trace) != (slot.state, slot.trace):
                slot.state, slot.trace = state, trace
                changed = (state, trace)
            answer = SlotAnswer(self._command[connector], slot.restart_seq)
        if changed is not None:
            self._on_state_change(connector, task, changed[0], changed[1])
        return answer
