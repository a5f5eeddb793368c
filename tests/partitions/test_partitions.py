"""Exactly-once under network faults, one round of each (docs/reliability.md).

The short version of ``tests/partitions/run.py``: the broker and three workers,
each in a network namespace of its own, run three sequence connectors while the
suite cuts, half-cuts and slows their links, once per fault, in an order and at
moments drawn from ``PARTITIONS_SEED`` (default 1): the faults of workers and
the broker (``scenario.FAULTS``) with Spark ``local[8]`` inside each worker, then
the faults of executor hosts (``scenario.EXECUTOR_FAULTS``) with a Spark
standalone cluster whose master and two executor hosts have namespaces too.
Nothing of the network may be left behind.
"""

from __future__ import annotations

import os
from pathlib import Path

import network
import pytest
from lab import Lab
from scenario import run

pytestmark = [pytest.mark.partitions, pytest.mark.timeout(1500)]


def run_once(workdir: Path, executor_hosts: int, title: str,
             capsys: pytest.CaptureFixture[str]) -> None:
    why = network.available()
    assert why is None, f"the partition suite {why}"
    seed = int(os.environ.get("PARTITIONS_SEED", "1"))
    lab = Lab(workdir, executor_hosts=executor_hosts)
    try:
        with lab:
            scenario = run(lab, seed, rounds=1)
    finally:
        mine = {kind: [n for n in names if lab.net.id in n]
                for kind, names in network.leftovers().items()}
    with capsys.disabled():
        print(f"\n\npartitions, {title} (seed {seed}): exactly-once under network faults\n"
              + scenario.table.format() + "\n"
              + "".join(f"{o.fault}: {o.what}\n" for o in scenario.observations))
    assert mine == {"namespaces": [], "links": [], "forward rules": []}, mine


def test_exactly_once_across_network_faults(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    run_once(tmp_path, 0, "workers running local[8]", capsys)


def test_exactly_once_across_executor_host_faults(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    run_once(tmp_path, 2, "a Spark standalone cluster", capsys)
