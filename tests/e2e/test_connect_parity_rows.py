"""Small REST parity rows on a real worker, each measured on Kafka Connect 4.1.1 first.

* ``initial_state=PAUSED``: no task configs until resumed (``tasks: []`` in the
  status and the info); a connector paused later keeps its tasks, PAUSED.
* Status objects carry ``version`` (KIP-891): the connector's and the task's.
* Connect's Java class name of the file connector works as ``connector.class``.
* A non-JSON ``Content-Type`` is a 415 through the real HTTP server.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from support.kafka import create_topic, wait_for
from support.workers import WorkerProcess

import connect_runtime

VERSION = connect_runtime.__version__


def test_a_connector_created_paused_has_no_tasks_until_resumed(
        worker: WorkerProcess, unique_name: Callable[[str], str]) -> None:
    topic, name = unique_name("paused-seq"), unique_name("paused")
    create_topic(worker.bootstrap, topic)
    config = {"connector.class": "SequenceSource", "topic": topic, "tasks.max": "2",
              "partitions": "2", "rate.per.sec": "20"}
    created = worker.rest("POST", "/connectors",
                          json={"name": name, "config": config, "initial_state": "PAUSED"})
    assert created.status_code == 201, created.text
    assert created.json()["tasks"] == []
    wait_for(lambda: worker.status(name).get("connector", {}).get("state") == "PAUSED", 60,
             f"{name} to be PAUSED")
    # Several reconcile passes (one a second): still no task configs.
    time.sleep(4)
    paused = worker.status(name)
    assert paused["tasks"] == []
    assert (paused["connector"]["state"], paused["connector"]["version"]) == ("PAUSED", VERSION)
    assert worker.rest("GET", f"/connectors/{name}").json()["tasks"] == []
    assert worker.rest("GET", f"/connectors/{name}/tasks").json() == []

    assert worker.rest("PUT", f"/connectors/{name}/resume").status_code == 202
    worker.wait_tasks(name, "RUNNING", 2)
    status = worker.status(name)
    assert status["connector"]["state"] == "RUNNING"
    assert status["connector"]["version"] == VERSION
    assert [t["version"] for t in status["tasks"]] == [VERSION, VERSION]
    task = worker.rest("GET", f"/connectors/{name}/tasks/1/status").json()
    assert (task["id"], task["version"]) == (1, VERSION)
    expanded = worker.rest("GET", "/connectors", params={"expand": "status"}).json()
    assert expanded[name]["status"]["tasks"][0]["version"] == VERSION

    # Paused once running: the tasks stay, PAUSED, as they did before this change.
    assert worker.rest("PUT", f"/connectors/{name}/pause").status_code == 202
    worker.wait_tasks(name, "PAUSED", 2)
    assert len(worker.rest("GET", f"/connectors/{name}").json()["tasks"]) == 2
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_connects_class_name_of_the_file_connector_runs_it(
        worker: WorkerProcess, unique_name: Callable[[str], str], tmp_path: Path) -> None:
    topic, name = unique_name("java-name"), unique_name("java-name")
    create_topic(worker.bootstrap, topic)
    source = tmp_path / "lines.txt"
    source.write_text("one\ntwo\n")
    java_name = "org.apache.kafka.connect.file.FileStreamSourceConnector"
    validated = worker.rest("PUT", f"/connector-plugins/{java_name}/config/validate",
                            json={"connector.class": java_name, "name": name,
                                  "topic": topic, "file": str(source)})
    assert validated.status_code == 200 and validated.json()["error_count"] == 0
    created = worker.rest("POST", "/connectors", json={"name": name, "config": {
        "connector.class": java_name, "topic": topic, "file": str(source)}})
    assert created.status_code == 201, created.text
    worker.wait_tasks(name, "RUNNING", 1)
    assert worker.status(name)["tasks"][0]["version"] == VERSION
    assert worker.rest("DELETE", f"/connectors/{name}").status_code == 204


def test_every_plugin_type_is_listed_and_foreign_media_types_are_refused(
        worker: WorkerProcess) -> None:
    everything = worker.rest("GET", "/connector-plugins",
                             params={"connectorsOnly": "false"}).json()
    assert {"class": "org.apache.kafka.connect.json.JsonConverter", "type": "converter",
            "version": VERSION} in everything
    connectors = worker.rest("GET", "/connector-plugins").json()
    assert connectors == [p for p in everything if p["type"] == "source"]
    assert {"class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "type": "source", "version": VERSION} in connectors
    refused = worker.rest("GET", "/connectors", headers={"Content-Type": "text/plain"})
    assert refused.status_code == 415
    assert refused.json() == {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"}
    unsent = worker.rest("POST", "/connectors", content=b'{"name": "x", "config": {}}')
    assert unsent.status_code == 415
