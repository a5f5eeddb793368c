"""The partition suite's workload, faults and checks (docs/reliability.md).

Sequence connectors run on a :class:`~lab.Lab` (one per transaction boundary,
one of them aborting every third transaction) while network faults come and
go. Each fault is applied at a moment and for a time drawn from a seeded
``random.Random``, so a seed replays the same schedule. After each fault a
``read_committed`` tail (in the root namespace, straight to the broker) must
show, for every source partition, a committed record produced after the
fault began (the recovery time); and what was committed so far must have no
duplicate, no gap and no record of a deliberately aborted transaction. At the
end the connectors are stopped and the verifier reads the topics again.
"""

from __future__ import annotations

import functools
import random
import re
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from lab import Lab, Proxy
from network import Host
from support import processes
from support.faults import CommittedTail, FaultTable, Group, wait_recovered
from support.kafka import create_topic, wait_for
from support.workers import WorkerProcess
from txn_log import TransactionLog, decisions

from connect_runtime.connectors.sequence import expected_aborted
from connect_runtime.tools.verify import format_table, verify_topics

SEQ = "SequenceSourceConnector"
SESSION_TIMEOUT_S = 6.0  # the lab's session.timeout.ms
RECOVERY_TIMEOUT = 150.0
COMMIT_EVERY, ABORT_EVERY = 10, 3
# Fault 7's transaction lengths, under a transaction.timeout.ms of 3 s: from a
# race each side can win, to where the coordinator's abort (3 to 3.5 s after the
# transaction began) always comes first.
RACE_INTERVALS_MS = (2700, 2900, 3100, 3300, 3500)


def aborted(seq: int) -> bool:
    return expected_aborted(seq, COMMIT_EVERY, ABORT_EVERY)


@dataclass(frozen=True)
class Workload:
    """One sequence connector: its config, source partitions, deliberately aborted seqs."""

    short: str
    config: dict[str, str]
    partitions: int
    missing: Callable[[int], bool] | None = None


# A task that fails is restarted by the leader, as an operator would configure it;
# the table counts every failure and automatic restart, so none goes unseen.
AUTO_RESTART = {"errors.restart.policy": "on-failure", "errors.restart.max.attempts": "-1",
                "errors.restart.backoff.max.ms": "5000"}

WORKLOADS = (
    Workload("poll", {"tasks.max": "3", "partitions": "4", "batch.size": "20",
                      "rate.per.sec": "100", **AUTO_RESTART}, 4),
    Workload("interval", {"tasks.max": "1", "partitions": "2", "batch.size": "10",
                          "rate.per.sec": "60", "transaction.boundary": "interval",
                          "transaction.boundary.interval.ms": "400", **AUTO_RESTART}, 2),
    # After every transaction it ends, a poll asks to commit with nothing written.
    Workload("aborts", {"tasks.max": "2", "partitions": "2", "batch.size": "5",
                        "rate.per.sec": "60", "transaction.boundary": "connector",
                        "commit.every.records": str(COMMIT_EVERY),
                        "abort.every.transactions": str(ABORT_EVERY),
                        "empty.commits": "true", **AUTO_RESTART}, 2, aborted),
)
# Connectors that never abort by themselves: every abort of theirs is the faults'.
UNPLANNED = ("poll", "interval")


@dataclass
class Observation:
    """Something the suite saw that the docs report (what REST answered, ...)."""

    fault: str
    what: str


@dataclass
class NetworkFaultRun:
    """The lab's pipeline under network faults: the rounds of faults applied to it,
    what each did (``table``) and what the suite saw on the way."""

    lab: Lab
    rng: random.Random
    table: FaultTable = field(default_factory=FaultTable)
    observations: list[Observation] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.names = {w.short: f"part-{w.short}" for w in WORKLOADS}
        self.groups: list[Group] = [(self.names[w.short], p) for w in WORKLOADS
                                    for p in range(w.partitions)]
        self.tail = CommittedTail(self.lab.bootstrap,
                                  {self.topic(w.short): self.names[w.short] for w in WORKLOADS})
        self.tasks_max = {w.short: int(w.config["tasks.max"]) for w in WORKLOADS}
        self.txn_log = TransactionLog(self.lab.bootstrap)
        # Decisions of the whole run by ClientTransactionVersion (txn_log.Decisions).
        self.by_version: dict[int, int] = {}
        self.empty_transactions = 0

    @staticmethod
    def topic(short: str) -> str:
        return f"out-{short}"

    # ---------------------------------------------------------------- running

    def start(self) -> None:
        for w in WORKLOADS:
            create_topic(self.lab.bootstrap, self.topic(w.short), 3)
        self.tail.start()
        leader = self.lab.leader()
        for w in WORKLOADS:
            created = leader.rest("POST", "/connectors", json={
                "name": self.names[w.short],
                "config": {"connector.class": SEQ, "topic": self.topic(w.short), **w.config}})
            assert created.status_code == 201, created.text
        self.wait_running()
        self.recovered("start", time.time() - 0.001)

    def wait_running(self, timeout: float = RECOVERY_TIMEOUT) -> None:
        leader = self.lab.leader()
        for w in WORKLOADS:
            leader.wait_tasks(self.names[w.short], "RUNNING", self.tasks_max[w.short], timeout)

    def recovered(self, fault: str, since: float, produced_after: float | None = None) -> float:
        """Seconds from ``since`` until every source partition committed a record
        produced after ``produced_after`` (default ``since``)."""
        return wait_recovered(self.tail, self.table, self.groups, fault, since,
                              RECOVERY_TIMEOUT, self.diagnosis, produced_after)

    def check(self, fault: str) -> None:
        """No duplicate, no gap, no aborted record in what was committed so far."""
        reports = [self.tail.verify(self.names[w.short], w.missing, range(w.partitions))
                   for w in WORKLOADS]
        for row in (fault, fault + " (healed)"):
            if row == fault or row in self.table.rows:
                self.table.checked(row, self.tail.count(), reports)
        bad = [v for r in reports for v in r.violations()]
        assert not bad, f"after {fault}:\n" + "\n".join(bad) + "\n" + self.table.format()

    def diagnosis(self) -> str:
        lines = [f"leader views: {self.lab.leader_views()}"]
        for w in self.lab.alive():
            try:
                lead = w.rest("GET", "/internal/leader").json()
                if lead["is_leader"]:
                    lines += [f"  status {n}: {w.status(n)}" for n in self.names.values()]
            except Exception as e:  # a partitioned worker may not answer: say so
                lines.append(f"{w.url}: {e!r}")
        for w in self.lab.workers:
            lines.append(f"--- {w.host} log tail ---\n{w.tail(40)}")
        return "\n".join(lines)

    def account(self, fault: str, action: Callable[[], None]) -> None:
        """Run ``action`` (one fault), then count in ``fault``'s row what the logs and
        the coordinator say happened meanwhile: tasks that failed or were lost, the
        leader's automatic restarts, and aborted transactions of connectors that
        never abort by themselves (from ``__transaction_state``)."""
        began_ms = int(time.time() * 1000)
        offsets = {w.host: w.log_path.stat().st_size for w in self.lab.workers}
        action()
        logs = "".join(self._log_since(w, offsets[w.host]) for w in self.lab.workers)
        self.table.count(fault, "tasks failed",
                         len(re.findall(r" ERROR task part-\S+ (?:failed on|lost:)", logs)))
        self.table.count(fault, "auto restarts", logs.count("automatic restart of task part-"))
        states = self.txn_log.refresh()
        until_ms = int(time.time() * 1000) + 1
        prefixes = tuple(f"{self.lab.group}-{self.names[s]}-" for s in UNPLANNED)
        self.table.count(fault, "aborts (poll, interval)",
                         decisions(states, prefixes, began_ms, until_ms).aborts)
        every = decisions(states, (f"{self.lab.group}-",), began_ms, until_ms)
        for version, n in every.by_version.items():
            self.by_version[version] = self.by_version.get(version, 0) + n
        self.empty_transactions += every.empty

    def others(self, worker: WorkerProcess) -> list[WorkerProcess]:
        return [w for w in self.lab.workers if w is not worker]

    def hold(self, low: float, high: float) -> float:
        """A fault's duration, drawn from the schedule's generator."""
        return round(self.rng.uniform(low, high), 1)

    def settle(self) -> None:
        """Wait a random moment before the next fault (0.5 to 4 s)."""
        time.sleep(self.hold(0.5, 4.0))

    # ------------------------------------------------------------------ faults

    def leader_cut_from_broker(self) -> None:
        """Fault 1: the leader (its tasks with it) cut from the broker, both ways,
        past session.timeout.ms; the others elect a leader that runs the tasks
        again (fencing the cut ones), then the cut heals."""
        fault = "leader cut from broker"
        self.settle()
        leader = self.lab.leader()
        host = self.lab.host_of(leader)
        duration = self.hold(SESSION_TIMEOUT_S + 2, SESSION_TIMEOUT_S + 10)
        since = time.time()
        host.cut_from(self.lab.broker_host)
        try:
            self.lab.leader(among=self.others(leader), timeout=RECOVERY_TIMEOUT)
            self.recovered(fault, since)
            time.sleep(max(0.0, since + duration - time.time()))
        finally:
            host.heal()
        self.lab.leader()  # the old leader has rejoined as a follower
        self.recovered(fault + " (healed)", time.time())
        self.check(fault)

    def leader_cut_from_workers(self) -> None:
        """Fault 2: the leader cut from the other workers, not from the broker:
        forwarded requests fail, group membership does not."""
        fault = "leader cut from workers"
        self.settle()
        leader = self.lab.leader()
        host = self.lab.host_of(leader)
        follower = self.others(leader)[0]
        duration = self.hold(8, 14)
        since = time.time()
        host.cut_from(*(self.lab.host_of(w) for w in self.others(leader)))
        try:
            self.recovered(fault, since)
            # A write sent to a follower must be forwarded to the leader: what it
            # answers. (Restarting the connector object leaves its tasks running.)
            path = f"/connectors/{self.names['interval']}/restart"
            asked = time.monotonic()
            try:
                answer = follower.rest("POST", path, timeout=90)
                seen = (f"{answer.status_code} after {time.monotonic() - asked:.1f} s: "
                        f"{answer.text[:300]}")
            except httpx.HTTPError as e:
                seen = f"no answer in 90 s ({e!r})"
            self.observations.append(Observation(fault, f"POST {path} on a follower: {seen}"))
            time.sleep(max(0.0, since + duration - time.time()))
        finally:
            host.heal()
        assert self.lab.leader() is leader, "the leader changed: the fault was not this one"
        self.check(fault)

    def broker_answers_to_leader_dropped(self) -> None:
        """Fault 3: what the broker sends the leader is lost, what the leader sends
        arrives, past session.timeout.ms."""
        fault = "broker's answers to leader dropped"
        self.settle()
        leader = self.lab.leader()
        duration = self.hold(SESSION_TIMEOUT_S + 2, SESSION_TIMEOUT_S + 10)
        since = time.time()
        self.lab.broker_host.drop_to(self.lab.host_of(leader))
        try:
            self.recovered(fault, since)
            time.sleep(max(0.0, since + duration - time.time()))
        finally:
            self.lab.broker_host.heal()
        self.lab.leader()
        self.recovered(fault + " (healed)", time.time())
        self.check(fault)

    def slow_lossy_links(self, seconds: float = 30.0) -> None:
        """Fault 6: every worker's path to the broker at 200 ms +- 100 ms latency
        (Toxiproxy, what the broker sends back) and 5% packet loss each way
        (iptables' statistic match), with commits in flight."""
        fault = "200 +- 100 ms, 5% loss to broker"
        self.settle()
        since = time.time()
        try:
            for proxy, host in zip(self.lab.proxies, self.lab.worker_hosts, strict=True):
                proxy.latency(200, 100)
                host.lose(0.05, self.lab.broker_host)
            self.recovered(fault, since)
            time.sleep(max(0.0, since + seconds - time.time()))
        finally:
            self._clear(fault, self.lab.proxies)
            self.lab.net.heal()
        self.recovered(fault + " (healed)", time.time())
        self.check(fault)

    def commit_racing_timeout_abort(self, step_s: float = 12.0) -> None:
        """Fault 7: transactions the broker aborts on their timeout while the task
        commits them. The interval connector's transactions last 2.7 s under a
        ``transaction.timeout.ms`` of 3 s, and 150 +- 150 ms of latency on what the
        broker sends back makes each commit end a little before or a little after
        the coordinator's abort (it looks every 500 ms: ``lab.BROKER_PROPERTIES``).
        Which side wins depends on how long each flush takes, so on a loaded
        machine every commit may win: each ``step_s`` without an abort the
        transactions get 0.2 s longer (``RACE_INTERVALS_MS``), up to 3.5 s, where
        no commit can beat the abort. A task whose commit lost is FAILED with the
        timeout named, restarted by the leader (``errors.restart.policy``), and
        reads its last committed offsets. Meanwhile the connector-boundary
        connector asks for a commit with nothing written after every transaction
        (``empty.commits``), as it does all along."""
        fault = "commit racing the broker's timeout abort"
        self.settle()
        w = next(w for w in WORKLOADS if w.short == "interval")
        name = self.names[w.short]
        prefix = (f"{self.lab.group}-{name}-",)
        began_ms = int(time.time() * 1000)
        since = time.time()
        try:
            for proxy in self.lab.proxies:
                proxy.latency(150, 150)
            for interval_ms in RACE_INTERVALS_MS:
                step_began = time.time()
                self._put_config(w, {"transaction.boundary.interval.ms": str(interval_ms),
                                     "producer.override.transaction.timeout.ms": "3000"})
                if interval_ms == RACE_INTERVALS_MS[0]:
                    self.recovered(fault, since)
                time.sleep(max(0.0, step_began + step_s - time.time()))
                raced = decisions(self.txn_log.refresh(), prefix, began_ms,
                                  int(time.time() * 1000))
                if raced.commits and raced.aborts:
                    break
        finally:
            self._clear(fault, self.lab.proxies)
            self._put_config(w, {})
        healed = time.time()
        raced = decisions(self.txn_log.refresh(), prefix, began_ms, int(healed * 1000))
        self.observations.append(Observation(
            fault, f"{name} in {healed - since:.0f} s, its transactions last lengthened to "
                   f"{interval_ms / 1000:.1f} s: {raced.commits} transactions committed, "
                   f"{raced.aborts} aborted by the coordinator"))
        # Both sides of the race must have been seen, or the round tested nothing.
        assert raced.commits and raced.aborts, raced
        self.wait_running()
        self.recovered(fault + " (healed)", healed)
        self.check(fault)

    def _clear(self, fault: str, proxies: Sequence[Proxy]) -> None:
        """Remove the toxics of ``proxies``, noting a proxy that had to be restarted."""
        for proxy in proxies:
            restarted = proxy.clear()
            if restarted is not None:
                self.observations.append(Observation(fault, restarted))

    def _put_config(self, w: Workload, overrides: dict[str, str]) -> None:
        """Reconfigure ``w``'s connector: its own config with ``overrides`` (and the
        tasks.max it has now)."""
        changed = self.lab.leader().rest("PUT", f"/connectors/{self.names[w.short]}/config",
                                         json={"connector.class": SEQ,
                                               "topic": self.topic(w.short), **w.config,
                                               "tasks.max": str(self.tasks_max[w.short]),
                                               **overrides})
        assert changed.status_code == 200, changed.text

    def broker_restart_during_fencing(self) -> None:
        self._broker_restart_during(fencing=True)

    def broker_restart_during_task_count_write(self) -> None:
        self._broker_restart_during(fencing=False)

    def _broker_restart_during(self, fencing: bool) -> None:
        """Fault 8: the broker SIGKILLed, then restarted, while the leader fences
        the previous generation's producers, or while it writes the task-count
        record that lets the new generation start (KIP-618).

        A change of ``tasks.max`` (3 <-> 4) makes the leader fence. One second
        of latency on the leader's link stretches each step's round trips; the
        leader's DEBUG lines say when a step begins (``fencing transactional.id
        ...``, ``writing the task-count record ...``), and the broker is killed
        as soon as that line appears, so the kill lands inside the step. That it
        did is checked: the step's end (the INFO line of the fence, or the new
        generation's first task start) was not logged before the kill."""
        phase = "fencing" if fencing else "task-count record write"
        fault = f"broker SIGKILL during {phase}"
        self.settle()
        leader = self.lab.leader()
        w = WORKLOADS[0]
        name = self.names[w.short]
        previous = self.tasks_max[w.short]
        tasks = 4 if previous == 3 else 3
        level = leader.rest("PUT", "/admin/loggers/connect_runtime.cluster.fencing",
                            json={"level": "DEBUG"})
        assert level.status_code == 200, level.text
        begins = (f"DEBUG fencing transactional.id {self.lab.group}-{name}-" if fencing
                  else f"DEBUG writing the task-count record of connector {name}:")
        offset = leader.log_path.stat().st_size
        proxy = self.lab.proxy_of(leader)
        proxy.latency(1000, 0)
        since = time.time()
        try:
            self.tasks_max[w.short] = tasks
            self._put_config(w, {})
            wait_for(lambda: begins in self._log_since(leader, offset), 120,
                     f"the leader to begin {phase}", interval=0.02)
            self.lab.broker.kill(signal.SIGKILL)
            before_kill = self._log_since(leader, offset)
        finally:
            self._clear(fault, [proxy])
        ended = (f"INFO fenced {previous} producer(s) of connector {name}"
                 if fencing else f"INFO task {name}-0 started on host")
        assert ended not in before_kill, f"the kill came after the {phase} ended"
        self.lab.broker.start()
        self.observations.append(Observation(
            fault, f"tasks.max -> {tasks}; the broker was killed after the leader logged "
                   f"{begins.split(' ', 1)[1]!r}..., before {ended.split(' ', 1)[1]!r}"))
        self.wait_running()
        self.recovered(fault, since)
        self.check(fault)

    # ------------------------------------------------- faults of executor hosts

    def executor_host_with_tasks(self) -> tuple[Host, dict[tuple[str, int], int]]:
        """An executor host (drawn by the schedule) running at least one task, and
        the pid of each task it runs, by (connector, task)."""
        slots = [s for s in self.lab.leader().slots()
                 if s["connector"] in self.names.values() and s["state"] == "RUNNING"]
        hosts: dict[str, tuple[Host, dict[tuple[str, int], int]]] = {}
        for slot in slots:
            host = self.lab.executor_host_of(slot["pid"])
            if host is not None:
                hosts.setdefault(host.name, (host, {}))[1][slot["connector"], slot["task"]] = \
                    slot["pid"]
        assert hosts, f"no task runs on an executor host: {slots}"
        return hosts[self.rng.choice(sorted(hosts))]

    def executor_cut_from_broker(self) -> None:
        """Fault 4: an executor host cut from the broker, both ways, its link to the
        worker (the slot channels) untouched: its tasks can neither write nor
        commit, and stay RUNNING; after the heal they go on."""
        fault = "executor host cut from broker"
        self.settle()
        host, tasks = self.executor_host_with_tasks()
        duration = self.hold(10, 20)
        host.cut_from(self.lab.broker_host)
        try:
            time.sleep(duration)
            states = self._task_states(tasks)
        finally:
            host.heal()
        healed = time.time()
        self.observations.append(Observation(
            fault, f"{len(tasks)} task(s) on {host.name} cut for {duration:.0f} s; the leader "
                   f"reported them {sorted(set(states.values()))} at the end of the cut"))
        self.recovered(fault, healed)
        self.check(fault)

    def executor_cut_from_workers(self) -> None:
        """Fault 5: an executor host cut from every worker (its slot channels and
        the Spark driver) and from the Spark master, not from the broker: its
        tasks go on writing, and nothing can stop them. The leader declares them
        lost (FAILED) after the channel's liveness timeout and restarts them
        (``errors.restart.policy``); Spark declares the executor lost after
        ``spark.network.timeout`` and runs the slots again on the other host,
        where each new instance fences the old one (its transactional.id) before
        it writes. The old instances must then end, fenced, each saying so in its
        executor's log; 0 duplicates says they committed nothing after that."""
        fault = "executor host cut from its worker"
        self.settle()
        host, tasks = self.executor_host_with_tasks()
        assert self.lab.master_host is not None
        since = time.time()
        host.cut_from(*self.lab.worker_hosts, self.lab.master_host)
        try:
            moved: dict[tuple[str, int], int] = wait_for(
                lambda: self._moved(tasks, host), RECOVERY_TIMEOUT,
                f"the tasks of {host.name} to run on another executor host", interval=0.5)
            moved_at = time.time()
            alive = [pid for pid in tasks.values() if processes.alive(pid)]
            # The new instances committed: every partition has records produced after.
            self.recovered(fault, since, produced_after=moved_at)
            fenced = wait_for(lambda: self._fenced(host, tasks), 60,
                              f"the old instances on {host.name} to be fenced", interval=0.5)
        finally:
            host.heal()
        self.observations.append(Observation(
            fault, f"{len(tasks)} task(s) of {host.name} ran again on another host "
                   f"{moved_at - since:.0f} s after the cut (pids {sorted(tasks.values())} -> "
                   f"{sorted(moved.values())}); {len(alive)} old instance(s) alive then, "
                   f"{fenced} of them ended fenced"))
        self.recovered(fault + " (healed)", time.time())
        self.check(fault)

    def _fenced(self, host: Host, tasks: dict[tuple[str, int], int]) -> int | None:
        """How many of the old ``tasks`` on ``host`` logged that they were fenced,
        once each of them did or its process is gone; None before."""
        log = self.lab.executor_logs(host)
        fenced = 0
        for (connector, task), pid in tasks.items():
            if f"Task {connector}-{task} was fenced" in log:
                fenced += 1
            elif processes.alive(pid):
                return None
        return fenced

    def _task_states(self, tasks: dict[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        statuses = {name: self.lab.leader().status(name) for name in {c for c, _ in tasks}}
        return {(c, t): next((s["state"] for s in statuses[c].get("tasks", []) if s["id"] == t),
                             "none")
                for c, t in tasks}

    def _moved(self, tasks: dict[tuple[str, int], int],
               host: Host) -> dict[tuple[str, int], int] | None:
        """The new pid of each of ``tasks`` once every one runs off ``host``."""
        slots = {(s["connector"], s["task"]): s for s in self.lab.leader().slots()}
        moved = {}
        for key, old in tasks.items():
            slot = slots.get(key)
            if (slot is None or slot["state"] != "RUNNING" or slot["pid"] == old
                    or host.holds(slot["pid"])):
                return None
            moved[key] = slot["pid"]
        return moved

    @staticmethod
    def _log_since(worker: WorkerProcess, offset: int) -> str:
        with worker.log_path.open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    # -------------------------------------------------------------------- end

    def report_transaction_versions(self) -> None:
        """Which transaction protocol ran: the broker's finalized
        ``transaction.version``, and the ClientTransactionVersion its coordinator
        recorded with each decision (0: the producer's pre-KIP-890 EndTxn; 2: the
        coordinator's own aborts, on timeout or fencing)."""
        features = self.lab.broker.features()
        self.observations.append(Observation(
            "transaction protocol",
            f"the broker finalized transaction.version={features.get('transaction.version')}; "
            f"its coordinator recorded decisions by ClientTransactionVersion "
            f"{dict(sorted(self.by_version.items()))}; {self.empty_transactions} decisions on "
            "a transaction with no partition (nothing written) reached it"))

    def stop_all_and_verify(self) -> dict[str, Any]:
        """Stop every connector; the verifier reads each topic again from the broker."""
        leader = self.lab.leader()
        for name in self.names.values():
            leader.rest("PUT", f"/connectors/{name}/stop")
        for name in self.names.values():
            wait_for(lambda n=name: leader.status(n).get("connector", {}).get("state")  # type: ignore[misc]
                     == "STOPPED", 90, f"{name} to stop")
        self.tail.stop()
        reports = {}
        for w in WORKLOADS:
            report = verify_topics(self.lab.bootstrap, [self.topic(w.short)],
                                   expected_missing=w.missing,
                                   expect_groups=[str(p) for p in range(w.partitions)])
            print(f"\n{w.short} ({self.names[w.short]}):\n{format_table(report)}")
            assert report.ok, f"{w.short}: " + "; ".join(report.violations())
            assert report.incomplete == [], report.incomplete
            reports[w.short] = report
        return reports


FAULTS: dict[str, Callable[[NetworkFaultRun], None]] = {
    "leader cut from broker": NetworkFaultRun.leader_cut_from_broker,
    "leader cut from workers": NetworkFaultRun.leader_cut_from_workers,
    "broker's answers to leader dropped": NetworkFaultRun.broker_answers_to_leader_dropped,
    "200 +- 100 ms, 5% loss to broker": NetworkFaultRun.slow_lossy_links,
    "broker SIGKILL during fencing": NetworkFaultRun.broker_restart_during_fencing,
    "commit racing the broker's timeout abort": NetworkFaultRun.commit_racing_timeout_abort,
    "broker SIGKILL during task-count record write":
        NetworkFaultRun.broker_restart_during_task_count_write,
}


# Faults of executor hosts, on a lab with a Spark standalone cluster (Lab(executor_hosts=2)).
EXECUTOR_FAULTS: dict[str, Callable[[NetworkFaultRun], None]] = {
    "executor host cut from broker": NetworkFaultRun.executor_cut_from_broker,
    "executor host cut from its worker": NetworkFaultRun.executor_cut_from_workers,
}


def run(lab: Lab, seed: int, rounds: int, only: Sequence[str] = ()) -> NetworkFaultRun:
    """Every fault of the lab's kind (``EXECUTOR_FAULTS`` on a lab with executor
    hosts, else ``FAULTS``), or those of them named in ``only``, ``rounds`` times,
    in an order shuffled per round by ``seed``."""
    faults = EXECUTOR_FAULTS if lab.executor_hosts_wanted else FAULTS
    scenario = NetworkFaultRun(lab, random.Random(seed))
    scenario.start()
    try:
        for _ in range(rounds):
            order = list(faults)
            scenario.rng.shuffle(order)
            for name in order:
                if only and name not in only:
                    continue
                scenario.account(name, functools.partial(faults[name], scenario))
        scenario.stop_all_and_verify()
        scenario.report_transaction_versions()
    finally:
        scenario.tail.stop()
    return scenario
