"""The worker's view of source offsets, for the REST API."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient

from connect_runtime.errors import TopicNotFound
from connect_runtime.kafka.clients import ClientSettings, create_admin
from connect_runtime.kafka.log import KafkaBasedLog
from connect_runtime.storage.offsets.views import (
    OffsetSource,
    OffsetView,
    OffsetViewBuilder,
    combine_offsets,
    to_rest_offsets,
)

if TYPE_CHECKING:
    from connect_runtime.config.worker_config import WorkerConfig


class OffsetStore:
    """The worker's view of source offsets, for REST ``GET /connectors/{name}/offsets``.

    Keeps a :class:`KafkaBasedLog` on the global offsets topic; a per-connector
    topic is read on demand. Every query first reads to the end (read_committed,
    KIP-618 rules), then returns the combined view with tombstoned partitions
    omitted.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        *,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        admin: AdminClient | None = None,
    ) -> None:
        clients = ClientSettings.of(bootstrap_servers, None, consumer_overrides, admin_overrides)
        self.topic = topic
        self._consumer_config = clients.consumer_config()
        self._admin = admin or create_admin(clients.admin_config())
        self._lock = threading.Lock()
        self._builder = OffsetViewBuilder()
        self._log = KafkaBasedLog(topic, self._consumer_config, self._admin, self._apply,
                                  client_id=f"connect-runtime-offsets-{topic}")

    @classmethod
    def from_worker_config(cls, config: WorkerConfig,
                           admin: AdminClient | None = None) -> OffsetStore:
        clients = ClientSettings.from_worker_config(config)
        return cls(clients.bootstrap_servers, str(config.values["offset.storage.topic"]),
                   consumer_overrides=clients.consumer_overrides,
                   admin_overrides=clients.admin_overrides, admin=admin)

    def _apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        with self._lock:
            self._builder.apply(key, value, partition, offset)

    def start(self, timeout: float = 60.0, wait_for_end: bool = True) -> None:
        """Start reading the global offsets topic; with ``wait_for_end``, return
        once it was read to its end (queries read to the end anyway)."""
        self._log.start(timeout, wait_for_end)

    def stop(self) -> None:
        self._log.stop()

    def read_to_end(self, timeout: float) -> None:
        self._log.read_to_end(timeout)

    def global_view(self, connector: str) -> OffsetView:
        """The connector's offsets in the global topic as last read (no read to end)."""
        with self._lock:
            return self._builder.view(connector)

    def connector_offsets(
        self,
        connector: str,
        connector_topic: str | OffsetSource | None = None,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """Connect's REST offsets list for ``connector`` from the combined view.

        ``connector_topic``: the connector's own offsets topic, on the worker's
        cluster (a name) or elsewhere (an :class:`OffsetSource`); None if it
        uses the global topic only.
        """
        deadline = time.monotonic() + timeout
        self.read_to_end(timeout)
        view = self.global_view(connector)
        source: OffsetSource | None
        if not isinstance(connector_topic, str):
            source = connector_topic
        elif connector_topic == self.topic:
            source = None  # same cluster, same name: it *is* the global topic
        else:
            source = OffsetSource(self._consumer_config, self._admin, connector_topic)
        if source is not None:
            remaining = max(0.0, deadline - time.monotonic())
            try:
                own = source.read(connector, remaining)
            except TopicNotFound:
                # Its tasks create it at their first start: until then it holds nothing
                # (GET .../offsets answered 500 here before).
                own = None
            if own is not None:
                view = combine_offsets(view, own)
        return to_rest_offsets(view)
