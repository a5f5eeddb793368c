"""The chart cannot render a worker config the worker rejects.

The worker process runs from exactly what a pod would get: the ConfigMap's
``worker.properties`` and the StatefulSet's environment (field references and
``$(VAR)`` expansion resolved as the kubelet does). Only the REST listener and
the advertised host differ, because this process is not in the pod's network.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
from chart import PodWorker, find, pod_environment, render, worker_properties
from kafka_helpers import free_port, read_topic, sequences, wait_for

POD = "r-connect-runtime-0"


def start_worker(tmp_path: Path, sets: dict[str, str]) -> PodWorker:
    objects = render("defaults-values.yaml", sets, namespace="connect")
    (tmp_path / "worker.properties").write_text(worker_properties(objects))
    port = free_port()
    # Outside the pod network: a free loopback port, advertised as such.
    (tmp_path / "outside-the-pod.properties").write_text(
        f"listeners=http://127.0.0.1:{port}\nrest.advertised.port={port}\n"
        "spark.driver.memory=512m\n")
    env = pod_environment(find(objects, "StatefulSet"), POD, "connect")
    assert env["CONNECT_REST_ADVERTISED_HOST_NAME"] == \
        f"{POD}.r-connect-runtime-headless.connect.svc.cluster.local"
    env["CONNECT_REST_ADVERTISED_HOST_NAME"] = "127.0.0.1"
    return PodWorker(tmp_path, [tmp_path / "worker.properties",
                                tmp_path / "outside-the-pod.properties"], env, port)


def test_rendered_config_starts_a_worker_that_delivers_exactly_once(
        kafka_bootstrap: str, tmp_path: Path) -> None:
    group = f"chart-{uuid.uuid4().hex[:8]}"
    worker = start_worker(tmp_path, {
        "kafka.bootstrapServers": kafka_bootstrap, "connect.groupId": group,
        "connect.replicationFactor": "1", "spark.local.threads": "2"})
    url = worker.url
    try:
        worker.wait_healthy(120)
        root = httpx.get(f"{url}/", timeout=10).json()
        assert root["kafka_cluster_id"]
        topic = f"{group}-seq"
        created = httpx.post(f"{url}/connectors", timeout=60, json={"name": "seq", "config": {
            "connector.class": "SequenceSourceConnector", "topic": topic, "tasks.max": "1",
            "max.records": "300", "batch.size": "50", "exactly.once.support": "required",
            "topic.creation.default.replication.factor": "1",
            "topic.creation.default.partitions": "1"}})
        assert created.status_code == 201, created.text

        def committed() -> dict[int, list[int]] | None:
            got = sequences(read_topic(kafka_bootstrap, topic))
            return got if sum(len(v) for v in got.values()) >= 300 else None
        assert wait_for(committed, 90, "300 committed records", interval=1) == \
            {0: list(range(300))}
        # The worker advertises the host the pod's environment gave it.
        status = httpx.get(f"{url}/connectors/seq/status", timeout=10).json()
        assert status["tasks"][0]["worker_id"] == url.removeprefix("http://")
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-4000:]


def test_an_invalid_rendered_config_exits_naming_the_key(tmp_path: Path) -> None:
    # The schema lets any string through connect.config (keys belong to the
    # worker); the worker is the one that knows offset.flush.interval.ms is a number.
    worker = start_worker(tmp_path, {"kafka.bootstrapServers": "127.0.0.1:1",
                                     "connect.config.offset\\.flush\\.interval\\.ms": "soon"})
    assert worker.proc.wait(60) == 2
    output = worker.output()
    assert "offset.flush.interval.ms" in output and "soon" in output, output
