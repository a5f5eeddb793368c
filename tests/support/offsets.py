"""What a pipeline committed, as the tests check it.

Records of a topic as a ``read_committed`` consumer sees them (``committed_records``,
their values ``committed_values``, their count ``committed``, their ``seq`` values
and transaction sizes ``committed_transactions``, ``wait_committed`` until there
are enough), and a connector's committed source offsets as its worker's REST API
lists them (``committed_offsets``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import orjson

from support.kafka import read_topic, transaction_sizes, wait_for

if TYPE_CHECKING:
    from support.workers import WorkerProcess


def committed_records(bootstrap: str, topic: str, *, decode: Callable[[bytes], Any] = orjson.loads,
                      missing_ok: bool = False) -> list[dict[str, Any]]:
    """Every committed record of ``topic`` (``support.kafka.read_topic``'s shape, values
    as ``decode`` reads them); with ``missing_ok``, none while the topic does not exist."""
    try:
        return read_topic(bootstrap, topic, decode=decode)
    except KeyError:  # the task has not created the topic yet
        if missing_ok:
            return []
        raise


def committed_values(bootstrap: str, topic: str, *,
                     decode: Callable[[bytes], Any] = orjson.loads) -> list[Any]:
    """The values of ``topic``'s committed records, in order, as ``decode`` reads them."""
    return [r["value"] for r in committed_records(bootstrap, topic, decode=decode)]


def committed(bootstrap: str, topic: str, *, decode: Callable[[bytes], Any] = orjson.loads,
              missing_ok: bool = False) -> int:
    """How many records of ``topic`` are committed (each read with ``decode``)."""
    return len(committed_records(bootstrap, topic, decode=decode, missing_ok=missing_ok))


def committed_transactions(bootstrap: str, topic: str) -> tuple[list[int], list[int]]:
    """(``seq`` of every committed record of ``topic``, the sizes of the transactions
    they were committed in: ``support.kafka.transaction_sizes``)."""
    seen = committed_records(bootstrap, topic)
    return [r["value"]["seq"] for r in seen], transaction_sizes([r["offset"] for r in seen])


def wait_committed(worker: WorkerProcess, topic: str, want: int, timeout: float = 60, *,
                   connector: str | None = None, interval: float = 1) -> list[dict[str, Any]]:
    """At least ``want`` committed records of ``topic``, read as they stood the first time
    there were that many. With ``connector``, a FAILED task of it fails the wait at once
    with its trace; a failed wait carries the tail of the worker's log."""
    def enough() -> list[dict[str, Any]] | None:
        if connector is not None:
            failed = [t["trace"] for t in worker.status(connector).get("tasks", [])
                      if t["state"] == "FAILED"]
            assert not failed, f"a task of {connector} failed:\n{failed[0]}"
        records = read_topic(worker.bootstrap, topic)
        return records if len(records) >= want else None
    try:
        found: list[dict[str, Any]] = wait_for(
            enough, timeout, f"{want} committed records in {topic}", interval=interval)
    except AssertionError as e:  # what the worker did is the diagnosis
        raise AssertionError(f"{e}\n--- worker log ---\n{worker.tail(150)}") from None
    return found


def committed_offsets(worker: WorkerProcess, connector: str,
                      partition_key: str) -> dict[Any, dict[str, Any]] | None:
    """``connector``'s committed source offsets by the ``partition_key`` field of their
    source partitions, as ``GET /connectors/{connector}/offsets`` lists them; None while
    the worker does not answer 200."""
    r = worker.rest("GET", f"/connectors/{connector}/offsets")
    if r.status_code != 200:
        return None
    return {o["partition"][partition_key]: o["offset"] for o in r.json()["offsets"]}
