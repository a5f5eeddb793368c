"""plugin.path end to end: a connector that only the worker's plugin.path holds runs on Spark.

The plugin package is written to a directory that is on no Python path of the
worker or of Spark: the worker imports it from its staged zip, and the
executors' Python workers (separate processes started by Spark) can only get it
through ``SparkContext.addPyFile``. With a ``local`` master they share the
machine's file system, so this proves the shipping only in part; the test takes
``spark.master`` as a parameter so that a real cluster can run it too.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from support.kafka import create_topic, free_port, read_topic, wait_for
from support.workers import WorkerProcess
from user_plugins import write_plugin

TASKS, RECORDS_PER_TASK = 3, 250


# A real cluster's master can be added here (or the list built from the environment):
# nothing below assumes the executors share this machine.
@pytest.mark.parametrize("spark_master", ["local[4]"])
def test_a_connector_from_plugin_path_runs_on_the_executors(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str],
        spark_master: str) -> None:
    package = f"userplugin_{uuid.uuid4().hex[:12]}"
    plugin_dir, workdir = tmp_path / "plugins", tmp_path / "work"
    workdir.mkdir()
    write_plugin(plugin_dir, package)
    worker = WorkerProcess(kafka_bootstrap, unique_name("plugins"), free_port(), workdir,
                           {"plugin.path": str(plugin_dir), "spark.master": spark_master})
    worker.start()
    try:
        qualified = f"{package}.source.UserCountingSourceConnector"
        listed = worker.rest("GET", "/connector-plugins").json()
        assert {"class": qualified, "type": "source", "version": "7.7"} in listed

        topic, name = unique_name("out"), unique_name("user")
        create_topic(kafka_bootstrap, topic, partitions=2)
        r = worker.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": "UserCountingSource",  # alias of a plugin.path class
            "tasks.max": str(TASKS), "topic": topic,
            "records.per.task": str(RECORDS_PER_TASK)}})
        assert r.status_code == 201, r.text
        worker.wait_tasks(name, "RUNNING", TASKS)

        want = TASKS * RECORDS_PER_TASK
        records = wait_for(lambda: (rs := read_topic(kafka_bootstrap, topic))
                           and len(rs) >= want and rs, 90, f"{want} records in {topic}",
                           interval=1)
        seen = sorted((r["value"]["task"], r["value"]["n"]) for r in records)
        assert seen == [(t, n) for t in range(TASKS) for n in range(RECORDS_PER_TASK)]
        # The task modules came from the shipped zip, on the executors' side of addPyFile.
        files = {r["value"]["module_file"] for r in records}
        assert all(f"{package}.zip/{package}/util/values.py" in f for f in files), files
        # Not from the worker's staging directory (<its temp root>/plugins/).
        assert not any(f"/plugins/{package}.zip/" in f for f in files), files
        assert "Skipping plugin" not in worker.log_path.read_text()
    finally:
        code = worker.stop()
    assert code == 0, f"worker exited with {code}:\n{worker.tail()}"
    # The staging directory of the plugin zips goes with the worker.
    staged = re.findall(r"Loaded plugin \S+ as (\S+)/" + re.escape(package) + r"\.zip",
                        worker.log_path.read_text())
    assert len(staged) == 1 and not Path(staged[0]).exists()
