"""What the broker's transaction coordinator decided, read from ``__transaction_state``.

Every state change of every transactional.id is a record of that internal
topic (the coordinator's own log, which it replays after a restart). Reading
it tells, independently of the tasks' logs and metrics, how many transactions
were committed and aborted, including those nobody lived to report: a zombie
fenced with a transaction open, or a transaction the broker aborted on its
timeout. Compaction keeps only the latest record per transactional.id, but the
topic's segments (100 MB) do not roll in a test's lifetime, so all are read.

Formats (Kafka's ``TransactionLogKey``/``TransactionLogValue``): the key is
``int16 version, string transactional_id``; the value ``int16 version``, then
``ProducerId int64, ProducerEpoch int16, TransactionTimeoutMs int32,
TransactionStatus int8, TransactionPartitions [Topic string, PartitionIds
[int32]], LastUpdateTimestampMs int64, StartTimestampMs int64``; version 1 is
flexible (compact strings and arrays, tagged fields), and its tag 2 is the
``ClientTransactionVersion``: 2 when the producer ran the KIP-890 protocol
(transaction version 2), 0 or absent otherwise.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, TopicPartition

TOPIC = "__transaction_state"
PREPARE_COMMIT, PREPARE_ABORT = 2, 3
STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort",
          4: "CompleteCommit", 5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


@dataclass(frozen=True)
class TxnState:
    """One state change of one transactional.id."""

    transactional_id: str
    producer_id: int
    epoch: int
    status: int
    partitions: tuple[tuple[str, int], ...]
    updated_ms: int
    client_version: int  # ClientTransactionVersion; 0 when not recorded (value version 0)

    @property
    def state(self) -> str:
        return STATES.get(self.status, str(self.status))


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return int(value)

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            byte = self.data[self.at]
            self.at += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    def string(self, compact: bool) -> str:
        n = self.uvarint() - 1 if compact else self.take(">h")
        text = self.data[self.at:self.at + n].decode()
        self.at += n
        return text

    def count(self, compact: bool) -> int:
        """An array's length (-1: null)."""
        return self.uvarint() - 1 if compact else self.take(">i")

    def tags(self) -> dict[int, bytes]:
        out = {}
        for _ in range(self.uvarint()):
            tag, size = self.uvarint(), self.uvarint()
            out[tag] = self.data[self.at:self.at + size]
            self.at += size
        return out


def decode(key: bytes, value: bytes | None) -> TxnState | None:
    """One record of the topic; None for a tombstone or a key this does not know."""
    k = _Reader(key)
    if k.take(">h") != 0 or value is None:
        return None
    tid = k.string(compact=False)
    v = _Reader(value)
    version = v.take(">h")
    flexible = version >= 1
    pid, epoch, _timeout, status = v.take(">q"), v.take(">h"), v.take(">i"), v.take(">b")
    partitions: list[tuple[str, int]] = []
    for _ in range(max(v.count(flexible), 0)):
        topic = v.string(flexible)
        partitions += [(topic, v.take(">i")) for _ in range(max(v.count(flexible), 0))]
        if flexible:
            v.tags()
    updated, _started = v.take(">q"), v.take(">q")
    client_version = 0
    if flexible:
        tagged = v.tags().get(2)
        if tagged is not None:
            client_version = struct.unpack(">h", tagged)[0]
    return TxnState(tid, pid, epoch, status, tuple(partitions), updated, client_version)


class TransactionLog:
    """``__transaction_state`` as read so far; :meth:`refresh` reads on to its end."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.states: list[TxnState] = []
        self._next: dict[int, int] = {}  # partition -> next offset to read

    def refresh(self, timeout: float = 60.0) -> list[TxnState]:
        """Read every record written since the last call; returns all read so far."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "txn-log-reader",
                             "enable.auto.commit": False})
        try:
            meta = consumer.list_topics(TOPIC, timeout=timeout).topics.get(TOPIC)
            if meta is None or meta.error is not None:
                return self.states  # the coordinator creates the topic on first use
            ends = {}
            for p in meta.partitions:
                _, high = consumer.get_watermark_offsets(TopicPartition(TOPIC, p),
                                                         timeout=timeout)
                if high > self._next.get(p, 0):
                    ends[p] = high
            consumer.assign([TopicPartition(TOPIC, p, self._next.get(p, 0)) for p in ends])
            deadline = time.monotonic() + timeout
            while ends:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{TOPIC} not read to its end in {timeout:.0f} s: "
                                         f"{ends} left")
                for msg in consumer.consume(1000, 1.0):
                    p, offset = msg.partition(), msg.offset()
                    if msg.error() is not None or p is None or offset is None:
                        continue
                    self._next[p] = offset + 1
                    if p in ends and offset >= ends[p] - 1:
                        del ends[p]
                    key = msg.key()
                    if key is not None:
                        state = decode(key, msg.value())
                        if state is not None:
                            self.states.append(state)
        finally:
            consumer.close()
        return self.states


@dataclass
class Decisions:
    """The coordinator's decisions over a time window, for transactional.ids of interest."""

    commits: int = 0
    aborts: int = 0
    # How many decisions recorded each ClientTransactionVersion: 0 for those the
    # producer asked for with the pre-KIP-890 EndTxn, 2 for the coordinator's own
    # (an abort on timeout or on fencing, which bump the epoch under version 2).
    by_version: dict[int, int] = field(default_factory=dict)
    # Decisions on transactions that held no partition at all: nothing written,
    # not even offsets (an empty commit the client sent on to the coordinator).
    empty: int = 0


def decisions(states: list[TxnState], prefixes: tuple[str, ...], since_ms: int,
              until_ms: int) -> Decisions:
    """Commits and aborts decided in ``[since_ms, until_ms)`` for transactional.ids
    starting with one of ``prefixes``: one PrepareCommit or PrepareAbort record each
    (an abort on timeout or on fencing is a PrepareAbort too)."""
    out = Decisions()
    for s in states:
        if not s.transactional_id.startswith(prefixes) or not since_ms <= s.updated_ms < until_ms:
            continue
        if s.status == PREPARE_COMMIT:
            out.commits += 1
        elif s.status == PREPARE_ABORT:
            out.aborts += 1
        else:
            continue
        out.by_version[s.client_version] = out.by_version.get(s.client_version, 0) + 1
        out.empty += not s.partitions
    return out
