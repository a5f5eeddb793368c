"""Recording the topics connectors' tasks produce to (KIP-558 active topics).

Kafka Connect's task writes ``status-topic-<topic>:connector-<connector>`` itself,
through its worker's status store, the first time it sends a record to a topic
the store does not list for its connector. Here tasks run on Spark executors
without a status store, so the work is split:

* a task reports over its slot channel which topics its durable records went to
  (:mod:`connect_runtime.task.active_topics` decides when);
* the leader, which hosts every task, looks them up in its status store's view
  and writes a record for each topic not yet listed: one writer of these
  records, one producer, no status-topic reader on any executor;
* resets (REST, on any worker) and deleted connectors write tombstones.

:class:`ActiveTopicRecorder` contract:

* :meth:`~ActiveTopicRecorder.offer` runs on the REST event loop: dict lookups
  in the view and a queue append, never a Kafka call.
* Its thread writes each queued ``(connector, topic)`` that is still not listed
  and whose connector still exists (``accepts``). That check and the write are
  atomic with :meth:`~ActiveTopicRecorder.reset`, so a report queued before a
  reset or a deletion cannot bring a topic back afterwards; only a later report
  (the task produced to it again) does.
* A failed write is logged and dropped: a task that keeps producing to the
  topic reports it again within ``REPORT_INTERVAL_S``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from connect_runtime.errors import ConnectError
from connect_runtime.storage.status_store import StatusStore, TopicStatus

log = logging.getLogger(__name__)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class ActiveTopicRecorder:
    """Writes the active-topic records tasks' reports call for (see the module doc)."""

    def __init__(self, store: StatusStore, accepts: Callable[[str], bool], *,
                 clock_ms: Callable[[], int] = _now_ms) -> None:
        """``accepts(connector)``: whether ``connector`` still exists (its topics may be
        recorded); ``clock_ms`` stamps ``discoverTimestamp``."""
        self._store = store
        self._accepts = accepts
        self._clock_ms = clock_ms
        self._lock = threading.Lock()  # guards _queued
        self._write_lock = threading.Lock()  # a check-and-write against a reset
        self._queued: dict[tuple[str, str], int] = {}  # (connector, topic) -> task
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="active-topics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def offer(self, connector: str, task: int, topics: frozenset[str]) -> None:
        """Task ``task`` of ``connector`` produced to ``topics``: queue the unlisted ones."""
        new = [t for t in topics if not self._store.is_active_topic(connector, t)]
        if not new:
            return
        with self._lock:
            for topic in new:
                self._queued.setdefault((connector, topic), task)
        self._wake.set()

    def reset(self, connector: str) -> list[str]:
        """Forget queued topics of ``connector`` and tombstone its listed ones (blocks
        on the status topic); returns the topics tombstoned."""
        with self._write_lock:
            with self._lock:
                for key in [k for k in self._queued if k[0] == connector]:
                    del self._queued[key]
            return self._store.delete_topics(connector)

    def reset_deleted(self, connectors: set[str], running: frozenset[str]) -> None:
        """Tombstone the active topics of connectors deleted from the config (not in
        ``connectors``) whose tasks have stopped (not in ``running``), as Connect
        does when a deleted connector's tasks are revoked. Also catches a deletion
        a previous leader did not get to."""
        for name in self._store.topic_connectors() - connectors:
            if name not in running:
                log.info("resetting the active topics of deleted connector %s", name)
                self.reset(name)

    def _run(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()
            while not self._stopping.is_set() and self._write_next():
                pass

    def _write_next(self) -> bool:
        """Write the oldest queued topic if it still needs it; False if none was queued."""
        with self._write_lock:
            with self._lock:
                if not self._queued:
                    return False
                (connector, topic), task = next(iter(self._queued.items()))
                del self._queued[(connector, topic)]
            if self._store.is_active_topic(connector, topic) or not self._accepts(connector):
                return True
            try:
                self._store.put_topic(TopicStatus(topic, connector, task, self._clock_ms()))
            except ConnectError as e:
                log.warning("Could not record topic %s as active for connector %s: %s",
                            topic, connector, e)
        return True
