"""Hosting connector tasks on Spark: one long-running job per connector generation.

Each job has one partition per connector task; its partition function is
:func:`connect_runtime.task.slot.slot_partition`, which runs until the
driver tells the slot to stop. Jobs of a connector run in a FAIR scheduler pool
named after it, so a connector's tasks do not queue behind another's.

Spark must not silently re-run a failed task (Connect semantics: FAILED until a
REST restart). Slots never raise for task errors; a *killed* slot's retry
reports FAILED instead of resuming. For retries to exist at all in local mode,
``local[N]`` becomes ``local[N,4]`` (Spark's syntax for N threads with up to 4
attempts per task); otherwise one dead Python worker would abort the whole job
and every sibling task with it.

Stopping: slots are asked to stop (graceful, with a final commit); after
``task.shutdown.graceful.timeout.ms`` the job group is cancelled, which kills
the slots' Python workers.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.task.slot import slot_partition

log = logging.getLogger(__name__)

_LOCAL_MASTER = re.compile(r"^local\[(\*|\d+)\]$")
SLOT_MAX_ATTEMPTS = 4

JobFailureListener = Callable[[str, int, str], None]


def effective_master(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``; ``local`` -> ``local[1,4]``; others unchanged."""
    if master == "local":
        return f"local[1,{SLOT_MAX_ATTEMPTS}]"
    match = _LOCAL_MASTER.match(master)
    if match:
        return f"local[{match.group(1)},{SLOT_MAX_ATTEMPTS}]"
    return master


@dataclass
class ConnectorJob:
    connector: str
    generation: int
    task_count: int
    group: str
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    error: str | None = None
    results: list[Any] = field(default_factory=list)


class SparkTaskRunner:
    """Owns the SparkSession and the per-connector jobs."""

    def __init__(self, spark_conf: dict[str, str], app_name: str,
                 on_job_failed: JobFailureListener) -> None:
        self._conf = dict(spark_conf)
        self._app_name = app_name
        self._on_job_failed = on_job_failed
        self._session: Any = None
        self._jobs: dict[str, ConnectorJob] = {}
        self._lock = threading.Lock()
        self.ready = threading.Event()

    def start(self) -> None:
        """Create the SparkSession (seconds: it starts a JVM). Executors run this interpreter."""
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName(self._app_name)
        conf = {
            "spark.scheduler.mode": "FAIR",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.task.maxFailures": str(SLOT_MAX_ATTEMPTS),
            **self._conf,
            "spark.pyspark.python": sys.executable,
        }
        conf["spark.master"] = effective_master(conf.get("spark.master", "local[*]"))
        if conf["spark.master"].startswith("local"):
            # Everything is in this process: keep Spark's driver on loopback instead
            # of whatever interface the host name resolves to.
            conf.setdefault("spark.driver.host", "127.0.0.1")
            conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
        for key, value in conf.items():
            builder = builder.config(key, value)
        self._session = builder.getOrCreate()
        self._session.sparkContext.setLogLevel(conf.get("spark.log.level", "WARN"))
        log.info("SparkSession started (master %s)", conf["spark.master"])
        self.ready.set()

    def submit(self, connector: str, generation: int, specs: list[TaskSpec]) -> ConnectorJob:
        """Start the job for one generation of ``connector``. Previous job must be stopped."""
        if not self.ready.wait(300):
            raise RuntimeError("SparkSession did not start within 300s")
        group = f"connect-{connector}-{generation}"
        job = ConnectorJob(connector, generation, len(specs), group)
        job.thread = threading.Thread(target=self._run_job, args=(job, specs), daemon=True,
                                      name=f"spark-job-{connector}")
        with self._lock:
            if connector in self._jobs and not self._jobs[connector].done.is_set():
                raise RuntimeError(f"a job for connector {connector} is still running")
            busy = sum(j.task_count for j in self._jobs.values() if not j.done.is_set())
            self._jobs[connector] = job
        self._warn_if_short_of_slots(connector, len(specs), busy)
        job.thread.start()
        return job

    def _warn_if_short_of_slots(self, connector: str, needed: int, busy: int) -> None:
        # Every task holds a Spark task slot for as long as it runs; Spark queues
        # what does not fit, and those tasks stay UNASSIGNED without an error.
        slots = int(self._session.sparkContext.defaultParallelism)
        if busy + needed > slots:
            log.warning(
                "connector %s needs %d Spark task slot(s) but only %d of %d are free "
                "(other connectors' tasks hold %d): %d task(s) stay UNASSIGNED until slots "
                "free up. Give Spark more cores (spark.master=local[N], or more executors).",
                connector, needed, max(slots - busy, 0), slots, busy,
                min(needed, busy + needed - slots))

    def _run_job(self, job: ConnectorJob, specs: list[TaskSpec]) -> None:
        sc = self._session.sparkContext
        try:
            sc.setJobGroup(job.group, f"connector {job.connector} generation {job.generation}",
                           interruptOnCancel=True)
            sc.setLocalProperty("spark.scheduler.pool", job.connector)
            rdd = sc.parallelize(specs, len(specs))
            job.results = rdd.mapPartitionsWithIndex(slot_partition).collect()
            log.info("job for %s generation %d ended: %s", job.connector, job.generation,
                     job.results)
        except Exception as e:
            if not job.cancelled:
                job.error = "".join(traceback.format_exception(e))
                log.error("Spark job for connector %s failed", job.connector, exc_info=True)
                self._on_job_failed(job.connector, job.generation, job.error)
        finally:
            job.done.set()

    def job(self, connector: str) -> ConnectorJob | None:
        with self._lock:
            return self._jobs.get(connector)

    def wait_stopped(self, connector: str, graceful_timeout_s: float) -> None:
        """After slots were told to stop: wait, then cancel the job group if needed."""
        job = self.job(connector)
        if job is None:
            return
        if not job.done.wait(graceful_timeout_s + 2.0):  # + heartbeat round trips
            log.warning("tasks of %s did not stop within %.1fs; cancelling their Spark job",
                        connector, graceful_timeout_s)
            job.cancelled = True
            self._session.sparkContext.cancelJobGroup(job.group)
            job.done.wait(30)
        with self._lock:
            if self._jobs.get(connector) is job:
                del self._jobs[connector]

    def shutdown(self) -> None:
        if self._session is not None:
            self._session.stop()
            self._session = None
