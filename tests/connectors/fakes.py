"""In-memory fakes of the task context, shared by the connector tests."""

from __future__ import annotations

from typing import Any


class FakeContext:
    """A SourceTaskContext: the task's config, an offsets reader, a transaction context."""

    def __init__(self, config: dict[str, str], reader: Any, txn: Any = None) -> None:
        self._config, self._reader, self._txn = config, reader, txn

    @property
    def config(self) -> dict[str, str]:
        return self._config

    @property
    def offset_storage_reader(self) -> Any:
        return self._reader

    def transaction_context(self) -> Any:
        return self._txn
