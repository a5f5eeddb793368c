"""The suite's lanes: where each test runs, in what order, and the time table
printed at the end of every run (a pytest plugin).

**Lanes.** Every test belongs to one lane (:func:`lane_of`): unit tests, tests
with a broker or database, end-to-end, Spark standalone clusters, the fault
suites, Kubernetes and the image. The suite runs them in that order, module by
module (a module runs in the lane of its slowest kind of test, so its
module-scoped fixtures are set up once), with the deployment checks
(``tests/deploy/``) last: ``deploy/test.sh`` builds their tools (helm,
Kubernetes, the image's inputs) in the background while the others run, which
on a machine that has built nothing overlaps some 20 minutes of builds with
the tests instead of adding them before the first one.

``--lane=parallel`` runs only the modules whose tests are all unit tests or
tests with a broker or database (:data:`PARALLEL`), ``--lane=serial`` all the
others: ``deploy/test.sh`` runs the first in two processes (pytest-xdist, one
module to a process at a time, so module fixtures stay whole), then the second
in one. The end-to-end tests stay in the serial run: tried in two processes on
2 cores, each of them took 1.6 times as long (they start workers, Spark and
JVMs: CPU, not waiting), the two processes saved only 130 s more, and four
tests timed out waiting for tasks to run. The Spark clusters, the fault suites
and Kubernetes measure recovery under load and stay alone too.

**The time table.** ``deploy/test.sh`` times its own steps (set-up, each tool
build, ruff, mypy) into the file named by ``CONNECT_TEST_TIMES``, one
``step<TAB>seconds`` line each, and exports ``CONNECT_TEST_STARTED`` (epoch
seconds). A ``--lane=parallel`` run adds its lanes' lines there when it ends
(``lane<TAB>name<TAB>seconds<TAB>tests``, the sum over its processes). The run
of the serial lanes adds its own, each the sum of its tests' set-up, call
and tear-down, and prints the whole table in the terminal summary, just
before pytest's closing line. A run longer than :data:`WARN_AFTER_S` warns and
names the slowest test files: CI has 90 minutes, and a warm run is meant to
take at most 40.

A session-scoped fixture (the broker, a shared worker) is counted in the lane
of the first test that asked for it.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

from support import TESTS

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


DEPLOY_TESTS = TESTS / "deploy"
# The lanes a --lane=parallel run takes: their tests share the machine well.
PARALLEL = (UNIT, SERVICES)


def module_of(nodeid: str) -> str:
    """The test file of a test id (``tests/e2e/test_x.py::test_y`` -> its path part)."""
    return nodeid.split("::", 1)[0]


def order(items: list[pytest.Item], lanes: dict[str, str]) -> list[tuple[pytest.Item, bool]]:
    """``items`` in the order they run, each with whether its module may run in
    the parallel lanes (every test of it in :data:`PARALLEL`, not a deployment
    check): by module lane, the deployment checks last, otherwise as collected
    (the sort is stable)."""
    module_lane: dict[str, str] = {}
    for item in items:
        module = module_of(item.nodeid)
        current = module_lane.get(module)
        if current is None or LANES.index(lanes[item.nodeid]) > LANES.index(current):
            module_lane[module] = lanes[item.nodeid]

    def deploy(item: pytest.Item) -> bool:
        return Path(str(item.path)).is_relative_to(DEPLOY_TESTS)

    def lane_of_module(item: pytest.Item) -> str:
        return module_lane[module_of(item.nodeid)]

    ordered = sorted(items, key=lambda item: (deploy(item), LANES.index(lane_of_module(item))))
    return [(item, lane_of_module(item) in PARALLEL and not deploy(item)) for item in ordered]


class TimeTable:
    """Collects each test's seconds by lane and by file; prints the table.

    Under pytest-xdist the controller, which collects nothing, learns each
    test's lane from its reports (``user_properties``, set on the workers).
    """

    def __init__(self, only: str, controller: bool) -> None:
        self.only = only  # --lane: all, parallel or serial
        self.controller = controller  # not an xdist worker
        self.lane: dict[str, str] = {}  # nodeid -> lane
        self.by_lane: dict[str, float] = defaultdict(float)
        self.by_file: dict[str, float] = defaultdict(float)
        self.tests: dict[str, int] = defaultdict(int)
        self.started = time.time()

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config,
                                      items: list[pytest.Item]) -> None:
        for item in items:
            self.lane[item.nodeid] = lane_of(item)
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item, parallel in order(items, self.lane):
            wanted = self.only == "all" or (self.only == "parallel") == parallel
            (keep if wanted else dropped).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.user_properties.append(("lane", self.lane.get(item.nodeid, UNIT)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.controller:
            return
        told = dict(report.user_properties).get("lane")
        lane = told if isinstance(told, str) else self.lane.get(report.nodeid, UNIT)
        self.by_lane[lane] += report.duration
        self.by_file[module_of(report.nodeid)] += report.duration
        if report.when == "call":
            self.tests[lane] += 1

    def pytest_sessionfinish(self) -> None:
        times = os.environ.get("CONNECT_TEST_TIMES")
        if self.only != "parallel" or not self.controller or not times:
            return
        with open(times, "a") as out:  # one short append; the serial run prints them
            for lane in PARALLEL:
                if self.tests.get(lane):
                    out.write(f"lane\t{lane}\t{self.by_lane[lane]:.1f}\t{self.tests[lane]}\n")

    @pytest.hookimpl(trylast=True)  # after --durations' list: the last thing before the result
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        steps, lanes_elsewhere = read_times(os.environ.get("CONNECT_TEST_TIMES"))
        if self.only != "serial":  # a parallel run's own lines are its lanes already
            lanes_elsewhere = {}
        for lane, (seconds, tests) in lanes_elsewhere.items():
            self.by_lane[lane] += seconds
            self.tests[lane] += tests
        pytest_s = time.time() - self.started
        begun = float(os.environ.get("CONNECT_TEST_STARTED") or self.started)
        total = time.time() - begun
        write = terminalreporter.write_line
        terminalreporter.write_sep("=", "time table")
        for step, seconds in steps:
            write(row(step, seconds))
        write(row("pytest, all lanes" if self.only == "all" else f"pytest, {self.only} lanes",
                  pytest_s))
        for lane in LANES:
            if self.tests.get(lane) or self.by_lane.get(lane):
                where = " (sum over 2 processes)" if lane in lanes_elsewhere else ""
                write(row(f"  {lane}", self.by_lane[lane], f"{self.tests[lane]} tests{where}"))
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


def read_times(path: str | None) -> tuple[list[tuple[str, float]], dict[str, tuple[float, int]]]:
    """The steps (``step<TAB>seconds``, in order) and the lanes run in another
    process (``lane<TAB>name<TAB>seconds<TAB>tests``) of ``deploy/test.sh``'s file."""
    steps: list[tuple[str, float]] = []
    lanes: dict[str, tuple[float, int]] = {}
    if not path:
        return steps, lanes
    try:
        lines = Path(path).read_text().splitlines()
    except OSError:
        return steps, lanes
    for line in lines:
        fields = line.split("\t")
        try:
            if fields[0] == "lane" and len(fields) == 4:
                lanes[fields[1]] = (float(fields[2]), int(fields[3]))
            elif len(fields) == 2:
                steps.append((fields[0], float(fields[1])))
        except ValueError:
            continue
    return steps, lanes


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--lane", choices=("all", "parallel", "serial"), default="all",
                     help="run only the modules of the lanes that share the machine well "
                          "(unit tests, tests with a broker or database), or only the others")


def pytest_configure(config: pytest.Config) -> None:
    table = TimeTable(config.getoption("--lane"), controller=not hasattr(config, "workerinput"))
    config.pluginmanager.register(table, "connect-time-table")
