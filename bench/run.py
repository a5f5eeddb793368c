"""Runs every benchmark scenario against one broker and writes the results.

    .venv/bin/python -m bench.run --bootstrap-server HOST:PORT [--runs 3] [--scale 1.0]

(``bash bench/run.sh`` starts a broker of its own and calls this.) Writes
``bench/results/latest.json``, ``bench/results/latest.md`` (the tables),
``bench/results/profile.md`` (py-spy profiles of the task loop),
``docs/benchmarks-throughput.png`` (throughput against transaction size) and
``docs/benchmarks-scaling.png`` (throughput against tasks, ``bench.scaling``),
and prints the tables. Figures are medians of ``--runs`` runs; "spread" is
(max - min) / median.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import Measurement, Scenario
from bench.java_limit import run_java_limit
from bench.limit import run_limit

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PLOT = REPO / "docs" / "benchmarks-throughput.png"
SCALING_PLOT = REPO / "docs" / "benchmarks-scaling.png"

# Transaction modes shared by the limit and this project: label -> (records, ms).
MODES: dict[str, tuple[int | None, int | None]] = {
    "txn 1,000": (1000, None), "txn 10,000": (10_000, None),
    "txn 100 ms": (None, 100), "txn 1 s": (None, 1000),
}
# Project boundary -> the limit's mode with the same transaction sizes.
BOUNDARIES: dict[str, tuple[str, int, str]] = {
    "poll 1,000": ("poll", 1000, "txn 1,000"),
    "poll 10,000": ("poll", 10_000, "txn 10,000"),
    "interval 100 ms": ("interval", 100, "txn 100 ms"),
    "interval 1 s": ("interval", 1000, "txn 1 s"),
}


# Scenario suffix of the sequence connector with emit.batches=false: the plain
# SourceRecord path, next to the same scenario with RecordBatch columns.
RECORDS_FORM = "SourceRecords"


def long_factor(interval_ms: int | None) -> int:
    """Time-bounded transactions get more records, so a run spans many of them and
    several seconds (at ~1M records/s, 300k records are 3 transactions of 100 ms
    and a run would measure its start): 5x with 100 ms, 10x with 1 s."""
    if interval_ms is None:
        return 1
    return 10 if interval_ms >= 1000 else 5


def repeat(scenario: Scenario, runs: int, once: Callable[[], Measurement]) -> Scenario:
    for i in range(runs):
        m = once()
        scenario.runs.append(m)
        print(f"  {scenario.group}/{scenario.name} run {i + 1}: {m.records_per_s:,.0f} rec/s "
              f"({m.mb_per_s:.1f} MB/s), {m.txn_size:,.0f} rec/txn", flush=True)
    return scenario


def limit_scenarios(bootstrap: str, runs: int, n100: int, n1k: int) -> list[Scenario]:
    """The raw librdkafka producer (group "limit") and Kafka's Java
    ProducerPerformance (group "limit-java", time-based modes only) per mode."""
    out = []
    for size, n in ((100, n100), (1000, n1k)):
        for label, (every, ms) in MODES.items():
            k = n * long_factor(ms)
            out.append(repeat(Scenario("limit", f"{label}, {size} B"), runs,
                              partial(run_limit, bootstrap, k, size, every, ms)))
            if ms is not None:
                out.append(repeat(Scenario("limit-java", f"{label}, {size} B"), runs,
                                  partial(run_java_limit, bootstrap, k, size, ms)))
        out.append(repeat(Scenario("limit", f"no txn, {size} B"), runs,
                          partial(run_limit, bootstrap, n, size, None, None, False)))
        out.append(repeat(Scenario("limit-java", f"no txn, {size} B"), runs,
                          partial(run_java_limit, bootstrap, n, size, None, False)))
    return out


def project_scenarios(bootstrap: str, runs: int, n100: int, n1k: int,
                      workdir: Path) -> tuple[list[Scenario], Scenario]:
    from bench.project import measure_recovery, run_connector, sequence_config, start_worker

    worker = start_worker(bootstrap, workdir)
    out: list[Scenario] = []
    try:
        def seq(name: str, tasks: int, n: int, size: int, boundary: str, value: int,
                rate: float = 0, hint: int = 1, batches: bool = True) -> Scenario:
            return repeat(Scenario("project", name, tasks), runs, lambda: run_connector(
                worker, sequence_config(tasks, n, size, boundary, value, rate, batches), n,
                tasks, size, hint))

        for label, (boundary, value, _) in BOUNDARIES.items():
            hint, k = _transactions_and_records(boundary, value, n100)
            out.append(seq(f"sequence {label}, 100 B", 1, k, 100, boundary, value, hint=hint))
        # The same connector returning one SourceRecord per record: what batches buy.
        hint, k = _transactions_and_records("interval", 100, n100)
        out.append(seq(f"sequence interval 100 ms, 100 B, {RECORDS_FORM}", 1, k, 100,
                       "interval", 100, hint=hint, batches=False))
        for label in ("poll 1,000", "poll 10,000"):
            boundary, value, _ = BOUNDARIES[label]
            out.append(seq(f"sequence {label}, 1000 B", 1, n1k, 1000, boundary, value,
                           hint=max(1, n1k // value)))
        for tasks in (2, 4):
            out.append(seq(f"sequence poll 1,000, 100 B, {tasks} tasks", tasks, n100 * tasks,
                           100, "poll", 1000, hint=n100 * tasks // 1000))
        out += file_scenarios("project", worker, "FileStreamSourceConnector", runs, n100,
                              workdir)
        # Latency at half the measured maximum, interval 100 ms (the target's setting).
        top = next(s for s in out if s.name == "sequence interval 100 ms, 100 B")
        rate = 0.5 * (top.median("records_per_s") or 10_000)
        n = int(rate * 10)
        out.append(seq("sequence interval 100 ms, 100 B, at 50% of max (latency)", 1, n, 100,
                       "interval", 100, rate=rate, hint=-100))
        recovery = Scenario("project", "recovery after SIGKILL of the task process")
        for _ in range(runs):
            seconds = measure_recovery(worker)
            recovery.runs.append(Measurement(records=1, value_size=0, seconds=1,
                                             recovery_seconds=seconds))
            print(f"  recovery: {seconds:.2f} s", flush=True)
    finally:
        worker.stop()
    return out, recovery


def loop_scenarios(bootstrap: str, runs: int, n100: int) -> list[Scenario]:
    """The exactly-once task loop alone, in this process (bench.task_loop): the
    framework's own per-record cost, without the worker and Spark around it."""
    from bench.task_loop import run_loop

    out = []
    for connector in ("sequence", "file"):
        for label in ("poll 10,000", "interval 100 ms"):
            boundary, value, _ = BOUNDARIES[label]
            _, k = _transactions_and_records(boundary, value, 2 * n100)
            out.append(repeat(Scenario("loop", f"{connector} {label}, 100 B"), runs,
                              partial(run_loop, bootstrap, connector, boundary, value, k,
                                      100)))
    _, k = _transactions_and_records("interval", 100, 2 * n100)
    out.append(repeat(Scenario("loop", f"sequence interval 100 ms, 100 B, {RECORDS_FORM}"),
                      runs, lambda: run_loop(bootstrap, "sequence", "interval", 100, k,
                                             100, emit_batches=False)))
    return out


def profiles(bootstrap: str) -> str:
    """py-spy profiles of the loop alone (bench.profile), one per connector."""
    from bench.profile import profile

    parts = []
    for connector in ("sequence", "file"):
        table = profile(bootstrap, connector, "poll", 10_000)
        if table is not None:
            parts.append(f"### {connector}, poll 10,000, 100 B\n\n{table}\n")
    return "\n".join(parts)


def java_scenarios(bootstrap: str, runs: int, n100: int, workdir: Path) -> list[Scenario]:
    """Kafka Connect's FileStreamSourceConnector over the same kind of input."""
    from bench.kafka_connect import CONNECTOR_CLASS, JavaWorker

    worker = JavaWorker(bootstrap, workdir).start()
    try:
        return file_scenarios("kafka-connect", worker, CONNECTOR_CLASS, runs, n100, workdir)
    finally:
        worker.stop()


def file_scenarios(group: str, worker: Any, connector_class: str, runs: int, n100: int,
                   workdir: Path) -> list[Scenario]:
    """One file-source task per boundary, 100 B lines; same inputs for every group."""
    from bench.project import file_config, run_connector, write_inputs

    out = []
    for label, (boundary, value, _) in BOUNDARIES.items():
        hint, k = _transactions_and_records(boundary, value, n100)
        path = write_inputs(workdir, k, 100)
        out.append(repeat(Scenario(group, f"file {label}, 100 B"), runs,
                          partial(run_connector, worker,
                                  file_config(path, boundary, value, connector_class), k, 1,
                                  100, hint)))
    return out


def _transactions_and_records(boundary: str, value: int, n: int) -> tuple[int, int]:
    """(``run_connector``'s transactions hint, record count) for a boundary."""
    hint = n // value if boundary == "poll" else -value
    return hint, n * long_factor(value if boundary == "interval" else None)


def _fmt(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def _limit_for(scenario: Scenario, limits: list[Scenario]) -> Scenario | None:
    """The faster of the two producers' scenarios (librdkafka, Java) with the same
    transaction sizes and value size: ratios are against the higher limit."""
    if "latency" in scenario.name:
        return None
    size = "1000 B" if "1000 B" in scenario.name else "100 B"
    for label, (_, _, mode) in BOUNDARIES.items():
        if f" {label}," in scenario.name:
            same = [s for s in limits if s.name == f"{mode}, {size}" and s.median("records_per_s")]
            return max(same, key=lambda s: s.median("records_per_s") or 0, default=None)
    return None


def _ratio(value: float, reference: Scenario | None) -> str:
    ref = reference.median("records_per_s") if reference else None
    return f"{value / ref:.2f}" if ref else "-"


def tables(limit: list[Scenario], project: list[Scenario], recovery: Scenario,
           java: list[Scenario], loop: list[Scenario]) -> str:
    java_by_name = {s.name: s for s in java}
    lines: list[str] = []
    if limit:
        lines += ["### The limit (one producer, 1 partition)", "",
                  "librdkafka: the raw confluent-kafka loop (`bench/limit.py`); Java: Kafka's "
                  "`ProducerPerformance` (`bench/java_limit.py`, time-based transactions only). "
                  "Ratios below are against the faster of the two.", "",
                  "| mode | producer | records/s | spread | MB/s | rec/txn | CPU s / M records |",
                  "|---|---|---|---|---|---|---|"]
    for s in sorted(limit, key=lambda s: (s.name, s.group)):
        producer = "Java" if s.group == "limit-java" else "librdkafka"
        lines.append(f"| {s.name} | {producer} | {_fmt(s.median('records_per_s'))} | "
                     f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                     f"{_fmt(s.median('mb_per_s'), '{:.1f}')} | "
                     f"{_fmt(s.median('txn_size'))} | "
                     f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} |")
    if project:
        lines += ["", "### This project (one worker, Spark local[*])", "",
                  "| scenario | records/s per task | spread | MB/s per task | ratio to the limit "
                  "| ratio to Kafka Connect | latency p50 / p99 ms | CPU s / M records | "
                  "worker / task RSS MB | startup s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for s in project:
        per_task = (s.median("records_per_s") or 0) / s.tasks
        mb = (s.median("mb_per_s") or 0) / s.tasks
        ratio = _ratio(per_task, _limit_for(s, limit))
        vs_java = _ratio(per_task, java_by_name.get(s.name))
        lines.append(
            f"| {s.name} | {per_task:,.0f} | {_fmt(s.spread('records_per_s'), '{:.0%}')} | "
            f"{mb:.1f} | {ratio} | {vs_java} | {_fmt(s.median('latency_p50_ms'))} / "
            f"{_fmt(s.median('latency_p99_ms'))} | "
            f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} | "
            f"{_fmt(s.median('worker_rss_mb'))} / {_fmt(s.median('task_rss_mb'))} | "
            f"{_fmt(s.median('startup_seconds'), '{:.1f}')} |")
    if loop:
        lines += ["", "### The exactly-once task loop alone (bench.task_loop: no worker, no "
                  "Spark)", "", "| scenario | records/s | spread | ratio to the limit | "
                  "rec/txn | CPU s / M records |", "|---|---|---|---|---|---|"]
        for s in loop:
            lines.append(
                f"| {s.name} | {_fmt(s.median('records_per_s'))} | "
                f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                f"{_ratio(s.median('records_per_s') or 0, _limit_for(s, limit))} | "
                f"{_fmt(s.median('txn_size'))} | "
                f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} |")
    if java:
        lines += ["", "### Apache Kafka Connect 4.1.1 (Java), FileStreamSourceConnector, "
                  "exactly.once.source.support=enabled", "",
                  "| scenario | records/s per task | spread | MB/s | latency p50 / p99 ms | "
                  "CPU s / M records | worker RSS MB | startup s |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in java:
            lines.append(
                f"| {s.name} | {_fmt(s.median('records_per_s'))} | "
                f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                f"{_fmt(s.median('mb_per_s'), '{:.1f}')} | "
                f"{_fmt(s.median('latency_p50_ms'))} / {_fmt(s.median('latency_p99_ms'))} | "
                f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} | "
                f"{_fmt(s.median('worker_rss_mb'))} | "
                f"{_fmt(s.median('startup_seconds'), '{:.1f}')} |")
    if recovery.runs:
        lines += ["", f"Recovery after SIGKILL of the task's Python worker (REST restart "
                  f"included): median {_fmt(recovery.median('recovery_seconds'), '{:.2f}')} s, "
                  f"spread {_fmt(recovery.spread('recovery_seconds'), '{:.0%}')}."]
    return "\n".join(lines).strip()


def plot(limit: list[Scenario], project: list[Scenario], java: list[Scenario]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    def limit_series(group: str) -> list[Scenario]:
        return [s for s in limit if s.group == group and s.name.endswith(", 100 B")
                and not s.name.startswith("no txn")]

    series = {
        "raw librdkafka producer (limit)": limit_series("limit"),
        "Java ProducerPerformance (limit)": limit_series("limit-java"),
        "this project, sequence": [s for s in project if s.name.startswith("sequence")
                                   and s.name.endswith(", 100 B") and s.tasks == 1],
        "this project, file": [s for s in project if s.name.startswith("file")],
        "Kafka Connect (Java), file": java,
    }
    for label, scenarios in series.items():
        points = sorted((s.median("txn_size") or 1, s.median("records_per_s") or 0)
                        for s in scenarios)
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_xlabel("records per transaction")
    ax.set_ylabel("records/s per task (100 B values)")
    ax.set_title("Throughput against transaction size")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.run", description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="multiplies the record counts (default 1: 300k x 100 B, 60k x 1 KB) "
                             "and the scaling part's measuring window (5 s)")
    parser.add_argument("--only", choices=["limit", "loop", "project", "kafka-connect", "profile",
                                           "scaling"], default=None)
    args = parser.parse_args(argv)
    if args.runs < 1 or args.scale <= 0:
        parser.error("--runs must be >= 1 and --scale > 0")
    n100, n1k = int(300_000 * args.scale), int(60_000 * args.scale)
    started = time.time()
    def wanted(part: str) -> bool:
        return args.only in (None, part)

    from bench.limit import warm_up

    print("warming the broker up (40 s of transactional writes, not measured)", flush=True)
    warm_up(args.bootstrap_server)
    limit = limit_scenarios(args.bootstrap_server, args.runs, n100, n1k) \
        if wanted("limit") else []
    loop = loop_scenarios(args.bootstrap_server, args.runs, n100) if wanted("loop") else []
    project: list[Scenario] = []
    java: list[Scenario] = []
    scaling: list[Scenario] = []
    recovery = Scenario("project", "recovery")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        if wanted("project"):
            project, recovery = project_scenarios(args.bootstrap_server, args.runs, n100, n1k,
                                                  Path(tmp))
        if wanted("kafka-connect"):
            java = java_scenarios(args.bootstrap_server, args.runs, n100, Path(tmp))
        if wanted("scaling"):
            from bench.scaling import scaling_scenarios, window_for

            scaling = scaling_scenarios(args.bootstrap_server, args.runs,
                                        window_for(args.scale), Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    machine = (f"{platform.machine()}, {platform.processor() or 'cpu'}, "
               f"{_cores()} cores, Python {platform.python_version()}")
    profile_text = profiles(args.bootstrap_server) if wanted("profile") else ""
    text = tables(limit, project, recovery, java, loop)
    if scaling:
        from bench.scaling import plot_scaling, scaling_table

        text = f"{text}\n\n{scaling_table(scaling)}".strip()
    header = (f"Commit `{commit}`, {time.strftime('%Y-%m-%d', time.gmtime(started))}, "
              f"{machine}; {args.runs} runs per scenario, medians.\n\n")
    RESULTS.mkdir(parents=True, exist_ok=True)
    # A partial run (--only) must not replace the full results the docs quote.
    stem = f"latest-{args.only}" if args.only else "latest"
    (RESULTS / f"{stem}.md").write_text(header + text + "\n")
    (RESULTS / f"{stem}.json").write_text(json.dumps({
        "commit": commit, "machine": machine, "runs": args.runs,
        "scenarios": [{"group": s.group, "name": s.name, "tasks": s.tasks,
                       "runs": [asdict(r) for r in s.runs]}
                      for s in [*limit, *loop, *project, recovery, *java, *scaling]]},
                     indent=1))
    if profile_text:
        (RESULTS / "profile.md").write_text(header + profile_text)
    if limit and project and java:
        plot(limit, project, java)
    if scaling:
        plot_scaling(scaling, SCALING_PLOT)
    print("\n" + header + text + ("\n\n" + profile_text if profile_text else ""))
    return 0


def _cores() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
