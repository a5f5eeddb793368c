"""The offsets reader a task (or a hosted connector) gets: a snapshot of the combined view."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from connect_runtime.kafka.clients import ClientSettings, create_admin
from connect_runtime.storage.offsets.format import serialize_key
from connect_runtime.storage.offsets.views import (
    OffsetEntry,
    OffsetSource,
    read_combined_offsets,
)

if TYPE_CHECKING:
    from connect_runtime.api.record import SourcePartition


class TaskOffsetStorageReader:
    """A task's :class:`~connect_runtime.api.task.OffsetStorageReader` over a snapshot.

    Constructing it reads the combined view once (the worker's global offsets
    topic, plus ``connector_topic`` if the connector has its own, on the same
    cluster); that is when a task starts. Later commits are not seen. Returned
    dicts are copies.
    """

    def __init__(
        self,
        connector: str,
        bootstrap_servers: str,
        global_topic: str | None,
        connector_topic: str | None = None,
        *,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
    ) -> None:
        clients = ClientSettings.of(bootstrap_servers, None, consumer_overrides, admin_overrides)
        admin = create_admin(clients.admin_config())

        def source(topic: str | None) -> OffsetSource | None:
            return OffsetSource(clients.consumer_config(), admin, topic) if topic else None

        view = read_combined_offsets(connector, source(global_topic), source(connector_topic),
                                     timeout)
        self._init(connector, view)

    def _init(self, connector: str, view: Mapping[bytes, OffsetEntry]) -> None:
        self.connector = connector
        self._view = dict(view)

    @classmethod
    def from_view(
        cls, connector: str, view: Mapping[bytes, OffsetEntry]
    ) -> TaskOffsetStorageReader:
        """A reader over an already-read view (no Kafka access)."""
        reader = cls.__new__(cls)
        reader._init(connector, view)
        return reader

    def offset(self, partition: SourcePartition) -> dict[str, object] | None:
        """The committed offset of ``partition`` or None; InvalidOffsetException if the
        partition is not a flat dict of primitives."""
        entry = self._view.get(serialize_key(self.connector, partition))
        return dict(entry.offset) if entry is not None else None

    def offsets(
        self, partitions: Iterable[SourcePartition]
    ) -> list[tuple[SourcePartition, dict[str, object] | None]]:
        return [(p, self.offset(p)) for p in partitions]
