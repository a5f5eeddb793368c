"""What the ``/ui`` dashboard shows: one worker's view of the cluster, as typed data.

The herder builds a :class:`DashboardView` from memory only
(:meth:`~connect_runtime.cluster.herder_api.Herder.dashboard`); the REST layer
renders it as HTML (``connect_runtime.rest.dashboard`` reads its attributes)
and sends :meth:`DashboardView.to_dict` as ``GET /ui/view.json``. The JSON keys
are written here and nowhere else.

What a worker knows decides what is None. Every worker reads the status topic,
so every view has the state, worker and trace of every connector and task. Only
the worker hosting the tasks (the leader) has their slots and metrics: on a
follower, and for a task whose slot has not connected yet, ``host``, ``pid``,
``attempt``, ``generation``, ``series``, ``transaction_size`` and ``stall`` are
None and ``offsets`` is empty.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["CommittedOffset", "ConnectorView", "DashboardView", "StallView", "TaskSeries",
           "TaskView", "TransactionSizes"]


@dataclass(frozen=True, slots=True)
class TaskSeries:
    """One task's recent throughput, for plots: equal-length sequences, oldest first,
    one entry per interval between two consecutive metrics reports of its slot,
    covering at most the view's ``window_s``.

    ``t_ms`` is when each interval ended (wall clock, ms since the epoch); the rates
    are records/s over the interval: polled from the task, written to the producer,
    committed. ``txn_size_avg`` is the average transaction size (records) the slot
    reported at the interval's end, 0.0 when no commit fell in the minute before.
    """

    t_ms: tuple[int, ...] = ()
    poll_rate: tuple[float, ...] = ()
    write_rate: tuple[float, ...] = ()
    commit_rate: tuple[float, ...] = ()
    txn_size_avg: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        lengths = {len(self.t_ms), len(self.poll_rate), len(self.write_rate),
                   len(self.commit_rate), len(self.txn_size_avg)}
        if len(lengths) > 1:
            raise ValueError(f"TaskSeries needs equal-length sequences, got lengths {lengths}")

    def to_dict(self) -> dict[str, list[Any]]:
        return {"t_ms": list(self.t_ms), "poll_rate": list(self.poll_rate),
                "write_rate": list(self.write_rate), "commit_rate": list(self.commit_rate),
                "txn_size_avg": list(self.txn_size_avg)}


@dataclass(frozen=True, slots=True)
class TransactionSizes:
    """The sizes (records) of the task's commits in the last minute, as its slot last
    reported them; a task without a commit in that minute has no TransactionSizes.
    ``min`` and ``max`` are None only if the slot sent an average without them."""

    min: int | None
    max: int | None
    avg: float

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "avg": self.avg}


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A source partition the task committed recently, and the offset it committed
    (both as the connector wrote them: dicts of primitives; None is a null offset)."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "offset": self.offset}


@dataclass(frozen=True, slots=True)
class StallView:
    """The task's ``call`` (``poll()`` or ``commit``) has not returned for ``stalled_s``
    seconds when the view is made, past its ``task.stall.threshold.ms``
    (``threshold_ms``); it began at ``since_ms`` (the executor's wall clock, ms since
    the epoch). The stack is in the task's ``trace``."""

    call: str
    stalled_s: float
    since_ms: int
    threshold_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {"call": self.call, "stalled_s": self.stalled_s, "since_ms": self.since_ms,
                "threshold_ms": self.threshold_ms}


@dataclass(frozen=True, slots=True)
class TaskView:
    """One task: its status (any worker knows it) and its slot and metrics (only the
    worker hosting it knows them; see the module docstring).

    ``state`` is a lifecycle state's name (UNASSIGNED when no status was written
    yet); ``worker_id`` and ``trace`` are those of its status, None without one.
    ``attempt`` is the Spark attempt running the slot, ``generation`` the task
    configs' generation it runs. ``stall`` (the hosting worker's only) is a call
    of the task loop stuck past ``task.stall.threshold.ms``.
    """

    id: int
    state: str
    worker_id: str | None = None
    trace: str | None = None
    host: str | None = None
    pid: int | None = None
    attempt: int | None = None
    generation: int | None = None
    series: TaskSeries | None = None
    transaction_size: TransactionSizes | None = None
    offsets: tuple[CommittedOffset, ...] = ()
    stall: StallView | None = None

    def to_dict(self) -> dict[str, Any]:
        """``series`` is ``{}`` when None; ``transaction_size`` and ``stall`` null when None."""
        return {"id": self.id, "state": self.state, "worker_id": self.worker_id,
                "trace": self.trace, "host": self.host, "pid": self.pid,
                "attempt": self.attempt, "generation": self.generation,
                "series": {} if self.series is None else self.series.to_dict(),
                "transaction_size": (None if self.transaction_size is None
                                     else self.transaction_size.to_dict()),
                "offsets": [o.to_dict() for o in self.offsets],
                "stall": None if self.stall is None else self.stall.to_dict()}


@dataclass(frozen=True, slots=True)
class ConnectorView:
    """One connector and its tasks, ordered by task id.

    ``state``, ``worker_id`` and ``trace`` are its status' (UNASSIGNED, None and
    None without one); ``connector_class`` is its ``connector.class`` config,
    sent as ``"class"`` in JSON.
    """

    name: str
    type: str
    state: str
    worker_id: str | None = None
    trace: str | None = None
    connector_class: str | None = None
    tasks: tuple[TaskView, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "state": self.state,
                "worker_id": self.worker_id, "trace": self.trace,
                "class": self.connector_class, "tasks": [t.to_dict() for t in self.tasks]}


@dataclass(frozen=True, slots=True)
class DashboardView:
    """What one worker knows of the cluster when the view is made: every connector of
    the config snapshot, ordered by name.

    ``leader_url`` is None while no leader is known; ``generated_at_ms`` is the
    wall clock when the view was made; a task's series reach back at most
    ``window_s`` seconds from it.
    """

    worker_id: str
    leader_url: str | None
    is_leader: bool
    generated_at_ms: int
    window_s: float
    connectors: tuple[ConnectorView, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"worker_id": self.worker_id, "leader_url": self.leader_url,
                "is_leader": self.is_leader, "generated_at_ms": self.generated_at_ms,
                "window_s": self.window_s,
                "connectors": [c.to_dict() for c in self.connectors]}

