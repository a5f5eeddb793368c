"""Reading a whole topic, and keeping up with it: :class:`TopicReader`, :class:`KafkaBasedLog`.

"Read to the end" follows KIP-618's rule for offset reads, which this module
applies to every internal topic:

1. capture the end offsets with the admin client at READ_UNCOMMITTED (the high
   watermark, which counts records of transactions that are still open);
2. consume with the configured isolation level (read_committed by default) until
   the consumer's position on every partition is at least that end offset.

With read_committed, an open transaction keeps the position below the high
watermark until it commits or aborts, so step 2 *waits* for it instead of
returning a view that misses a commit in flight. The position moves past
transaction markers and past aborted records, so once the transaction is
resolved, the position reaches the captured end.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import (
    ConnectError,
    KafkaTimeoutError,
    TopicNotFound,
    translate_kafka_error,
)
from connect_runtime.kafka.clients import create_consumer, read_end_offsets, topic_partitions

log = logging.getLogger(__name__)

RecordCallback = Callable[[bytes | None, bytes | None, int, int], None]
"""``callback(key, value, partition, offset)`` for every record, in order per partition."""

_MAX_BATCH = 500
# Idle poll timeout: bounds how long stop() waits and how often an idle log wakes up.
_IDLE_POLL_TIMEOUT = 0.2
# While someone waits in read_to_end, poll often: a transaction marker advances
# the position without returning a message, so it is only seen when poll returns.
_BUSY_POLL_TIMEOUT = 0.02
_TOPIC_LOOKUP_BACKOFF = 0.1


class TopicReader:
    """An assign-only consumer over all partitions of one topic, from the beginning.

    Not thread-safe: one thread polls it. :meth:`positions` is how far the
    consumer has read; see :func:`behind` to compare with end offsets.
    """

    def __init__(self, consumer: Consumer, topic: str, partitions: list[int]) -> None:
        self.consumer = consumer
        self.topic = topic
        self.partitions = list(partitions)
        try:
            # Offset 0, not OFFSET_BEGINNING: a logical offset needs a ListOffsets
            # lookup that librdkafka first retries on a 500 ms timer while it has
            # no partition leader yet, slowing every fresh reader by half a
            # second. A log that no longer starts at 0 answers OFFSET_OUT_OF_RANGE
            # and auto.offset.reset=earliest moves us to its start.
            consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        except KafkaException as e:
            raise translate_kafka_error(e, f"assign partitions of topic {topic}") from e

    def poll(self, timeout: float) -> list[Message]:
        """Up to a batch of records; waits at most ``timeout`` for the first one.

        ``Consumer.consume(n, timeout)`` would wait the whole timeout unless n
        records arrive, so wait for one with ``poll`` and then take what is ready.
        Consumer-side errors are logged and skipped: the consumer recovers by itself.
        """
        first = self.consumer.poll(timeout)
        if first is None:
            return []
        batch = [first, *self.consumer.consume(_MAX_BATCH, 0)]
        good = []
        for msg in batch:
            err = msg.error()
            if err is None:
                good.append(msg)
            else:
                log.warning("Error reading topic %s: %s", self.topic, err)
        return good

    def positions(self) -> dict[int, int]:
        """Next offset to read per partition; -1 while unknown.

        Until a partition returns its first record librdkafka reports no
        position; its log start offset (cached from fetch responses) is then as
        far as the consumer is known to be, which matters when every record
        below the end offset has been deleted.
        """
        tps = self.consumer.position([TopicPartition(self.topic, p) for p in self.partitions])
        out: dict[int, int] = {}
        for tp in tps:
            position = tp.offset
            if position < 0:
                low, _ = self.consumer.get_watermark_offsets(
                    TopicPartition(self.topic, tp.partition), cached=True)
                position = low if low >= 0 else -1
            out[tp.partition] = position
        return out

    def close(self) -> None:
        try:
            self.consumer.close()
        except (KafkaException, RuntimeError) as e:
            log.debug("Closing consumer of %s: %s", self.topic, e)


def behind(positions: Mapping[int, int], targets: Mapping[int, int]) -> dict[int, tuple[int, int]]:
    """Partitions whose position is below the target: ``{partition: (position, target)}``."""
    return {
        p: (positions.get(p, -1), end)
        for p, end in targets.items()
        if end > 0 and positions.get(p, -1) < end
    }


def describe_lag(topic: str, lag: Mapping[int, tuple[int, int]]) -> str:
    parts = ", ".join(f"partition {p} at {pos} < end {end}"
                      for p, (pos, end) in sorted(lag.items()))
    return (f"topic {topic}: {parts}. An open transaction on the topic holds read_committed "
            f"readers back until it commits or aborts (or times out on the broker).")


def wait_for_partitions(admin: AdminClient, topic: str, timeout: float) -> list[int]:
    """Partition ids of ``topic``, retrying while metadata does not show it yet."""
    deadline = time.monotonic() + timeout
    while True:
        partitions = topic_partitions(admin, topic, max(1.0, min(10.0, timeout)))
        if partitions:
            return partitions
        if time.monotonic() >= deadline:
            raise ConnectError(
                f"Could not find partitions of topic '{topic}' within {timeout:.1f}s; does it "
                f"exist? Internal topics are created by ensure_internal_topics().")
        time.sleep(_TOPIC_LOOKUP_BACKOFF)



def read_topic_to_end(
    consumer_config: Mapping[str, Any],
    admin: AdminClient,
    topic: str,
    callback: RecordCallback,
    timeout: float,
    *,
    isolation_level: str = "read_committed",
    client_id: str | None = None,
) -> None:
    """One-shot read of all of ``topic`` from the beginning to the end offsets listed
    now (see module doc), handing every record to ``callback`` on this thread.

    Uses a fresh assign-only consumer and closes it. TopicNotFound if the topic does
    not exist; KafkaTimeoutError if the end is not reached within ``timeout``
    (for example because a transaction on the topic stays open).
    """
    deadline = time.monotonic() + timeout
    partitions = topic_partitions(admin, topic, timeout)
    if not partitions:
        raise TopicNotFound(f"Topic '{topic}' does not exist")
    targets = read_end_offsets(admin, topic, timeout=timeout, partitions=partitions)
    if not behind({}, targets):
        return
    consumer = create_consumer(consumer_config, isolation_level=isolation_level,
                               client_id=client_id or f"connect-runtime-reader-{topic}")
    reader = TopicReader(consumer, topic, partitions)
    try:
        while lag := behind(reader.positions(), targets):
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(
                    f"Timed out after {timeout:.1f}s reading to the end of "
                    f"{describe_lag(topic, lag)}")
            for msg in reader.poll(_BUSY_POLL_TIMEOUT):
                partition, offset = msg.partition(), msg.offset()
                assert partition is not None and offset is not None
                callback(msg.key(), msg.value(), partition, offset)
    finally:
        reader.close()

class KafkaBasedLog:
    """Consumes all partitions of ``topic`` from the beginning on a background thread.

    Contract:

    * ``callback(key, value, partition, offset)`` runs on the log's thread for
      every record, in offset order within a partition (no order across
      partitions). An exception from it is logged and the record skipped.
    * :meth:`start` returns once the log has read to the end once (unless told
      not to wait: then once its thread runs).
    * :meth:`read_to_end` returns only when every record below the end offsets
      captured at call time has been handed to the callback (see module doc);
      it raises :class:`KafkaTimeoutError` if that takes longer than ``timeout``.
    * ``isolation_level`` is "read_committed" (default) or "read_uncommitted".
    * The log owns its consumer; ``admin`` is borrowed (used for metadata and
      end offsets) and not closed. A stopped log cannot be started again.
    """

    def __init__(
        self,
        topic: str,
        consumer_config: Mapping[str, Any],
        admin: AdminClient,
        callback: RecordCallback,
        *,
        isolation_level: str = "read_committed",
        client_id: str | None = None,
    ) -> None:
        self.topic = topic
        self._consumer_config = dict(consumer_config)
        self._admin = admin
        self._callback = callback
        self._isolation_level = isolation_level
        self._client_id = client_id or f"connect-runtime-log-{topic}"
        self._reader: TopicReader | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._cond = threading.Condition()
        self._positions: dict[int, int] = {}
        self._waiters = 0

    @property
    def partitions(self) -> list[int]:
        """Partition ids being read (empty before :meth:`start`)."""
        return list(self._reader.partitions) if self._reader else []

    def start(self, timeout: float = 60.0, wait_for_end: bool = True) -> None:
        """Assign all partitions, start the thread, and read to the end once
        (``wait_for_end=False``: without waiting for that)."""
        if self._thread is not None or self._stopping.is_set():
            raise ConnectError(f"KafkaBasedLog for {self.topic} was already started; "
                               f"a log cannot be restarted")
        deadline = time.monotonic() + timeout
        partitions = wait_for_partitions(self._admin, self.topic, timeout)
        consumer = create_consumer(self._consumer_config, isolation_level=self._isolation_level,
                                   client_id=self._client_id)
        self._reader = TopicReader(consumer, self.topic, partitions)
        self._thread = threading.Thread(target=self._run, name=f"kafka-log-{self.topic}",
                                        daemon=True)
        self._thread.start()
        if wait_for_end:
            try:
                self.read_to_end(max(0.0, deadline - time.monotonic()))
            except BaseException:
                self.stop()
                raise
        log.info("Started KafkaBasedLog for topic %s (%d partitions, %s)", self.topic,
                 len(partitions), self._isolation_level)

    def read_to_end(self, timeout: float) -> None:
        """Block until everything below the current end offsets has been consumed."""
        thread, reader = self._thread, self._reader
        if thread is None or reader is None or self._stopping.is_set():
            raise ConnectError(f"KafkaBasedLog for {self.topic} is not running")
        deadline = time.monotonic() + timeout
        targets = read_end_offsets(self._admin, self.topic, timeout=max(timeout, 1.0),
                                   partitions=reader.partitions)
        with self._cond:
            self._waiters += 1
            try:
                while lag := behind(self._positions, targets):
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise KafkaTimeoutError(
                            f"Timed out after {timeout:.1f}s reading to the end of "
                            f"{describe_lag(self.topic, lag)}")
                    if not thread.is_alive():
                        raise ConnectError(f"KafkaBasedLog thread for {self.topic} has stopped")
                    self._cond.wait(min(remaining, _IDLE_POLL_TIMEOUT))
            finally:
                self._waiters -= 1

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the thread and close the consumer. Idempotent."""
        self._stopping.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                log.warning("KafkaBasedLog thread for %s did not stop within %.1fs; "
                            "leaving its consumer open", self.topic, timeout)
                return
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        with self._cond:
            self._cond.notify_all()

    def _run(self) -> None:
        reader = self._reader
        assert reader is not None
        while not self._stopping.is_set():
            try:
                self._poll_once(reader)
            except Exception:
                # Never let the thread die: readers would then wait until timeout.
                log.exception("Unexpected error reading topic %s", self.topic)
                time.sleep(_IDLE_POLL_TIMEOUT)

    def _poll_once(self, reader: TopicReader) -> None:
        timeout = _BUSY_POLL_TIMEOUT if self._waiters else _IDLE_POLL_TIMEOUT
        for msg in reader.poll(timeout):
            self._deliver(msg)
        positions = reader.positions()
        with self._cond:
            self._positions = positions
            self._cond.notify_all()

    def _deliver(self, msg: Message) -> None:
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None and offset is not None
        try:
            self._callback(msg.key(), msg.value(), partition, offset)
        except Exception:
            log.exception("Callback failed for record %s-%d@%d; skipping it",
                          self.topic, partition, offset)
