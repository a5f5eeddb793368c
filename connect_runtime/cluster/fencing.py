"""Fencing out a previous generation of task producers (KIP-618 "Zombie Fencing").

:class:`ZombieFencer` is the leader's procedure; :func:`fence_producers` the
act of fencing on the wire.

confluent-kafka has no ``Admin.fenceProducers``; a throwaway transactional
producer per ``transactional.id`` calling ``init_transactions()`` does the same
on the wire (FindCoordinator + InitProducerId), which bumps the producer epoch
and aborts whatever transaction the zombie left open. KIP-618 lists this as the
equivalent ("Throwaway fencing-only producers").
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

from connect_runtime.errors import (
    ConflictException,
    ConnectError,
    NotFoundException,
    translate_kafka_error,
)
from connect_runtime.kafka.clients import create_producer

log = logging.getLogger(__name__)

_T = TypeVar("_T")

# Bounded so one huge connector cannot open hundreds of broker connections at once.
MAX_PARALLEL_FENCES = 16


def transactional_ids(group_id: str, connector: str, task_count: int) -> list[str]:
    """The ids every task of a generation of ``task_count`` tasks would have used."""
    return [f"{group_id}-{connector}-{task}" for task in range(task_count)]


def task_count_needs_fencing(previous: int | None, new: int) -> bool:
    """KIP-618 step 6: fence unless there is no previous count, or it is 1 -> 1.

    A single task fences its one predecessor itself, since they share a
    transactional.id; multi-task connectors may have reshuffled source partitions.
    """
    return previous is not None and not (previous == 1 and new == 1)


def _fence_one(base_config: dict[str, Any], transactional_id: str, timeout_s: float) -> None:
    log.debug("fencing transactional.id %s", transactional_id)
    producer = create_producer(base_config, transactional_id=transactional_id,
                               client_id=f"connect-fence-{transactional_id}")
    try:
        producer.init_transactions(timeout_s)
    except Exception as e:
        raise translate_kafka_error(e, f"fencing transactional.id {transactional_id!r}") from e
    finally:
        producer.flush(0)


def fence_producers(base_config: dict[str, Any], ids: list[str], timeout_s: float = 60.0) -> None:
    """Fence every id in parallel; raise one ConnectError listing every failure."""
    if not ids:
        return
    failures: list[str] = []
    with ThreadPoolExecutor(max_workers=min(len(ids), MAX_PARALLEL_FENCES),
                            thread_name_prefix="fence") as pool:
        futures = {tid: pool.submit(_fence_one, base_config, tid, timeout_s) for tid in ids}
        for tid, future in futures.items():
            error = future.exception()
            if error is not None:
                failures.append(f"{tid}: {''.join(traceback.format_exception(error))}")
    if failures:
        raise ConnectError(
            "Failed to fence out producers of the previous task generation. Check that the "
            "brokers' transaction coordinators are reachable and that the connector's "
            "principal may Write and Describe these TransactionalIds:\n" + "\n".join(failures))


class FencingView(Protocol):
    """What fencing reads of the config topic (a ``ClusterConfigState`` has it)."""

    def contains(self, name: str) -> bool: ...

    def pending_fencing(self, name: str) -> bool: ...

    def config_generation(self, name: str) -> int: ...

    def task_count_record(self, name: str) -> int | None: ...

    def task_count(self, name: str) -> int: ...


class ZombieFencer:
    """KIP-618 "Zombie fencing by the leader", steps 3-9, for one connector at a time.

    ``read_config`` reads the config topic to its end and returns the view;
    ``fence`` fences a list of transactional ids (all or raise); and
    ``write_task_count(connector, count)`` writes the task-count record. The
    caller checks leadership; this class decides what to fence and in which order.
    """

    def __init__(self, group_id: str, read_config: Callable[[], FencingView],
                 fence: Callable[[list[str]], None],
                 write_task_count: Callable[[str, int], None]) -> None:
        self._group_id = group_id
        self._read_config = read_config
        self._fence = fence
        self._write_task_count = write_task_count
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()

    def fence(self, connector: str) -> None:
        """Fence the producers of ``connector``'s previous task generation, then
        record its new task count, so its tasks may start (exactly-once).

        Does nothing when no fencing is pending (no task configs were committed
        since the last record). Raises :class:`NotFoundException` for an unknown
        connector, :class:`ConflictException` if new task configs are committed
        meanwhile (their tasks ask again), and whatever ``fence`` raises; in
        every such case no record is written. Requests for one connector run one
        at a time, so a repeated request finds the work done.
        """
        with self._lock(connector):
            self._fence_locked(connector)

    def fence_then(self, connector: str, action: Callable[[], _T]) -> _T:
        """:meth:`fence`, then ``action()`` before any other fencing of ``connector``.

        A task of a new generation asks for fencing before it starts, so while
        ``action`` runs (KIP-875 writing offsets, say) no such task gets past its
        first startup step; it starts after, and sees what ``action`` wrote.
        """
        with self._lock(connector):
            self._fence_locked(connector)
            return action()

    def _fence_locked(self, connector: str) -> None:
        view = self._read_config()
        if not view.contains(connector):
            raise NotFoundException(f"Connector {connector} not found")
        if not view.pending_fencing(connector):
            return
        generation = view.config_generation(connector)
        previous, new = view.task_count_record(connector), view.task_count(connector)
        if task_count_needs_fencing(previous, new):
            assert previous is not None
            # The previous generation's ids: those are the producers that may
            # still be alive and hold partitions the new tasks take over.
            ids = transactional_ids(self._group_id, connector, previous)
            self._fence(ids)
            log.info("fenced %d producer(s) of connector %s for generation %d (%d task(s) "
                     "before, %d now): %s", len(ids), connector, generation, previous, new,
                     ", ".join(ids), extra={"event": "producers_fenced", "connector": connector,
                                            "generation": generation, "producers": len(ids)})
        # The record must not vouch for a generation we did not fence for.
        if self._read_config().config_generation(connector) != generation:
            raise ConflictException(
                f"New task configs for {connector} were written during zombie fencing; "
                "the tasks will retry with the new generation")
        log.debug("writing the task-count record of connector %s: %d task(s), generation %d",
                  connector, new, generation)
        self._write_task_count(connector, new)

    def _lock(self, connector: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(connector, threading.Lock())
