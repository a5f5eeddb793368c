"""The suite's order and split (support/lanes.py): pure logic, on stand-in items."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from support import TESTS
from support.lanes import E2E, FAULTS, KUBERNETES, SERVICES, UNIT, order, read_times


def item(nodeid: str) -> Any:
    return SimpleNamespace(nodeid=nodeid, path=TESTS / nodeid.split("::", 1)[0])


def test_modules_run_by_lane_whole_with_the_deployment_checks_last() -> None:
    items = [item(n) for n in (
        "deploy/test_helm_chart.py::test_a",       # unit tests, but a deployment check
        "task/test_loop.py::test_unit",            # a module mixing unit and broker tests
        "task/test_loop.py::test_broker",
        "chaos/test_chaos.py::test_faults",
        "api/test_api.py::test_unit",
        "e2e/test_pipeline.py::test_e2e",
    )]
    lanes = {"deploy/test_helm_chart.py::test_a": UNIT, "task/test_loop.py::test_unit": UNIT,
             "task/test_loop.py::test_broker": SERVICES, "chaos/test_chaos.py::test_faults": FAULTS,
             "api/test_api.py::test_unit": UNIT, "e2e/test_pipeline.py::test_e2e": E2E}
    ordered = order(items, lanes)
    assert [(i.nodeid, parallel) for i, parallel in ordered] == [
        ("api/test_api.py::test_unit", True),
        ("task/test_loop.py::test_unit", True),   # its module's lane is SERVICES: still parallel
        ("task/test_loop.py::test_broker", True),
        ("e2e/test_pipeline.py::test_e2e", False),
        ("chaos/test_chaos.py::test_faults", False),
        ("deploy/test_helm_chart.py::test_a", False),
    ]


def test_a_module_with_one_slow_kind_of_test_runs_whole_in_that_lane() -> None:
    items = [item("e2e/test_mixed.py::test_unit"), item("e2e/test_mixed.py::test_kube")]
    ordered = order(items, {items[0].nodeid: UNIT, items[1].nodeid: KUBERNETES})
    assert [parallel for _, parallel in ordered] == [False, False]


def test_the_times_file_gives_steps_in_order_and_lanes_run_elsewhere(tmp_path: Path) -> None:
    times = tmp_path / "times.tsv"
    times.write_text("set-up\t42.5\nruff\t0.1\n"
                     f"lane\t{UNIT}\t81.3\t2826\n"
                     "half a line\n"  # a torn or foreign line is skipped
                     "pytest, parallel lanes (2 processes)\t143.8\n")
    steps, lanes = read_times(str(times))
    assert steps == [("set-up", 42.5), ("ruff", 0.1),
                     ("pytest, parallel lanes (2 processes)", 143.8)]
    assert lanes == {UNIT: (81.3, 2826)}
    assert read_times(None) == ([], {})
    assert read_times(str(tmp_path / "missing")) == ([], {})
