"""The slot heartbeat: the one conversation between a task slot and the worker.

A slot (a long-running Spark task on an executor, :mod:`connect_runtime.task.slot`)
sends a :class:`SlotReport` to its worker every :data:`HEARTBEAT_INTERVAL_S`, and
at once when its state changes::

    POST /internal/tasks/{connector}/{task}/heartbeat     body: SlotReport (JSON)
    200                                                    body: SlotAnswer (JSON)

The request is signed with the cluster's session key like every internal
request (KIP-507, :mod:`connect_runtime.protocol.signing`). The answers:

* 200 with a :class:`SlotAnswer`: what the slot should do (:class:`Command`),
  the task's restart counter (a change means "restart": stop this instance and
  start a new one) and the current session key, so slots follow key rotations.
* 403: the signature's key is no longer accepted; the slot reads the current
  key from the config topic and tries again.
* 404: this worker hosts no such task (any more); the slot stops.
* 400: the body is not a report (:class:`InvalidHeartbeat` names the field).

Both ends parse with this module, so a field renamed on one side fails the
other's tests rather than silently reading a default.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import quote

import orjson

from connect_runtime.errors import BadRequestException
from connect_runtime.protocol.states import State

__all__ = [
    "HEARTBEAT_INTERVAL_S",
    "HEARTBEAT_ROUTE",
    "Command",
    "InvalidHeartbeat",
    "SlotAnswer",
    "SlotReport",
    "heartbeat_url",
]

HEARTBEAT_INTERVAL_S = 0.25
"""How often a slot reports when nothing changes. Failure detection (a slot that
stopped reporting) and pause/stop latency are multiples of it."""

HEARTBEAT_ROUTE = "/internal/tasks/{connector}/{task}/heartbeat"


def heartbeat_url(worker_url: str, connector: str, task: int) -> str:
    """The heartbeat URL of ``connector``'s task ``task`` on the worker at ``worker_url``."""
    return worker_url + HEARTBEAT_ROUTE.format(connector=quote(connector, safe=""), task=task)


class Command(StrEnum):
    """What the worker tells a slot to do with its task instance."""

    RUN = "run"
    PAUSE = "pause"  # keep the task and its producer; stop polling
    STOP = "stop"  # stop the task and end the slot (the Spark task returns)


class InvalidHeartbeat(BadRequestException):
    """A heartbeat message that does not parse; the worker answers it with 400."""


def _object(body: bytes, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidHeartbeat(f"Invalid {what}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise InvalidHeartbeat(
            f"Invalid {what}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(message: dict[str, Any], what: str, name: str, kind: type,
           *, optional: bool = False) -> Any:
    value = message.get(name)
    if value is None and optional:
        return None
    # bool is an int in Python; a JSON true is not a count.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InvalidHeartbeat(
            f"Invalid {what}: field '{name}' must be {'null or ' if optional else ''}"
            f"{kind.__name__}, got {value!r}")
    return value


_E = TypeVar("_E", bound=StrEnum)


def _choice(message: dict[str, Any], what: str, name: str, kind: type[_E]) -> _E:
    value = _field(message, what, name, str)
    try:
        return kind(value)
    except ValueError:
        raise InvalidHeartbeat(f"Invalid {what}: unknown {name} {value!r}") from None


@dataclass(frozen=True, slots=True)
class SlotReport:
    """A slot's state as it reports it. ``restart_seq`` is the last restart counter
    the slot heard (None before the first answer): a report older than a restart
    describes the instance being restarted and must not overwrite RESTARTING."""

    run_id: str  # one per slot process attempt; tells two attempts' reports apart in logs
    generation: int  # the connector generation the slot was submitted for
    state: State
    trace: str | None
    attempt: int  # Spark's attempt number of the slot
    restart_seq: int | None
    fenced: bool  # the slot's producer was fenced by another with its transactional.id
    pid: int
    host: str

    def to_json(self) -> bytes:
        return orjson.dumps({
            "run_id": self.run_id, "generation": self.generation, "state": self.state.value,
            "trace": self.trace, "attempt": self.attempt, "restart_seq": self.restart_seq,
            "fenced": self.fenced, "pid": self.pid, "host": self.host,
        })

    @classmethod
    def from_json(cls, body: bytes) -> SlotReport:
        """Parse a report; raises :class:`InvalidHeartbeat` naming the bad field."""
        what = "heartbeat"
        m = _object(body, what)
        return cls(
            run_id=_field(m, what, "run_id", str),
            generation=_field(m, what, "generation", int),
            state=_choice(m, what, "state", State),
            trace=_field(m, what, "trace", str, optional=True),
            attempt=_field(m, what, "attempt", int),
            restart_seq=_field(m, what, "restart_seq", int, optional=True),
            fenced=_field(m, what, "fenced", bool),
            pid=_field(m, what, "pid", int),
            host=_field(m, what, "host", str),
        )


@dataclass(frozen=True, slots=True)
class SlotAnswer:
    """The worker's answer: the command, the task's restart counter, and the
    current session key (base64; None when the worker has none yet)."""

    command: Command
    restart_seq: int
    session_key: str | None = None

    @classmethod
    def stop(cls, restart_seq: int = 0) -> SlotAnswer:
        return cls(Command.STOP, restart_seq)

    def to_json(self) -> bytes:
        return orjson.dumps({"command": self.command.value, "restart_seq": self.restart_seq,
                             "session_key": self.session_key})

    @classmethod
    def from_json(cls, body: bytes) -> SlotAnswer:
        """Parse an answer; raises :class:`InvalidHeartbeat` naming the bad field."""
        what = "heartbeat answer"
        m = _object(body, what)
        return cls(_choice(m, what, "command", Command), _field(m, what, "restart_seq", int),
                   _field(m, what, "session_key", str, optional=True))
