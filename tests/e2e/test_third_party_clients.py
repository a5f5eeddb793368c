"""Two Kafka Connect clients from PyPI, unchanged, against a real worker.

``kafka-connect-py`` (``kafka_connect.KafkaConnect``) and ``kafka-connect-api``
(``kafka_connect_api``) were written for Apache Kafka Connect; each call below
is one their users make. Neither client has calls for KIP-875 offsets (checked
in the versions pinned by ``pyproject.toml``); those routes are covered against
Java Connect itself by ``test_rest_parity.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from kafka_connect import KafkaConnect
from kafka_connect_api.kafka_connect_api import Api, Cluster, Connector
from support.kafka import create_topic, wait_for
from support.workers import WorkerProcess

FILE_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def test_kafka_connect_py_manages_a_file_connector_and_its_topics(
        worker: WorkerProcess, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    name, topic = unique_name("kcpy"), unique_name("kcpy-out")
    create_topic(worker.bootstrap, topic)
    source = tmp_path / "in.txt"
    source.write_text("one\ntwo\n")
    client = KafkaConnect(url=worker.url, logger=logging.getLogger("kafka-connect-py"))

    assert client.get_cluster_info()["version"]
    assert any(p["class"].endswith(".FileStreamSourceConnector")
               for p in client.list_connector_plugins())
    config = {"connector.class": FILE_SOURCE, "file": str(source), "topic": topic,
              "tasks.max": "1"}
    validation = client.validate_connector_config("FileStreamSourceConnector",
                                                  {**config, "name": name})
    assert validation["error_count"] == 0
    created = client.create_connector({"name": name, "config": config})
    assert created["name"] == name

    wait_for(lambda: client.get_connector_status(name)["tasks"][:1]
             and client.get_connector_status(name)["tasks"][0]["state"] == "RUNNING",
             90, f"{name} to run")
    assert name in client.list_connectors(expand="status")
    wait_for(lambda: client.list_connector_topics(name) == {name: {"topics": [topic]}}, 60,
             f"{topic} to be tracked")
    client.pause_connector(name)
    wait_for(lambda: client.get_connector_status(name)["connector"]["state"] == "PAUSED", 60,
             f"{name} to pause")
    client.reset_connector_topics(name)
    assert client.list_connector_topics(name) == {name: {"topics": []}}
    client.resume_connector(name)
    client.restart_connector(name, include_tasks=True)
    assert client.get_connector_config(name)["file"] == str(source)
    client.stop_connector(name)
    wait_for(lambda: client.get_connector_status(name)["connector"]["state"] == "STOPPED", 60,
             f"{name} to stop")
    client.delete_connector(name)
    assert name not in client.list_connectors()


def test_kafka_connect_api_reads_and_sets_logger_levels(
        worker: WorkerProcess, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    cluster = Cluster(Api(url=worker.url))
    assert cluster.version and cluster.kafka_cluster
    assert cluster.root_logger["level"] in ("INFO", "WARN", "ERROR", "DEBUG")
    logger = "connect_runtime.cluster.herder"
    assert logger in cluster.loggers
    try:
        changed = cluster.set_logger_log_level(logger, "DEBUG")
        assert logger in changed
        assert cluster.loggers[logger]["level"] == "DEBUG"
        assert isinstance(cluster.loggers[logger]["last_modified"], int)
    finally:
        cluster.set_logger_log_level(logger, "INFO")

    name = unique_name("kcapi")
    source = tmp_path / "in.txt"
    source.write_text("line\n")
    connector = Connector(cluster, name)
    connector.config = {"connector.class": FILE_SOURCE, "file": str(source),
                        "topic": unique_name("kcapi-out"), "tasks.max": "1"}
    assert connector.exists()
    wait_for(lambda: connector.state == "RUNNING", 60, f"{name} to run")
    connector.pause()
    wait_for(lambda: connector.state == "PAUSED", 60, f"{name} to pause")
    connector.resume()
    connector.delete()
    assert name not in cluster.connectors
