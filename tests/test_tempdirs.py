"""A worker's temporary root and the sweep of dead workers' roots (connect_runtime.tempdirs).

The rule (``owner_gone``) is pure and tested case by case; the marker's lock is
tested with real processes (a plain Python child that makes a root, then is
SIGKILLed or left running), no Kafka, no Spark.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from connect_runtime.tempdirs import (
    MARKER,
    LockProbe,
    Owner,
    PidState,
    ProcessSpace,
    WorkerTempRoot,
    current_space,
    is_root_name,
    owner_gone,
    start_ticks,
    sweep_stale_roots,
)

HERE = ProcessSpace("host-a", "boot-1", "pid:[4026531836]")


def owner(*, locked: bool = False, start: int | None = 100,
          space: ProcessSpace = HERE) -> Owner:
    return Owner(pid=4242, start_ticks=start, space=space, locked=locked)


# -- the rule ------------------------------------------------------------------

@pytest.mark.parametrize("locked", [True, False])
def test_a_held_lock_means_the_owner_lives_whatever_the_pid_says(locked: bool) -> None:
    assert not owner_gone(owner(locked=locked), LockProbe.HELD, PidState(running=False), HERE)


def test_a_free_lock_the_owner_had_taken_means_it_is_gone_even_from_another_namespace() -> None:
    other = ProcessSpace("host-a", "boot-1", "pid:[4026532999]")  # a restarted container
    alive_pid = PidState(running=True, start_ticks=100)  # the pid means another process here
    assert owner_gone(owner(locked=True, space=other), LockProbe.FREE, alive_pid, HERE)


@pytest.mark.parametrize("lock", [LockProbe.FREE, LockProbe.UNSUPPORTED])
def test_without_a_lock_to_ask_the_pid_decides(lock: LockProbe) -> None:
    unlocked = owner(locked=lock is LockProbe.UNSUPPORTED, start=100)
    assert owner_gone(unlocked, lock, PidState(running=False), HERE)
    assert not owner_gone(unlocked, lock, PidState(running=True, start_ticks=100), HERE)


def test_a_reused_pid_is_not_taken_for_the_owner() -> None:
    assert owner_gone(owner(start=100), LockProbe.UNSUPPORTED,
                      PidState(running=True, start_ticks=7_000), HERE)


@pytest.mark.parametrize("recorded, now", [(None, 100), (100, None), (None, None)])
def test_a_live_pid_whose_start_time_is_unknown_is_taken_for_the_owner(
        recorded: int | None, now: int | None) -> None:
    assert not owner_gone(owner(start=recorded), LockProbe.UNSUPPORTED,
                          PidState(running=True, start_ticks=now), HERE)


@pytest.mark.parametrize("space", [
    ProcessSpace("host-b", "boot-1", HERE.pid_namespace),  # another host sharing the volume
    ProcessSpace("host-b", "boot-0", HERE.pid_namespace),
    ProcessSpace("host-a", "boot-1", "pid:[4026532999]"),  # another container
    ProcessSpace("host-a", "boot-1", None),  # a platform that does not say
    ProcessSpace("host-a", None, HERE.pid_namespace),
], ids=["other-host", "other-host-other-boot", "other-namespace", "no-namespace", "no-boot"])
def test_a_pid_from_another_process_space_is_not_judged(space: ProcessSpace) -> None:
    assert not owner_gone(owner(space=space), LockProbe.UNSUPPORTED, PidState(running=False),
                          HERE)


def test_a_marker_from_an_earlier_boot_of_this_host_is_gone() -> None:
    earlier = ProcessSpace("host-a", "boot-0", HERE.pid_namespace)
    assert owner_gone(owner(space=earlier), LockProbe.UNSUPPORTED,
                      PidState(running=True, start_ticks=100), HERE)


@pytest.mark.parametrize("name, ours", [
    ("connect-runtime-123-a1B_z9x", True),
    ("connect-runtime-1-x", True),
    ("connect-plugins-abc123", False),  # what earlier versions made: no owner to ask
    ("spark-0d6f7c2e-1b1a-4a8e-9c55-1e0b7a1c9d11", False),
    ("blockmgr-0d6f7c2e-1b1a-4a8e-9c55-1e0b7a1c9d11", False),
    ("pyspark-0d6f7c2e", False),
    ("connect-runtime-abc-x", False),
    ("connect-runtime-12-", False),
    ("connect-runtime-12-a.b", False),
    ("xconnect-runtime-12-ab", False),
    ("connect-runtime-12-ab-old", False),
])
def test_only_exact_root_names_are_looked_at(name: str, ours: bool) -> None:
    assert is_root_name(name) is ours


def test_the_marker_round_trips_and_a_partial_one_is_no_marker() -> None:
    o = owner(locked=True)
    assert Owner.from_json(o.to_json()) == o
    whole = json.loads(o.to_json())
    assert Owner.from_json("") is None  # created, not written yet
    assert Owner.from_json(o.to_json()[:20]) is None
    assert Owner.from_json(json.dumps({**whole, "pid": "4242"})) is None
    assert Owner.from_json(json.dumps({**whole, "pid": 0})) is None
    assert Owner.from_json(json.dumps({**whole, "locked": 1})) is None
    assert Owner.from_json(json.dumps({k: v for k, v in whole.items() if k != "space"})) is None
    assert Owner.from_json("[1, 2]") is None


# -- roots and the sweep, with real processes ---------------------------------

CHILD = textwrap.dedent("""
    import sys, time
    from connect_runtime.tempdirs import WorkerTempRoot
    root = WorkerTempRoot.create(sys.argv[1])
    (root.spark / "spark-0d6f7c2e" / "userFiles-1").mkdir(parents=True)
    (root.spark / "blockmgr-0d6f7c2e").mkdir()
    (root.plugins / "plugin.zip").write_bytes(b"PK")
    print(root.path, flush=True)
    time.sleep(600)
""")


class Child:
    """A process owning a root under ``parent`` (what a worker does at start)."""

    def __init__(self, parent: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}  # this checkout's code
        self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(parent)],
                                     stdout=subprocess.PIPE, env=env)
        assert self.proc.stdout is not None
        self.root = Path(self.proc.stdout.readline().decode().strip())
        assert self.root.is_dir(), self.root

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


@pytest.fixture
def children(tmp_path: Path) -> Iterator[list[Child]]:
    made: list[Child] = []
    yield made
    for child in made:
        if child.proc.poll() is None:
            child.kill()


def test_a_root_holds_plugins_and_sparks_temp_dir_under_a_locked_marker(tmp_path: Path) -> None:
    root = WorkerTempRoot.create(tmp_path)
    try:
        assert root.path.parent == tmp_path and is_root_name(root.path.name)
        assert root.plugins.is_dir() and root.spark.is_dir()
        marker = Owner.from_json((root.path / MARKER).read_text())
        assert marker == Owner(os.getpid(), start_ticks(os.getpid()), current_space(), True)
        # The lock is per open file: this process's own sweep sees it held too.
        assert sweep_stale_roots(tmp_path) == [] and root.path.is_dir()
    finally:
        root.remove()
    assert not root.path.exists()
    root.remove()  # idempotent


def test_a_killed_owners_root_is_swept_and_a_live_ones_stays(
        tmp_path: Path, children: list[Child]) -> None:
    dead, live = Child(tmp_path), Child(tmp_path)
    children += [dead, live]
    dead.kill()
    assert (dead.root / "spark" / "blockmgr-0d6f7c2e").is_dir()  # SIGKILL left it all

    assert sweep_stale_roots(tmp_path) == [dead.root]

    assert not dead.root.exists()
    assert (live.root / "plugins" / "plugin.zip").is_file()
    assert (live.root / "spark" / "spark-0d6f7c2e" / "userFiles-1").is_dir()
    live.kill()
    assert sweep_stale_roots(tmp_path) == [live.root]


def test_an_unlocked_marker_with_a_reused_pid_is_swept_and_the_true_owners_is_not(
        tmp_path: Path) -> None:
    """Where locks do not answer (the owner could not take one), the pid and its
    start time decide: this test process's pid stands for a reused one."""
    pid, here = os.getpid(), current_space()
    reused = tmp_path / f"connect-runtime-{pid}-reused"
    mine = tmp_path / f"connect-runtime-{pid}-mine"
    for path, start in ((reused, (start_ticks(pid) or 0) + 1), (mine, start_ticks(pid))):
        path.mkdir()
        (path / MARKER).write_text(Owner(pid, start, here, locked=False).to_json())
    assert sweep_stale_roots(tmp_path) == [reused]
    assert mine.is_dir()


def test_what_is_not_a_workers_root_is_never_touched(tmp_path: Path) -> None:
    gone = Owner(2**22 + 1, None, current_space(), locked=True)  # lock free: "gone"
    dead = tmp_path / "elsewhere" / "connect-runtime-5-dead"
    dead.mkdir(parents=True)
    (dead / MARKER).write_text(gone.to_json())
    untouched = [
        tmp_path / "connect-plugins-abc",  # an earlier version's staging: no marker
        tmp_path / "spark-0d6f7c2e",  # some other Spark application's
        tmp_path / "blockmgr-0d6f7c2e",
        tmp_path / "connect-runtime-6-nomarker",  # being created, or not ours
        tmp_path / "connect-runtime-7-empty",  # marker created, content not yet written
    ]
    for path in untouched:
        path.mkdir()
    (tmp_path / "connect-runtime-7-empty" / MARKER).write_text("")
    for name in ("spark-0d6f7c2e", "connect-plugins-abc"):
        (tmp_path / name / MARKER).write_text(gone.to_json())
    link = tmp_path / "connect-runtime-8-link"
    link.symlink_to(dead)
    file = tmp_path / "connect-runtime-9-file"
    file.write_text(gone.to_json())

    assert sweep_stale_roots(tmp_path) == []

    assert all(p.is_dir() for p in untouched) and link.is_symlink() and file.is_file()
    assert (dead / MARKER).is_file()
    assert sweep_stale_roots(tmp_path / "elsewhere") == [dead]


def test_a_missing_temp_dir_sweeps_nothing(tmp_path: Path) -> None:
    assert sweep_stale_roots(tmp_path / "missing") == []
