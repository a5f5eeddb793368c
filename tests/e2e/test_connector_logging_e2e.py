"""Logging from a connector and its tasks, as an author does it (``logging.getLogger
(__name__)``), seen in a real worker's log: each line with its time, level, logger,
connector and task, in the text and the JSON format, at the levels
``/admin/loggers`` sets, for a running task and for one started afterwards.

The connector ships through ``plugin.path``, so its tasks run in Spark's Python
workers (``local[2]``), whose output reaches the worker's through the Spark JVM.
"""

from __future__ import annotations

import json
import re
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.kafka import free_port, wait_for
from support.workers import WorkerProcess

TEXT_LINE = re.compile(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] (?P<level>[A-Z]+) "
    r"(?:\[(?P<connector>[^|\]]+)\|(?P<scope>task-\d+|worker)\] )?"
    r"(?P<message>.*) \((?P<logger>[\w.]+)\)$")
JSON_TS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
POLL = re.compile(r"^poll (\d+) (debug|info|error)$")


def write_chatty_plugin(plugin_dir: Path, package: str) -> None:
    """A connector whose connector and task log the way the docs tell authors to."""
    root = plugin_dir / package
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "source.py").write_text(textwrap.dedent("""
        import logging
        import threading

        from connect_runtime import SourceConnector, SourceTask

        log = logging.getLogger(__name__)


        class ChattyTask(SourceTask):
            def version(self):
                return "1.0"

            def start(self, config):
                self.stopping = threading.Event()
                self.polls = 0
                log.info("task started")
                log.debug("task start details: %s", sorted(config)[0])

            def poll(self):
                if self.stopping.wait(0.2):
                    return None
                self.polls += 1
                if self.polls == 1:
                    log.warning("first poll")
                log.debug("poll %d debug", self.polls)
                log.info("poll %d info", self.polls)
                if self.polls % 5 == 0:
                    log.error("poll %d error", self.polls)
                return None

            def stop(self):
                self.stopping.set()


        class ChattySourceConnector(SourceConnector):
            def version(self):
                return "1.0"

            def start(self, config):
                self.config = dict(config)
                log.info("connector started")

            def task_class(self):
                return ChattyTask

            def task_configs(self, max_tasks):
                return [dict(self.config) for _ in range(max_tasks)]

            def stop(self):
                pass
        """))


@dataclass(frozen=True)
class Line:
    ts: str
    level: str
    logger: str
    connector: str | None
    task: int | None
    message: str


def parse(raw: str, log_format: str) -> Line | None:
    """One line of the worker's output in ``log_format``; None if it is not one
    (Spark's JVM writes lines of its own)."""
    if log_format == "json":
        if not raw.startswith("{"):
            return None
        entry = json.loads(raw)
        return Line(entry["ts"], entry["level"], entry["logger"], entry.get("connector"),
                    entry.get("task"), entry["message"])
    match = TEXT_LINE.match(raw)
    if match is None:
        return None
    scope = match["scope"]
    task = int(scope.removeprefix("task-")) if scope and scope != "worker" else None
    return Line(match["ts"], match["level"], match["logger"], match["connector"], task,
                match["message"])


class WorkerLog:
    def __init__(self, worker: WorkerProcess, log_format: str, logger: str) -> None:
        self.worker, self.log_format, self.logger = worker, log_format, logger

    def raw(self) -> list[str]:
        # The last element is a line still being written, or empty.
        return self.worker.log_path.read_text(errors="replace").split("\n")[:-1]

    def lines(self, connector: str | None = None, task: int | None = None) -> list[Line]:
        parsed = (parse(raw, self.log_format) for raw in self.raw())
        return [line for line in parsed if line is not None and line.logger == self.logger
                and (connector is None or (line.connector, line.task) == (connector, task))]

    def wait(self, level: str, message: str, connector: str, task: int | None) -> Line:
        def found() -> Line | None:
            return next((line for line in self.lines(connector, task)
                         if (line.level, line.message) == (level, message)), None)
        line: Line = wait_for(found, 90, f"{level} {message!r} of {connector}/{task} "
                                         f"in {self.worker.log_path}", interval=0.5)
        return line

    def polls(self, connector: str, level: str) -> set[int]:
        """The poll numbers of task 0's ``poll <n> <level>`` lines."""
        found = set()
        for line in self.lines(connector, 0):
            match = POLL.match(line.message)
            if match and match[2] == level.lower():
                assert line.level == level, line
                found.add(int(match[1]))
        return found


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_connector_and_task_lines_reach_the_worker_log_with_context_at_set_levels(
        kafka_bootstrap: str, tmp_path: Path, unique_name: Callable[[str], str],
        log_format: str) -> None:
    package = f"chatty_{uuid.uuid4().hex[:12]}"
    plugin_dir, workdir = tmp_path / "plugins", tmp_path / "work"
    workdir.mkdir()
    write_chatty_plugin(plugin_dir, package)
    worker = WorkerProcess(kafka_bootstrap, unique_name("logging"), free_port(), workdir,
                           {"plugin.path": str(plugin_dir), "spark.master": "local[2]"},
                           env={"CONNECT_LOG_FORMAT": log_format})
    logs = WorkerLog(worker, log_format, f"{package}.source")
    first, later = unique_name("first"), unique_name("later")

    def create(name: str) -> None:
        r = worker.rest("POST", "/connectors", json={"name": name, "config": {
            "connector.class": f"{package}.source.ChattySourceConnector", "tasks.max": "1"}})
        assert r.status_code == 201, r.text
        worker.wait_tasks(name, "RUNNING", 1)

    worker.start()
    try:
        create(first)
        # The task's lines, from its Spark Python worker: time, level, logger, context.
        started = logs.wait("INFO", "task started", first, 0)
        warned = logs.wait("WARNING", "first poll", first, 0)
        # The connector's own line, on the worker: its context, no task.
        connector = logs.wait("INFO", "connector started", first, None)
        for line in (started, warned, connector):
            if log_format == "json":
                assert JSON_TS.match(line.ts), line
        # The level is INFO by default: no DEBUG line, from the task or elsewhere.
        wait_for(lambda: logs.polls(first, "INFO") >= {1, 2, 3}, 30, "three polls' INFO lines")
        assert not [line for line in logs.lines() if line.level == "DEBUG"]
        # Every line of the task's is in the worker's format: none is a bare message.
        stray = [raw for raw in logs.raw() if ("first poll" in raw or "task started" in raw)
                 and parse(raw, log_format) is None]
        assert not stray, stray

        # DEBUG for the connector's package, this worker (it runs the tasks): the
        # running task's debug lines appear...
        r = worker.rest("PUT", f"/admin/loggers/{package}", json={"level": "DEBUG"})
        assert r.status_code == 200, r.text
        assert f"{package}.source" in r.json()
        wait_for(lambda: logs.polls(first, "DEBUG"), 30, "a DEBUG poll line of the running task")
        # ...and a task started afterwards starts at DEBUG.
        create(later)
        logs.wait("DEBUG", "task start details: connector.class", later, 0)

        # ERROR, cluster-wide (through the config topic): the running task's INFO
        # and DEBUG lines stop while it keeps polling (its ERROR lines go on).
        r = worker.rest("PUT", f"/admin/loggers/{package}?scope=cluster",
                        json={"level": "ERROR"})
        assert r.status_code == 204, r.text

        def silenced_at() -> int | None:
            """The first poll whose ERROR line has no INFO line: ERROR applies from there."""
            return min(logs.polls(first, "ERROR") - logs.polls(first, "INFO"), default=None)
        since: int = wait_for(silenced_at, 30, "an ERROR poll line without its INFO line")
        wait_for(lambda: max(logs.polls(first, "ERROR")) >= since + 10, 30,
                 "two more ERROR poll lines")
        until = max(logs.polls(first, "ERROR"))
        for level in ("INFO", "DEBUG"):
            leaked = {n for n in logs.polls(first, level) if since <= n <= until}
            assert not leaked, f"{level} lines of polls {sorted(leaked)} after ERROR was set"
    finally:
        code = worker.stop()
    assert code == 0, worker.tail()
