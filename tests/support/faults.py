"""Building blocks of the fault suites (chaos and partitions): a committed-record
tail that times recoveries, and the per-fault table.

Faults come from outside the processes under test (signals, process restarts);
nothing here reaches into the runtime.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import orjson
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from connect_runtime.tools.verify import Report, verify_sequences

Group = tuple[str, int]  # (connector, source partition)


@dataclass
class _Seen:
    seqs: list[int] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)    # record timestamp, epoch ms
    arrivals: list[float] = field(default_factory=list)  # when the tail read it, epoch s


class CommittedTail:
    """Reads the output topics with ``read_committed`` from the start, all along.

    Every sequence record carries the time its batch was created (epoch ms), so
    a record stamped after a fault was produced after it; the time the tail
    reads it bounds the time it was committed from above.
    """

    def __init__(self, bootstrap: str, topics: dict[str, str]) -> None:
        self._topics = topics  # output topic -> connector name
        self._bootstrap = bootstrap
        self._seen: dict[Group, _Seen] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="committed-tail", daemon=True)

    def start(self) -> CommittedTail:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self._bootstrap, "group.id": "chaos-tail",
                             "isolation.level": "read_committed",
                             "enable.auto.commit": False, "fetch.wait.max.ms": 50})
        admin = AdminClient({"bootstrap.servers": self._bootstrap})
        # Topics created a moment ago may reach this client's metadata a little later.
        deadline = time.monotonic() + 30
        meta = admin.list_topics(timeout=30).topics
        while any(t not in meta for t in self._topics) and time.monotonic() < deadline:
            time.sleep(0.2)
            meta = admin.list_topics(timeout=30).topics
        consumer.assign([TopicPartition(t, p, 0) for t in self._topics
                         for p in meta[t].partitions])
        try:
            while not self._stop.is_set():
                for msg in consumer.consume(500, 0.2):
                    if msg.error() is not None or msg.value() is None:
                        continue
                    value = orjson.loads(msg.value())
                    now = time.time()
                    group = (self._topics[msg.topic()], int(value["partition"]))
                    with self._lock:
                        seen = self._seen.setdefault(group, _Seen())
                        seen.seqs.append(int(value["seq"]))
                        seen.stamps.append(msg.timestamp()[1])
                        seen.arrivals.append(now)
        finally:
            consumer.close()

    def count(self) -> int:
        with self._lock:
            return sum(len(s.seqs) for s in self._seen.values())

    def first_after(self, group: Group, since: float) -> float | None:
        """Arrival time of the first record of ``group`` stamped after ``since`` (epoch s)."""
        since_ms = since * 1000
        with self._lock:
            seen = self._seen.get(group)
            if seen is None:
                return None
            for i in range(len(seen.stamps) - 1, -1, -1):
                if seen.stamps[i] <= since_ms:
                    return seen.arrivals[i + 1] if i + 1 < len(seen.stamps) else None
            return seen.arrivals[0] if seen.stamps else None

    def wait_progress(self, groups: Sequence[Group], since: float, timeout: float,
                      what: str, produced_after: float | None = None) -> float:
        """Seconds from ``since`` until every group committed a record stamped after
        ``produced_after`` (default ``since``)."""
        deadline = time.monotonic() + timeout
        after = since if produced_after is None else produced_after
        while True:
            times = [self.first_after(g, after) for g in groups]
            if all(t is not None for t in times):
                return max(t for t in times if t is not None) - since
            if time.monotonic() > deadline:
                stalled = [g for g, t in zip(groups, times, strict=True) if t is None]
                raise AssertionError(f"no committed progress {timeout:.0f}s after {what} "
                                     f"for {stalled}")
            time.sleep(0.1)

    def verify(self, connector: str, expected_missing: Callable[[int], bool] | None,
               groups: Sequence[int]) -> Report:
        """The verifier's checks over what the tail has read of ``connector`` so far."""
        with self._lock:
            pairs = [(p, s) for (c, p), seen in self._seen.items() if c == connector
                     for s in seen.seqs]
        return verify_sequences(pairs, 0, expected_missing, [str(g) for g in groups])


def wait_recovered(tail: CommittedTail, table: FaultTable, groups: Sequence[Group], fault: str,
                   since: float, timeout: float, diagnosis: Callable[[], str],
                   produced_after: float | None = None) -> float:
    """Seconds from ``since`` until every group committed a record produced after
    ``produced_after`` (default ``since``), recorded in ``table`` and printed; on
    timeout, AssertionError with ``diagnosis()``."""
    try:
        seconds = tail.wait_progress(groups, since, timeout, fault, produced_after)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnosis()}") from None
    table.record(fault, seconds)
    print(f"{time.strftime('%H:%M:%S')} {fault}: recovered in {seconds:.1f} s, "
          f"{tail.count()} committed records so far", flush=True)
    return seconds


@dataclass
class FaultRow:
    fault: str
    rounds: int = 0
    records: int = 0
    duplicates: int = 0
    gaps: int = 0
    leaked: int = 0  # records of deliberately aborted transactions that were visible
    recoveries: list[float] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)  # extra columns, summed over rounds


class FaultTable:
    """One row per kind of fault: rounds, records checked, duplicates, gaps, aborted
    records visible, recovery, and any counted columns a suite adds (:meth:`count`)."""

    def __init__(self) -> None:
        self.rows: dict[str, FaultRow] = {}
        self.columns: list[str] = []  # counted columns, in the order first used

    def count(self, fault: str, column: str, n: int) -> None:
        """Add ``n`` to ``column`` of ``fault``'s row (summed over its rounds)."""
        row = self.rows.setdefault(fault, FaultRow(fault))
        row.counts[column] = row.counts.get(column, 0) + n
        if column not in self.columns:
            self.columns.append(column)

    def record(self, fault: str, recovery: float) -> None:
        row = self.rows.setdefault(fault, FaultRow(fault))
        row.rounds += 1
        row.recoveries.append(recovery)

    def checked(self, fault: str, records: int, reports: Sequence[Report]) -> None:
        row = self.rows.setdefault(fault, FaultRow(fault))
        row.records = records
        row.duplicates = sum(sum(n - 1 for n in g.duplicates.values())
                             for r in reports for g in r.groups)
        row.gaps = sum(sum(b - a + 1 for a, b in g.missing) for r in reports for g in r.groups)
        row.leaked = sum(len(g.leaked) for r in reports for g in r.groups)

    def format(self) -> str:
        head = ("fault", "rounds", "records checked", "duplicates", "gaps",
                "aborted visible", *self.columns, "recovery s (median / max)")
        # Records, duplicates and gaps are cumulative: everything committed up to
        # the end of that fault's rounds, checked again each time.
        lines = [head]
        for row in self.rows.values():
            rec = (f"{statistics.median(row.recoveries):.1f} / {max(row.recoveries):.1f}"
                   if row.recoveries else "-")
            lines.append((row.fault, str(row.rounds), str(row.records), str(row.duplicates),
                          str(row.gaps), str(row.leaked),
                          # "-": nothing counted for this row (its fault counts elsewhere)
                          *(str(row.counts.get(c, 0)) if row.counts else "-"
                            for c in self.columns), rec))
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        out = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
               for line in lines]
        out.insert(1, "  ".join("-" * w for w in widths))
        return "\n".join(out)
