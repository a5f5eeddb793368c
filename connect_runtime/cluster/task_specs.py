"""Building the :class:`TaskSpec` a Spark executor runs one task from."""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping

from connect_runtime.config.connector_config import (
    TASKS_PER_PROCESS_CONFIG,
    parse_tasks_per_process,
)
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.logs import process_log_format
from connect_runtime.protocol.task_spec import TaskSpec, WorkerProcess
from connect_runtime.storage.config_store import SessionKey
from connect_runtime.tempdirs import start_ticks


class TaskSpecBuilder:
    """Combines the leader's worker settings with one task's configs.

    Every spec gets its own copies of the dicts it holds, so one spec's data
    never aliases another's or the caller's.
    """

    def __init__(self, config: WorkerConfig, worker_url: str, worker_id: str) -> None:
        self.config = config
        self.worker_url = worker_url
        self.worker_id = worker_id
        self.worker_process = this_process()

    def client_overrides(self, kind: str) -> dict[str, str]:
        """The worker's ``<kind>.*`` client settings (producer, consumer, admin).

        Without ``bootstrap.servers``: the spec carries the worker's as
        ``bootstrap_servers``, and the overrides are layered on top of it.
        """
        conf = self.config.client_config(kind)
        conf.pop("bootstrap.servers", None)
        return conf

    def build(self, connector: str, task: int, generation: int,
              task_config: Mapping[str, str], connector_config: Mapping[str, str],
              session_key: SessionKey | None,
              password_keys: Iterable[str] = (), submission: str = "") -> TaskSpec:
        """The spec of task ``task`` of ``connector`` in config generation ``generation``.

        ``session_key`` is the cluster's current key (None: the task's internal
        requests go unsigned); tasks sign with ``inter.worker.signature.algorithm``.
        The configs are the config topic's (placeholders unresolved): the executor
        resolves them with the worker's ``config_providers``, and hides the values
        of ``password_keys`` (the connector's PASSWORD keys) in its traces.
        ``submission`` names the Spark job it goes in (``TaskSpec.submission``).
        """
        config = self.config
        converters = config.converter_configs()
        return TaskSpec(
            connector=connector, task=task, generation=generation, task_config=dict(task_config),
            connector_config=dict(connector_config),
            bootstrap_servers=config.bootstrap_servers, group_id=config.group_id,
            config_topic=config["config.storage.topic"],
            status_topic=config["status.storage.topic"],
            global_offsets_topic=config["offset.storage.topic"],
            worker_url=self.worker_url, worker_id=self.worker_id,
            eos_support=config.eos_support,
            offset_flush_interval_ms=int(config["offset.flush.interval.ms"]),
            offset_flush_timeout_ms=int(config["offset.flush.timeout.ms"]),
            stall_threshold_ms=stall_threshold_ms(connector_config,
                                                  int(config["task.stall.threshold.ms"])),
            tasks_per_process=tasks_per_process(
                connector_config, config.tasks_per_process, config.spark_settings().task_cpus),
            producer_overrides=self.client_overrides("producer"),
            consumer_overrides=self.client_overrides("consumer"),
            admin_overrides=self.client_overrides("admin"),
            worker_converters=converters,
            offsets_topic_partitions=int(config["offset.storage.partitions"]),
            offsets_topic_replication_factor=int(config["offset.storage.replication.factor"]),
            session_key=base64.b64encode(session_key.key).decode("ascii") if session_key
            else None,
            session_key_algorithm=str(config["inter.worker.signature.algorithm"]),
            topic_tracking=bool(config["topic.tracking.enable"]),
            rest_tls=config.rest_tls.client() if config.rest_tls is not None else None,
            config_providers=config.config_providers,
            password_keys=tuple(sorted(password_keys)),
            log_format=process_log_format(),
            worker_process=self.worker_process,
            submission=submission,
        )


def _positive_key(connector_config: Mapping[str, str], key: str, default: int) -> int:
    """The connector's integer ``key`` (validated when it was written), else
    ``default``; a value a config provider supplies (not known here) counts as unset."""
    value = connector_config.get(key, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    return default


def stall_threshold_ms(connector_config: Mapping[str, str], worker_ms: int) -> int:
    """The connector's ``task.stall.threshold.ms``, else the worker's."""
    return _positive_key(connector_config, "task.stall.threshold.ms", worker_ms)


def tasks_per_process(connector_config: Mapping[str, str], worker_default: int | None,
                      task_cpus: int) -> int | None:
    """The connector's ``tasks.per.process``, else the worker's; None is ``auto``.
    1 whatever they say when ``spark.task.cpus`` is above 1: validation refuses
    sharing then, but a config written before the worker's cpus changed may ask.
    A value a config provider supplies (not known here) counts as unset."""
    if task_cpus > 1:
        return 1
    try:
        return parse_tasks_per_process(connector_config[TASKS_PER_PROCESS_CONFIG])
    except (KeyError, ValueError):
        return worker_default


def this_process() -> WorkerProcess | None:
    """This worker process, for its tasks to die with (``task/worker_watch.py``);
    None where the platform has no ``/proc``."""
    pid = os.getpid()
    ticks = start_ticks(pid)
    return None if ticks is None else WorkerProcess(pid, ticks)
