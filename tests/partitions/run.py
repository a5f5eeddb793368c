"""The partition suite's long run: ``python tests/partitions/run.py --rounds 5 --seed 7``.

Every fault of ``scenario.FAULTS`` ``--rounds`` times on a lab of workers running
``local[8]``, then every fault of ``scenario.EXECUTOR_FAULTS`` as often on a lab
with a Spark standalone cluster (their order shuffled per round, their moments
and durations drawn from ``--seed``), each followed by the verifier over
everything committed; prints the tables docs/reliability.md shows. Needs
root. ``--sweep`` removes what a killed run left (namespaces, links and
FORWARD rules named ``ptn…``) and exits.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

import network  # noqa: E402
from lab import Lab  # noqa: E402
from scenario import EXECUTOR_FAULTS, FAULTS, run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tests/partitions/run.py",
                                     description="Exactly-once under network faults.")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of every fault (default 5)")
    parser.add_argument("--seed", type=int, default=1, help="the schedule's seed (default 1)")
    parser.add_argument("--only", action="append", default=[], metavar="FAULT",
                        help="run only this fault (repeatable; a name of scenario.FAULTS or "
                        "scenario.EXECUTOR_FAULTS)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where logs go (default: a new temporary directory, kept)")
    parser.add_argument("--sweep", action="store_true",
                        help="remove a killed run's namespaces, links and rules, then exit")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"argument --rounds: must be at least 1, not {args.rounds}")
    known = [*FAULTS, *EXECUTOR_FAULTS]
    unknown = [name for name in args.only if name not in known]
    if unknown:
        parser.error(f"argument --only: no such fault {unknown}; the faults are {known}")
    why = network.available()
    if why is not None:
        print(f"run.py: the partition suite {why}", file=sys.stderr)
        return 2
    if args.sweep:
        network.sweep()
        print(f"left: {network.leftovers()}")
        return 0
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="partitions-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"logs in {workdir}", flush=True)
    # Two labs, one after the other: workers with Spark inside them, for the
    # faults of workers and the broker; then a Spark standalone cluster, for the
    # faults of executor hosts.
    for title, faults, executor_hosts in (("workers running local[8]", FAULTS, 0),
                                          ("a Spark standalone cluster", EXECUTOR_FAULTS, 2)):
        if args.only and not any(name in faults for name in args.only):
            continue
        with Lab(workdir / ("cluster" if executor_hosts else "local"),
                 executor_hosts=executor_hosts) as lab:
            scenario = run(lab, args.seed, args.rounds, args.only)
        print(f"\npartitions, {title} (seed {args.seed}, {args.rounds} rounds): exactly-once "
              f"under network faults\n{scenario.table.format()}")
        for o in scenario.observations:
            print(f"{o.fault}: {o.what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
