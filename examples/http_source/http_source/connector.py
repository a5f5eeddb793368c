"""The HTTP source connector: checks the configuration and deals streams to tasks."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from connect_runtime import (
    ConfigDef,
    ConfigException,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from http_source import __version__
from http_source.config import CONFIG_DEF, STREAMS, TASK_STREAMS
from http_source.task import STREAM_FIELD, HttpSourceTask, resume_after

log = logging.getLogger(__name__)


class HttpSourceConnector(SourceConnector):
    """Reads event streams from an HTTP feed (the tasks: :mod:`http_source.task`).

    Each stream is one source partition, ``{"stream": <name>}``. The connector
    deals the streams round-robin to at most ``tasks.max`` tasks, so every
    stream is read by exactly one task, which exactly-once delivery needs.
    """

    def __init__(self) -> None:
        self._config: dict[str, str] = {}
        self._streams: list[str] = []

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        self._streams = CONFIG_DEF.parse(config)[STREAMS]  # ConfigException names the key
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return HttpSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One config per task: the connector's config plus the task's streams."""
        tasks = min(max_tasks, len(self._streams))
        log.info("Dealing %d stream(s) to %d task(s)", len(self._streams), tasks)
        return [{**self._config, TASK_STREAMS: ",".join(self._streams[i::tasks])}
                for i in range(tasks)]

    def stop(self) -> None:
        pass

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport:
        # The feed keeps its events and serves them again from any id, so a task
        # can resume exactly after the last committed one.
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        # With transaction.boundary=connector, tasks commit at upstream batch ends.
        return ConnectorTransactionBoundaries.SUPPORTED

    def alter_offsets(self, config: dict[str, str],
                      offsets: Sequence[tuple[Mapping[str, object], Mapping[str, object] | None]],
                      ) -> bool:
        """Accept ``{"stream": <name>}`` -> ``{"after": <event id >= 0>}`` (or None).

        The position of a stream lives only in its Kafka offsets, so the change
        is complete: True.
        """
        for partition, offset in offsets:
            stream = partition.get(STREAM_FIELD)
            if not isinstance(stream, str):
                raise ConfigException(f"The partition {dict(partition)} must be "
                                      f"{{{STREAM_FIELD!r}: <stream name>}}")
            resume_after(stream, offset)  # raises for an offset a task could not resume from
        return True
