"""Apache Kafka Connect (Java), the reference: a distributed worker built from
Maven Central jars, running ``FileStreamSourceConnector`` with
``exactly.once.source.support=enabled`` on the same broker and input files."""

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

from bench.common import free_port

# Connect's own file source, configured by bench.project.file_config like ours.
CONNECTOR_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"

REPO = Path(__file__).resolve().parents[1]
VERSION = "4.1.1"
LIBS = REPO / ".cache" / f"kafka-connect-{VERSION}" / "libs"
POM = REPO / "bench" / "kafka-connect" / "pom.xml"


def fetch() -> Path:
    """The jars (connect-runtime, connect-file, connect-json and dependencies), once."""
    if not (LIBS / ".complete").exists():
        LIBS.mkdir(parents=True, exist_ok=True)
        subprocess.run(["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
                        f"-DoutputDirectory={LIBS}", "-DincludeScope=runtime"], check=True)
        (LIBS / ".complete").touch()
    return LIBS


class JavaWorker:
    """``ConnectDistributed`` in its own process group, REST on a free port."""

    def __init__(self, bootstrap: str, workdir: Path) -> None:
        self.bootstrap = bootstrap
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        group = f"bench-java-{uuid.uuid4().hex[:8]}"
        self.props = workdir / "connect-distributed.properties"
        self.props.write_text("\n".join([
            f"bootstrap.servers={bootstrap}", f"group.id={group}",
            f"config.storage.topic={group}-configs", f"offset.storage.topic={group}-offsets",
            f"status.storage.topic={group}-status",
            "config.storage.replication.factor=1", "offset.storage.replication.factor=1",
            "status.storage.replication.factor=1",
            "key.converter=org.apache.kafka.connect.storage.StringConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable=false",
            f"listeners=http://127.0.0.1:{self.port}",
            "rest.advertised.host.name=127.0.0.1", f"rest.advertised.port={self.port}",
            "exactly.once.source.support=enabled",
            "offset.flush.interval.ms=1000", ""]))
        self.log = workdir / "connect-java.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> JavaWorker:
        libs = fetch()
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                ["java", "-Xms256m", "-Xmx1g", "-cp", f"{libs}/*",
                 "org.apache.kafka.connect.cli.ConnectDistributed", str(self.props)],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
