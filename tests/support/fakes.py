"""Stand-ins for what the framework hands a connector, for tests of connectors alone.

``FakeReader`` is a task's offset storage reader over fixed committed offsets.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any


class FakeReader:
    """Committed offsets by source partition, as the framework's reader returns them.

    ``committed`` maps what ``key`` reads from a source partition (its table, file
    name, sequence number, ...) to that partition's offset; a partition whose key is
    not there has none. Every partition asked for through ``offsets`` is kept, in
    order, in ``asked``.
    """

    def __init__(self, committed: Mapping[Any, dict[str, Any] | None] | None = None, *,
                 key: Callable[[Mapping[str, Any]], Any]) -> None:
        self.committed = dict(committed or {})
        self.key = key
        self.asked: list[Mapping[str, Any]] = []

    def offset(self, partition: Mapping[str, Any]) -> dict[str, Any] | None:
        return self.committed.get(self.key(partition))

    def offsets(self, partitions: Iterable[Mapping[str, Any]],
                ) -> list[tuple[Mapping[str, Any], dict[str, Any] | None]]:
        partitions = list(partitions)
        self.asked.extend(partitions)
        return [(p, self.offset(p)) for p in partitions]
