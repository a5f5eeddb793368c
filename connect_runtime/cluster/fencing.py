"""Fencing out a previous generation of task producers (KIP-618 "Zombie Fencing").

confluent-kafka has no ``Admin.fenceProducers``; a throwaway transactional
producer per ``transactional.id`` calling ``init_transactions()`` does the same
on the wire (FindCoordinator + InitProducerId), which bumps the producer epoch
and aborts whatever transaction the zombie left open. KIP-618 lists this as the
equivalent ("Throwaway fencing-only producers").
"""

from __future__ import annotations

import logging
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from connect_runtime.errors import ConnectError, translate_kafka_error
from connect_runtime.kafka.clients import create_producer

log = logging.getLogger(__name__)

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
    log.info("fenced %d producer(s): %s", len(ids), ", ".join(ids))
