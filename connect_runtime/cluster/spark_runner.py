"""Hosting connector tasks on Spark: one long-running job per connector generation.

Each job has one partition per *slot*: a group of up to ``tasks.per.process``
of the connector's tasks (:func:`slot_groups`; by default, ``auto``, one slot
per core Spark has, :func:`auto_slots`). Its partition function is
:func:`connect_runtime.task.slot.slot_partition`, which runs the group's tasks
in one Python process until the driver tells each to stop. Jobs of a connector
run in a FAIR scheduler pool named after it, so a connector's tasks do not queue
behind another's.

Spark must not silently re-run a failed task (Connect semantics: FAILED until a
REST restart). Slots never raise for task errors; a *killed* slot's retry
reports FAILED instead of resuming (:mod:`connect_runtime.config.spark_settings`
keeps retries possible and speculation off).

The session: with a ``local`` master every worker starts Spark at startup, so
a follower that takes over only needs its tasks to start. With a cluster master
(standalone, Kubernetes, YARN) only the leader holds a session: an application
holds executors (cores) as long as it lives, and a standby's would take cores
the leader's tasks need. The leader starts its session when elected and stops
it when it steps down, which releases its executors to the next leader.

Stopping: slots are asked to stop (graceful, with a final commit); after
``task.shutdown.graceful.timeout.ms`` the job group is cancelled, which kills
the slots' Python workers.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connect_runtime.cluster import jvm_archive
from connect_runtime.cluster.kube_executors import remove_stale_executors
from connect_runtime.config.connector_config import MAX_TASKS_PER_PROCESS
from connect_runtime.config.spark_settings import SparkSettings
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.task.slot import slot_partition

log = logging.getLogger(__name__)

SESSION_START_TIMEOUT_S = 300.0

JobFailureListener = Callable[[str, int, str], None]


@dataclass
class ConnectorJob:
    connector: str
    generation: int
    task_count: int
    group: str
    slot_count: int
    thread: threading.Thread | None = None
    done: threading.Event = field(default_factory=threading.Event)
    cancelled: bool = False
    error: str | None = None
    results: list[Any] = field(default_factory=list)


class SparkTaskRunner:
    """Owns the SparkContext and the per-connector jobs."""

    def __init__(self, settings: SparkSettings, app_name: str,
                 on_job_failed: JobFailureListener,
                 py_files: Sequence[str | Path] = (),
                 driver_tmpdir: Path | None = None) -> None:
        """``driver_tmpdir``: the driver JVM's java.io.tmpdir (the worker's own
        temporary root, which it removes; see :func:`driver_conf`)."""
        self._settings = settings
        self._py_files = list(py_files)  # plugin.path zips, shipped with addPyFile
        self._driver_tmpdir = driver_tmpdir
        self._app_name = app_name
        self._on_job_failed = on_job_failed
        self._context: Any = None  # the SparkContext, once started
        self._jobs: dict[str, ConnectorJob] = {}
        self._lock = threading.Lock()
        self._context_lock = threading.Lock()  # guards _context: start() and shutdown()
        self.ready = threading.Event()

    @property
    def per_leader(self) -> bool:
        """Only the leader holds a session (a cluster master); see the module docstring."""
        return not self._settings.local

    @property
    def healthy(self) -> bool:
        """For ``/health``: a local session must be up; a per-leader one starts on election."""
        return self.per_leader or self.ready.is_set()

    def start(self) -> None:
        """Create the SparkContext (seconds: it starts a JVM, and on a cluster it
        registers an application). Idempotent."""
        with self._context_lock:
            if self._context is not None:
                return
            os.environ["PYSPARK_PYTHON"] = self._settings.conf["spark.pyspark.python"]
            os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
            if self._settings.local:
                # Everything runs in this process, on loopback (spark_settings):
                # saying so spares a warning on every start that the host name
                # resolves to a loopback address.
                os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            # A SparkContext, not a SparkSession: tasks are RDD jobs, and the
            # session's SQL machinery would cost every worker start about 2.5 s
            # of class loading on a 2-core machine (docs/spark.md).
            from pyspark import SparkConf, SparkContext

            if (unsafe := self._settings.unauthenticated_rpc()) is not None:
                log.warning("%s", unsafe)
            conf = SparkConf().setAppName(self._app_name)
            for key, value in driver_conf(self._settings.conf, self._driver_tmpdir).items():
                conf.set(key, value)
            sc = SparkContext.getOrCreate(conf)
            self._context = sc
            for f in self._py_files:
                sc.addPyFile(str(f))
            sc.setLogLevel(self._settings.conf.get("spark.log.level", "WARN"))
            log.info("Spark started (master %s)", self._settings.master)
            try:
                remove_stale_executors(self._settings.conf, str(sc.applicationId))
            except Exception:  # housekeeping: the new application runs regardless
                log.warning("could not remove the executor pods of an earlier driver",
                            exc_info=True)
            self.ready.set()

    def start_in_background(self) -> None:
        def run() -> None:
            try:
                self.start()
            except Exception:
                log.exception("Spark failed to start; tasks cannot run on this worker")
        threading.Thread(target=run, name="spark-start", daemon=True).start()

    def capacity(self) -> int | None:
        """Task slots Spark has now (executor cores / ``spark.task.cpus``); None
        before the session is up."""
        sc = self._context
        if sc is None:
            return None
        if not self._settings.local:
            # defaultParallelism is at least 2 even with no executor at all (while
            # Kubernetes schedules the executor pods, say), so count the
            # registered executors first; the list includes the driver.
            executors = len(sc._jsc.sc().statusTracker().getExecutorInfos()) - 1
            if executors <= 0:
                return 0
            per_executor = self._settings.conf.get("spark.executor.cores")
            if per_executor is not None:
                return executors * int(per_executor) // self._settings.task_cpus
        return int(sc.defaultParallelism) // self._settings.task_cpus

    def cores(self) -> int:
        """The cores Spark runs tasks on, for ``tasks.per.process=auto``. A local
        master: the cores its JVM sees (``local[*]``'s count, which honours a
        container's CPU limit), never more than N of ``local[N]``. A cluster master:
        the slots its config asks for (``spark.cores.max``, else
        ``spark.executor.instances`` x ``spark.executor.cores``), or the registered
        executors' if more, so the packing does not depend on how many executors
        happened to have registered when the job was submitted. At least 1."""
        sc = self._context
        if sc is None:
            return 1
        if self._settings.local:
            machine = int(sc._jvm.java.lang.Runtime.getRuntime().availableProcessors())
            return max(1, min(machine, int(sc.defaultParallelism)))
        conf = self._settings.conf
        try:
            asked = int(conf["spark.cores.max"]) if "spark.cores.max" in conf else \
                int(conf.get("spark.executor.instances", "2")) * \
                int(conf.get("spark.executor.cores", "1"))
        except ValueError:  # Spark refuses such a value itself
            asked = 0
        return max(1, self.capacity() or 0, asked // self._settings.task_cpus)

    def busy_slots(self) -> int:
        """Slots held by the jobs that are running."""
        with self._lock:
            return sum(j.slot_count for j in self._jobs.values() if not j.done.is_set())

    def submit(self, connector: str, generation: int, specs: list[TaskSpec]) -> ConnectorJob:
        """Start the job for one generation of ``connector``. Previous job must be stopped."""
        if not self.ready.wait(SESSION_START_TIMEOUT_S):
            raise RuntimeError(f"Spark did not start within {SESSION_START_TIMEOUT_S:.0f}s")
        group = f"connect-{connector}-{generation}"
        groups = slot_groups(specs, self.cores())
        job = ConnectorJob(connector, generation, len(specs), group, len(groups))
        job.thread = threading.Thread(target=self._run_job, args=(job, groups), daemon=True,
                                      name=f"spark-job-{connector}")
        with self._lock:
            if connector in self._jobs and not self._jobs[connector].done.is_set():
                raise RuntimeError(f"a job for connector {connector} is still running")
            self._jobs[connector] = job
        self._warn_if_short_of_slots(connector, len(specs))
        job.thread.start()
        return job

    def _warn_if_short_of_slots(self, connector: str, needed: int) -> None:
        # Every task holds a Spark task slot for as long as it runs; Spark queues
        # what does not fit, and those tasks stay UNASSIGNED (the herder puts the
        # reason in their status once they have waited a while: shortfall()).
        message = self.shortfall()
        if message is not None:
            log.warning("connector %s (%d task(s)): %s", connector, needed, message)

    def shortfall(self) -> str | None:
        """Why tasks wait for Spark, if the running jobs need more slots than Spark has."""
        capacity, busy = self.capacity(), self.busy_slots()
        if capacity is None or busy <= capacity:
            return None
        cpus = self._settings.task_cpus
        how = ("spark.master=local[N] with a larger N" if self._settings.local else
               "more executors or cores (spark.executor.instances, spark.executor.cores, "
               "spark.cores.max)")
        return (f"Waiting for a Spark task slot: the running connectors' tasks need {busy} "
                f"slot(s) and Spark has {capacity} ({capacity * cpus} executor core(s) / "
                f"spark.task.cpus={cpus}); each slot hosts up to tasks.per.process task(s) "
                f"while they run. Give Spark {how}, raise tasks.per.process, or lower "
                "tasks.max.")

    def _run_job(self, job: ConnectorJob, groups: list[list[TaskSpec]]) -> None:
        sc = self._context
        try:
            sc.setJobGroup(job.group, f"connector {job.connector} generation {job.generation}",
                           interruptOnCancel=True)
            _define_pool(sc, job.connector)
            sc.setLocalProperty("spark.scheduler.pool", job.connector)
            # One element per partition: a group is one slot's tasks (parallelize
            # slices batches of elements, so a list of specs would not split by group).
            rdd = sc.parallelize(groups, len(groups))
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
        if not job.done.wait(graceful_timeout_s + 2.0):  # + channel round trips
            log.warning("tasks of %s did not stop within %.1fs; cancelling their Spark job",
                        connector, graceful_timeout_s)
            job.cancelled = True
            self._context.cancelJobGroup(job.group)
            job.done.wait(30)
        with self._lock:
            if self._jobs.get(connector) is job:
                del self._jobs[connector]

    def shutdown(self) -> None:
        """Stop Spark (a cluster application: its executors are released)."""
        with self._context_lock:
            self.ready.clear()
            if self._context is not None:
                self._context.stop()
                self._context = None
                log.info("Spark stopped")


def auto_slots(tasks: int, cores: int) -> int:
    """How many slots (processes) ``tasks.per.process=auto`` cuts ``tasks`` tasks
    into: one per core Spark has (no more than there are tasks), so busy tasks
    still use every core, and more where that keeps each at MAX_TASKS_PER_PROCESS
    tasks or fewer. 40 tasks on 2 cores: 2 slots of 20; 200: 4 of 50."""
    return max(min(tasks, max(cores, 1)), -(-tasks // MAX_TASKS_PER_PROCESS))


def slot_groups(specs: Sequence[TaskSpec], cores: int) -> list[list[TaskSpec]]:
    """``specs`` (one connector generation's tasks, in task order) cut into the
    fewest slots that hold at most ``tasks_per_process`` tasks each, as even as
    can be: 10 tasks at 4 per process are slots of 4, 3 and 3 tasks. ``auto``
    (None) cuts them into :func:`auto_slots` of ``cores`` slots, as even."""
    if not specs:
        return []
    wanted = specs[0].tasks_per_process
    slots = auto_slots(len(specs), cores) if wanted is None else -(-len(specs) // max(1, wanted))
    size, longer = divmod(len(specs), slots)
    groups, start = [], 0
    for i in range(slots):
        end = start + size + (1 if i < longer else 0)
        groups.append(list(specs[start:end]))
        start = end
    return groups


DRIVER_LOG4J2 = jvm_archive.DRIVER_LOG4J2


def driver_conf(conf: Mapping[str, str], tmpdir: Path | None = None) -> dict[str, str]:
    """``conf`` with the driver JVM's class archive (:mod:`jvm_archive`, when this
    machine has one), its log configuration (DRIVER_LOG4J2) and, if given, its
    ``java.io.tmpdir`` ahead of any ``spark.driver.extraJavaOptions`` given: an
    option of the same name there comes later on the JVM's command line, and
    wins (``-Xshare:off`` turns the archive off).

    ``java.io.tmpdir`` is where Spark puts the driver's ``spark-*`` and
    ``blockmgr-*`` directories unless ``spark.local.dir`` (or
    ``SPARK_LOCAL_DIRS``) says otherwise; only the driver's option is set, so
    executors of a cluster master keep their own."""
    given = conf.get("spark.driver.extraJavaOptions", "")
    ours = f'{jvm_archive.java_options()} -Dlog4j2.configurationFile="{DRIVER_LOG4J2}"'.lstrip()
    if tmpdir is not None:
        ours += f' -Djava.io.tmpdir="{tmpdir}"'
    return {**conf, "spark.driver.extraJavaOptions": f"{ours} {given}".strip()}


# Guards the check-then-add of _define_pool: jobs start on threads of their own.
_POOLS_LOCK = threading.Lock()


def _define_pool(sc: Any, name: str) -> None:
    """Defines the FAIR pool ``name`` (FIFO inside, weight 1, no minimum share)
    unless it exists. Spark would create the same pool itself on the job's
    submission, but with a WARN per connector ("A job was submitted with
    scheduler pool ..., which has not been configured"); an allocation file
    cannot name pools that come and go with connectors."""
    jvm = sc._jvm
    root = sc._jsc.sc().taskScheduler().rootPool()
    with _POOLS_LOCK:
        if root.getSchedulableByName(name) is None:
            fifo = jvm.org.apache.spark.scheduler.SchedulingMode.FIFO()
            root.addSchedulable(jvm.org.apache.spark.scheduler.Pool(name, fifo, 0, 1))
