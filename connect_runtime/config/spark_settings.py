"""The ``spark.*`` worker keys: what long-running task slots need of Spark.

A connector task holds one Spark task (a *slot*) for as long as it runs, which
is not what Spark's defaults assume (short tasks, retried or duplicated freely).
:func:`spark_settings` turns the worker's ``spark.*`` keys into the SparkContext
settings, refusing the ones that would break task semantics (a ``ConfigException``
naming the key: the CLI exits non-zero with it) and overriding, with a warning,
the ones that must not be on. docs/spark.md explains each choice.

* ``spark.master``: ``local[N]`` (default ``local[*]``), ``spark://``, ``k8s://``
  or ``yarn``. ``local[N]`` becomes ``local[N,4]``: local mode retries nothing
  unless told, and a slot whose process was killed needs its retry to report
  FAILED; without one, the whole job (every task of the connector) dies.
* ``spark.task.maxFailures`` (default 4) must be at least 2, for the same reason.
* ``spark.speculation`` is forced off: a speculative copy of a slot would be a
  second instance of a task, fenced at once, and a FAILED task for nothing.
* ``spark.dynamicAllocation.enabled=true`` needs ``spark.dynamicAllocation.maxExecutors``:
  executors running slots are never idle, so dynamic allocation only ever
  grows; unbounded, it grows with every connector created.
* ``spark.scheduler.mode`` defaults to FAIR (one pool per connector), so one
  connector's queued tasks do not hold back another's.
* ``spark.pyspark.python`` defaults to the worker's interpreter (executors then
  share its environment, the image case); set it to run executors from a packed
  environment shipped with ``spark.archives``.
* ``spark.python.daemon.module`` defaults to :mod:`connect_runtime.task.daemon`,
  PySpark's daemon with the slot's modules imported before it forks, so task
  processes share those pages instead of each importing its own copy.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from connect_runtime.errors import ConfigException

log = logging.getLogger(__name__)

SLOT_MAX_ATTEMPTS = 4
DAEMON_MODULE = "connect_runtime.task.daemon"
_LOCAL = re.compile(r"^local(?:\[(\*|\d+)(?:,(\d+))?\])?$")
_CLUSTER_PREFIXES = ("spark://", "k8s://", "yarn", "mesos://")


def effective_master(master: str) -> str:
    """``local[N]`` -> ``local[N,4]``; ``local`` -> ``local[1,4]``; others unchanged."""
    match = _LOCAL.match(master)
    if match is None or match.group(2) is not None:
        return master
    return f"local[{match.group(1) or 1},{SLOT_MAX_ATTEMPTS}]"


def is_local(master: str) -> bool:
    return _LOCAL.match(master) is not None


def _int(conf: Mapping[str, str], key: str, default: int, at_least: int, why: str) -> int:
    raw = conf.get(key)
    if raw is None:
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigException(f"must be an integer; {why}", name=key, value=raw) from None
    if value < at_least:
        raise ConfigException(f"must be at least {at_least}; {why}", name=key, value=raw)
    return value


def _true(conf: Mapping[str, str], key: str) -> bool:
    return conf.get(key, "false").strip().lower() == "true"


@dataclass(frozen=True)
class SparkSettings:
    """Validated SparkContext settings. ``conf`` is what the session is built with."""

    conf: dict[str, str]

    @property
    def master(self) -> str:
        return self.conf["spark.master"]

    @property
    def local(self) -> bool:
        """Everything runs in the worker process; no cluster manager to share."""
        return is_local(self.master)

    @property
    def task_cpus(self) -> int:
        return int(self.conf.get("spark.task.cpus", "1"))

    def unauthenticated_rpc(self) -> str | None:
        """What to warn of when the driver's RPC port accepts anyone: with a cluster
        master it listens beyond loopback, and without ``spark.authenticate`` any
        client that reaches it can have the driver's process run code. None with
        a local master (loopback only) or with authentication on."""
        if self.local or _true(self.conf, "spark.authenticate"):
            return None
        where = self.conf.get("spark.driver.bindAddress") or self.conf.get(
            "spark.driver.host") or "every interface of this host"
        return (f"the Spark driver's RPC port (spark.driver.port) listens on {where} for "
                f"{self.master} without spark.authenticate: whoever reaches it can run code "
                "in this worker; set spark.authenticate=true and "
                "spark.authenticate.secret, or keep the port off any network others "
                "reach (docs/security.md#spark)")


def spark_settings(worker_keys: Mapping[str, str]) -> SparkSettings:
    """The session settings for the worker's ``spark.*`` keys (see the module docstring).

    Raises :class:`ConfigException` naming the key for a setting that would
    break task semantics; logs a warning for each one it overrides.
    """
    given = {k: v for k, v in worker_keys.items() if k.startswith("spark.")}
    master = given.get("spark.master", "local[*]").strip()
    local = _LOCAL.match(master)
    if local is None and not master.startswith(_CLUSTER_PREFIXES):
        raise ConfigException(
            "must be local[N], spark://HOST:PORT, k8s://https://HOST:PORT or yarn",
            name="spark.master", value=master)
    if local is not None and local.group(2) is not None and int(local.group(2)) < 2:
        raise ConfigException(
            "the second number (attempts per task) must be at least 2: a slot whose process "
            "is killed needs a second attempt to report FAILED, or Spark aborts every task "
            "of the connector", name="spark.master", value=master)
    _int(given, "spark.task.maxFailures", SLOT_MAX_ATTEMPTS, 2,
         "a slot whose process is killed needs a second attempt to report FAILED; with 1, "
         "Spark aborts the job and every task of the connector with it")
    _int(given, "spark.task.cpus", 1, 1, "each connector task holds this many cores")
    if _true(given, "spark.dynamicAllocation.enabled") \
            and "spark.dynamicAllocation.maxExecutors" not in given:
        raise ConfigException(
            "needs spark.dynamicAllocation.maxExecutors: executors running connector tasks "
            "are never idle, so dynamic allocation only grows, without bound",
            name="spark.dynamicAllocation.enabled", value="true")
    if _true(given, "spark.speculation"):
        log.warning("Ignoring spark.speculation=true: a speculative copy of a connector task "
                    "would be a second instance of it (fenced at once, and a FAILED task); "
                    "speculation is forced off")
    conf = {
        "spark.scheduler.mode": "FAIR",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.task.maxFailures": str(SLOT_MAX_ATTEMPTS),
        "spark.pyspark.python": sys.executable,
        "spark.python.daemon.module": DAEMON_MODULE,
        **given,
        "spark.speculation": "false",
        "spark.master": effective_master(master),
    }
    if local is not None:
        # Everything is in this process: keep Spark's driver on loopback instead
        # of whatever interface the host name resolves to.
        conf.setdefault("spark.driver.host", "127.0.0.1")
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
    return SparkSettings(conf)
