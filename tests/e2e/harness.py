"""Real worker processes for end-to-end tests (and the chaos suite).

A :class:`WorkerProcess` is ``python -m connect_runtime.cli worker.properties``
in its own process group (so the Spark JVM and its Python workers die with it),
talking to the session's real broker. Helpers read topics the way a downstream
consumer would: ``read_committed``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

REPO = Path(__file__).resolve().parents[2]
TEST_CONNECTORS = Path(__file__).resolve().parent  # testconnectors.py lives here


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


class WorkerProcess:
    def __init__(self, bootstrap: str, group: str, port: int, workdir: Path,
                 overrides: dict[str, str] | None = None) -> None:
        self.bootstrap = bootstrap
        self.group = group
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.workdir = workdir
        self.props = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets",
            "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "5",
            "listeners": f"http://127.0.0.1:{port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(port),
            "offset.flush.interval.ms": "500",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "spark.master": "local[8]",
            "spark.driver.memory": "512m",
            **(overrides or {}),
        }
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = workdir / f"worker-{port}.log"

    def start(self, wait: bool = True) -> WorkerProcess:
        props_path = self.workdir / f"worker-{self.port}.properties"
        props_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(TEST_CONNECTORS), str(REPO), env.get("PYTHONPATH", "")) if p)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "connect_runtime.cli", str(props_path)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        if wait:
            self.wait_healthy()
        return self

    def wait_healthy(self, timeout: float = 120) -> None:
        def healthy() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                return httpx.get(f"{self.url}/health", timeout=2).status_code == 200
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

    def stop(self, timeout: float = 60) -> int | None:
        """SIGTERM, wait (graceful task stop), then SIGKILL the whole process group."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        code = self.proc.poll()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        return code

    # REST conveniences -------------------------------------------------------
    def rest(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        return httpx.request(method, f"{self.url}{path}", timeout=120, **kwargs)

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


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed",
               timeout: float = 30) -> list[dict[str, Any]]:
    """Every record of ``topic`` visible at ``isolation``, read up to the end offsets."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-reader",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
    consumer.assign(tps)
    ends = {}
    for tp in tps:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=10)
        ends[tp.partition] = high
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in consumer.position(
                [TopicPartition(topic, p) for p in ends])}
            if all(positions[p] >= ends[p] for p in ends if ends[p] > 0):
                break
            msg = consumer.poll(0.2)
            if msg is None or msg.error():
                continue
            value = msg.value()
            out.append({"partition": msg.partition(), "offset": msg.offset(),
                        "key": msg.key(),
                        "value": orjson.loads(value) if value is not None else None})
    finally:
        consumer.close()
    return out


def sequences(records: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Sequence numbers per source partition, in the order they were read."""
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(int(r["value"]["partition"]), []).append(int(r["value"]["seq"]))
    return out


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
