"""Reading and writing the real broker the way tests need it (shared by all tests).

``Broker`` starts, stops and kills one with ``deploy/kafka.sh``.

``read_topic`` reads what a downstream consumer would see (``read_committed`` by
default) up to the end offsets at the time of the call; ``transaction_sizes``
turns the offsets of a one-partition topic into committed transaction sizes,
since every commit marker takes one offset.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from support import REPO

KAFKA_SH = str(REPO / "deploy" / "kafka.sh")


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = condition()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def group_settings(bootstrap: str, group: str) -> dict[str, str]:
    """The worker keys of a Connect group on the tests' one-broker cluster: its
    bootstrap, its group id and its three internal topics (named after the
    group, replication factor 1). Our workers and Kafka Connect's take the same."""
    settings = {"bootstrap.servers": bootstrap, "group.id": group}
    for store, suffix in (("config", "configs"), ("offset", "offsets"), ("status", "status")):
        settings[f"{store}.storage.topic"] = f"{group}-{suffix}"
        settings[f"{store}.storage.replication.factor"] = "1"
    return settings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_port_pair() -> int:
    """A port p such that p and p+1 are both free (broker + KRaft controller)."""
    for _ in range(50):
        p = free_port()
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
    raise RuntimeError("no free port pair on 127.0.0.1")


class Broker:
    """A broker run with ``deploy/kafka.sh`` on its own data dir and port.

    The session's shared broker is one; the chaos suite runs another, since it
    stops and kills it. ``env`` adds kafka.sh settings (``KAFKA_SASL_PORT``, ...).
    """

    def __init__(self, data_dir: Path, port: int, env: dict[str, str] | None = None, *,
                 host: str = "127.0.0.1", prefix: Sequence[str] = ()) -> None:
        """``host`` is the client listener's address; ``prefix`` goes before
        ``kafka.sh start`` (``nsenter --net=...``: the broker runs there)."""
        self.data_dir = data_dir
        self.port = port
        self.bootstrap = f"{host}:{port}"
        self._prefix = list(prefix)
        self._env = dict(os.environ, **(env or {}), KAFKA_DATA_DIR=str(data_dir),
                         KAFKA_PORT=str(port), KAFKA_HOST=host)

    def start(self) -> None:
        subprocess.run([*self._prefix, "bash", KAFKA_SH, "start"], env=self._env, check=True,
                       stdout=subprocess.DEVNULL)

    def stop(self) -> None:
        subprocess.run(["bash", KAFKA_SH, "stop"], env=self._env, check=False,
                       stdout=subprocess.DEVNULL)

    def pid(self) -> int:
        return int((self.data_dir / "broker.pid").read_text().strip())

    def features(self) -> dict[str, int]:
        """The broker's finalized feature levels (``kafka.sh features``)."""
        done = subprocess.run(["bash", KAFKA_SH, "features"], env=self._env, check=True,
                              stdout=subprocess.PIPE, text=True)
        return {name: int(level) for name, _, level in
                (line.partition("=") for line in done.stdout.split())}

    def kill(self, sig: int, timeout: float = 60) -> None:
        """Send ``sig`` and wait for the broker to exit (SIGTERM: a controlled shutdown)."""
        pid = self.pid()
        os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result()


def set_topic_config(bootstrap: str, topic: str, key: str, value: str | None) -> None:
    """Set ``topic``'s ``key`` to ``value``; None deletes it (back to the broker's
    default)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    op = AlterConfigOpType.SET if value is not None else AlterConfigOpType.DELETE
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=op)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.incremental_alter_configs([resource]).values():
        f.result(30)


def read_topic(bootstrap: str, topic: str, isolation: str = "read_committed",
               timeout: float = 30,
               decode: Callable[[bytes], Any] = orjson.loads) -> list[dict[str, Any]]:
    """Every record of ``topic`` visible at ``isolation``, read up to the end offsets;
    values as ``decode`` reads them (JSON by default; ``bytes`` for the raw bytes)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-reader",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    tps = [TopicPartition(topic, p, 0) for p in meta.partitions]
    consumer.assign(tps)
    ends = {}
    for tp in tps:
        ends[tp.partition] = _high_watermark(consumer, TopicPartition(topic, tp.partition))
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
                        "key": msg.key(), "headers": msg.headers(),
                        "value": decode(value) if value is not None else None})
    finally:
        consumer.close()
    return out


_SETTLING = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
             KafkaError.UNKNOWN_TOPIC_OR_PART)


def _high_watermark(consumer: Consumer, tp: TopicPartition, timeout: float = 15) -> int:
    """The partition's high watermark; a topic created a moment ago may answer
    NOT_LEADER_FOR_PARTITION until its leader serves it, so that is retried."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            _, high = consumer.get_watermark_offsets(tp, timeout=10)
            return int(high)
        except KafkaException as e:
            error = e.args[0]
            settling = error.retriable() or error.code() in _SETTLING
            if not settling or time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def sequences(records: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Sequence numbers per source partition, in the order they were read."""
    out: dict[int, list[int]] = {}
    for r in records:
        out.setdefault(int(r["value"]["partition"]), []).append(int(r["value"]["seq"]))
    return out



def transaction_sizes(offsets: list[int]) -> list[int]:
    """Runs of consecutive offsets in one partition: each commit marker ends a run."""
    sizes, run = [], 0
    for i, off in enumerate(offsets):
        run += 1
        if i + 1 == len(offsets) or offsets[i + 1] != off + 1:
            sizes.append(run)
            run = 0
    return sizes
