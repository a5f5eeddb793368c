"""The worker's metrics: Kafka Connect's names, in Prometheus' format, at ``GET /metrics``.

Three sources, all in memory, so a scrape never waits on Kafka or Spark (a
scrape during a rebalance, a leader change or a broker outage answers what the
worker knew last):

* :class:`WorkerCounters`: what this worker did (connector starts, rebalances,
  leadership changes), bumped by the herder and the group membership;
* :class:`TaskMetricsStore`: what the slots of the tasks this worker hosts
  report on their channels (:class:`~connect_runtime.protocol.slot_channel.SlotMetrics`,
  every few seconds in place of a keepalive); only the leader hosts tasks, so one
  scrape of the leader shows every task of the cluster;
* the status store and config snapshot, read through callables (states of every
  connector and task in the cluster, as the status topic has them).

Names follow the rule Prometheus' JMX exporter is conventionally given for
Connect's MBeans (``kafka.connect:type=source-task-metrics,...`` attribute
``source-record-poll-rate`` becomes ``kafka_connect_source_task_source_record_poll_rate``),
so a dashboard built for Kafka Connect reads ours. Connect's attributes are
gauges, as that exporter exposes them; what this runtime adds that Connect
lacks (transactions committed and aborted, commit latency, ...) are proper
counters and gauges with their own names. docs/operations.md lists them all.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import orjson
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from connect_runtime.cluster.dashboard_view import TaskSeries
from connect_runtime.protocol.slot_channel import ERROR_COUNTS, TaskMetricsSnapshot

RATE_WINDOW_S = 30.0
"""Rates and the average poll time cover the last this many seconds (Connect's
default ``metrics.sample.window.ms``)."""

HISTORY_S = 600.0
"""How far back the dashboard's plots go."""

TASK_LABELS = ("connector", "task", "worker")


class WorkerCounters:
    """What this worker did; bumped from the herder's and the membership's threads
    (single int adds under the GIL), read by scrapes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.connector_startup_attempts = 0
        self.connector_startup_failures = 0
        self.rebalances = 0
        self.last_rebalance: float | None = None
        self.leadership_changes = 0
        self.last_leadership_change: float | None = None

    def connector_started(self, failed: bool) -> None:
        self.connector_startup_attempts += 1
        if failed:
            self.connector_startup_failures += 1

    def rebalanced(self) -> None:
        self.rebalances += 1
        self.last_rebalance = self._clock()

    def leadership_changed(self) -> None:
        self.leadership_changes += 1
        self.last_leadership_change = self._clock()

    def since_ms(self, when: float | None) -> float:
        """Milliseconds since ``when`` (NaN if never, as Connect shows an unset time)."""
        return math.nan if when is None else (self._clock() - when) * 1000.0


@dataclass
class _Sample:
    at: float  # the worker's monotonic clock when the snapshot arrived
    wall_ms: int
    values: TaskMetricsSnapshot


Total = Callable[[TaskMetricsSnapshot], float]
"""Reads one total (a counter) of a snapshot."""


@dataclass
class TaskHistory:
    """The snapshots one task's current slot sent, oldest first, ``HISTORY_S`` long."""

    generation: int
    samples: deque[_Sample] = field(default_factory=deque)

    @property
    def latest(self) -> TaskMetricsSnapshot:
        return self.samples[-1].values

    def window_start(self, now: float, window_s: float) -> _Sample:
        """The oldest sample within ``window_s`` of ``now`` (or the latest one)."""
        for sample in self.samples:
            if sample.at >= now - window_s:
                return sample
        return self.samples[-1]

    def rate(self, total: Total, now: float, window_s: float = RATE_WINDOW_S) -> float:
        """Per second of ``total`` over the window; 0 with fewer than two samples in it."""
        first, last = self.window_start(now, window_s), self.samples[-1]
        elapsed = last.at - first.at
        return (total(last.values) - total(first.values)) / elapsed if elapsed > 0 else 0.0

    def poll_batch_avg_ms(self, now: float) -> float:
        first, last = self.window_start(now, RATE_WINDOW_S), self.samples[-1]
        batches = last.values.poll_batches - first.values.poll_batches
        if first is last:
            batches, spent = last.values.poll_batches, last.values.poll_time_ms_total
        else:
            spent = last.values.poll_time_ms_total - first.values.poll_time_ms_total
        return spent / batches if batches > 0 else math.nan

    def series(self) -> TaskSeries:
        """Per-interval rates between consecutive samples, for plots."""
        t_ms: list[int] = []
        poll: list[float] = []
        write: list[float] = []
        commit: list[float] = []
        txn_size: list[float] = []
        samples = list(self.samples)
        for before, after in itertools.pairwise(samples):
            elapsed = after.at - before.at
            if elapsed <= 0:
                continue
            a, b = before.values, after.values
            t_ms.append(after.wall_ms)
            poll.append((b.poll_total - a.poll_total) / elapsed)
            write.append((b.write_total - a.write_total) / elapsed)
            commit.append((b.records_committed - a.records_committed) / elapsed)
            txn_size.append(b.txn_size_avg or 0.0)
        return TaskSeries(tuple(t_ms), tuple(poll), tuple(write), tuple(commit),
                          tuple(txn_size))


class TaskMetricsStore:
    """The latest metrics of each task this worker hosts, with their recent history.

    Fed from the REST event loop (:meth:`record` takes a lock for a deque append);
    read by scrapes and the dashboard. A new generation of a task (a new slot)
    starts a new history, since its totals start from zero; the totals of the
    slots it replaces are kept in :attr:`retired` so worker-wide startup counts
    never go down.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 history_s: float = HISTORY_S) -> None:
        self.clock = clock  # what the histories' sample times are read against
        self._history_s = history_s
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, int], TaskHistory] = {}
        # The startup counts of the slots whose histories ended.
        self.retired_startup_attempts = 0
        self.retired_startup_failures = 0

    def record(self, connector: str, task: int, generation: int,
               values: TaskMetricsSnapshot) -> None:
        now = self.clock()
        with self._lock:
            history = self._tasks.get((connector, task))
            if history is None or history.generation != generation or (
                    history.samples and values.poll_total < history.latest.poll_total):
                if history is not None and history.samples:
                    self._retire(history)
                history = self._tasks[(connector, task)] = TaskHistory(generation)
            history.samples.append(_Sample(now, int(time.time() * 1000), values))
            while history.samples and history.samples[0].at < now - self._history_s:
                history.samples.popleft()

    def keep_only(self, current: Iterable[tuple[str, int, int]]) -> None:
        """Drop tasks not in ``current`` (connector, task, generation): a deleted
        connector's tasks, or those of a generation that was replaced."""
        wanted = set(current)
        with self._lock:
            for key, history in list(self._tasks.items()):
                if (key[0], key[1], history.generation) not in wanted:
                    self._retire(history)
                    del self._tasks[key]

    def tasks(self) -> dict[tuple[str, int], TaskHistory]:
        """A copy (the histories' samples are copied too: readers never see appends)."""
        with self._lock:
            return {key: TaskHistory(h.generation, deque(h.samples))
                    for key, h in self._tasks.items() if h.samples}

    def _retire(self, history: TaskHistory) -> None:
        if history.samples:
            self.retired_startup_attempts += history.latest.startup_attempts
            self.retired_startup_failures += history.latest.startup_failures


@dataclass(frozen=True)
class ClusterView:
    """What the status store and config snapshot say, read at scrape time."""

    connector_states: Mapping[str, str]  # connector -> state
    task_states: Mapping[tuple[str, int], str]  # (connector, task) -> state
    connector_classes: Mapping[str, str]
    hosted_connectors: int  # connector instances running on this worker
    hosted_tasks: int  # task slots this worker hosts
    leader_url: str | None
    is_leader: bool
    # (connector, task) -> (automatic restarts done, consecutive failed attempts)
    auto_restarts: Mapping[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    # (connector, task) -> seconds its stuck call has not returned (0.0: not stuck),
    # for each task this worker hosts
    stalled_s: Mapping[tuple[str, int], float] = field(default_factory=dict)


_TASK_STATES = ("RUNNING", "PAUSED", "FAILED", "UNASSIGNED", "RESTARTING")
_CONNECTOR_STATES = (*_TASK_STATES, "STOPPED")


class MetricsCollector:
    """A prometheus_client collector over the three sources (module docstring)."""

    def __init__(self, worker_id: str, counters: WorkerCounters, tasks: TaskMetricsStore,
                 cluster: Callable[[], ClusterView]) -> None:
        self.worker_id = worker_id
        self.counters = counters
        self.tasks = tasks
        self.cluster = cluster

    def collect(self) -> Iterator[Metric]:
        view, tasks = self.cluster(), self.tasks.tasks()  # one copy of the histories
        yield from self._worker(view, tasks)
        yield from self._connectors(view)
        yield from self._tasks(tasks)

    # ------------------------------------------------------------ the worker

    def _worker(self, view: ClusterView,
                tasks: Mapping[tuple[str, int], TaskHistory]) -> Iterator[Metric]:
        w, c = [self.worker_id], self.counters
        yield _gauge("kafka_connect_worker_connector_count",
                     "Connectors run by this worker.", ["worker"], [(w, view.hosted_connectors)])
        yield _gauge("kafka_connect_worker_task_count",
                     "Tasks hosted by this worker (the leader hosts every task).", ["worker"],
                     [(w, view.hosted_tasks)])
        by_state = _count(view.connector_states.values(), _CONNECTOR_STATES)
        yield _gauge("kafka_connect_worker_connectors_by_state",
                     "Connectors of the cluster in each state, as the status topic has them.",
                     ["worker", "state"], [([*w, s], n) for s, n in by_state.items()])
        by_state = _count(view.task_states.values(), _TASK_STATES)
        yield _gauge("kafka_connect_worker_tasks_by_state",
                     "Tasks of the cluster in each state, as the status topic has them.",
                     ["worker", "state"], [([*w, s], n) for s, n in by_state.items()])
        attempts, failures = c.connector_startup_attempts, c.connector_startup_failures
        yield _gauge("kafka_connect_worker_connector_startup_attempts_total",
                     "Connector starts attempted on this worker.", ["worker"], [(w, attempts)])
        yield _gauge("kafka_connect_worker_connector_startup_failure_total",
                     "Connector starts that failed.", ["worker"], [(w, failures)])
        yield _gauge("kafka_connect_worker_connector_startup_success_total",
                     "Connector starts that succeeded.", ["worker"], [(w, attempts - failures)])
        live = tasks.values()
        attempts = self.tasks.retired_startup_attempts + sum(
            h.latest.startup_attempts for h in live)
        failures = self.tasks.retired_startup_failures + sum(
            h.latest.startup_failures for h in live)
        yield _gauge("kafka_connect_worker_task_startup_attempts_total",
                     "Task starts attempted by the slots this worker hosts(ed).", ["worker"],
                     [(w, attempts)])
        yield _gauge("kafka_connect_worker_task_startup_failure_total",
                     "Task starts that failed.", ["worker"], [(w, failures)])
        yield _gauge("kafka_connect_worker_task_startup_success_total",
                     "Task starts that succeeded.", ["worker"], [(w, attempts - failures)])
        yield _gauge("kafka_connect_worker_rebalance_completed_rebalances_total",
                     "Group rebalances this worker completed.", ["worker"], [(w, c.rebalances)])
        yield _gauge("kafka_connect_worker_rebalance_time_since_last_rebalance_ms",
                     "Milliseconds since this worker's last rebalance (NaN: none yet).",
                     ["worker"], [(w, c.since_ms(c.last_rebalance))])
        yield _counter("kafka_connect_worker_leadership_changes",
                       "Times this worker became or stopped being the leader.", ["worker"],
                       [(w, c.leadership_changes)])
        yield _gauge("kafka_connect_worker_time_since_last_leadership_change_ms",
                     "Milliseconds since this worker last became or stopped being the leader "
                     "(NaN: never).", ["worker"], [(w, c.since_ms(c.last_leadership_change))])
        yield _gauge("kafka_connect_worker_is_leader", "1 if this worker leads the cluster.",
                     ["worker"], [(w, 1 if view.is_leader else 0)])
        leader = GaugeMetricFamily("kafka_connect_worker_rebalance_leader",
                                   "The leader's URL, as this worker knows it (Connect's "
                                   "leader-name).", labels=["worker", "leader_name"])
        if view.leader_url:
            leader.add_metric([self.worker_id, view.leader_url], 1)
        yield leader

    # -------------------------------------------------------- the connectors

    def _connectors(self, view: ClusterView) -> Iterator[Metric]:
        w = self.worker_id
        status = GaugeMetricFamily(
            "kafka_connect_connector_status", "1 for the connector's state (Connect's "
            "connector-metrics status).", labels=["connector", "worker", "status"])
        for name, state in sorted(view.connector_states.items()):
            status.add_metric([name, w, state.lower()], 1)
        yield status
        info = GaugeMetricFamily("kafka_connect_connector_info", "The connector's class.",
                                 labels=["connector", "worker", "connector_class"])
        for name, klass in sorted(view.connector_classes.items()):
            info.add_metric([name, w, klass], 1)
        yield info
        per_connector: dict[str, dict[str, int]] = {}
        for (name, _task), state in view.task_states.items():
            counts = per_connector.setdefault(name, dict.fromkeys(_TASK_STATES, 0))
            counts[state] = counts.get(state, 0) + 1
        for state in _TASK_STATES:
            yield _gauge(f"kafka_connect_worker_connector_{state.lower()}_task_count",
                         f"The connector's tasks in state {state}.", ["connector", "worker"],
                         [([name, w], counts[state])
                          for name, counts in sorted(per_connector.items())])
        yield _gauge("kafka_connect_worker_connector_total_task_count",
                     "The connector's tasks.", ["connector", "worker"],
                     [([name, w], sum(counts.values()))
                      for name, counts in sorted(per_connector.items())])
        restarts = sorted(view.auto_restarts.items())
        yield _counter("kafka_connect_worker_task_auto_restarts",
                       "Automatic restarts of the task (errors.restart.policy=on-failure).",
                       list(TASK_LABELS), [([c, str(t), w], n) for (c, t), (n, _) in restarts])
        yield _gauge("kafka_connect_worker_task_restart_attempts",
                     "Consecutive failures of the task counted toward "
                     "errors.restart.max.attempts (0 after a stable run).", list(TASK_LABELS),
                     [([c, str(t), w], n) for (c, t), (_, n) in restarts])
        yield _gauge("kafka_connect_worker_task_stalled_seconds",
                     "Seconds the task's poll() or commit has not returned, once past "
                     "task.stall.threshold.ms; 0 when not stuck. Tasks this worker hosts.",
                     list(TASK_LABELS),
                     [([c, str(t), w], s) for (c, t), s in sorted(view.stalled_s.items())])
        task_status = GaugeMetricFamily(
            "kafka_connect_connector_task_status", "1 for the task's state (Connect's "
            "connector-task-metrics status).", labels=[*TASK_LABELS, "status"])
        for (name, task), state in sorted(view.task_states.items()):
            task_status.add_metric([name, str(task), w, state.lower()], 1)
        yield task_status

    # ------------------------------------------------------------- the tasks

    def _tasks(self, tasks: Mapping[tuple[str, int], TaskHistory]) -> Iterator[Metric]:
        now = self.tasks.clock()
        rows = [([c, str(t), self.worker_id], h) for (c, t), h in sorted(tasks.items())]

        def each(value: Callable[[TaskHistory], float | None]) -> list[tuple[list[str], float]]:
            out = []
            for labels, history in rows:
                v = value(history)
                out.append((labels, math.nan if v is None else v))
            return out

        def latest(of: Callable[[TaskMetricsSnapshot], float | None],
                   ) -> Callable[[TaskHistory], float | None]:
            return lambda h: of(h.latest)

        source = "kafka_connect_source_task_"
        for name, doc, value in (
            ("source_record_poll_total", "Records polled from the task (Connect).",
             latest(lambda m: m.poll_total)),
            ("source_record_poll_rate", "Records polled per second (last 30 s).",
             lambda h: h.rate(lambda m: m.poll_total, now)),
            ("source_record_write_total", "Records written to Kafka after transforms "
             "(Connect).", latest(lambda m: m.write_total)),
            ("source_record_write_rate", "Records written per second (last 30 s).",
             lambda h: h.rate(lambda m: m.write_total, now)),
            ("poll_batch_avg_time_ms", "Average time of a poll() that returned records "
             "(last 30 s).", lambda h: h.poll_batch_avg_ms(now)),
            ("poll_batch_max_time_ms", "Longest poll() that returned records.",
             latest(lambda m: m.poll_time_ms_max)),
            ("source_record_active_count", "Records polled and not yet committed "
             "(exactly-once) or acknowledged (at-least-once).",
             latest(lambda m: m.active_count)),
            ("source_record_active_count_max", "Highest source_record_active_count.",
             latest(lambda m: m.active_max)),
            ("transaction_size_min", "Smallest committed transaction, in records "
             "(KIP-618; last 60 s).", latest(lambda m: m.txn_size_min)),
            ("transaction_size_max", "Largest committed transaction, in records "
             "(KIP-618; last 60 s).", latest(lambda m: m.txn_size_max)),
            ("transaction_size_avg", "Average committed transaction, in records "
             "(KIP-618; last 60 s).", latest(lambda m: m.txn_size_avg)),
            ("records_committed_rate", "Records committed per second (last 30 s).",
             lambda h: h.rate(lambda m: m.records_committed, now)),
            ("time_since_last_commit_ms", "Milliseconds since the task last committed "
             "(NaN: never).", lambda h: None if h.latest.last_commit_ms is None
             else max(time.time() * 1000 - h.latest.last_commit_ms, 0.0)),
        ):
            yield _gauge(source + name, doc, list(TASK_LABELS), each(value))
        counters: tuple[tuple[str, str, Total], ...] = (
            ("transactions_committed", "Transactions committed (exactly-once) or offset "
             "flushes that wrote offsets (at-least-once).", lambda m: m.commits),
            ("transactions_aborted", "Transactions aborted at the connector's request.",
             lambda m: m.aborts),
            ("records_committed", "Records made durable with their offsets.",
             lambda m: m.records_committed),
        )
        for name, doc, total in counters:
            yield _counter(source + name, doc, list(TASK_LABELS), each(latest(total)))
        latency = GaugeMetricFamily(
            source + "commit_latency_ms", "Commit latency quantiles over the last 60 s "
            "(writing the offsets and committing the transaction).",
            labels=[*TASK_LABELS, "quantile"])
        for labels, history in rows:
            m = history.latest
            for q, quantile in (("0.5", m.commit_latency_ms_p50),
                                ("0.99", m.commit_latency_ms_p99)):
                latency.add_metric([*labels, q], math.nan if quantile is None else quantile)
        yield latency
        yield from self._offsets(rows)
        errors = "kafka_connect_task_error_"
        for key, name in zip(ERROR_COUNTS, ("total_record_errors", "total_record_failures",
                                            "total_records_skipped", "total_retries",
                                            "total_errors_logged"), strict=True):
            yield _gauge(errors + name, f"Connect's task-error-metrics {name}.",
                         list(TASK_LABELS),
                         [(labels, getattr(h.latest.errors, key)) for labels, h in rows])

    def _offsets(self, rows: Sequence[tuple[list[str], TaskHistory]]) -> Iterator[Metric]:
        commits = CounterMetricFamily(
            "kafka_connect_source_task_source_partition_commits",
            "Commits that wrote this source partition's offset (the most recently "
            "committed partitions of each task).", labels=[*TASK_LABELS, "source_partition"])
        offsets = GaugeMetricFamily(
            "kafka_connect_source_task_committed_offset",
            "Numeric fields of the last committed offset of each source partition.",
            labels=[*TASK_LABELS, "source_partition", "field"])
        for labels, history in rows:
            for committed in history.latest.offsets:
                key = orjson.dumps(committed.partition, option=orjson.OPT_SORT_KEYS).decode()
                commits.add_metric([*labels, key], committed.commits)
                for name, value in sorted((committed.offset or {}).items()):
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        offsets.add_metric([*labels, key, name], value)
        yield commits
        yield offsets


def _gauge(name: str, doc: str, labels: list[str],
           rows: Iterable[tuple[list[str], float]]) -> Metric:
    return _family(GaugeMetricFamily(name, doc, labels=labels), rows)


def _counter(name: str, doc: str, labels: list[str],
             rows: Iterable[tuple[list[str], float]]) -> Metric:
    """``name`` without ``_total``: prometheus_client adds it to a counter's samples."""
    return _family(CounterMetricFamily(name, doc, labels=labels), rows)


def _family(family: GaugeMetricFamily | CounterMetricFamily,
            rows: Iterable[tuple[list[str], float]]) -> Metric:
    for values, value in rows:
        family.add_metric(values, value)
    return family


def _count(states: Iterable[str], known: Sequence[str]) -> dict[str, int]:
    counts = dict.fromkeys(known, 0)
    for state in states:
        counts[state] = counts.get(state, 0) + 1
    return counts


class WorkerMetrics:
    """The worker's metrics registry: what ``GET /metrics`` renders."""

    CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

    def __init__(self, worker_id: str, cluster: Callable[[], ClusterView]) -> None:
        self.counters = WorkerCounters()
        self.tasks = TaskMetricsStore()
        self.collector = MetricsCollector(worker_id, self.counters, self.tasks, cluster)
        # A registry of our own: the default one would add this process's
        # Python GC and platform metrics under names no Connect dashboard expects.
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)

    def exposition(self) -> bytes:
        """Every metric in Prometheus' text format."""
        return generate_latest(self.registry)
