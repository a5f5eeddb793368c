"""Everything a Spark executor needs to run one connector task.

A :class:`TaskSpec` is built on the driver and pickled into the Spark job's
closure, so it holds plain data only (strings, ints, dicts of strings): no
clients, locks or connector instances. The executor rebuilds everything from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from connect_runtime.security.providers import ConfigProviders
from connect_runtime.security.tls import ClientTls


class TaskMode(Enum):
    """How a task writes, from the leader's ``exactly.once.source.support``.

    The slot picks the task loop by it; startup runs KIP-618's fencing steps
    only for ``EXACTLY_ONCE``.
    """

    EXACTLY_ONCE = "exactly-once"  # enabled: transactions, fencing (KIP-618)
    AT_LEAST_ONCE = "at-least-once"  # disabled or preparing: Connect's WorkerSourceTask

    @classmethod
    def for_support(cls, eos_support: str) -> TaskMode:
        return cls.EXACTLY_ONCE if eos_support == "enabled" else cls.AT_LEAST_ONCE


@dataclass(frozen=True)
class WorkerProcess:
    """The worker process that built a spec (the Spark driver), as its kernel names it.

    ``pid`` is in the worker's pid namespace; ``start_ticks`` is its start time
    (``/proc/<pid>/stat`` field 22, clock ticks after boot), which tells it from
    a later process given the same pid. A task process that descends from it
    (a local master) dies with it: ``task/worker_watch.py``.
    """

    pid: int
    start_ticks: int


@dataclass(frozen=True)
class TaskSpec:
    connector: str
    task: int
    # Config-topic offset of the commit record of this task generation; a task
    # whose startup read finds a larger one belongs to a dead generation.
    generation: int
    # As the config topic holds them: ${provider:path:key} placeholders unresolved
    # (the executor resolves them), but literal PASSWORD values too: no repr.
    task_config: dict[str, str] = field(repr=False)
    connector_config: dict[str, str] = field(repr=False)
    # Worker settings the executor needs.
    bootstrap_servers: str
    group_id: str
    config_topic: str
    status_topic: str
    global_offsets_topic: str
    worker_url: str
    worker_id: str
    # exactly.once.source.support as the leader has it (named in log messages);
    # ``mode`` is what it means for the task.
    eos_support: str
    offset_flush_interval_ms: int
    # At-least-once tasks only: how long one offset flush may take.
    offset_flush_timeout_ms: int = 5000
    # task.stall.threshold.ms (the connector's, else the worker's): a poll() or
    # commit in progress this long is reported stuck (task/stall_watch.py).
    stall_threshold_ms: int = 300000
    # tasks.per.process (the connector's, else the worker's; 1 when the worker's
    # spark.task.cpus is above 1): how many of the connector's tasks one Spark slot,
    # one Python process, hosts (cluster/spark_runner.py, task/slot.py). None is
    # "auto": the Spark runner decides from the cores Spark has.
    tasks_per_process: int | None = None
    # Client settings on top of bootstrap_servers, the worker's security keys
    # included: they may hold credentials (sasl.password), so no repr shows them.
    producer_overrides: dict[str, str] = field(default_factory=dict, repr=False)
    consumer_overrides: dict[str, str] = field(default_factory=dict, repr=False)
    admin_overrides: dict[str, str] = field(default_factory=dict, repr=False)
    worker_converters: dict[str, str] = field(default_factory=dict)
    offsets_topic_partitions: int = 25
    offsets_topic_replication_factor: int = -1
    # Session key for signing internal requests (fence), base64; None: unsigned.
    session_key: str | None = field(default=None, repr=False)
    session_key_algorithm: str = "HmacSHA256"
    # topic.tracking.enable: the task reports the topics it produces to (KIP-558).
    topic_tracking: bool = True
    # An https worker: what the slot trusts (and, under mutual TLS, presents) on
    # its channel and fence request. None: plain HTTP.
    rest_tls: ClientTls | None = field(default=None, repr=False)
    # The worker's config.providers settings (names, classes, params; never a
    # resolved value): the executor builds its own providers from them.
    config_providers: ConfigProviders = field(default_factory=ConfigProviders, repr=False)
    # The connector's PASSWORD keys, whose values the task's traces never show.
    password_keys: tuple[str, ...] = ()
    # The worker's log format ("text" or "json", connect_runtime.logs): the task
    # process logs in it too. Levels come later, in the slot's answers.
    log_format: str = "text"
    # The worker process that submitted the task; None where there is no /proc.
    worker_process: WorkerProcess | None = None
    # Which submission of the generation to Spark this is: a job Spark gave up is
    # submitted again with the same generation, and a slot of the old job that is
    # still alive (partitioned away, say) must not pass for the new one's.
    submission: str = ""

    @property
    def mode(self) -> TaskMode:
        return TaskMode.for_support(self.eos_support)

    @property
    def transactional_id(self) -> str:
        """KIP-618: ``<group.id>-<connector>-<task>``; users cannot override it."""
        return f"{self.group_id}-{self.connector}-{self.task}"

    @property
    def task_label(self) -> str:
        return f"{self.connector}-{self.task}"
