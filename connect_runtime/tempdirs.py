"""A worker process's temporary files: one root per process, and the sweep of
the roots that killed workers left behind.

Layout. Each worker process owns one directory under the temporary directory
(``tempfile.gettempdir()``: ``TMPDIR``, else ``/tmp``)::

    connect-runtime-<pid>-<random>/
        owner.json   the owner marker (:class:`Owner`), locked while the owner lives
        plugins/     the staged plugin.path zips (plugin_path.py)
        spark/       the Spark driver JVM's java.io.tmpdir: Spark's spark-* (PySpark's
                     pyspark-* and the shipped files inside) and blockmgr-*, unless
                     spark.local.dir or SPARK_LOCAL_DIRS sends them elsewhere

A clean stop removes the root (:meth:`WorkerTempRoot.remove`). A killed worker
cannot, so each worker, as it starts, removes the roots of workers that are gone
(:func:`sweep_stale_roots`) before it makes its own.

The owner marker. The owner creates ``owner.json``, takes an exclusive
``flock`` on it and only then writes its content: its pid, the process's start
time (``/proc/<pid>/stat`` field 22, so a reused pid is not taken for the owner),
the boot and pid namespace these mean something in, and whether the lock was
taken. It keeps the file open, and so the lock held, until :meth:`remove`. The
kernel drops the lock when the process ends, however it ends (SIGKILL, OOM
kill), so the lock answers "owner gone?" across pid namespaces too: a container
restarted with the same ``/tmp`` volume sees its previous incarnation's root
unlocked, though its pid means nothing there.

The sweep rule (:func:`owner_gone`, pure) is conservative: a root is removed
only when its owner is certainly gone. Anything it cannot judge stays: a name
that is not exactly ``connect-runtime-<pid>-<random>``, a symlink, a directory
of another user, a missing or unreadable marker (also a root being created this
instant), a marker whose owner lives in another pid namespace or on another
host when locks do not answer.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import shutil
import socket
import tempfile
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path

log = logging.getLogger(__name__)

ROOT_PREFIX = "connect-runtime-"
MARKER = "owner.json"
# mkdtemp's random part is letters, digits and "_"; the pid part is the owner's.
_ROOT_NAME = re.compile(r"connect-runtime-(\d+)-[A-Za-z0-9_]+")


class LockProbe(Enum):
    """What trying the marker's lock (without waiting) said."""

    HELD = "held"  # another open file holds it: the owner lives (or another sweeper looks)
    FREE = "free"  # the prober got it: no process holds it
    UNSUPPORTED = "unsupported"  # the file system refused locks: no answer


@dataclass(frozen=True)
class ProcessSpace:
    """What a pid is relative to: the host name, the boot (``boot_id``) and the
    pid namespace. None where the platform does not say (no ``/proc``)."""

    host: str
    boot_id: str | None
    pid_namespace: str | None


@dataclass(frozen=True)
class PidState:
    """A pid as seen from the sweeper's process space: whether a process has it,
    and that process's start time in clock ticks since boot (None if unknown)."""

    running: bool
    start_ticks: int | None = None


@dataclass(frozen=True)
class Owner:
    """The content of ``owner.json``: who owns a root.

    ``start_ticks`` tells the owner from a later process given the same pid;
    ``locked`` says the owner holds the marker's lock for its whole life, so a
    free lock means it is gone.
    """

    pid: int
    start_ticks: int | None
    space: ProcessSpace
    locked: bool

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Owner | None:
        """The marker's owner; None if ``text`` is not a whole marker (empty while
        its owner writes it, or not ours)."""
        try:
            raw = json.loads(text)
            space = raw["space"]
            owner = cls(pid=raw["pid"], start_ticks=raw["start_ticks"],
                        space=ProcessSpace(space["host"], space["boot_id"],
                                           space["pid_namespace"]),
                        locked=raw["locked"])
        except (ValueError, KeyError, TypeError):
            return None
        valid = (type(owner.pid) is int and owner.pid > 0 and type(owner.locked) is bool
                 and (owner.start_ticks is None or type(owner.start_ticks) is int)
                 and isinstance(owner.space.host, str)
                 and all(v is None or isinstance(v, str)
                         for v in (owner.space.boot_id, owner.space.pid_namespace)))
        return owner if valid else None


def is_root_name(name: str) -> bool:
    """Whether ``name`` is exactly a worker root's name (``connect-runtime-<pid>-<random>``)."""
    return _ROOT_NAME.fullmatch(name) is not None


def owner_gone(owner: Owner, lock: LockProbe, pid: PidState, here: ProcessSpace) -> bool:
    """Whether the worker that owns a root has certainly ended, so the root may go.

    ``owner`` is the root's whole marker (a root without one is never judged),
    ``lock`` what trying its lock said, ``pid`` the state of ``owner.pid`` as
    seen from ``here``, the sweeper's process space.

    1. The lock is held: the owner lives.
    2. The lock is free and the owner had taken it: gone (the kernel releases a
       dead process's locks, whatever its pid namespace).
    3. Otherwise (no locks on this file system) the pid decides, and only in the
       owner's own process space: same host, boot and pid namespace. Gone if no
       process has the pid, or the one that has it started at another time (the
       pid was reused). A marker from an earlier boot of this host is gone too.
       A live pid with the owner's start time, or an unknown one, is the owner;
       another host or pid namespace, or one the platform does not name, is
       not judged.
    """
    if lock is LockProbe.HELD:
        return False
    if lock is LockProbe.FREE and owner.locked:
        return True
    there = owner.space
    if there.host != here.host:
        return False
    if there.boot_id is not None and here.boot_id is not None and there.boot_id != here.boot_id:
        return True  # this host rebooted since: every process of that boot has ended
    if None in (there.boot_id, here.boot_id, there.pid_namespace, here.pid_namespace) \
            or there.pid_namespace != here.pid_namespace:
        return False  # the pid may mean a process this sweeper cannot see
    if not pid.running:
        return True
    return owner.start_ticks is not None and pid.start_ticks is not None \
        and owner.start_ticks != pid.start_ticks


# -- I/O ---------------------------------------------------------------------

def current_space() -> ProcessSpace:
    """This process's :class:`ProcessSpace`."""
    return ProcessSpace(socket.gethostname(),
                        _read("/proc/sys/kernel/random/boot_id"),
                        _readlink("/proc/self/ns/pid"))


def pid_state(pid: int) -> PidState:
    """Whether a process has ``pid`` here, and when it started."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return PidState(running=False)
    except PermissionError:
        pass  # it exists, under another user
    return PidState(running=True, start_ticks=start_ticks(pid))


def start_ticks(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (start time, clock ticks after boot); None
    without ``/proc`` or once the process is gone."""
    return proc_stat(pid)[1]


def proc_stat(pid: int) -> tuple[int | None, int | None]:
    """Parent pid and start time (fields 4 and 22 of ``/proc/<pid>/stat``); None
    for what cannot be read (no ``/proc``, the process is gone)."""
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return None, None
    # The command name (field 2) may hold spaces and ")": split after its last ")".
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return int(fields[1]), int(fields[19])
    except (IndexError, ValueError):
        return None, None


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _readlink(path: str) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def _try_lock(fd: int, *, wait: bool) -> LockProbe:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return LockProbe.HELD
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EACCES):
            return LockProbe.HELD
        return LockProbe.UNSUPPORTED
    return LockProbe.FREE


def sweep_stale_roots(parent: str | Path | None = None) -> list[Path]:
    """Remove the roots under ``parent`` (default: the temporary directory) whose
    owner is gone (:func:`owner_gone`); returns those removed.

    Only entries named exactly like a root, that are directories (not symlinks)
    of this process's user, with a marker, are looked at. Errors are logged, never
    raised: a worker starts whatever its temporary directory holds.
    """
    base = Path(parent if parent is not None else tempfile.gettempdir())
    here, removed = current_space(), []
    try:
        entries = list(os.scandir(base))
    except OSError as e:
        log.warning("could not list %s to remove what stopped workers left: %s", base, e)
        return []
    for entry in entries:
        try:
            if _sweep_one(entry, here):
                removed.append(Path(entry.path))
        except OSError as e:
            log.warning("could not check or remove %s: %s", entry.path, e)
    return removed


def _sweep_one(entry: os.DirEntry[str], here: ProcessSpace) -> bool:
    if not is_root_name(entry.name) or not entry.is_dir(follow_symlinks=False) \
            or entry.stat(follow_symlinks=False).st_uid != os.getuid():
        return False
    try:
        fd = os.open(os.path.join(entry.path, MARKER), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False  # no marker: being created now, or not a worker's
    with os.fdopen(fd, "rb") as marker:
        lock = _try_lock(marker.fileno(), wait=False)
        if lock is LockProbe.HELD:
            return False
        owner = Owner.from_json(marker.read(64 * 1024).decode("utf-8", "replace"))
        if owner is None or not owner_gone(owner, lock, pid_state(owner.pid), here):
            return False  # no whole marker: being written now, or not a worker's
        # Removed while this sweeper holds the lock: another one starting now skips it.
        shutil.rmtree(entry.path, ignore_errors=True)
    log.info("removed %s, the temporary files of worker process %d, which is gone",
             entry.path, owner.pid)
    return True


class WorkerTempRoot:
    """This process's root (see the module docstring): ``plugins`` and ``spark``
    exist once it is created; the marker's lock is held until :meth:`remove`.

    Ownership: created and removed by the thread that builds and stops the
    worker; the paths are read-only after creation.
    """

    def __init__(self, path: Path, marker_fd: int) -> None:
        self.path = path
        self.plugins = path / "plugins"
        self.spark = path / "spark"
        self._marker_fd: int | None = marker_fd

    @classmethod
    def create(cls, parent: str | Path | None = None) -> WorkerTempRoot:
        """Make a new root under ``parent`` (default: the temporary directory),
        with its marker written under its lock. Sweeping is the caller's
        (:func:`sweep_stale_roots`, before this)."""
        pid = os.getpid()
        path = Path(tempfile.mkdtemp(prefix=f"{ROOT_PREFIX}{pid}-", dir=parent))
        # Non-inheritable (Python's default): the Spark JVM and other children
        # must not keep the lock alive after this process dies.
        fd = os.open(path / MARKER, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            # Waits only while a sweeper probing this marker holds it (moments);
            # the content is written under the lock, so a sweeper that gets the
            # lock and reads a whole marker knows the owner let it go.
            locked = _try_lock(fd, wait=True) is LockProbe.FREE
            owner = Owner(pid, start_ticks(pid), current_space(), locked)
            os.write(fd, owner.to_json().encode())
            root = cls(path, fd)
            root.plugins.mkdir()
            root.spark.mkdir()
        except BaseException:
            os.close(fd)
            shutil.rmtree(path, ignore_errors=True)
            raise
        return root

    def remove(self) -> None:
        """Delete the root, then let its lock go. Idempotent."""
        if self._marker_fd is None:
            return
        shutil.rmtree(self.path, ignore_errors=True)
        with contextlib.suppress(OSError):
            os.close(self._marker_fd)
        self._marker_fd = None

