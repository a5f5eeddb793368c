"""``connect-runtime verify``: check that topics hold every sequence number exactly once.

What is checked (every item below except ``aborted`` is a violation):

* Records are read with ``isolation.level=read_committed`` from offset 0 of every
  partition of every topic, up to the high watermarks captured once at the start.
  A partition that cannot be read up to its captured high watermark within the
  timeout (e.g. a transaction still open) is **incomplete**.
* Each value must be a JSON object holding an integer sequence field (``seq``)
  and a JSON-scalar group field (``partition``); otherwise it is **unparseable**.
* Per group (one sequence space, e.g. a source partition):
  ``count``, ``first``/``last`` seq, **duplicates** (seq seen more than once),
  **missing** ranges (seqs in ``[start, last]`` never seen), **below start** (seqs
  smaller than ``start``), and, when an ``expected_missing`` predicate is given
  (seqs the connector deliberately aborted), **leaked** seqs: expected-aborted
  seqs that are visible to read_committed. Expected-aborted seqs are never missing.
* **missing groups**: groups listed in ``expect_groups`` that have no record.
* **no records**: nothing parseable was read at all (an empty topic never passes).
* ``aborted`` (informational): the same range is also read with
  ``read_uncommitted``; records at a (topic, partition, offset) seen there but not
  by read_committed belong to aborted transactions. They are never counted: all
  other checks use read_committed data only.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import orjson
from confluent_kafka import Consumer, KafkaError, TopicPartition

#: A JSON scalar used as a group value.
Scalar = str | int | float | bool | None


@dataclass
class GroupReport:
    """Findings for one group. ``first``/``last`` are ``None`` iff ``count == 0``."""

    group: Scalar
    count: int = 0
    first: int | None = None
    last: int | None = None
    duplicates: dict[int, int] = field(default_factory=dict)  # seq -> times seen (>= 2)
    missing: list[tuple[int, int]] = field(default_factory=list)  # inclusive ranges
    below_start: list[int] = field(default_factory=list)
    leaked: list[int] = field(default_factory=list)  # visible expected-aborted seqs
    aborted: int = 0  # read_uncommitted-only records (informational)

    @property
    def label(self) -> str:
        return group_label(self.group)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.missing or self.below_start or self.leaked)


@dataclass
class Report:
    """The verifier's result; :attr:`ok` is False iff :meth:`violations` is non-empty."""

    groups: list[GroupReport]
    missing_groups: list[str] = field(default_factory=list)
    unparseable: int = 0
    incomplete: list[str] = field(default_factory=list)  # "topic[partition]" not fully read
    aborted: int = 0  # records of aborted transactions skipped (informational)

    def group(self, group: Scalar) -> GroupReport:
        """The report of ``group`` (matched by type and value); KeyError if absent."""
        key = _group_key(group)
        for g in self.groups:
            if _group_key(g.group) == key:
                return g
        raise KeyError(group)

    def violations(self) -> list[str]:
        out: list[str] = []
        for g in self.groups:
            if g.duplicates:
                out.append(f"group {g.label}: duplicates {_fmt_dups(g.duplicates, 20)}")
            if g.missing:
                out.append(f"group {g.label}: missing {_fmt_ranges(g.missing, 20)}")
            if g.below_start:
                out.append(f"group {g.label}: seqs below start {_fmt_list(g.below_start, 20)}")
            if g.leaked:
                out.append(f"group {g.label}: leaked aborted seqs {_fmt_list(g.leaked, 20)}")
        out.extend(f"group {label}: no records" for label in self.missing_groups)
        if not any(g.count for g in self.groups):
            out.append("no records: nothing was verified")
        if self.unparseable:
            out.append(f"{self.unparseable} unparseable record(s)")
        out.extend(f"{tp}: not read up to its high watermark" for tp in self.incomplete)
        return out

    @property
    def ok(self) -> bool:
        return not self.violations()


def group_label(group: Scalar) -> str:
    """How a group is shown and matched by ``--expect-groups``: strings as they are,
    other scalars as JSON (``0``, ``true``, ``null``)."""
    return group if isinstance(group, str) else orjson.dumps(group).decode()


def _group_key(group: Scalar) -> tuple[str, str]:
    # Distinguishes 0, "0", 0.0 and False (which compare or hash equal in Python).
    return type(group).__name__, repr(group)


def _sort_key(group: Scalar) -> tuple[int, float, str]:
    if isinstance(group, int | float) and not isinstance(group, bool):
        return 0, float(group), repr(group)
    if isinstance(group, str):  # "--expect-groups 1" sorts with the number 1
        try:
            return 0, float(group), group
        except ValueError:
            pass
    return 1, 0.0, group_label(group)


def verify_sequences(
    records: Iterable[tuple[Scalar, int]],
    start: int = 0,
    expected_missing: Callable[[int], bool] | None = None,
    expect_groups: Sequence[str] = (),
) -> Report:
    """Check ``(group, seq)`` pairs (in read order); pure.

    Per group: count, first/last seq in read order, duplicates, missing inclusive
    ranges within ``[start, last seq]`` (``last`` being the largest seq seen),
    seqs below ``start``. ``expected_missing(seq)`` marks seqs that must not
    appear (deliberately aborted): they are never missing, and each one seen is
    reported as leaked. ``expect_groups`` lists group labels (:func:`group_label`)
    that must have records; absent ones become zero-count groups and are listed in
    ``missing_groups``. Cost is O(records + largest seq - start) per group.
    """
    seqs: dict[tuple[str, str], tuple[Scalar, list[int]]] = {}
    for group, seq in records:
        seqs.setdefault(_group_key(group), (group, []))[1].append(seq)
    reports: list[GroupReport] = []
    for group, values in seqs.values():
        counts = Counter(values)
        seen = sorted(counts)
        top = seen[-1]
        missing: list[tuple[int, int]] = []
        run_start: int | None = None
        seen_set = set(seen)
        for s in range(start, top + 2):
            hole = s <= top and s not in seen_set and not (
                expected_missing is not None and expected_missing(s))
            if hole and run_start is None:
                run_start = s
            elif not hole and run_start is not None:
                missing.append((run_start, s - 1))
                run_start = None
        reports.append(GroupReport(
            group=group, count=len(values), first=values[0], last=values[-1],
            duplicates={s: n for s, n in sorted(counts.items()) if n > 1},
            missing=missing,
            below_start=[s for s in seen if s < start],
            leaked=[s for s in seen if expected_missing is not None and expected_missing(s)],
        ))
    present = {g.label for g in reports}
    missing_groups = [label for label in expect_groups if label not in present]
    reports.extend(GroupReport(group=label) for label in missing_groups)
    reports.sort(key=lambda g: _sort_key(g.group))
    return Report(groups=reports, missing_groups=missing_groups)


# --- reading -----------------------------------------------------------------

RawRecord = tuple[str, int, int, bytes | None]  # topic, partition, offset, value


def _consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"connect-runtime-verify-{uuid.uuid4().hex[:8]}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    })


def high_watermarks(bootstrap: str, topics: Sequence[str],
                    timeout: float = 10.0) -> dict[tuple[str, int], int]:
    """The high watermark of every partition of ``topics`` now; KeyError-free:
    raises ``ValueError`` for a topic that does not exist."""
    consumer = _consumer(bootstrap, "read_uncommitted")
    try:
        ends: dict[tuple[str, int], int] = {}
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=timeout).topics[topic]
            if meta.error is not None or not meta.partitions:
                raise ValueError(f"topic {topic!r}: {meta.error or 'no partitions'}")
            for p in meta.partitions:
                _, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=timeout)
                ends[(topic, p)] = int(high)
        return ends
    finally:
        consumer.close()


def read_range(bootstrap: str, ends: dict[tuple[str, int], int], isolation: str,
               timeout: float = 30.0) -> tuple[list[RawRecord], list[tuple[str, int]]]:
    """Every record visible at ``isolation`` in ``[0, ends[tp])`` of each partition.

    Returns the records in read order and the partitions that were not read up to
    their end within ``timeout`` seconds (with read_committed, an open transaction
    keeps the readable end below the high watermark).
    """
    consumer = _consumer(bootstrap, isolation)
    pending = {tp for tp, end in ends.items() if end > 0}
    out: list[RawRecord] = []
    deadline = time.monotonic() + timeout
    try:
        if pending:
            consumer.assign([TopicPartition(t, p, 0) for t, p in sorted(pending)])
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                err = msg.error()
                topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if topic is not None and partition is not None and offset is not None:
                    tp = (topic, partition)
                    if err is None:
                        if offset < ends.get(tp, 0):
                            out.append((topic, partition, offset, msg.value()))
                    elif err.code() == KafkaError._PARTITION_EOF and offset >= ends.get(tp, 0):
                        pending.discard(tp)
                if err is not None and err.fatal():
                    raise RuntimeError(f"verify: {err}")
            # Positions also advance past control records (commit/abort markers).
            for pos in consumer.position([TopicPartition(t, p) for t, p in pending]):
                if pos.offset >= 0 and pos.offset >= ends[(pos.topic, pos.partition)]:
                    pending.discard((pos.topic, pos.partition))
    finally:
        consumer.close()
    return out, sorted(pending)


def parse_record(value: bytes | None, seq_field: str,
                 group_field: str) -> tuple[Scalar, int] | None:
    """``(group, seq)`` from a JSON object value, or None when unparseable: not JSON,
    not an object, a field absent, seq not an integer, or group not a scalar."""
    if value is None:
        return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or seq_field not in obj or group_field not in obj:
        return None
    seq, group = obj[seq_field], obj[group_field]
    if not isinstance(seq, int) or isinstance(seq, bool):
        return None
    if not isinstance(group, str | int | float | bool | type(None)):
        return None
    return group, seq


def verify_topics(
    bootstrap: str,
    topics: Sequence[str],
    seq_field: str = "seq",
    group_field: str = "partition",
    start: int = 0,
    expected_missing: Callable[[int], bool] | None = None,
    expect_groups: Sequence[str] = (),
    timeout: float = 30.0,
) -> Report:
    """Read ``topics`` (see the module docstring) and :func:`verify_sequences` them."""
    ends = high_watermarks(bootstrap, topics)
    uncommitted, _ = read_range(bootstrap, ends, "read_uncommitted", timeout)
    committed, incomplete = read_range(bootstrap, ends, "read_committed", timeout)
    committed_at = {(t, p, o) for t, p, o, _ in committed}
    pairs: list[tuple[Scalar, int]] = []
    unparseable = 0
    for _, _, _, value in committed:
        parsed = parse_record(value, seq_field, group_field)
        if parsed is None:
            unparseable += 1
        else:
            pairs.append(parsed)
    report = verify_sequences(pairs, start, expected_missing, expect_groups)
    aborted = 0
    by_key = {_group_key(g.group): g for g in report.groups}
    for t, p, o, value in uncommitted:
        if (t, p, o) in committed_at:
            continue
        aborted += 1
        parsed = parse_record(value, seq_field, group_field)
        if parsed is not None and (g := by_key.get(_group_key(parsed[0]))) is not None:
            g.aborted += 1
    return replace(report, unparseable=unparseable, aborted=aborted,
                   incomplete=[f"{t}[{p}]" for t, p in incomplete])


# --- output ------------------------------------------------------------------

def _fmt_list(values: Sequence[int], limit: int) -> str:
    shown = ",".join(str(v) for v in values[:limit])
    return shown + (f",... ({len(values)} total)" if len(values) > limit else "")


def _fmt_ranges(ranges: Sequence[tuple[int, int]], limit: int) -> str:
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in ranges[:limit]]
    more = f",... ({len(ranges)} ranges)" if len(ranges) > limit else ""
    return ",".join(parts) + more


def _fmt_dups(dups: dict[int, int], limit: int) -> str:
    items = list(dups.items())
    shown = ",".join(f"{s}x{n}" for s, n in items[:limit])
    return shown + (f",... ({len(items)} total)" if len(items) > limit else "")


def format_table(report: Report) -> str:
    """One row per group (group, count, first, last, duplicates, gaps, leaked,
    aborted), a totals row, then ``OK`` or one ``VIOLATION:`` line per finding."""
    header = ("group", "count", "first", "last", "duplicates", "gaps", "leaked", "aborted")
    rows: list[tuple[str, ...]] = []
    for g in report.groups:
        rows.append((
            g.label, str(g.count),
            "-" if g.first is None else str(g.first),
            "-" if g.last is None else str(g.last),
            _fmt_dups(g.duplicates, 5) or "-",
            _fmt_ranges(g.missing, 5) or "-",
            _fmt_list(g.leaked, 5) or "-",
            str(g.aborted),
        ))
    rows.append((
        "TOTAL", str(sum(g.count for g in report.groups)), "", "",
        str(sum(n - 1 for g in report.groups for n in g.duplicates.values())),
        str(sum(b - a + 1 for g in report.groups for a, b in g.missing)),
        str(sum(len(g.leaked) for g in report.groups)),
        str(report.aborted),
    ))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [header, *rows]]
    lines.append(f"unparseable: {report.unparseable}")
    violations = report.violations()
    lines.extend(f"VIOLATION: {v}" for v in violations)
    if not violations:
        lines.append("OK")
    return "\n".join(lines)
