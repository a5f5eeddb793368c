"""Lifecycle states of connectors and tasks, with the transitions the runtime allows.

The names and meanings are Kafka Connect's, as they appear in the status topic
and the REST API::

    UNASSIGNED ──► RUNNING ◄──► PAUSED
        │            │  ▲          │
        │            ▼  │          ▼
        ├──────────► FAILED ──► RESTARTING ──► RUNNING
        └──────────► STOPPED (connector stopped; tasks removed)

An illegal transition is a bug in the runtime, not user error: it raises
:class:`IllegalStateTransition` so it is caught in tests rather than written to
the status topic.
"""

from __future__ import annotations

from enum import StrEnum

from connect_runtime.errors import IllegalStateTransition


class State(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"
    DESTROYED = "DESTROYED"


_ALLOWED: dict[State, frozenset[State]] = {
    State.UNASSIGNED: frozenset(
        {State.RUNNING, State.PAUSED, State.STOPPED, State.FAILED, State.RESTARTING,
         State.DESTROYED}
    ),
    State.RUNNING: frozenset(
        {State.PAUSED, State.STOPPED, State.FAILED, State.RESTARTING, State.UNASSIGNED,
         State.DESTROYED}
    ),
    State.PAUSED: frozenset(
        {State.RUNNING, State.STOPPED, State.FAILED, State.RESTARTING, State.UNASSIGNED,
         State.DESTROYED}
    ),
    State.FAILED: frozenset({State.RESTARTING, State.UNASSIGNED, State.STOPPED, State.DESTROYED}),
    State.RESTARTING: frozenset(
        {State.RUNNING, State.PAUSED, State.FAILED, State.UNASSIGNED, State.STOPPED,
         State.DESTROYED}
    ),
    State.STOPPED: frozenset(
        {State.RUNNING, State.PAUSED, State.UNASSIGNED, State.RESTARTING, State.DESTROYED}
    ),
    State.DESTROYED: frozenset(),
}


def check_transition(current: State, target: State) -> State:
    """Return ``target`` if ``current -> target`` is allowed (or a no-op), else raise."""
    if current == target or target in _ALLOWED[current]:
        return target
    raise IllegalStateTransition(f"illegal state transition {current.value} -> {target.value}")


class TargetState(StrEnum):
    """What the user asked for (config topic ``target-state-<name>``)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
