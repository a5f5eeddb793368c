"""Views of offsets topics: what a topic holds per source partition, read to its end.

A view maps the canonical serialized key to the live offset; tombstoned
partitions are absent. The combined view (KIP-618) lays a connector's own
topic over the global one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import DataException
from connect_runtime.kafka.log import read_topic_to_end
from connect_runtime.storage.offsets.format import (
    OffsetMap,
    deserialize_key,
    deserialize_value,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetEntry:
    """The committed offset of one source partition of one connector."""

    connector: str
    partition: OffsetMap
    offset: OffsetMap


OffsetView = dict[bytes, OffsetEntry]
"""Live offsets keyed by the canonical serialized key, ``serialize_key(connector, partition)``.
Tombstoned partitions are absent."""


class OffsetViewBuilder:
    """Applies offsets-topic records in order: later records win, tombstones remove."""

    def __init__(self, connector: str | None = None) -> None:
        self._connector = connector
        self.by_connector: dict[str, OffsetView] = {}

    def apply(self, key: bytes | None, value: bytes | None, partition: int, offset: int) -> None:
        """Apply one record; garbage is skipped with a warning (never raises DataException)."""
        try:
            connector, source_partition = deserialize_key(key)
            if self._connector is not None and connector != self._connector:
                return
            source_offset = deserialize_value(value)
        except DataException as e:
            log.warning("Skipping offsets record at partition %d offset %d: %s",
                        partition, offset, e)
            return
        view = self.by_connector.setdefault(connector, {})
        canonical = orjson.dumps([connector, source_partition], option=orjson.OPT_SORT_KEYS)
        if source_offset is None:
            view.pop(canonical, None)
        else:
            view[canonical] = OffsetEntry(connector, source_partition, source_offset)

    def view(self, connector: str | None = None) -> OffsetView:
        """A copy of the view of ``connector`` (default: the builder's), or of all connectors."""
        name = connector if connector is not None else self._connector
        if name is not None:
            return dict(self.by_connector.get(name, {}))
        return {k: e for view in self.by_connector.values() for k, e in view.items()}


def combine_offsets(global_view: Mapping[bytes, OffsetEntry],
                    connector_view: Mapping[bytes, OffsetEntry]) -> OffsetView:
    """KIP-618's combined view: the connector topic's offset wins per partition.

    Both views have tombstones applied already, so a partition tombstoned in the
    connector's topic falls back to the global topic, as in Connect's
    ``ConnectorOffsetBackingStore.get`` (see the module doc).
    """
    combined = dict(global_view)
    combined.update(connector_view)
    return combined


def to_rest_offsets(view: Mapping[bytes, OffsetEntry]) -> list[dict[str, Any]]:
    """``[{"partition": {...}, "offset": {...}}, ...]`` (Connect's REST shape), in key order."""
    return [{"partition": dict(e.partition), "offset": dict(e.offset)}
            for _, e in sorted(view.items())]


def read_offsets(
    consumer_conf: Mapping[str, Any],
    admin: AdminClient,
    topic: str,
    connector: str | None,
    timeout: float,
) -> OffsetView:
    """Read ``topic`` to its end and return the live offsets (of ``connector``, or all).

    End offsets are listed READ_UNCOMMITTED, then a fresh assign-only consumer
    reads with read_committed until its position reaches them on every
    partition: an open transaction makes this wait (KafkaTimeoutError after
    ``timeout``) rather than return a view that misses a commit in flight.
    ConnectError if the topic does not exist.
    """
    builder = OffsetViewBuilder(connector)
    read_topic_to_end(consumer_conf, admin, topic, builder.apply, timeout,
                      client_id=f"connect-runtime-offsets-reader-{topic}")
    return builder.view()


@dataclass(frozen=True)
class OffsetSource:
    """An offsets topic and how to read it: consumer config and admin client of its cluster."""

    consumer_config: Mapping[str, Any]
    admin: AdminClient
    topic: str

    def read(self, connector: str | None, timeout: float) -> OffsetView:
        return read_offsets(self.consumer_config, self.admin, self.topic, connector, timeout)


def read_combined_offsets(
    connector: str,
    global_source: OffsetSource | None,
    connector_source: OffsetSource | None,
    timeout: float,
) -> OffsetView:
    """The KIP-618 combined view of ``connector``: global topic, overridden by its own topic."""
    if global_source is None and connector_source is None:
        raise ValueError("at least one offsets topic is required")
    deadline = time.monotonic() + timeout
    global_view = global_source.read(connector, timeout) if global_source else {}
    connector_view = (connector_source.read(connector, max(0.0, deadline - time.monotonic()))
                      if connector_source else {})
    return combine_offsets(global_view, connector_view)
