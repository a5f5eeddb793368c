"""Building records and configured transforms for the transform unit tests."""

from __future__ import annotations

from typing import Any, TypeVar

from connect_runtime.api.record import SourceRecord
from connect_runtime.api.schema import Schema

P = TypeVar("P")

PARTITION = {"table": "orders"}
OFFSET = {"id": 7}


def record(value: Any = None, *, key: Any = None, value_schema: Schema | None = None,
           key_schema: Schema | None = None, topic: str = "orders",
           headers: list[tuple[str, Any]] | None = None, timestamp: int | None = None,
           partition: int | None = None) -> SourceRecord:
    """A source record with a fixed source partition and offset."""
    return SourceRecord(PARTITION, OFFSET, topic, value=value, key=key, partition=partition,
                        headers=headers, timestamp=timestamp, key_schema=key_schema,
                        value_schema=value_schema)


def configured(cls: type[P], configs: dict[str, str] | None = None) -> P:
    """A new ``cls`` configured with ``configs`` (the plugin's own keys, as strings)."""
    plugin = cls()
    plugin.configure(dict(configs or {}))  # type: ignore[attr-defined]
    return plugin
