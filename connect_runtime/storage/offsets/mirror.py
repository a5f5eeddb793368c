"""Copying committed per-connector offsets to the global offsets topic (KIP-618)."""

from __future__ import annotations

import heapq
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from connect_runtime.errors import KafkaClientError
from connect_runtime.kafka.clients import ClientSettings, create_producer
from connect_runtime.kafka.produce import produce_waiting

log = logging.getLogger(__name__)


class GlobalOffsetMirror:
    """Copies committed per-connector offsets to the worker's global offsets topic.

    KIP-618: after a task commits offsets to its connector's own offsets topic,
    they are also written to the global topic with a non-transactional producer,
    so a downgrade or a switch back to the global topic loses nothing.

    Contract:

    * :meth:`submit` never blocks and never raises because of Kafka: records are
      queued and written by a background thread with an idempotent producer.
    * Failed writes are retried indefinitely with exponential backoff. Only the
      newest value of a key is ever retried, so a retry cannot overwrite a newer
      offset with an older one.
    * :meth:`flush` waits until every submitted key's newest value is written.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        producer_overrides: Mapping[str, Any] | None = None,
        *,
        max_backoff: float = 10.0,
    ) -> None:
        self.topic = topic
        self._producer_config = ClientSettings.of(bootstrap_servers,
                                                  producer_overrides).producer_config()
        self._client_id = f"connect-runtime-offset-mirror-{topic}"
        self._producer = self._new_producer()
        self._max_backoff = max_backoff
        self._cond = threading.Condition()
        self._latest: dict[bytes, tuple[int, bytes | None]] = {}  # unconfirmed newest values
        self._ready: deque[bytes] = deque()
        self._queued: set[bytes] = set()
        self._retries: list[tuple[float, bytes]] = []  # heap of (due time, key)
        self._seq = 0
        self._failures = 0
        self._reset_producer = False
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=f"offset-mirror-{topic}",
                                        daemon=True)
        self._thread.start()

    def _new_producer(self) -> Producer:
        return create_producer(self._producer_config, client_id=self._client_id)

    def submit(self, records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Queue ``(serialized key, serialized value or None)`` pairs for the global topic."""
        with self._cond:
            for key, value in records:
                self._seq += 1
                self._latest[key] = (self._seq, value)
                self._enqueue(key)
            self._cond.notify_all()

    def _enqueue(self, key: bytes) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._ready.append(key)

    def write_tombstones_first(self, written: Iterable[tuple[bytes, bytes | None]],
                               deadline: float) -> bool:
        """Write the tombstones among ``written`` to the global topic, and wait.

        The rule (Kafka Connect's, KAFKA-15018): with a per-connector offsets
        topic, a tombstone there falls back to the global topic's offset in the
        combined view, so the global topic gets the tombstone *before* the
        connector's topic does. A task loop calls this before committing offsets.
        True when there was nothing to do or it was written; False if not
        written by ``deadline`` (at least 1 s is allowed). The caller decides
        what failing means.
        """
        tombstones = [(k, v) for k, v in written if v is None]
        if not tombstones:
            return True
        self.submit(tombstones)
        return self.flush(max(deadline - time.monotonic(), 1.0))

    def pending(self) -> int:
        """Keys whose newest value is not yet confirmed written."""
        with self._cond:
            return len(self._latest)

    def flush(self, timeout: float) -> bool:
        """True once everything submitted so far is written; False after ``timeout``."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._latest, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Flush for up to ``timeout``, then stop. Unwritten offsets are logged and dropped."""
        deadline = time.monotonic() + timeout
        flushed = self.flush(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(max(0.1, deadline - time.monotonic()))
        if not flushed:
            log.warning("Closing offset mirror to %s with %d offsets not written",
                        self.topic, self.pending())
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=False)
            self._producer.flush(0)
        except (KafkaException, RuntimeError) as e:
            log.debug("Closing mirror producer: %s", e)

    # ----- the mirror thread

    def _run(self) -> None:
        while True:
            batch = self._take(0.05 if len(self._producer) else 0.5)
            if batch is None:
                return
            for key, seq, value in batch:
                self._send(key, seq, value)
            self._producer.poll(0.05 if len(self._producer) else 0)
            if self._reset_producer:
                self._replace_producer()

    def _take(self, wait: float) -> list[tuple[bytes, int, bytes | None]] | None:
        """Keys due for (re)sending with their newest values; None when stopping."""
        with self._cond:
            if self._stopping:
                return None
            if not self._ready and not self._due_retries():
                if self._retries:
                    wait = min(wait, max(0.0, self._retries[0][0] - time.monotonic()))
                self._cond.wait(wait)
                self._due_retries()
            batch = []
            while self._ready:
                key = self._ready.popleft()
                self._queued.discard(key)
                if key in self._latest:
                    seq, value = self._latest[key]
                    batch.append((key, seq, value))
            return batch

    def _due_retries(self) -> bool:
        now = time.monotonic()
        moved = False
        while self._retries and self._retries[0][0] <= now:
            _, key = heapq.heappop(self._retries)
            if key in self._latest:
                self._enqueue(key)
                moved = True
        return moved

    def _send(self, key: bytes, seq: int, value: bytes | None) -> None:
        def on_delivery(err: KafkaError | None, _msg: Message) -> None:
            self._on_delivery(key, seq, err)

        try:
            produce_waiting(self._producer, self.topic, value, key, -1, on_delivery,
                            context=f"produce to {self.topic!r} by the offset mirror")
        except KafkaClientError as e:  # retried like a failed delivery: never raised
            self._on_delivery(key, seq, e)

    def _on_delivery(self, key: bytes, seq: int, err: KafkaError | KafkaClientError | None) -> None:
        """Delivery report for (key, seq); ``err`` None means written, a
        KafkaClientError that ``produce`` itself refused the record."""
        with self._cond:
            newest = self._latest.get(key)
            if err is None:
                self._failures = 0
                if newest is not None and newest[0] == seq:
                    del self._latest[key]
                    self._cond.notify_all()
                return
            self._failures += 1
            backoff = min(self._max_backoff, 0.1 * 2 ** min(self._failures, 10))
            log.warning("Failed to mirror an offset to %s (retrying in %.1fs): %s",
                        self.topic, backoff, err)
            if err.fatal() if isinstance(err, KafkaError) else err.fatal:
                self._reset_producer = True
            if newest is not None and newest[0] == seq:
                heapq.heappush(self._retries, (time.monotonic() + backoff, key))

    def _replace_producer(self) -> None:
        """An idempotent producer that hit a fatal error is unusable: start a new one."""
        self._reset_producer = False
        old, self._producer = self._producer, self._new_producer()
        try:
            old.purge(in_queue=True, in_flight=True, blocking=False)
            old.flush(0)
        except (KafkaException, RuntimeError) as e:
            log.debug("Discarding failed mirror producer: %s", e)
        with self._cond:
            for key in self._latest:
                self._enqueue(key)
