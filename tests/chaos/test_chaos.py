"""Exactly-once under faults: 3 real workers, a real broker, faults from outside.

Three sequence connectors run side by side, one per transaction boundary
(poll; interval; connector-defined with every third transaction aborted), while
the suite bounces workers (SIGTERM, SIGKILL of the whole process group), stalls
the leader (SIGSTOP past the session timeout, then SIGCONT: a zombie), kills a
task's Spark Python worker mid-transaction, changes ``tasks.max`` during
bounces, drives pause/resume, stop/resume and restarts through REST, and stops
the broker (SIGTERM, then SIGKILL) under running workers.

The workers run with the default packing (``tasks.per.process=auto``: a
connector's tasks packed into one process per core), which ``poll`` keeps;
``aborts`` asks for its 2 tasks in one process (``tasks.per.process=2``) and
``interval`` for a process per task (``tasks.per.process=1``). The kills of a
Spark Python worker hit a process of each: every task it hosted must fail,
restart and resume exactly where its last transaction left it.

After every round a ``read_committed`` tail must show new committed records
for every source partition, stamped after the fault (the recovery time is
measured that way). After each kind of fault the records read so far must have
no duplicate and no gap; at the end every connector is stopped and the
verifier reads the topics again from the broker: zero missing, zero duplicated,
no leaked aborted record, and the committed source offsets agree with the
output. The per-fault table is printed.

``CHAOS_ROUNDS`` (default 2) repeats the worker bounces: each round bounces
every worker, leader included, once per signal.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cluster import Cluster
from support.faults import CommittedTail, FaultTable, Group, wait_recovered
from support.kafka import Broker, create_topic, free_port_pair, wait_for
from support.workers import WorkerProcess

from connect_runtime.connectors.sequence import expected_aborted
from connect_runtime.tools.verify import format_table, verify_topics

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(2400)]

SEQ = "SequenceSourceConnector"
ROUNDS = int(os.environ.get("CHAOS_ROUNDS", "2"))
RECOVERY_TIMEOUT = 120.0
COMMIT_EVERY, ABORT_EVERY = 10, 3


def aborted(seq: int) -> bool:
    return expected_aborted(seq, COMMIT_EVERY, ABORT_EVERY)


# name -> (config, source partitions, deliberately aborted seqs)
CONNECTORS: dict[str, tuple[dict[str, str], int, Callable[[int], bool] | None]] = {
    # The default packing: on 2 cores, tasks 0 and 1 in one process, 2 in another.
    "poll": ({"tasks.max": "3", "partitions": "5", "batch.size": "20", "rate.per.sec": "100"},
             5, None),
    "interval": ({"tasks.max": "2", "partitions": "2", "batch.size": "10",
                  "rate.per.sec": "60", "transaction.boundary": "interval",
                  "transaction.boundary.interval.ms": "400", "tasks.per.process": "1"},
                 2, None),
    "aborts": ({"tasks.max": "2", "partitions": "2", "batch.size": "5", "rate.per.sec": "60",
                "transaction.boundary": "connector",
                "commit.every.records": str(COMMIT_EVERY),
                "abort.every.transactions": str(ABORT_EVERY),
                "tasks.per.process": "2"}, 2, aborted),
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """The suite's own broker: it is stopped and killed, so it cannot be the shared one."""
    b = Broker(tmp_path_factory.mktemp("chaos-kafka"), free_port_pair())
    b.start()
    try:
        yield b
    finally:
        b.stop()


@pytest.fixture
def cluster(broker: Broker, tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(broker.bootstrap, tmp_path, 3, {"spark.master": "local[10]"}).start()
    try:
        yield c
    finally:
        for w in c.workers:
            if w.proc is not None and w.proc.poll() is None:
                w.signal_tree(signal.SIGCONT)
        c.stop()


class ChaosRun:
    """The running pipeline, and the faults applied to it."""

    def __init__(self, broker: Broker, cluster: Cluster, names: dict[str, str]) -> None:
        self.broker = broker
        self.cluster = cluster
        self.names = names  # short name -> connector name
        self.table = FaultTable()
        self.groups: list[Group] = [(names[short], p) for short, (_, n, _) in CONNECTORS.items()
                                    for p in range(n)]
        self.tail = CommittedTail(broker.bootstrap,
                                  {self.topic(short): names[short] for short in CONNECTORS})
        self.tasks = {short: int(config["tasks.max"]) for short, (config, _, _)
                      in CONNECTORS.items()}

    @staticmethod
    def topic(short: str) -> str:
        return f"out-{short}"

    def rest(self, method: str, path: str, **kwargs: Any) -> Any:
        """A REST call through whichever worker answers (followers forward writes)."""
        def attempt() -> Any:
            for w in self.cluster.alive():
                try:
                    r = w.rest(method, path, **kwargs)
                except Exception:
                    continue
                if r.status_code < 300:
                    return r
            return None
        return wait_for(attempt, 90, f"{method} {path} to succeed", interval=1)

    def leader(self) -> WorkerProcess:
        return self.cluster.wait_agreed_leader(RECOVERY_TIMEOUT)

    def followers(self) -> list[WorkerProcess]:
        lead = self.leader()
        return [w for w in self.cluster.workers if w is not lead]

    def wait_running(self, timeout: float = RECOVERY_TIMEOUT) -> None:
        for short, count in self.tasks.items():
            self.leader().wait_tasks(self.names[short], "RUNNING", count, timeout)

    def recovered(self, fault: str, since: float, produced_after: float | None = None) -> float:
        """Seconds from ``since`` until every source partition committed a record
        produced after ``produced_after`` (default: ``since``)."""
        return wait_recovered(self.tail, self.table, self.groups, fault, since,
                              RECOVERY_TIMEOUT, self.diagnosis, produced_after)

    def diagnosis(self) -> str:
        """What the workers say, for a failure message."""
        lines = []
        for w in self.cluster.alive():
            try:
                lead = w.rest("GET", "/internal/leader").json()
                lines.append(f"{w.url}: {lead}")
                if lead["is_leader"]:
                    lines += [f"  status {n}: {w.status(n)}" for n in self.names.values()]
                    lines += [f"  slot {slot}" for slot in w.slots()]
            except Exception as e:
                lines.append(f"{w.url}: {e!r}")
        return "\n".join(lines)

    def check(self, fault: str) -> None:
        """No duplicate and no gap in what was committed so far."""
        reports = [self.tail.verify(self.names[short], missing, range(n))
                   for short, (_, n, missing) in CONNECTORS.items()]
        self.table.checked(fault, self.tail.count(), reports)
        bad = [v for r in reports for v in r.violations()]
        assert not bad, f"after {fault}:\n" + "\n".join(bad) + "\n" + self.table.format()

    # --- faults -------------------------------------------------------------
    def bounce(self, worker: WorkerProcess, sig: int, fault: str) -> None:
        """SIGTERM: the worker's own clean shutdown. SIGKILL: the worker and all
        its descendants (Spark JVM, Python workers), as when a pod dies."""
        assert worker.proc is not None
        since = time.time()
        if sig == signal.SIGKILL:
            worker.signal_tree(sig)
        else:
            worker.signal(sig)
        worker.proc.wait(120)
        # A clean stop commits what its tasks produced after the signal; only
        # records produced once the worker is gone show that others took over.
        self.recovered(fault, since, produced_after=time.time())
        worker.start()
        self.leader()

    def bounce_every_worker(self, sig: int, fault: str) -> None:
        for _ in range(ROUNDS):
            # Followers first, then whoever leads at that point.
            for worker in self.followers():
                self.bounce(worker, sig, fault)
            self.bounce(self.leader(), sig, fault + " (leader)")
        self.check(fault)
        self.check(fault + " (leader)")

    def stall_leader(self) -> None:
        fault = "SIGSTOP leader, SIGCONT"
        leader = self.leader()
        assert leader.proc is not None
        since = time.time()
        leader.signal_tree(signal.SIGSTOP)  # its Spark executors stall with it
        try:
            self.cluster.wait_leader(RECOVERY_TIMEOUT, other_than=leader)
            self.recovered(fault, since)
        finally:
            leader.signal_tree(signal.SIGCONT)
        # The zombie learns it lost the group and steps down; its writes are fenced.
        wait_for(lambda: not leader.rest("GET", "/internal/leader").json()["is_leader"], 60,
                 "the resumed zombie to step down")
        self.leader()
        self.check(fault)

    def kill_executor(self, short: str, hosting: int | None) -> None:
        """SIGKILL the Python process of a running task of ``short``, which must host
        ``hosting`` of its tasks (None: as many as the default packing put there, on
        this machine's cores): each of them fails, and is restarted."""
        name = self.names[short]
        leader = self.leader()

        def running_process() -> tuple[int, list[int]] | None:
            slots = [s for s in leader.slots() if s["connector"] == name]
            if not slots or any(not s.get("pid") or s["state"] != "RUNNING" for s in slots):
                return None
            pid = slots[0]["pid"]
            return pid, sorted(int(s["task"]) for s in slots if s["pid"] == pid)
        pid, tasks = wait_for(running_process, 60,
                              f"every task of {name} running with a known Python worker")
        assert hosting in (None, len(tasks)), f"process {pid} hosts tasks {tasks} of {name}"
        packing = "" if hosting else ", default packing"
        fault = f"SIGKILL Spark Python worker ({len(tasks)} task{'s' * (len(tasks) > 1)}{packing})"
        since = time.time()
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: all(leader.status(name)["tasks"][t]["state"] == "FAILED"
                             for t in tasks), 60, f"tasks {tasks} of {name} to be FAILED")
        for task in tasks:
            self.rest("POST", f"/connectors/{name}/tasks/{task}/restart")
        self.recovered(fault, since)
        self.check(fault)

    def reconfigure_during(self, short: str, tasks: int, sig: int) -> None:
        fault = f"tasks.max change + {signal.Signals(sig).name} leader"
        name = self.names[short]
        config = {"connector.class": SEQ, "topic": self.topic(short),
                  **CONNECTORS[short][0], "tasks.max": str(tasks)}
        leader = self.leader()
        self.rest("PUT", f"/connectors/{name}/config", json=config)
        self.tasks[short] = tasks
        self.bounce(leader, sig, fault)
        self.wait_running()
        self.check(fault)

    def lifecycle(self) -> None:
        poll, interval, aborts = (self.names[s] for s in ("poll", "interval", "aborts"))
        leader = self.leader()

        self.rest("PUT", f"/connectors/{interval}/pause")
        leader.wait_tasks(interval, "PAUSED", 2)
        since = time.time()
        self.rest("PUT", f"/connectors/{interval}/resume")
        self.recovered("pause, resume", since)
        self.check("pause, resume")

        self.rest("PUT", f"/connectors/{aborts}/stop")
        wait_for(lambda: leader.status(aborts).get("connector", {}).get("state") == "STOPPED",
                 60, f"{aborts} to stop")
        since = time.time()
        self.rest("PUT", f"/connectors/{aborts}/resume")
        self.recovered("stop, resume", since)
        self.check("stop, resume")

        since = time.time()
        self.rest("POST", f"/connectors/{poll}/tasks/0/restart")
        self.recovered("task restart (REST)", since)
        self.check("task restart (REST)")

        since = time.time()
        self.rest("POST", f"/connectors/{interval}/restart?includeTasks=true")
        self.recovered("connector restart (REST)", since)
        self.check("connector restart (REST)")

    def bounce_broker(self, sig: int, also_leader: bool = False) -> None:
        fault = f"broker {signal.Signals(sig).name}, restart"
        leader = self.leader() if also_leader else None
        if leader is not None:
            fault += " + SIGKILL leader"
        since = time.time()
        if leader is not None:
            leader.signal_tree(signal.SIGKILL)
        self.broker.kill(sig)
        time.sleep(2)
        self.broker.start()
        if leader is not None:
            assert leader.proc is not None
            leader.proc.wait(30)
            leader.start()
        self.recovered(fault, since)
        self.leader()
        self.check(fault)

    def stop_all_and_verify(self) -> None:
        for short in CONNECTORS:
            self.rest("PUT", f"/connectors/{self.names[short]}/stop")
        leader = self.leader()
        for name in self.names.values():
            wait_for(lambda n=name: leader.status(n).get("connector", {}).get("state")  # type: ignore[misc]
                     == "STOPPED", 90, f"{name} to stop")
        self.tail.stop()
        for short, (_, partitions, missing) in CONNECTORS.items():
            name = self.names[short]
            report = verify_topics(self.broker.bootstrap, [self.topic(short)],
                                   expected_missing=missing,
                                   expect_groups=[str(p) for p in range(partitions)])
            print(f"\n{short} ({name}):\n{format_table(report)}")
            assert report.ok, f"{short}: " + "; ".join(report.violations())
            assert report.incomplete == [], report.incomplete
            # The committed source offsets are exactly where the output ends.
            # Right after the broker bounces, reading the offsets topic may still time
            # out (an error body): the answer that counts is the first complete one.
            offsets = wait_for(lambda n=name: _offsets(leader, n), 60,  # type: ignore[misc]
                               f"{name}'s committed offsets")
            next_seq = {o["partition"]["sequence.partition"]: o["offset"]["seq"] for o in offsets}
            for g in report.groups:
                last = max(g.last or 0, g.first or 0)
                nxt = next_seq[int(g.label)]
                assert nxt > last, (short, g.label, last, nxt)
                assert all(missing is not None and missing(s) for s in range(last + 1, nxt)), (
                    f"{short}/{g.label}: offsets at {nxt} but output ends at {last}")


def _offsets(worker: WorkerProcess, name: str) -> list[dict[str, Any]] | None:
    """``name``'s committed offsets, or None (the answer printed) while the worker
    cannot read them yet."""
    r = worker.rest("GET", f"/connectors/{name}/offsets")
    if r.status_code == 200:
        return list(r.json()["offsets"])
    print(f"GET /connectors/{name}/offsets: {r.status_code} {r.text[:300]}")
    return None


def test_exactly_once_survives_faults(broker: Broker, cluster: Cluster,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    names = {short: f"chaos-{short}" for short in CONNECTORS}
    for short in CONNECTORS:
        create_topic(broker.bootstrap, ChaosRun.topic(short), 3)
    s = ChaosRun(broker, cluster, names)
    s.tail.start()
    try:
        for short, (config, _, _) in CONNECTORS.items():
            s.rest("POST", "/connectors", json={"name": names[short], "config": {
                "connector.class": SEQ, "topic": s.topic(short), **config}})
        s.wait_running()
        s.recovered("start", time.time() - 0.001)

        s.bounce_every_worker(signal.SIGTERM, "SIGTERM worker")
        s.bounce_every_worker(signal.SIGKILL, "SIGKILL worker")
        s.stall_leader()
        s.kill_executor("poll", hosting=None)
        s.kill_executor("aborts", hosting=2)
        s.kill_executor("interval", hosting=1)
        s.reconfigure_during("poll", 5, signal.SIGKILL)
        s.reconfigure_during("poll", 2, signal.SIGTERM)
        s.lifecycle()
        s.bounce_broker(signal.SIGTERM)
        s.bounce_broker(signal.SIGKILL)
        s.bounce_broker(signal.SIGKILL, also_leader=True)
        s.stop_all_and_verify()
    finally:
        s.tail.stop()
        with capsys.disabled():
            print("\n\nchaos: exactly-once under faults\n" + s.table.format() + "\n")
