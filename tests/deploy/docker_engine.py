"""A private Docker engine: Debian's ``dockerd`` on a socket of its own, for the
image tests and for scripts.

:class:`DockerEngine` starts ``dockerd`` (which starts its own ``containerd``)
with everything it would share with a system engine made private:

* the API socket, ``--exec-root`` (containerd's socket and state, runc's) and
  the daemon's log live in a fresh folder under /tmp (short: a unix socket path
  must stay under 108 bytes), removed on :meth:`DockerEngine.stop`;
* ``--data-root`` (images and build cache) is kept between runs, under
  ``${CONNECT_RUNTIME_CACHE:-~/.cache/connect-runtime}/docker-engine/``: that is
  what makes a second image build take seconds. One engine at a time uses it
  (an exclusive ``flock``, waited for);
* ``--containerd-namespace`` is unique, in case dockerd finds a system
  containerd and shares it;
* host networking only: no bridge, no iptables rules, no ``ip_forward`` change
  (``--bridge=none --iptables=false --ip-forward=false``), so nothing on the
  machine's network changes; containers run with ``--network host`` and builds
  with ``docker build --network host``;
* ``--config-file`` is an empty one of its own (no /etc/docker/daemon.json).

The storage driver is dockerd's own choice: ``overlay2`` where the kernel and
file system allow it (they do on the CI machine), ``vfs`` otherwise (slow, but
it works everywhere).

:meth:`DockerEngine.stop` leaves nothing behind: it removes every container of
this engine, stops dockerd with SIGTERM (dockerd stops its containerd), then
kills by pid any process still naming the run folder (containerd, shims),
unmounts anything left under the run folder or the data root, deletes the run
folder, and raises if it had to clean up any of that (dockerd should have).
A run killed before its stop is cleaned up by the next start. dockerd 20.10
also writes /etc/docker/key.json once per machine (its identity; harmless and
reused).

The ``docker_engine`` fixture (session scope, tests/deploy/conftest.py) is one
such engine, shared by every module there.

From a shell, to build the image without a system engine::

    .venv/bin/python tests/deploy/docker_engine.py bash deploy/docker/build.sh

runs the command with ``DOCKER_HOST`` pointing at a private engine, then stops it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO

if __name__ == "__main__":  # run as a script: tests/, the support package's folder, first
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.kube_script import cluster_module

# deploy/kubernetes/cluster.py's helpers: the cache folder, tools.sh, and what
# its down does too, finding processes naming a folder and mounts under it.
script = cluster_module()
CACHE: Path = script.CACHE


def dockerd_path() -> str:
    """Debian's dockerd, installed with docker.io on first use (tools.sh)."""
    return str(script.tool("dockerd"))


def docker_cli() -> str:
    cli = shutil.which("docker")
    if cli is None:
        raise RuntimeError("no docker CLI on PATH (Debian's docker.io package has one)")
    return cli


class DockerEngine:
    """One private dockerd; see the module docstring. Use as a context manager."""

    def __init__(self, home: Path = CACHE / "docker-engine", lock_timeout: float = 1800) -> None:
        self.home = home
        self.data_root = home / "data"
        self.lock_timeout = lock_timeout
        self.run_dir = Path()
        self.host = ""
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------

    def start(self, timeout: float = 60) -> DockerEngine:
        dockerd = dockerd_path()
        self.home.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            self._clean_up_after_a_killed_run()
            self.run_dir = Path(tempfile.mkdtemp(prefix="cr-docker-", dir="/tmp"))
            (self.home / "run-dir").write_text(f"{self.run_dir}\n")
            self.host = f"unix://{self.run_dir}/docker.sock"
            (self.run_dir / "daemon.json").write_text("{}\n")
            with open(self.run_dir / "dockerd.log", "ab") as log:
                self._proc = subprocess.Popen(
                    [dockerd, "--host", self.host,
                     "--data-root", str(self.data_root),
                     "--exec-root", str(self.run_dir / "exec"),
                     "--pidfile", str(self.home / "dockerd.pid"),
                     "--config-file", str(self.run_dir / "daemon.json"),
                     "--containerd-namespace", f"cr-{uuid.uuid4().hex[:8]}",
                     "--containerd-plugins-namespace", f"cr-plugins-{uuid.uuid4().hex[:8]}",
                     "--bridge=none", "--iptables=false", "--ip-forward=false",
                     "--ip-masq=false", "--userland-proxy=false", "--log-level=warn"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _acquire_lock(self) -> None:
        self._lock = open(self.home / "lock", "wb")  # noqa: SIM115 (held until stop)
        deadline = time.monotonic() + self.lock_timeout
        while True:
            try:
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.home} stayed in use by another engine for "
                                       f"{self.lock_timeout:.0f}s") from None
                time.sleep(1)

    def _clean_up_after_a_killed_run(self) -> None:
        """An earlier run killed before its stop (its lock went with it) may have
        left its dockerd, containerd and run folder: stop and remove them, by the
        pid dockerd recorded and the folder that run recorded."""
        with contextlib.suppress(OSError, ValueError):
            pid = int((self.home / "dockerd.pid").read_text().strip())
            if str(self.data_root) in script.cmdline(pid):
                script.terminate(pid, 30)
        record = self.home / "run-dir"
        with contextlib.suppress(FileNotFoundError):
            stale = Path(record.read_text().strip())
            if stale.is_absolute() and stale.name.startswith("cr-docker-"):
                for pid in script.processes_naming(stale):
                    script.terminate(pid, 10)
                _unmount_under(stale)
                shutil.rmtree(stale, ignore_errors=True)
            record.unlink()
        _unmount_under(self.data_root)
        with contextlib.suppress(FileNotFoundError):
            (self.home / "dockerd.pid").unlink()

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(
                    f"dockerd exited with {self._proc.returncode}:\n{self.log_tail()}")
            done = subprocess.run([docker_cli(), "version", "--format", "{{.Server.Version}}"],
                                  env=self.env(), capture_output=True, text=True, timeout=30)
            if done.returncode == 0:
                return
            time.sleep(0.3)
        raise RuntimeError(f"dockerd not ready after {timeout:.0f}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 60) -> None:
        """Remove every container, stop dockerd and its containerd, check that
        nothing of the engine is left; idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(subprocess.SubprocessError, OSError):
                ids = self.docker("ps", "-aq", check=False, timeout=30).stdout.split()
                if ids:
                    self.docker("rm", "-f", *ids, check=False, timeout=120)
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        leftovers: list[str] = []
        if self.run_dir != Path():
            # containerd and any shim name the run folder on their command line;
            # dockerd stops them, this is for when it could not.
            survivors = script.processes_naming(self.run_dir)
            leftovers += [f"process {p}: {script.cmdline(p)}" for p in survivors]
            for pid in survivors:
                script.terminate(pid, 10)
            # dockerd 20.10 bind-mounts the host's network namespace at
            # exec/netns/default for the "host" network and leaves it mounted
            # when it exits: expected, so unmounted without a complaint.
            expected = str(self.run_dir / "exec" / "netns" / "default")
            leftovers += [f"mount {m}" for m in script.mounts_under(self.run_dir)
                          if m != expected]
            _unmount_under(self.run_dir)
            shutil.rmtree(self.run_dir, ignore_errors=True)
            self.run_dir = Path()
        leftovers += [f"mount {m}" for m in script.mounts_under(self.data_root)]
        _unmount_under(self.data_root)
        for name in ("dockerd.pid", "run-dir"):
            with contextlib.suppress(FileNotFoundError):
                (self.home / name).unlink()
        if self._lock is not None:
            self._lock.close()  # releases the flock
            self._lock = None
        if leftovers:
            raise RuntimeError("dockerd left these behind (now removed):\n" + "\n".join(leftovers))

    def __enter__(self) -> DockerEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- use -------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment of a docker CLI (or build.sh) talking to this engine."""
        return {**os.environ, "DOCKER_HOST": self.host}

    def docker(self, *args: str, check: bool = True, timeout: float = 120,
               ) -> subprocess.CompletedProcess[str]:
        """``docker ARGS`` against this engine, output captured as text."""
        return subprocess.run([docker_cli(), *args], env=self.env(), capture_output=True,
                              text=True, timeout=timeout, check=check)

    def log_tail(self, lines: int = 40) -> str:
        with contextlib.suppress(OSError):
            text = (self.run_dir / "dockerd.log").read_text(errors="replace")
            return "\n".join(text.splitlines()[-lines:])
        return ""

    def processes(self) -> list[int]:
        """Live processes naming this engine's run folder: containerd and the shims
        (a container's own processes are the shims' children)."""
        return script.processes_naming(self.run_dir) if self.run_dir != Path() else []


# -- processes and mounts left behind --------------------------------------------


def _unmount_under(folder: Path) -> None:
    for point in script.mounts_under(folder):
        subprocess.run(["umount", "-l", point], check=False, capture_output=True)


# -- command line ---------------------------------------------------------------


@contextlib.contextmanager
def private_engine() -> Iterator[DockerEngine]:
    engine = DockerEngine().start()
    try:
        yield engine
    finally:
        engine.stop()


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.split("From a shell")[1].strip() if __doc__ else "", file=sys.stderr)
        return 2
    with private_engine() as engine:
        return subprocess.run(argv, env=engine.env(), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
