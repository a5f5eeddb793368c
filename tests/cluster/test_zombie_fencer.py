"""ZombieFencer: which producers the leader fences, in which order, and when not."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from connect_runtime.cluster.fencing import ZombieFencer
from connect_runtime.errors import ConflictException, ConnectError, NotFoundException

Call = tuple[object, ...]


@dataclass
class View:
    """The slice of the config topic fencing reads, for one connector ``c``."""

    task_count_now: int = 2
    record: int | None = 3
    pending: bool = True
    generation: int = 10
    connectors: set[str] = field(default_factory=lambda: {"c"})

    def contains(self, name: str) -> bool:
        return name in self.connectors

    def pending_fencing(self, name: str) -> bool:
        return self.pending

    def config_generation(self, name: str) -> int:
        return self.generation

    def task_count_record(self, name: str) -> int | None:
        return self.record

    def task_count(self, name: str) -> int:
        return self.task_count_now


class Cluster:
    """Fake collaborators that record every call in one list, in order.

    Writing the task-count record clears the pending flag, as the config topic
    reader does when it reads that record back.
    """

    def __init__(self, view: View) -> None:
        self.view = view
        self.calls: list[Call] = []
        self.before_second_read: Callable[[], None] = lambda: None
        self.fence_error: Exception | None = None
        self.fence_hook: Callable[[], None] = lambda: None

    def read(self) -> View:
        reads = sum(1 for c in self.calls if c[0] == "read")
        if reads % 2 == 1:
            self.before_second_read()
        self.calls.append(("read",))
        return View(self.view.task_count_now, self.view.record, self.view.pending,
                    self.view.generation, set(self.view.connectors))

    def fence(self, ids: list[str]) -> None:
        self.calls.append(("fence", tuple(ids)))
        self.fence_hook()
        if self.fence_error is not None:
            raise self.fence_error

    def write(self, name: str, count: int) -> None:
        self.calls.append(("write", name, count))
        self.view.record, self.view.pending = count, False

    def fencer(self) -> ZombieFencer:
        return ZombieFencer("grp", read_config=self.read, fence=self.fence,
                            write_task_count=self.write)


def test_previous_generation_is_fenced_before_the_new_count_is_recorded(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="connect_runtime.cluster.fencing")
    cluster = Cluster(View(task_count_now=2, record=3))
    cluster.fencer().fence("c")
    assert cluster.calls == [
        ("read",),
        ("fence", ("grp-c-0", "grp-c-1", "grp-c-2")),  # the previous count's ids
        ("read",),
        ("write", "c", 2),
    ]
    # One lifecycle line, naming the connector and the generation fenced for.
    [line] = [r for r in caplog.records if r.__dict__.get("event") == "producers_fenced"]
    assert line.getMessage() == ("fenced 3 producer(s) of connector c for generation 10 "
                                 "(3 task(s) before, 2 now): grp-c-0, grp-c-1, grp-c-2")
    assert (line.__dict__["connector"], line.__dict__["generation"],
            line.__dict__["producers"]) == ("c", 10, 3)


@pytest.mark.parametrize(("record", "now"), [(None, 4), (1, 1)])
def test_no_fencing_for_a_first_generation_or_a_single_task(record: int | None,
                                                            now: int) -> None:
    cluster = Cluster(View(task_count_now=now, record=record))
    cluster.fencer().fence("c")
    assert cluster.calls == [("read",), ("read",), ("write", "c", now)]


def test_nothing_happens_when_no_fencing_is_pending() -> None:
    cluster = Cluster(View(pending=False))
    cluster.fencer().fence("c")
    assert cluster.calls == [("read",)]


def test_an_unknown_connector_is_not_found() -> None:
    cluster = Cluster(View(connectors=set()))
    with pytest.raises(NotFoundException, match="Connector c not found"):
        cluster.fencer().fence("c")
    assert cluster.calls == [("read",)]


def test_a_failed_fence_writes_no_record() -> None:
    cluster = Cluster(View())
    cluster.fence_error = ConnectError("coordinator unreachable")
    with pytest.raises(ConnectError, match="coordinator unreachable"):
        cluster.fencer().fence("c")
    assert [c[0] for c in cluster.calls] == ["read", "fence"]
    assert cluster.view.pending


def test_new_task_configs_during_fencing_conflict_and_write_no_record() -> None:
    cluster = Cluster(View(generation=10))

    def reconfigure() -> None:
        cluster.view.generation = 12

    cluster.before_second_read = reconfigure
    with pytest.raises(ConflictException, match="written during zombie fencing"):
        cluster.fencer().fence("c")
    assert [c[0] for c in cluster.calls] == ["read", "fence", "read"]


def test_requests_for_one_connector_run_one_at_a_time() -> None:
    cluster = Cluster(View())
    fencer = cluster.fencer()
    fencing_started, release = threading.Event(), threading.Event()

    def block() -> None:
        fencing_started.set()
        assert release.wait(10)

    cluster.fence_hook = block
    first = threading.Thread(target=fencer.fence, args=("c",))
    second = threading.Thread(target=fencer.fence, args=("c",))
    first.start()
    assert fencing_started.wait(10)
    cluster.fence_hook = lambda: None
    second.start()
    second.join(0.3)
    assert second.is_alive()  # waiting for the lock: it has not even read yet
    assert cluster.calls == [("read",), ("fence", ("grp-c-0", "grp-c-1", "grp-c-2"))]
    release.set()
    first.join(10)
    second.join(10)
    # The second request finds the first one's record: nothing left to fence.
    assert cluster.calls == [("read",), ("fence", ("grp-c-0", "grp-c-1", "grp-c-2")),
                             ("read",), ("write", "c", 2), ("read",)]


def test_other_connectors_are_not_held_up() -> None:
    cluster = Cluster(View(connectors={"c", "d"}))
    fencer = cluster.fencer()
    fencing_started, release = threading.Event(), threading.Event()

    def block_c() -> None:
        if not fencing_started.is_set():
            fencing_started.set()
            release.wait(60)  # longer than the wait for "d" below

    cluster.fence_hook = block_c
    first = threading.Thread(target=fencer.fence, args=("c",))
    first.start()
    try:
        assert fencing_started.wait(10)
        other = threading.Thread(target=fencer.fence, args=("d",))
        other.start()
        other.join(5)
        assert not other.is_alive()  # a lock shared with "c" would hold it up
        assert ("write", "d", 2) in cluster.calls
    finally:
        release.set()
        first.join(10)
