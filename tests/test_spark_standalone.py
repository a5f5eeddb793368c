"""The Spark standalone fixture, with a real driver process, and an executor SIGKILL.

Run with ``-s`` to see the measured timings (docs/spark.md#standalone-on-loopback).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from support import processes
from support.spark_standalone import (
    Executor,
    SparkStandaloneCluster,
    spark_cluster_fixture,  # noqa: F401
    wait_for,
)

pytestmark = pytest.mark.spark_cluster

# A driver as a worker process would run one: ``python driver.py <args.json>``.
# Every task writes <ctl>/p<partition>-a<attempt>.json when it starts, then
# sleeps until <ctl>/release exists (at most ``hold`` seconds) and returns what
# it saw.
DRIVER = r'''
import json, os, sys, time
from pathlib import Path
from pyspark.sql import SparkSession

args = json.loads(sys.argv[1])
ctl = Path(args["ctl"])
builder = SparkSession.builder.appName(args["app_name"])
for k, v in args["conf"].items():
    builder = builder.config(k, v)
spark = builder.getOrCreate()
sc = spark.sparkContext
(ctl / "started.json").write_text(json.dumps({"app_id": sc.applicationId, "t": time.time()}))


def task(index, rows):
    from pyspark import TaskContext

    ctx = TaskContext.get()
    attempt = ctx.attemptNumber()
    seen = {"partition": index, "attempt": attempt, "pid": os.getpid(),
            "ppid": os.getppid(), "python": sys.executable, "t": time.time()}
    tmp = ctl / f".p{index}-a{attempt}.json"
    tmp.write_text(json.dumps(seen))
    tmp.rename(ctl / f"p{index}-a{attempt}.json")
    deadline = time.time() + args["hold"]
    while time.time() < deadline and not (ctl / "release").exists():
        time.sleep(0.05)
    yield seen


n = args["partitions"]
result = sc.parallelize(range(n), n).mapPartitionsWithIndex(task).collect()
(ctl / "done.json").write_text(json.dumps(result))
spark.stop()
'''


class Driver:
    def __init__(self, cluster: SparkStandaloneCluster, name: str, partitions: int = 4,
                 hold: float = 240) -> None:
        self.name = name
        self.dir = cluster.workdir / f"driver-{name}"
        self.ctl = self.dir / "ctl"
        self.ctl.mkdir(parents=True)
        script = self.dir / "driver.py"
        script.write_text(DRIVER)
        conf = cluster.driver_conf() | {
            "spark.executor.cores": "1",
            "spark.cores.max": "4",
            "spark.executor.memory": "512m",
        }
        args = {"ctl": str(self.ctl), "app_name": name, "conf": conf,
                "partitions": partitions, "hold": hold}
        self.log = self.dir / "driver.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(script), json.dumps(args)], cwd=self.dir,
                env=os.environ | cluster.driver_env(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def marker(self, partition: int, attempt: int = 0) -> dict[str, Any] | None:
        path = self.ctl / f"p{partition}-a{attempt}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def release(self) -> None:
        (self.ctl / "release").touch()

    def finish(self, timeout: float = 120) -> list[dict[str, Any]]:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        assert rc == 0, f"driver exited {rc}:\n{self.log.read_text()[-3000:]}"
        return list(json.loads((self.ctl / "done.json").read_text()))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def leftovers(cluster: SparkStandaloneCluster) -> list[str]:
    """Live processes (per ``ps``) that mention this cluster's work dir or master port."""
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    needles = (str(cluster.workdir), f"127.0.0.1:{cluster.master_port}")
    found = []
    for line in out.splitlines():
        pid, stat, args = line.split(None, 2)
        if int(pid) == os.getpid() or stat.startswith("Z"):
            continue
        if any(n in args for n in needles) and ("java" in args or "python" in args):
            found.append(line[:300])
    return found


def on_both_workers(execs: list[Executor]) -> list[Executor] | None:
    return execs if len({e.worker for e in execs}) >= 2 else None


@pytest.mark.timeout(600)
def test_driver_gets_executors_on_both_workers(spark_cluster: SparkStandaloneCluster) -> None:
    cluster = spark_cluster
    assert cluster.startup_seconds is not None
    t0 = time.monotonic()
    driver = Driver(cluster, "smoke")
    try:
        app = wait_for(lambda: [a for a in cluster.applications() if a["name"] == "smoke"],
                       120, "the app registered with the master")[0]
        t_app = time.monotonic() - t0
        execs = wait_for(lambda: on_both_workers(cluster.executors("smoke")), 120,
                         "executors on both workers")
        t_execs = time.monotonic() - t0
        assert {e.app_id for e in execs} == {app["id"]}
        seen = wait_for(lambda: all(m := [driver.marker(p) for p in range(4)]) and m,
                        180, "all 4 tasks running")
        t_tasks = time.monotonic() - t0

        # Every task runs in a Python worker forked by a PySpark daemon, both
        # descendants of an executor JVM of this app; 4 one-core executors on
        # 2 two-core workers: both workers are used.
        execs = cluster.executors(app["id"])
        assert len(execs) == 4, execs
        owner = {pid: e for e in execs for pid in cluster.python_workers(e.pid)}
        for m in seen:
            assert m["pid"] in owner and m["ppid"] in owner, (m, owner)
            assert owner[m["pid"]] == owner[m["ppid"]]
            assert m["python"] == sys.executable
        assert {owner[m["pid"]].worker for m in seen} == {0, 1}
        assert len({owner[m["pid"]].pid for m in seen}) == 4
        assert cluster.executors("no-such-app") == []

        driver.release()
        result = driver.finish()
        assert sorted((r["partition"], r["pid"], r["ppid"]) for r in result) == sorted(
            (m["partition"], m["pid"], m["ppid"]) for m in seen)
        wait_for(lambda: not cluster.executors(app["id"]), 60,
                 "the workers to stop the finished app's executors")
        assert not any(a["id"] == app["id"] for a in cluster.applications())
    finally:
        driver.kill()

    print(f"\ncluster start {cluster.startup_seconds:.1f}s; from driver start: app registered "
          f"{t_app:.1f}s, executor JVMs on both workers {t_execs:.1f}s, "
          f"all 4 tasks running {t_tasks:.1f}s; load average {os.getloadavg()}")
    cluster.stop()
    cluster.stop()  # idempotent
    assert leftovers(cluster) == []
    assert cluster.processes() == []


_LOG_TIME = re.compile(r"^(\d\d/\d\d/\d\d \d\d:\d\d:\d\d\.\d\d\d) (\w+) (\S+): (.*)$")


def log_events(path: Path, patterns: list[str], since: float) -> list[tuple[float, str]]:
    """(seconds after ``since``, line) of the log lines matching any pattern."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _LOG_TIME.match(line)
        if m and any(p in m.group(4) for p in patterns):
            t = datetime.strptime(m.group(1), "%y/%m/%d %H:%M:%S.%f").timestamp()
            if t >= since - 1:
                out.append((round(t - since, 3), f"{m.group(3)}: {m.group(4)[:160]}"))
    return out


@pytest.mark.timeout(600)
def test_executor_sigkill_during_long_task(spark_cluster: SparkStandaloneCluster) -> None:
    """SIGKILL an executor JVM while its task sleeps: what dies, and what Spark does.

    Default spark.network.timeout. Every first attempt sleeps (until released),
    so the other three executors stay busy and the re-run needs a new executor.
    """
    cluster = spark_cluster
    driver = Driver(cluster, "sigkill")
    try:
        seen = wait_for(lambda: all(m := [driver.marker(p) for p in range(4)]) and m,
                        300, "all 4 tasks running")
        app_id = json.loads((driver.ctl / "started.json").read_text())["app_id"]
        execs = cluster.executors(app_id)
        owner = {pid: e for e in execs for pid in cluster.python_workers(e.pid)}
        victim = owner[seen[0]["pid"]]
        python = cluster.python_workers(victim.pid)
        assert seen[0]["pid"] in python and seen[0]["ppid"] in python
        known = {e.executor_id for e in execs}

        t_kill = time.time()
        os.kill(victim.pid, signal.SIGKILL)
        gone: dict[int, float] = {}
        replacement: list[Executor] = []
        t_replacement = None
        deadline = time.monotonic() + 120
        while len(gone) < len(python) or not replacement:
            assert time.monotonic() < deadline, (gone, python, replacement)
            now = time.time()
            gone.update({p: now for p in python if p not in gone and not processes.alive(p)})
            if not replacement:
                replacement = [e for e in cluster.executors(app_id)
                               if e.executor_id not in known]
                t_replacement = time.time() if replacement else None
            time.sleep(0.005 if len(gone) < len(python) else 0.1)
        rerun = wait_for(lambda: driver.marker(0, 1), 150, "partition 0 to run again")
        after = cluster.executors(app_id)
        rerun_owner = {pid: e for e in after for pid in cluster.python_workers(e.pid)}.get(
            rerun["pid"])
        assert not processes.alive(victim.pid)
        assert len(replacement) == 1 and len(after) == 4, (execs, after)
        assert rerun_owner == replacement[0]

        driver.release()
        result = driver.finish()
        assert sorted((r["partition"], r["attempt"]) for r in result) == [
            (0, 1), (1, 0), (2, 0), (3, 0)]
    finally:
        driver.kill()

    assert t_replacement is not None
    driver_log = log_events(driver.log, [
        "Lost executor", "Lost task", "Starting task 0.1",
        "Registered executor", "removed:", "Removing executor", "Granted executor"], t_kill)
    worker_log = log_events(cluster.workdir / f"worker-{victim.worker}.log", [
        "finished with state", "Asked to launch executor", "Launch command"], t_kill)
    new_stderr = (cluster.worker_dir(replacement[0].worker) / app_id
                  / replacement[0].executor_id / "stderr")
    executor_log = log_events(new_stderr, [
        "Started daemon", "Successfully registered with driver", "Got assigned task",
        "Starting Python task"], t_kill)
    report = {
        "load_average": os.getloadavg(),
        "victim": f"executor {victim.executor_id} on worker {victim.worker}",
        "python_gone_s": {("daemon" if p == seen[0]["ppid"] else "task worker" if
                           p == seen[0]["pid"] else str(p)): round(t - t_kill, 3)
                          for p, t in gone.items()},
        "replacement": f"executor {replacement[0].executor_id} on worker "
                       f"{replacement[0].worker}",
        "replacement_jvm_seen_s": round(t_replacement - t_kill, 3),
        "rerun_task_started_s": round(rerun["t"] - t_kill, 3),
        "driver_log": driver_log,
        "worker_log": worker_log,
        "replacement_executor_log": executor_log,
    }
    (cluster.workdir / "sigkill-report.json").write_text(json.dumps(report, indent=1))
    print("\n" + json.dumps(report, indent=1))
