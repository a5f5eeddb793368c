"""A real Spark standalone cluster on loopback, from the installed PySpark's own jars.

``SparkStandaloneCluster(workdir)`` starts one Master and N Workers with
``$SPARK_HOME/bin/spark-class`` (SPARK_HOME is the ``pyspark`` package directory
of this interpreter), each in a process group of its own, everything bound to
127.0.0.1 and everything it writes inside ``workdir``:

* ``workdir/master.log``, ``workdir/worker-<i>.log``: the daemons' output;
* ``workdir/worker-<i>/<app-id>/<executor-id>/{stdout,stderr}``: executors';
* ``workdir/conf``: SPARK_CONF_DIR (a ``log4j2.properties`` with millisecond
  timestamps; no ``spark-env.sh`` or ``spark-defaults.conf`` is read from
  anywhere else), ``workdir/local``: SPARK_LOCAL_DIRS, ``workdir/tmp``: the JVMs'
  ``java.io.tmpdir`` and the Python workers' TMPDIR (JVMs run with
  ``-XX:-UsePerfData``, so nothing goes to ``/tmp/hsperfdata_*`` either).

Every process the cluster starts, down to the executors' PySpark daemons and
workers, inherits ``SPARK_STANDALONE_FIXTURE=<workdir>`` in its environment;
``stop()`` finds them by it (an executor whose Worker died, or a PySpark daemon,
which puts itself in a process group of its own, is still found) and
SIGTERMs, then SIGKILLs, them all.

Drivers are the tests' own processes: give them ``cluster.driver_conf()`` and
``cluster.driver_env()`` (loopback addresses, the same log format and temporary
directories inside ``workdir``).

A test module uses the fixture by importing it (pytest registers an imported
fixture under its ``name``; the function's own name differs so that ruff's F811
does not flag the test's parameter)::

    from spark_standalone import SparkStandaloneCluster, spark_cluster_fixture  # noqa: F401

    pytestmark = pytest.mark.spark_cluster

    def test_x(spark_cluster: SparkStandaloneCluster) -> None: ...

``spark_cluster`` is per test; ``spark_cluster_module`` (import
``spark_cluster_module_fixture``) shares one cluster per test module.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
import pyspark
import pytest

from support import processes
from support.kafka import free_port, wait_for

SPARK_HOME = Path(pyspark.__file__).resolve().parent
MARKER_ENV = "SPARK_STANDALONE_FIXTURE"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

# Millisecond timestamps, so that the daemons', executors' and drivers' logs
# can be lined up (Spark's default profile logs whole seconds).
LOG4J2_PROPERTIES = """\
rootLogger.level = info
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss.SSS} %p %c{1}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.hadoop.name = org.apache.hadoop
logger.hadoop.level = warn
# A PySpark driver lowers its console to WARN (Spark's shell filter) unless a
# logger is configured explicitly; the scheduler's INFO lines (tasks started and
# lost, executors added, registered and lost) are what tests read.
logger.scheduler.name = org.apache.spark.scheduler
logger.scheduler.level = info
"""

# Variables that spark-class, load-spark-env.sh, the launcher or the JVM read
# and that must come from this cluster, not from whoever runs the tests.
_INHERITED_SPARK_VARS = ("SPARK_", "PYSPARK_", "HADOOP_CONF_DIR", "YARN_CONF_DIR",
                         "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS")


@dataclass(frozen=True)
class Place:
    """Where a daemon runs: the address it binds and advertises, and a command
    prefix (``nsenter --net=...``, for the partition suite; empty: here)."""

    ip: str = "127.0.0.1"
    prefix: tuple[str, ...] = ()


LOOPBACK = Place()


@dataclass(frozen=True)
class Executor:
    """One executor JVM of this cluster."""

    pid: int
    worker: int  # index of the Worker that launched it (its work dir is worker-<i>)
    executor_id: str
    app_id: str


# ----------------------------------------------------------------------------
# /proc helpers


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_cmdline(pid: int) -> list[str]:
    raw = _read(f"/proc/{pid}/cmdline") or b""
    return [a.decode(errors="replace") for a in raw.split(b"\0") if a]


def proc_cwd(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return None


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, ppid, pgid) from /proc/<pid>/stat."""
    raw = _read(f"/proc/{pid}/stat")
    if raw is None:
        return None
    fields = raw[raw.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1]), int(fields[2])


def _pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _environ_has(pid: int, entry: bytes) -> bool:
    raw = _read(f"/proc/{pid}/environ")
    return raw is not None and entry in raw.split(b"\0")


def _arg(cmdline: list[str], name: str) -> str | None:
    with contextlib.suppress(ValueError, IndexError):
        return cmdline[cmdline.index(name) + 1]
    return None


# ----------------------------------------------------------------------------


class SparkStandaloneCluster:
    """One Spark standalone Master and ``workers`` Workers on 127.0.0.1."""

    def __init__(self, workdir: Path, workers: int = 2, cores_per_worker: int = 2,
                 memory_per_worker: str = "1g", *, master: Place = LOOPBACK,
                 worker_places: tuple[Place, ...] = ()) -> None:
        """``master`` and ``worker_places`` (one per Worker; default: all on
        loopback) say where each daemon runs and which address it uses."""
        self.workdir = Path(workdir).resolve()
        self.workers = workers
        self.master_place = master
        self.worker_places = worker_places or (LOOPBACK,) * workers
        if len(self.worker_places) != workers:
            raise ValueError(f"{workers} workers but {len(self.worker_places)} places")
        self.cores_per_worker = cores_per_worker
        self.memory_per_worker = memory_per_worker
        self.conf_dir = self.workdir / "conf"
        self.tmp_dir = self.workdir / "tmp"
        self.local_dir = self.workdir / "local"
        self.master_port = 0
        self.master_webui_port = 0
        self.worker_webui_ports: list[int] = []
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        self._marker = f"{MARKER_ENV}={self.workdir}".encode()
        self.startup_seconds: float | None = None

    # -- lifecycle -------------------------------------------------------------

    @property
    def master_url(self) -> str:
        return f"spark://{self.master_place.ip}:{self.master_port}"

    @property
    def master_webui(self) -> str:
        return f"http://{self.master_place.ip}:{self.master_webui_port}"

    def worker_dir(self, index: int) -> Path:
        return self.workdir / f"worker-{index}"

    def _env(self, place: Place = LOOPBACK) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(_INHERITED_SPARK_VARS)}
        env.update(self.driver_env())
        env.update({
            "SPARK_HOME": str(SPARK_HOME),
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
            "SPARK_PID_DIR": str(self.workdir / "pids"),
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
            "SPARK_PUBLIC_DNS": place.ip,
            "SPARK_LOCAL_IP": place.ip,
            "SPARK_DAEMON_MEMORY": "512m",
            # No REST submission server (it would take the fixed port 6066) and
            # no silent move to the next port if ours was taken meanwhile.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false -Dspark.port.maxRetries=0",
            "SPARK_WORKER_OPTS": "-Dspark.port.maxRetries=0",
            MARKER_ENV: str(self.workdir),
        })
        return env

    def driver_env(self) -> dict[str, str]:
        """Environment entries for a driver process talking to this cluster.

        PYSPARK_PYTHON matters: a driver started as ``python script.py`` takes the
        executors' Python from it (``SparkContext.pythonExec``, default ``python3``);
        ``spark.pyspark.python`` is read only by ``spark-submit``.
        """
        return {
            "PYSPARK_PYTHON": sys.executable,
            "SPARK_CONF_DIR": str(self.conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOCAL_DIRS": str(self.local_dir),
            "TMPDIR": str(self.tmp_dir),
            "JAVA_TOOL_OPTIONS": f"-Djava.io.tmpdir={self.tmp_dir} -XX:-UsePerfData",
        }

    def driver_conf(self) -> dict[str, str]:
        """Spark conf for a driver on this machine, talking to this cluster."""
        return {
            "spark.master": self.master_url,
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.pyspark.python": sys.executable,
        }

    def _spawn(self, name: str, args: list[str], place: Place = LOOPBACK) -> None:
        log = self.workdir / f"{name}.log"
        self._logs.append(log)
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [*place.prefix, str(SPARK_HOME / "bin" / "spark-class"), *args],
                cwd=self.workdir, env=self._env(place), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        self._procs.append(proc)

    def start(self, timeout: float = 120) -> SparkStandaloneCluster:
        begin = time.monotonic()
        for d in (self.conf_dir, self.tmp_dir, self.local_dir, self.workdir / "logs",
                  self.workdir / "pids", self.workdir / "work"):
            d.mkdir(parents=True, exist_ok=True)
        (self.conf_dir / "log4j2.properties").write_text(LOG4J2_PROPERTIES)
        self.master_port, self.master_webui_port = free_port(), free_port()
        self.worker_webui_ports = [free_port() for _ in range(self.workers)]
        try:
            self._spawn("master", [MASTER_CLASS, "--host", self.master_place.ip,
                                   "--port", str(self.master_port),
                                   "--webui-port", str(self.master_webui_port)],
                        self.master_place)
            for i in range(self.workers):
                self.worker_dir(i).mkdir(parents=True, exist_ok=True)
                place = self.worker_places[i]
                self._spawn(f"worker-{i}", [
                    WORKER_CLASS, self.master_url, "--host", place.ip,
                    "--cores", str(self.cores_per_worker),
                    "--memory", self.memory_per_worker,
                    "--webui-port", str(self.worker_webui_ports[i]),
                    "--work-dir", str(self.worker_dir(i))], place)
            self._wait_alive(timeout)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - begin
        return self

    def _wait_alive(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        state: dict[str, Any] | None = None
        while time.monotonic() < deadline:
            dead = [p for p in self._procs if p.poll() is not None]
            if dead:
                raise RuntimeError(
                    f"Spark standalone process exited early (rc {dead[0].returncode}, "
                    f"{dead[0].args!r})\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                state = self.master_state()
                alive = [w for w in state.get("workers", []) if w.get("state") == "ALIVE"]
                if len(alive) >= self.workers:
                    return
            time.sleep(0.25)
        raise RuntimeError(f"Spark standalone cluster not up after {timeout:.0f}s "
                           f"(master state: {state!r})\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        out = []
        for log in self._logs:
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            out.append(f"--- {log} (last {lines} lines)\n" + "\n".join(text[-lines:]))
        return "\n".join(out)

    def processes(self) -> list[int]:
        """Every live process this cluster started, directly or not."""
        own = {p.pid for p in self._procs if processes.alive(p.pid)}
        for pid in list(own):
            own.update(processes.descendants(pid))
        for pid in _pids():
            if pid not in own and pid != os.getpid() and _environ_has(pid, self._marker) \
                    and processes.alive(pid):
                own.add(pid)
        return sorted(own)

    def stop(self, grace: float = 5) -> None:
        """Stop the daemons and everything they launched; idempotent."""
        groups = {p.pid for p in self._procs}  # start_new_session: pgid == pid
        pids = set(self.processes())
        for pid in pids:
            stat = _proc_stat(pid)
            if stat is not None:
                groups.add(stat[2])
        groups.discard(os.getpgrp())
        # Workers (whose shutdown kills their executors) before the master.
        master = self._procs[0].pid if self._procs else None
        for pgid in sorted(groups, key=lambda g: g == master):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(processes.alive(p) for p in pids):
            time.sleep(0.1)
        for _ in range(20):
            left = set(self.processes()) | {p for p in pids if processes.alive(p)}
            if not left:
                break
            for pid in left:
                stat = _proc_stat(pid)
                if stat is not None:
                    groups.add(stat[2])
            groups.discard(os.getpgrp())
            for pgid in groups:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for p in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
        survivors = self.processes()
        if survivors:
            raise RuntimeError(f"Spark standalone processes survived SIGKILL: {survivors}")

    def __enter__(self) -> SparkStandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- inspection ------------------------------------------------------------

    def master_state(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.master_webui}/json/", timeout=5) as resp:
            state: dict[str, Any] = orjson.loads(resp.read())
        return state

    def applications(self, include_completed: bool = False) -> list[dict[str, Any]]:
        """The master's active apps (``id``, ``name``, ``cores``, ``state``, ...)."""
        state = self.master_state()
        apps = list(state.get("activeapps", []))
        if include_completed:
            apps += state.get("completedapps", [])
        return apps

    def executors(self, app_name_or_id: str | None = None) -> list[Executor]:
        """Live executor JVMs launched by this cluster's Workers, optionally of one app.

        An app name is resolved to ids with the master's active and completed apps.
        """
        app_ids: set[str] | None = None
        if app_name_or_id is not None:
            app_ids = {app_name_or_id}
            if not app_name_or_id.startswith("app-"):
                with contextlib.suppress(OSError, ValueError):
                    app_ids |= {a["id"] for a in self.applications(include_completed=True)
                                if a.get("name") == app_name_or_id}
        out = []
        for pid in _pids():
            cmd = proc_cmdline(pid)
            if EXECUTOR_CLASS not in cmd or not processes.alive(pid):
                continue
            worker = self._worker_of(pid)
            if worker is None:
                continue
            app_id = _arg(cmd, "--app-id") or ""
            if app_ids is not None and app_id not in app_ids:
                continue
            out.append(Executor(pid=pid, worker=worker,
                                executor_id=_arg(cmd, "--executor-id") or "", app_id=app_id))
        return sorted(out, key=lambda e: (e.app_id, int(e.executor_id or -1)))

    def _worker_of(self, pid: int) -> int | None:
        """The Worker index whose work dir the executor runs in (<work-dir>/<app>/<exec>)."""
        cwd = proc_cwd(pid)
        if cwd is None:
            return None
        for i in range(self.workers):
            root = str(self.worker_dir(i))
            if cwd == root or cwd.startswith(root + os.sep):
                return i
        return None

    def python_workers(self, executor_pid: int) -> list[int]:
        """The PySpark daemon and worker processes descended from an executor JVM."""
        return [pid for pid in processes.descendants(executor_pid)
                if any("pyspark" in a or "python" in os.path.basename(a)
                       for a in proc_cmdline(pid)[:3])]


def _cluster(workdir: Path) -> Iterator[SparkStandaloneCluster]:
    cluster = SparkStandaloneCluster(workdir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(name="spark_cluster")
def spark_cluster_fixture(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """A started 2-worker (2 cores, 1g each) standalone cluster, stopped after the test."""
    yield from _cluster(tmp_path_factory.mktemp("spark-cluster"))


@pytest.fixture(name="spark_cluster_module", scope="module")
def spark_cluster_module_fixture(
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkStandaloneCluster]:
    """The same, shared by the tests of one module."""
    yield from _cluster(tmp_path_factory.mktemp("spark-cluster"))


__all__ = ["Executor", "SparkStandaloneCluster", "spark_cluster_fixture",
           "spark_cluster_module_fixture", "wait_for"]
