"""Apache Kafka Connect 4.1.1 (Java), the reference we measure ourselves against.

A :class:`JavaWorker` is ``ConnectDistributed`` in its own process group, built
from Maven Central jars (connect-runtime, connect-file, connect-json), with
``exactly.once.source.support=enabled``, on the given broker. The REST parity test
(``test_rest_parity.py``) and the benchmark (``bench/kafka_connect.py``) share it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from support.kafka import free_port, group_settings

__all__ = ["CONNECTOR_CLASS", "VERSION", "JavaWorker", "fetch"]

# Connect's own file source; our worker accepts the same class name.
CONNECTOR_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"

REPO = Path(__file__).resolve().parents[2]
VERSION = "4.1.1"
LIBS = REPO / ".cache" / f"kafka-connect-{VERSION}" / "libs"
POM = REPO / "bench" / "kafka-connect" / "pom.xml"


def fetch() -> Path:
    """Kafka Connect's jars (:func:`maven_jars` of ``bench/kafka-connect/pom.xml``)."""
    return maven_jars(POM, LIBS)


def maven_jars(pom: Path, libs: Path) -> Path:
    """The runtime jars of ``pom``'s dependencies, resolved with Maven once and
    cached in ``libs`` (under ``.cache/``, gitignored)."""
    if not (libs / ".complete").exists():
        libs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mvn", "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                        f"-DoutputDirectory={libs}", "-DincludeScope=runtime"], check=True)
        (libs / ".complete").touch()
    return libs


class JavaWorker:
    """``ConnectDistributed`` in its own process group, REST on a free port.

    ``group`` names the Connect cluster (default: a fresh one); ``overrides`` are
    added to, or replace, the worker properties.
    """

    def __init__(self, bootstrap: str, workdir: Path, *, group: str | None = None,
                 overrides: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        group = group or f"java-connect-{uuid.uuid4().hex[:8]}"
        props = {
            **group_settings(bootstrap, group),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1", "rest.advertised.port": str(self.port),
            "exactly.once.source.support": "enabled",
            "offset.flush.interval.ms": "1000",
            **(overrides or {}),
        }
        self.props = workdir / f"connect-distributed-{self.port}.properties"
        self.props.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log = workdir / f"connect-java-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> JavaWorker:
        """Start and wait until ``GET /connectors`` answers 200 (the herder has joined)."""
        libs = fetch()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xms256m", "-Xmx1g", "-cp", f"{libs}/*",
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        return self.wait_ready(timeout)

    def wait_ready(self, timeout: float) -> JavaWorker:
        """Wait until ``GET /connectors`` answers 200; RuntimeError if the JVM exits
        or ``timeout`` passes first."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"Kafka Connect exited; see {self.log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/connectors", timeout=2).status_code == 200:
                    return self
            time.sleep(0.5)
        raise RuntimeError(f"Kafka Connect did not start; see {self.log}")

    def rest(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", timeout=60, **kwargs)

    def slots(self) -> list[dict[str, Any]]:
        return []  # tasks are threads of the worker process: no separate process

    def stop(self) -> None:
        """SIGTERM, then SIGKILL the process group if it has not exited within 60 s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
