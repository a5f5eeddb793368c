"""Real worker processes for end-to-end tests, the fault suites and the benchmarks.

A :class:`WorkerProcess` is ``python -m connect_runtime.cli worker.properties``
in its own process group (so the Spark JVM and its Python workers die with it),
talking to the session's real broker. Helpers read topics the way a downstream
consumer would: ``read_committed``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import ssl
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from support import TESTS
from support.kafka import group_settings, wait_for
from support.processes import process_tree

__all__ = ["TEST_CONNECTORS", "WorkerProcess", "stop_all"]
TEST_CONNECTORS = TESTS / "e2e"  # testconnectors.py lives here


class WorkerProcess:
    def __init__(self, bootstrap: str, group: str, port: int, workdir: Path,
                 overrides: dict[str, str] | None = None, *, python: str = sys.executable,
                 cwd: Path | None = None, pythonpath: tuple[str, ...] = (),
                 env: dict[str, str] | None = None, scheme: str = "http",
                 verify: ssl.SSLContext | bool = True, host: str = "127.0.0.1",
                 prefix: Sequence[str] = (), standalone: Sequence[Path] | None = None,
                 config_files: Sequence[Path] | None = None) -> None:
        """``python`` runs the worker (another venv's, say), from ``cwd`` (default:
        ``workdir``), with ``pythonpath`` ahead of the test connectors and ``env``
        added to the environment. ``scheme`` is the listener's (``https`` needs the
        TLS keys in ``overrides``); ``verify`` is how the harness checks its
        certificate. ``host`` is the address the REST listener binds and
        advertises; ``prefix`` goes before the command (``nsenter --net=...``:
        it execs, so ``proc`` is still the worker itself). ``standalone``: run
        ``connect-runtime standalone`` with these connector files instead.
        ``config_files``: the worker's properties files, in order (a pod's
        ConfigMap file, then overrides), instead of the one :meth:`start` writes
        from ``bootstrap``, ``group`` and ``overrides``, which are then unused."""
        self.bootstrap = bootstrap
        self.group = group
        self.port = port
        self.host = host
        self.prefix = tuple(prefix)
        self.url = f"{scheme}://{host}:{port}"
        self.verify = verify
        self.workdir = workdir
        self.props = {
            **group_settings(bootstrap, group),
            "offset.storage.partitions": "5",
            "listeners": self.url,
            "rest.advertised.host.name": host,
            "rest.advertised.port": str(port),
            "offset.flush.interval.ms": "500",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "spark.master": "local[8]",
            "spark.driver.memory": "512m",
            **(overrides or {}),
        }
        self.python = python
        self.cwd = cwd or workdir
        self.pythonpath = pythonpath
        self.env = env or {}
        self.standalone = standalone
        self.config_files = None if config_files is None else tuple(config_files)
        self.proc: subprocess.Popen[bytes] | None = None
        self._terminated = False  # SIGTERM sent to this proc: a second one would kill it
        self.log_path = workdir / f"worker-{port}.log"

    def start(self, wait: bool = True) -> WorkerProcess:
        if self.config_files is None:
            props_path = self.workdir / f"worker-{self.port}.properties"
            props_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
            configs = [str(props_path)]
        else:
            configs = [str(f) for f in self.config_files]
        env = {**os.environ, **self.env}
        # Not the repository root: connect_runtime comes from the installed package.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (*self.pythonpath, str(TEST_CONNECTORS), env.get("PYTHONPATH", "")) if p)
        log = self.log_path.open("ab")
        mode = [] if self.standalone is None else ["standalone"]
        files = [str(f) for f in self.standalone or ()]
        self._terminated = False
        self.proc = subprocess.Popen(
            [*self.prefix, self.python, "-m", "connect_runtime.cli", *mode, *configs, *files],
            cwd=self.cwd,
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if wait:
            try:
                self.wait_healthy()
            except BaseException:
                # The caller gets no worker to stop: a fixture that failed here
                # would leave it running, with its JVM, past the session.
                self.stop(timeout=10)
                raise
        return self

    def wait_healthy(self, timeout: float = 120) -> None:
        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                return httpx.get(f"{self.url}/health", timeout=2,
                                 verify=self.verify).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(healthy, timeout, f"worker {self.url} to become healthy")

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def signal_tree(self, sig: int) -> None:
        """Signal the worker and every descendant, as when its whole pod dies or stalls.

        A process group is not enough: PySpark's daemon puts itself and the
        Python workers running the tasks in a group of their own.
        """
        assert self.proc is not None
        done: set[int] = set()
        while True:  # until no new descendant appears (a stopped parent forks no more)
            todo = [p for p in process_tree(self.proc.pid) if p not in done]
            if not todo:
                return
            for pid in todo:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            done.update(todo)
            if sig == signal.SIGKILL:
                return  # the killed have no children left to find

    def terminate(self) -> None:
        """Ask the worker to stop (SIGTERM, once) without waiting: :func:`stop_all`
        stops several at once. A worker a test left SIGSTOPped is resumed first,
        so it can stop gracefully."""
        if self.proc is None or self.proc.poll() is not None or self._terminated:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        self._terminated = True

    def stop(self, timeout: float = 60) -> int | None:
        """:meth:`terminate`, wait (graceful task stop), then SIGKILL the whole
        process group; the worker's exit status, None if it had to be killed."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        code = self.proc.poll()
        if code is None:
            self.signal_tree(signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        return code

    # REST conveniences -------------------------------------------------------
    def rest(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        kwargs.setdefault("timeout", 120)
        return httpx.request(method, f"{self.url}{path}", **kwargs)

    def status(self, connector: str) -> dict[str, Any]:
        r = self.rest("GET", f"/connectors/{connector}/status")
        return r.json() if r.status_code == 200 else {}

    def task_states(self, connector: str) -> list[str]:
        return [t["state"] for t in self.status(connector).get("tasks", [])]

    def wait_tasks(self, connector: str, state: str, count: int, timeout: float = 90) -> None:
        wait_for(lambda: self.task_states(connector) == [state] * count, timeout,
                 f"{count} task(s) of {connector} to be {state}")

    def slots(self) -> list[dict[str, Any]]:
        return list(self.rest("GET", "/internal/tasks").json())


def stop_all(workers: Sequence[WorkerProcess], timeout: float = 60) -> list[int | None]:
    """Stop ``workers`` together, as a cluster's pods are deleted together: each
    is told first, then each is waited for (:meth:`WorkerProcess.stop`), so the
    graceful stops overlap instead of adding up. The exit statuses, in order."""
    for worker in workers:
        worker.terminate()
    return [worker.stop(timeout) for worker in workers]
