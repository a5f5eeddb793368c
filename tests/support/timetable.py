"""The time table printed at the end of every run (a pytest plugin).

``deploy/test.sh`` times its own steps (set-up, each tool build, ruff, mypy)
into the file named by ``CONNECT_TEST_TIMES``, one ``step<TAB>seconds`` line
each, and exports ``CONNECT_TEST_STARTED`` (epoch seconds). This plugin adds
the suite's lanes, each the sum of its tests' set-up, call and tear-down, and
prints the whole table in the terminal summary, just before pytest's closing
line. A run longer than :data:`WARN_AFTER_S` warns and names the slowest test
files: CI has 90 minutes, and a warm run is meant to take at most 40.

A session-scoped fixture (the broker, a shared worker) is counted in the lane
of the first test that asked for it.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

WARN_AFTER_S = 45 * 60
SLOWEST_FILES = 12

# The lanes, in the order they are printed.
UNIT = "unit tests (no broker)"
SERVICES = "tests with a broker or database"
E2E = "end-to-end (worker processes)"
SPARK = "Spark standalone clusters"
FAULTS = "fault suites (chaos, partitions)"
KUBERNETES = "Kubernetes and the image"
LANES = (UNIT, SERVICES, E2E, SPARK, FAULTS, KUBERNETES)

# Fixtures that start a real service: a test asking for one is not a unit test.
SERVICE_FIXTURES = frozenset({"kafka_bootstrap", "postgres", "schema_registry", "worker"})


def lane_of(item: pytest.Item) -> str:
    """The lane a test's time is counted in, from its markers, folder and fixtures."""
    markers = {mark.name for mark in item.iter_markers()}
    if markers & {"kubernetes", "image"}:
        return KUBERNETES
    if markers & {"chaos", "partitions"}:
        return FAULTS
    if "spark_cluster" in markers:
        return SPARK
    path = Path(str(item.path))
    if path.parent.name == "e2e" or path.stem.endswith("_e2e"):
        return E2E
    if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return SERVICES
    return UNIT


class TimeTable:
    """Collects each test's seconds by lane and by file; prints the table."""

    def __init__(self) -> None:
        self.lane: dict[str, str] = {}  # nodeid -> lane
        self.by_lane: dict[str, float] = defaultdict(float)
        self.by_file: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)
        self.started = time.time()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            self.lane[item.nodeid] = lane_of(item)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        lane = self.lane.get(report.nodeid, UNIT)
        self.by_lane[lane] += report.duration
        self.by_file[report.nodeid.split("::", 1)[0]] += report.duration
        if report.when == "call":
            self.tests[lane] += 1

    @pytest.hookimpl(trylast=True)  # after --durations' list: the last thing before the result
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        steps = read_steps(os.environ.get("CONNECT_TEST_TIMES"))
        pytest_s = time.time() - self.started
        begun = float(os.environ.get("CONNECT_TEST_STARTED") or self.started)
        total = time.time() - begun
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "time table")
        for step, seconds in steps:
            write(row(step, seconds))
        write(row("pytest, all lanes", pytest_s))
        for lane in LANES:
            if self.tests.get(lane) or self.by_lane.get(lane):
                write(row(f"  {lane}", self.by_lane[lane], f"{self.tests[lane]} tests"))
        write(row("whole run", total))
        if total > WARN_AFTER_S:
            slowest = sorted(self.by_file.items(), key=lambda kv: -kv[1])[:SLOWEST_FILES]
            terminalreporter.write_sep(
                "!", f"WARNING: this run took {total / 60:.0f} min, over "
                     f"{WARN_AFTER_S // 60}; the slowest test files:", yellow=True)
            for path, seconds in slowest:
                write(row(f"  {path}", seconds))


def row(name: str, seconds: float, note: str = "") -> str:
    return f"{name:<58} {seconds:8.1f} s  {note}".rstrip()


def read_steps(path: str | None) -> list[tuple[str, float]]:
    """The ``step<TAB>seconds`` lines of ``deploy/test.sh``'s file, in order."""
    if not path:
        return []
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return []
    steps = []
    for line in lines:
        name, _, seconds = line.rpartition("\t")
        try:
            steps.append((name, float(seconds)))
        except ValueError:
            continue
    return steps


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(TimeTable(), "connect-time-table")
