"""Several workers of one group, and the one leader agreement every suite uses.

A worker's ``GET /internal/leader`` says which worker it believes leads
(``leader_url``) and whether it leads itself (``is_leader``). No single answer
can be trusted: a worker cut off from the broker, or stopped and resumed, may
still say it leads after the group has moved on. So a leader is *agreed* only
when every worker asked names the same worker, and that worker, asked too,
says it leads (:func:`agreed_leader`). The e2e ``Cluster``, the partition
suite's ``Lab`` and the Kubernetes tests all decide through it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from support.kafka import free_port, wait_for
from support.workers import WorkerProcess, stop_all

__all__ = ["Cluster", "LeaderView", "agreed_leader", "ask_leader", "wait_agreed_leader"]


@dataclass(frozen=True)
class LeaderView:
    """One worker's answer to ``GET /internal/leader``."""

    leader_url: str | None
    is_leader: bool


def agreed_leader(views: Mapping[str, LeaderView | None]) -> str | None:
    """The URL of the agreed leader among the workers asked, or None.

    ``views`` maps the URL of every worker asked to its answer (None: it did
    not answer). A leader is agreed when every worker answered, all name the
    same URL, that URL is one of the workers asked, and its own answer says it
    leads. A worker cut off from the group that still says it leads is refused
    unless the others name it too; leave it out of ``views`` to find the
    leader of the rest.
    """
    if not views or any(view is None for view in views.values()):
        return None
    named = {view.leader_url for view in views.values() if view is not None}
    if len(named) != 1:
        return None
    (url,) = named
    own = views.get(url) if url is not None else None
    return url if own is not None and own.is_leader else None


def ask_leader(worker: WorkerProcess, timeout: float = 3) -> LeaderView | None:
    """``worker``'s view of the leader, or None if it did not answer."""
    try:
        body = httpx.get(f"{worker.url}/internal/leader", timeout=timeout,
                         verify=worker.verify).json()
    except (httpx.HTTPError, ValueError):
        return None
    return LeaderView(body.get("leader_url"), bool(body.get("is_leader")))


def current_leader(workers: Sequence[WorkerProcess]) -> WorkerProcess | None:
    """The agreed leader of ``workers`` now, or None."""
    url = agreed_leader({w.url: ask_leader(w) for w in workers})
    return next((w for w in workers if w.url == url), None)


def wait_agreed_leader(workers: Callable[[], Sequence[WorkerProcess]], timeout: float,
                       what: str = "the workers to agree on a leader") -> WorkerProcess:
    """Wait until the workers ``workers()`` returns (asked anew each time) agree."""
    found: WorkerProcess = wait_for(lambda: current_leader(workers()), timeout, what,
                                    interval=0.5)
    return found


def running(workers: Sequence[WorkerProcess]) -> list[WorkerProcess]:
    """The workers whose process has not exited."""
    return [w for w in workers if w.proc is not None and w.proc.poll() is None]


class Cluster:
    """Several workers sharing group.id and internal topics (one leader)."""

    def __init__(self, bootstrap: str, workdir: Path, size: int,
                 overrides: dict[str, str] | None = None,
                 env: dict[str, str] | None = None) -> None:
        group = f"cluster-{os.urandom(4).hex()}"
        settings = {"session.timeout.ms": "6000", "heartbeat.interval.ms": "1500",
                    "spark.master": "local[6]", **(overrides or {})}
        self.workers = [WorkerProcess(bootstrap, group, free_port(), workdir, settings, env=env)
                        for _ in range(size)]

    def start(self) -> Cluster:
        try:
            for w in self.workers:
                w.start(wait=False)
            for w in self.workers:
                w.wait_healthy()
            self.wait_agreed_leader()
        except BaseException:
            self.stop()  # leave no worker behind when startup fails
            raise
        return self

    def stop(self) -> None:
        stop_all(self.workers)

    def alive(self) -> list[WorkerProcess]:
        return running(self.workers)

    def _asked(self, other_than: WorkerProcess | None) -> list[WorkerProcess]:
        # ``other_than`` is possibly SIGSTOPped: it would not answer.
        return [w for w in self.alive() if w is not other_than]

    def leader(self, other_than: WorkerProcess | None = None) -> WorkerProcess | None:
        """The leader the live workers (but ``other_than``) agree on now, or None."""
        return current_leader(self._asked(other_than))

    def wait_leader(self, timeout: float = 60,
                    other_than: WorkerProcess | None = None) -> WorkerProcess:
        """Wait for a leader the live workers but ``other_than`` agree on."""
        return wait_agreed_leader(lambda: self._asked(other_than), timeout,
                                  "a leader to be elected")

    def wait_agreed_leader(self, timeout: float = 60) -> WorkerProcess:
        """Wait until every live worker names the same leader, and it says it leads."""
        return wait_agreed_leader(self.alive, timeout)
