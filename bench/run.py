"""Runs every benchmark scenario against one broker and writes the results.

    .venv/bin/python -m bench.run --bootstrap-server HOST:PORT [--runs 3] [--scale 1.0]
        [--only PART] [--method window|count|both]

(``bash bench/run.sh`` starts a broker of its own and calls this.) Writes
``bench/results/latest.json``, ``bench/results/latest.md`` (the tables),
``bench/results/profile.md`` (py-spy profiles of the task loop),
``docs/benchmarks-throughput.png`` (throughput against transaction size) and
``docs/benchmarks-scaling.png`` (throughput against tasks, ``bench.scaling``),
and prints the tables. Figures are medians of ``--runs`` runs; "spread" is
(max - min) / median.

``--method`` says how the limit, this project and Kafka Connect are measured:

* ``window`` (the default): steady state. Each source runs without end (the
  limit's producer in a process of its own, the sequence connector without
  ``max.records``, the file sources over a file larger than the window needs);
  once its first records are committed and ``WARMUP_S`` more, the records
  committed over a window of 5 s x ``--scale`` are the growth of the topic's
  last stable offsets (ListOffsets, READ_COMMITTED), with no consumer reading
  the topic; CPU is over the same window. The limit and the product are
  measured the same way, on the same number of partitions.
* ``count`` (the old method, docs/benchmarks.md#method): a fixed number of
  records; the limit timed from its first ``produce`` to its last commit with no
  consumer, the product by a ``read_committed`` consumer reading the topic
  meanwhile.
* ``both``: every throughput scenario both ways, in the same run.

The tables show the window figures, with the count ("old method") figures
beside them: from the same run with ``both``, otherwise from
``bench/results/old-method.json`` (the last full run before the change). The
task loop alone (``bench.task_loop``) and the latency scenario are always
measured by count (the loop has no consumer; latency needs one).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any

from bench.common import WARMUP_S, Measurement, Scenario, TopicSweeper, window_for
from bench.java_limit import run_java_limit, run_java_limit_window
from bench.limit import run_limit, run_limit_window

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
PLOT = REPO / "docs" / "benchmarks-throughput.png"
SCALING_PLOT = REPO / "docs" / "benchmarks-scaling.png"
# The count method's figures from the last full run before the window method
# (commit 55c7736): the "old method" columns when this run measures no counts.
OLD_METHOD = RESULTS / "old-method.json"
METHODS = {"window": ("window",), "count": ("count",), "both": ("window", "count")}

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


# Set by main: deletes each run's topics after it (common.TopicSweeper).
SWEEPER: TopicSweeper | None = None


def repeat(scenario: Scenario, runs: int, once: Callable[[], Measurement]) -> Scenario:
    for i in range(runs):
        if SWEEPER is not None:
            SWEEPER.mark()
        m = once()
        if SWEEPER is not None:
            SWEEPER.sweep()
        scenario.runs.append(m)
        print(f"  {scenario.group}/{scenario.name} [{scenario.method}] run {i + 1}: "
              f"{m.records_per_s:,.0f} rec/s "
              f"({m.mb_per_s:.1f} MB/s), {m.txn_size:,.0f} rec/txn", flush=True)
    return scenario


def limit_scenarios(bootstrap: str, runs: int, n100: int, n1k: int,
                    methods: tuple[str, ...] = ("count",), window_s: float = 5.0,
                    ) -> list[Scenario]:
    """The raw librdkafka producer (group "limit") and Kafka's Java
    ProducerPerformance (group "limit-java", time-based modes only) per mode,
    one topic partition, measured by each of ``methods``."""
    out = []
    for size, n in ((100, n100), (1000, n1k)):
        for label, (every, ms) in MODES.items():
            k = n * long_factor(ms)
            for method in methods:
                out.append(repeat(
                    Scenario("limit", f"{label}, {size} B", method=method), runs,
                    partial(run_limit_window, bootstrap, window_s, size, every, ms)
                    if method == "window" else partial(run_limit, bootstrap, k, size, every, ms)))
                if ms is not None:
                    out.append(repeat(
                        Scenario("limit-java", f"{label}, {size} B", method=method), runs,
                        partial(run_java_limit_window, bootstrap, window_s, size, ms)
                        if method == "window" else partial(run_java_limit, bootstrap, k, size, ms)))
        for method in methods:
            out.append(repeat(
                Scenario("limit", f"no txn, {size} B", method=method), runs,
                partial(run_limit_window, bootstrap, window_s, size, None, None, False)
                if method == "window" else partial(run_limit, bootstrap, n, size, None, None,
                                                   False)))
            out.append(repeat(
                Scenario("limit-java", f"no txn, {size} B", method=method), runs,
                partial(run_java_limit_window, bootstrap, window_s, size, None, False)
                if method == "window" else partial(run_java_limit, bootstrap, n, size, None,
                                                   False)))
    return out


def project_scenarios(bootstrap: str, runs: int, n100: int, n1k: int, workdir: Path,
                      methods: tuple[str, ...] = ("count",), window_s: float = 5.0,
                      ) -> tuple[list[Scenario], Scenario]:
    from bench.project import (
        measure_recovery,
        run_connector,
        run_connector_window,
        sequence_config,
        start_worker,
    )

    worker = start_worker(bootstrap, workdir)
    out: list[Scenario] = []
    try:
        def seq(name: str, tasks: int, n: int, size: int, boundary: str, value: int,
                rate: float = 0, hint: int = 1, batches: bool = True,
                only: tuple[str, ...] | None = None) -> list[Scenario]:
            done = []
            for method in only or methods:
                if method == "window":  # without max.records: it does not run out
                    config = sequence_config(tasks, 0, size, boundary, value, rate, batches)
                    once = partial(run_connector_window, worker, config, tasks, size, boundary,
                                   value, window_s)
                else:
                    once = partial(run_connector, worker, sequence_config(
                        tasks, n, size, boundary, value, rate, batches), n, tasks, size, hint)
                done.append(repeat(Scenario("project", name, tasks, method=method), runs, once))
            return done

        for label, (boundary, value, _) in BOUNDARIES.items():
            hint, k = _transactions_and_records(boundary, value, n100)
            out += seq(f"sequence {label}, 100 B", 1, k, 100, boundary, value, hint=hint)
        # The same connector returning one SourceRecord per record: what batches buy.
        hint, k = _transactions_and_records("interval", 100, n100)
        out += seq(f"sequence interval 100 ms, 100 B, {RECORDS_FORM}", 1, k, 100,
                   "interval", 100, hint=hint, batches=False)
        for label in ("poll 1,000", "poll 10,000"):
            boundary, value, _ = BOUNDARIES[label]
            out += seq(f"sequence {label}, 1000 B", 1, n1k, 1000, boundary, value,
                       hint=max(1, n1k // value))
        for tasks in (2, 4):
            out += seq(f"sequence poll 1,000, 100 B, {tasks} tasks", tasks, n100 * tasks,
                       100, "poll", 1000, hint=n100 * tasks // 1000)
        out += file_scenarios("project", worker, "FileStreamSourceConnector", runs, n100,
                              workdir, methods, window_s)
        # Latency at half the measured maximum (the first method's), interval 100 ms
        # (the target's setting); measured by a consumer whatever the method.
        top = next(s for s in out if s.name == "sequence interval 100 ms, 100 B"
                   and s.method == methods[0])
        rate = 0.5 * (top.median("records_per_s") or 10_000)
        n = int(rate * 10)
        out += seq("sequence interval 100 ms, 100 B, at 50% of max (latency)", 1, n, 100,
                   "interval", 100, rate=rate, hint=-100, only=("count",))
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
    """py-spy profiles of the loop alone (bench.profile): one per connector, and
    those of the scenarios the density targets cover (``SourceRecord``s at
    ``interval`` 100 ms, small transactions at ``poll`` 1,000)."""
    from bench.profile import profile

    parts = []
    for title, connector, boundary, size, records_form in (
            ("sequence, poll 10,000, 100 B", "sequence", "poll", 10_000, False),
            ("file, poll 10,000, 100 B", "file", "poll", 10_000, False),
            (f"sequence, interval 100 ms, 100 B, {RECORDS_FORM}", "sequence", "interval", 100,
             True),
            ("sequence, poll 1,000, 100 B", "sequence", "poll", 1_000, False)):
        table = profile(bootstrap, connector, boundary, size, records_form=records_form)
        if table is not None:
            parts.append(f"### {title}\n\n{table}\n")
    return "\n".join(parts)


def java_scenarios(bootstrap: str, runs: int, n100: int, workdir: Path,
                   methods: tuple[str, ...] = ("count",), window_s: float = 5.0,
                   ) -> list[Scenario]:
    """Kafka Connect's FileStreamSourceConnector over the same kind of input."""
    from bench.kafka_connect import CONNECTOR_CLASS, JavaWorker

    worker = JavaWorker(bootstrap, workdir).start()
    try:
        return file_scenarios("kafka-connect", worker, CONNECTOR_CLASS, runs, n100, workdir,
                              methods, window_s)
    finally:
        worker.stop()


def file_scenarios(group: str, worker: Any, connector_class: str, runs: int, n100: int,
                   workdir: Path, methods: tuple[str, ...] = ("count",),
                   window_s: float = 5.0) -> list[Scenario]:
    """One file-source task per boundary, 100 B lines; same inputs for every group
    (for the window method, one file the window cannot exhaust, ``bench.steady``)."""
    from bench.project import file_config, run_connector, run_connector_window, write_inputs
    from bench.steady import inputs

    out = []
    for label, (boundary, value, _) in BOUNDARIES.items():
        for method in methods:
            if method == "window":
                paths = inputs(workdir, 1, window_s)
                once = partial(run_connector_window, worker,
                               file_config(paths[0], boundary, value, connector_class), 1, 100,
                               boundary, value, window_s, paths)
            else:
                hint, k = _transactions_and_records(boundary, value, n100)
                path = write_inputs(workdir, k, 100)
                once = partial(run_connector, worker,
                               file_config(path, boundary, value, connector_class), k, 1, 100,
                               hint)
            out.append(repeat(Scenario(group, f"file {label}, 100 B", method=method), runs,
                              once))
    return out


def _transactions_and_records(boundary: str, value: int, n: int) -> tuple[int, int]:
    """(``run_connector``'s transactions hint, record count) for a boundary."""
    hint = n // value if boundary == "poll" else -value
    return hint, n * long_factor(value if boundary == "interval" else None)


def _fmt(value: float | None, pattern: str = "{:,.0f}") -> str:
    return "-" if value is None else pattern.format(value)


def _limit_for(scenario: Scenario, limits: list[Scenario]) -> Scenario | None:
    """The faster of the two producers' scenarios (librdkafka, Java) with the same
    transaction sizes and value size among ``limits`` (of one method): ratios are
    against the higher limit."""
    if "latency" in scenario.name:
        return None
    size = "1000 B" if "1000 B" in scenario.name else "100 B"
    for label, (_, _, mode) in BOUNDARIES.items():
        if f" {label}," in scenario.name:
            same = [s for s in limits if s.name == f"{mode}, {size}" and s.median("records_per_s")]
            return max(same, key=lambda s: s.median("records_per_s") or 0, default=None)
    return None


def _ratio(value: float | None, reference: Scenario | None) -> str:
    ref = reference.median("records_per_s") if reference else None
    return f"{value / ref:.2f}" if ref and value is not None else "-"


def _per_task(s: Scenario | None) -> float | None:
    rate = s.median("records_per_s") if s else None
    return rate / s.tasks if s and rate is not None else None


def _find(scenarios: list[Scenario], like: Scenario) -> Scenario | None:
    return next((s for s in scenarios if s.group == like.group and s.name == like.name
                 and s.tasks == like.tasks), None)


@dataclass
class Results:
    """One run's scenarios, split by method: ``new`` is what the tables show
    (the window method's scenarios if the run measured any, else the count
    method's), ``old`` the count method's beside them (this run's, or those of
    ``OLD_METHOD`` when this run measured none; empty when ``new`` is count)."""

    new: list[Scenario]
    old: list[Scenario]
    old_source: str | None  # where ``old`` comes from, for the tables' header

    @classmethod
    def of(cls, scenarios: list[Scenario], baseline: Path | None = OLD_METHOD) -> Results:
        window = [s for s in scenarios if s.method == "window"]
        count = [s for s in scenarios if s.method == "count"]
        if not window:
            return cls(count, [], None)
        measured = [s for s in count if "latency" not in s.name and s.group != "loop"]
        if measured:
            return cls(window + [s for s in count if s not in measured], measured, "this run")
        old, source = load_old(baseline) if baseline else ([], None)
        return cls(window + count, old, source)

    def group(self, *groups: str, old: bool = False) -> list[Scenario]:
        return [s for s in (self.old if old else self.new) if s.group in groups]


def load_old(path: Path) -> tuple[list[Scenario], str | None]:
    """The count-method scenarios of a results file (``OLD_METHOD``)."""
    if not path.exists():
        return [], None
    data = json.loads(path.read_text())
    names = {f.name for f in fields(Measurement)}
    out = [Scenario(d["group"], d["name"], d.get("tasks", 1),
                    [Measurement(**{k: v for k, v in r.items() if k in names})
                     for r in d["runs"]], method=d.get("method", "count"))
           for d in data["scenarios"]]
    return ([s for s in out if s.method == "count" and s.group != "scaling"],
            f"`{path.relative_to(REPO)}`, commit `{data.get('commit', '?')}`")


def method_note(results: Results, window_s: float) -> str:
    if not any(s.method == "window" for s in results.new):
        return ("Throughput by count (`--method count`): a fixed number of records, the "
                "limit timed from its first produce to its last commit, the product by a "
                "`read_committed` consumer reading the topic meanwhile.")
    note = (f"Throughput in steady state (`--method window`): once a source's first records "
            f"are committed and {WARMUP_S:g} s more, the records committed over at least "
            f"{window_s:g} s (whole transactions) by the topic's last stable offsets "
            f"(ListOffsets, READ_COMMITTED), no consumer reading; the limit and the product "
            f"measured alike, on as many partitions as tasks (1 unless the scenario says). "
            f"CPU over the same window. ")
    if results.old:
        note += (f"\"old method\": the count method (fixed record count; the limit from first "
                 f"produce to last commit without a consumer, the product by a `read_committed` "
                 f"consumer), from {results.old_source}.")
    return note


def tables(limit: list[Scenario], project: list[Scenario], recovery: Scenario,
           java: list[Scenario], loop: list[Scenario], results: Results | None = None,
           window_s: float = 5.0) -> str:
    results = results or Results.of([*limit, *project, *java, *loop], None)
    has_old = bool(results.old)
    new_limits = results.group("limit", "limit-java")
    old_limits = results.group("limit", "limit-java", old=True)
    new_java = results.group("kafka-connect")
    old_java = results.group("kafka-connect", old=True)
    old_project = results.group("project", old=True)

    def old_cols(*values: str) -> str:
        return "".join(f" {v} |" for v in values) if has_old else ""

    lines: list[str] = [method_note(results, window_s), ""]
    if limit:
        lines += ["### The limit (one producer, 1 partition)", "",
                  "librdkafka: the raw confluent-kafka loop (`bench/limit.py`); Java: Kafka's "
                  "`ProducerPerformance` (`bench/java_limit.py`, time-based transactions only). "
                  "Ratios below are against the faster of the two.", "",
                  "| mode | producer | records/s | spread | MB/s | rec/txn | CPU s / M records |"
                  + old_cols("records/s, old method", "CPU s / M, old method"),
                  "|---|---|---|---|---|---|---|" + old_cols("---", "---")]
    for s in sorted(results.group("limit", "limit-java"), key=lambda s: (s.name, s.group)):
        producer = "Java" if s.group == "limit-java" else "librdkafka"
        o = _find(old_limits, s)
        lines.append(f"| {s.name} | {producer} | {_fmt(s.median('records_per_s'))} | "
                     f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                     f"{_fmt(s.median('mb_per_s'), '{:.1f}')} | "
                     f"{_fmt(s.median('txn_size'))} | "
                     f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} |"
                     + old_cols(_fmt(o.median("records_per_s") if o else None),
                                _fmt(o.median("cpu_s_per_million") if o else None, "{:.1f}")))
    rows = results.group("project")
    if project:
        lines += ["", "### This project (one worker, Spark local[*])", "",
                  "| scenario | records/s per task | spread | MB/s per task | ratio to the limit "
                  "| ratio to Kafka Connect | latency p50 / p99 ms | CPU s / M records | "
                  "worker / task RSS MB | startup s |"
                  + old_cols("records/s per task, old method", "ratio to the limit, old method",
                             "ratio to Kafka Connect, old method", "CPU s / M, old method"),
                  "|---|---|---|---|---|---|---|---|---|---|"
                  + old_cols("---", "---", "---", "---")]
    for s in rows:
        per_task = _per_task(s)
        mb = (s.median("mb_per_s") or 0) / s.tasks
        o = _find(old_project, s)
        # Latency needs a consumer: the count method's (this run's), if any.
        lat = s if s.method == "count" else (o if results.old_source == "this run" else None)
        lines.append(
            f"| {s.name} | {_fmt(per_task)} | {_fmt(s.spread('records_per_s'), '{:.0%}')} | "
            f"{mb:.1f} | {_ratio(per_task, _limit_for(s, new_limits))} | "
            f"{_ratio(per_task, _find_named(new_java, s.name))} | "
            f"{_fmt(lat.median('latency_p50_ms') if lat else None)} / "
            f"{_fmt(lat.median('latency_p99_ms') if lat else None)} | "
            f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} | "
            f"{_fmt(s.median('worker_rss_mb'))} / {_fmt(s.median('task_rss_mb'))} | "
            f"{_fmt(s.median('startup_seconds'), '{:.1f}')} |"
            + old_cols(_fmt(_per_task(o)), _ratio(_per_task(o), _limit_for(s, old_limits)),
                       _ratio(_per_task(o), _find_named(old_java, s.name)),
                       _fmt(o.median("cpu_s_per_million") if o else None, "{:.1f}")))
    if loop:
        lines += ["", "### The exactly-once task loop alone (bench.task_loop: no worker, no "
                  "Spark; timed by count, first produce to last commit, like the old limit)", "",
                  "| scenario | records/s | spread | ratio to the limit | rec/txn | "
                  "CPU s / M records |" + old_cols("ratio to the limit, old method"),
                  "|---|---|---|---|---|---|" + old_cols("---")]
        for s in loop:
            rate = s.median("records_per_s")
            lines.append(
                f"| {s.name} | {_fmt(rate)} | "
                f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                f"{_ratio(rate, _limit_for(s, new_limits))} | "
                f"{_fmt(s.median('txn_size'))} | "
                f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} |"
                + old_cols(_ratio(rate, _limit_for(s, old_limits))))
    if java:
        lines += ["", "### Apache Kafka Connect 4.1.1 (Java), FileStreamSourceConnector, "
                  "exactly.once.source.support=enabled", "",
                  "| scenario | records/s per task | spread | MB/s | latency p50 / p99 ms | "
                  "CPU s / M records | worker RSS MB | startup s |"
                  + old_cols("records/s, old method", "CPU s / M, old method"),
                  "|---|---|---|---|---|---|---|---|" + old_cols("---", "---")]
        for s in new_java:
            o = _find(old_java, s)
            lat = s if s.method == "count" else (o if results.old_source == "this run" else None)
            lines.append(
                f"| {s.name} | {_fmt(s.median('records_per_s'))} | "
                f"{_fmt(s.spread('records_per_s'), '{:.0%}')} | "
                f"{_fmt(s.median('mb_per_s'), '{:.1f}')} | "
                f"{_fmt(lat.median('latency_p50_ms') if lat else None)} / "
                f"{_fmt(lat.median('latency_p99_ms') if lat else None)} | "
                f"{_fmt(s.median('cpu_s_per_million'), '{:.1f}')} | "
                f"{_fmt(s.median('worker_rss_mb'))} | "
                f"{_fmt(s.median('startup_seconds'), '{:.1f}')} |"
                + old_cols(_fmt(o.median("records_per_s") if o else None),
                           _fmt(o.median("cpu_s_per_million") if o else None, "{:.1f}")))
    if has_old and rows:
        lines += ["", method_table(results)]
    if recovery.runs:
        lines += ["", f"Recovery after SIGKILL of the task's Python worker (REST restart "
                  f"included): median {_fmt(recovery.median('recovery_seconds'), '{:.2f}')} s, "
                  f"spread {_fmt(recovery.spread('recovery_seconds'), '{:.0%}')}."]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _find_named(scenarios: list[Scenario], name: str) -> Scenario | None:
    return next((s for s in scenarios if s.name == name), None)


def method_table(results: Results) -> str:
    """Per-task records/s against the faster limit, by each method, side by side."""
    new_limits = results.group("limit", "limit-java")
    old_limits = results.group("limit", "limit-java", old=True)
    lines = [f"### Ratios to the limit: old method (count; {results.old_source}) and new "
             f"(steady-state window)", "",
             "| scenario | limit, old | records/s per task, old | ratio, old | limit, new | "
             "records/s per task, new | ratio, new | CPU s / M, old: product / limit | "
             "CPU s / M, new: product / limit |", "|---|---|---|---|---|---|---|---|---|"]
    for s in results.group("project"):
        if "latency" in s.name:
            continue
        o = _find(results.group("project", old=True), s)
        ln, lo = _limit_for(s, new_limits), _limit_for(s, old_limits)

        def cpu(x: Scenario | None) -> str:
            return _fmt(x.median("cpu_s_per_million") if x else None, "{:.1f}")

        lines.append(
            f"| {s.name} | {_fmt(lo.median('records_per_s') if lo else None)} | "
            f"{_fmt(_per_task(o))} | {_ratio(_per_task(o), lo)} | "
            f"{_fmt(ln.median('records_per_s') if ln else None)} | {_fmt(_per_task(s))} | "
            f"{_ratio(_per_task(s), ln)} | {cpu(o)} / {cpu(lo)} | {cpu(s)} / {cpu(ln)} |")
    return "\n".join(lines)


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
                             "and the measuring windows (5 s)")
    parser.add_argument("--only", choices=["limit", "loop", "project", "kafka-connect", "profile",
                                           "scaling"], default=None)
    parser.add_argument("--method", choices=list(METHODS), default="window",
                        help="how throughput is measured: steady-state windows by end offsets "
                             "(default), fixed counts (the old method), or both")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.scale <= 0:
        parser.error("--runs must be >= 1 and --scale > 0")
    n100, n1k = int(300_000 * args.scale), int(60_000 * args.scale)
    methods = METHODS[args.method]
    window_s = window_for(args.scale)
    started = time.time()
    def wanted(part: str) -> bool:
        return args.only in (None, part)

    from bench.limit import warm_up

    print("warming the broker up (40 s of transactional writes, not measured)", flush=True)
    global SWEEPER
    # BENCH_KEEP_TOPICS=1 keeps every run's topics (to read them afterwards).
    SWEEPER = None if os.environ.get("BENCH_KEEP_TOPICS") else TopicSweeper(args.bootstrap_server)
    warm_up(args.bootstrap_server)
    limit = limit_scenarios(args.bootstrap_server, args.runs, n100, n1k, methods, window_s) \
        if wanted("limit") else []
    loop = loop_scenarios(args.bootstrap_server, args.runs, n100) if wanted("loop") else []
    project: list[Scenario] = []
    java: list[Scenario] = []
    scaling: list[Scenario] = []
    recovery = Scenario("project", "recovery")
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        if wanted("project"):
            project, recovery = project_scenarios(args.bootstrap_server, args.runs, n100, n1k,
                                                  Path(tmp), methods, window_s)
        if wanted("kafka-connect"):
            # Not while Kafka Connect runs: with topics of finished runs deleted
            # under it, its GET /connectors/{name}/offsets stopped answering
            # (twice, in the second "file interval 1 s" window run; without
            # the deletions the same part completed). It writes a few GB only.
            with SWEEPER.paused() if SWEEPER is not None else contextlib.nullcontext():
                java = java_scenarios(args.bootstrap_server, args.runs, n100, Path(tmp),
                                      methods, window_s)
        if wanted("scaling"):
            from bench.scaling import scaling_scenarios

            scaling = scaling_scenarios(args.bootstrap_server, args.runs, window_s, Path(tmp))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True).stdout.strip()
    machine = (f"{platform.machine()}, {platform.processor() or 'cpu'}, "
               f"{_cores()} cores, Python {platform.python_version()}")
    profile_text = profiles(args.bootstrap_server) if wanted("profile") else ""
    results = Results.of([*limit, *loop, *project, *java])
    text = tables(limit, project, recovery, java, loop, results, window_s) \
        if limit or loop or project or java else ""
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
        "commit": commit, "machine": machine, "runs": args.runs, "method": args.method,
        "window_s": window_s, "warmup_s": WARMUP_S, "old_method_source": results.old_source,
        "scenarios": [{"group": s.group, "name": s.name, "tasks": s.tasks, "method": s.method,
                       "runs": [asdict(r) for r in s.runs]}
                      for s in [*limit, *loop, *project, recovery, *java, *scaling]]},
                     indent=1))
    if profile_text:
        (RESULTS / "profile.md").write_text(header + profile_text)
    shown = results.new
    if limit and project and java:
        plot([s for s in shown if s.group in ("limit", "limit-java")],
             [s for s in shown if s.group == "project"],
             [s for s in shown if s.group == "kafka-connect"])
    if scaling:
        plot_scaling(scaling, SCALING_PLOT)
    print("\n" + header + text + ("\n\n" + profile_text if profile_text else ""))
    return 0


def _cores() -> int:
    import os

    return os.cpu_count() or 1


if __name__ == "__main__":
    sys.exit(main())
