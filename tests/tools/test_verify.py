"""``connect-runtime verify``: the pure checks, and the CLI against crafted topics."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

import orjson
import pytest
from confluent_kafka import Producer
from support.kafka import create_topic

from connect_runtime.cli import main
from connect_runtime.connectors.sequence import expected_aborted
from connect_runtime.tools.verify import (
    format_table,
    parse_record,
    verify_sequences,
    verify_topics,
)

# --- pure logic ----------------------------------------------------------------


def test_clean_sequences_pass() -> None:
    report = verify_sequences([(0, 0), (1, 0), (0, 1), (1, 1), (0, 2)])
    assert report.ok and report.violations() == []
    g0, g1 = report.group(0), report.group(1)
    assert (g0.count, g0.first, g0.last) == (3, 0, 2)
    assert (g1.count, g1.first, g1.last) == (2, 0, 1)
    assert "OK" in format_table(report)


def test_duplicate_is_reported() -> None:
    report = verify_sequences([(0, 0), (0, 1), (0, 1), (0, 2), (0, 1)])
    assert not report.ok
    assert report.group(0).duplicates == {1: 3}
    assert report.group(0).missing == []
    assert "duplicates 1x3" in "\n".join(report.violations())


def test_gaps_are_inclusive_ranges_from_start() -> None:
    report = verify_sequences([(0, 2), (0, 3), (0, 6), (0, 8)])
    assert report.group(0).missing == [(0, 1), (4, 5), (7, 7)]
    assert not report.ok
    assert verify_sequences([(0, 5), (0, 6)], start=5).ok
    below = verify_sequences([(0, 4), (0, 5)], start=5)
    assert below.group(0).below_start == [4] and not below.ok


def test_expected_groups_without_records_are_violations() -> None:
    report = verify_sequences([(0, 0), (2, 0)], expect_groups=["0", "1", "2"])
    assert report.missing_groups == ["1"]
    empty = report.group("1")
    assert (empty.count, empty.first, empty.last) == (0, None, None)
    assert "group 1: no records" in report.violations()
    assert verify_sequences([(0, 0), (1, 0)], expect_groups=["0", "1"]).ok
    assert not verify_sequences([], expect_groups=["0"]).ok
    assert "no records: nothing was verified" in verify_sequences([]).violations()


def test_groups_of_different_json_types_are_distinct() -> None:
    # 0, "0" and false would merge as Python dict keys and could hide gaps.
    report = verify_sequences([(0, 0), ("0", 1), (False, 0)])
    assert len(report.groups) == 3
    assert report.group("0").missing == [(0, 0)]
    assert not report.ok


def test_expected_aborts_are_neither_missing_nor_allowed() -> None:
    def aborted(s: int) -> bool:
        return expected_aborted(s, 2, 3)  # seqs 4,5 and 10,11 are aborted

    clean = [(0, s) for s in range(12) if not aborted(s)]
    assert verify_sequences(clean, expected_missing=aborted).ok
    # Without the predicate the aborted seqs are gaps.
    assert verify_sequences(clean).group(0).missing == [(4, 5)]
    leaked = verify_sequences([*clean, (0, 4)], expected_missing=aborted)
    assert leaked.group(0).leaked == [4] and not leaked.ok
    # A real gap next to an aborted range is still found.
    gap = verify_sequences([(0, s) for s in range(12) if not aborted(s) and s != 6],
                           expected_missing=aborted)
    assert gap.group(0).missing == [(6, 6)]


def test_parse_record_rejects_what_it_cannot_check() -> None:
    assert parse_record(b'{"seq": 3, "partition": "a"}', "seq", "partition") == ("a", 3)
    for bad in [None, b"not json", b"[1]", b'{"seq": 3}', b'{"partition": 0}',
                b'{"seq": "3", "partition": 0}', b'{"seq": true, "partition": 0}',
                b'{"seq": 1.5, "partition": 0}', b'{"seq": 1, "partition": {}}']:
        assert parse_record(bad, "seq", "partition") is None, bad


# --- against the broker --------------------------------------------------------


def _value(group: Any, seq: int) -> bytes:
    return orjson.dumps({"partition": group, "seq": seq, "task": 0})


def _produce(bootstrap: str, topic: str, values: Iterable[bytes | tuple[int, bytes]]) -> None:
    """Write ``values`` (optionally ``(kafka partition, value)``) and flush."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        partition, value = v if isinstance(v, tuple) else (0, v)
        producer.produce(topic, value, partition=partition)
    assert producer.flush(30) == 0


@pytest.fixture
def topic(kafka_bootstrap: str, unique_name: Callable[[str], str]) -> str:
    name = unique_name("verify")
    create_topic(kafka_bootstrap, name, partitions=2)
    return name


def _cli(bootstrap: str, *args: str) -> int:
    return main(["verify", "--bootstrap-server", bootstrap, "--timeout", "20", *args])


def test_clean_topic_exits_0(kafka_bootstrap: str, topic: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    # Groups spread over both Kafka partitions; sequence order kept per group.
    _produce(kafka_bootstrap, topic, [(g % 2, _value(g, s)) for s in range(20) for g in range(3)])
    assert _cli(kafka_bootstrap, "--topic", topic, "--expect-groups", "0,1,2") == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK")
    report = verify_topics(kafka_bootstrap, [topic])
    assert report.ok and [g.count for g in report.groups] == [20, 20, 20]


def test_duplicate_exits_1(kafka_bootstrap: str, topic: str,
                           capsys: pytest.CaptureFixture[str]) -> None:
    _produce(kafka_bootstrap, topic, [_value(0, s) for s in [0, 1, 2, 2, 3]])
    assert _cli(kafka_bootstrap, "--topic", topic) == 1
    assert "VIOLATION: group 0: duplicates 2x2" in capsys.readouterr().out
    assert verify_topics(kafka_bootstrap, [topic]).group(0).duplicates == {2: 2}


def test_gap_exits_1(kafka_bootstrap: str, topic: str,
                     capsys: pytest.CaptureFixture[str]) -> None:
    _produce(kafka_bootstrap, topic, [_value("a", s) for s in [0, 1, 4, 5]])
    assert _cli(kafka_bootstrap, "--topic", topic) == 1
    assert "VIOLATION: group a: missing 2-3" in capsys.readouterr().out


def test_aborted_transaction_is_not_counted(kafka_bootstrap: str, topic: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    producer = Producer({"bootstrap.servers": kafka_bootstrap,
                         "transactional.id": f"verify-test-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)

    def txn(seqs: list[int], commit: bool) -> None:
        producer.begin_transaction()
        for s in seqs:
            producer.produce(topic, _value(0, s), partition=0)
        # Abort purges what is still queued: flush so the aborted records are written.
        assert producer.flush(30) == 0
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    txn([0, 1, 2], commit=True)
    # Would be duplicates and a gap (3..99) if the verifier counted aborted records.
    txn([1, 2, 100], commit=False)
    txn([3, 4], commit=True)
    assert _cli(kafka_bootstrap, "--topic", topic) == 0
    out = capsys.readouterr().out
    assert out.rstrip().endswith("OK")
    report = verify_topics(kafka_bootstrap, [topic])
    assert report.ok
    assert report.aborted == 3 and report.group(0).aborted == 3
    assert (report.group(0).count, report.group(0).last) == (5, 4)


def test_expected_aborted_seq_visible_is_a_leak(kafka_bootstrap: str, topic: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    # commit.every=2, abort.every=3: seqs 4 and 5 must never be committed.
    _produce(kafka_bootstrap, topic, [_value(0, s) for s in [0, 1, 2, 3, 4, 6, 7]])
    flags = ["--commit-every", "2", "--abort-every", "3"]
    assert _cli(kafka_bootstrap, "--topic", topic, *flags) == 1
    assert "VIOLATION: group 0: leaked aborted seqs 4" in capsys.readouterr().out
    report = verify_topics(kafka_bootstrap, [topic],
                           expected_missing=lambda s: expected_aborted(s, 2, 3))
    assert report.group(0).leaked == [4] and report.group(0).missing == []


def test_expected_aborts_absent_pass(kafka_bootstrap: str, topic: str) -> None:
    _produce(kafka_bootstrap, topic, [_value(0, s) for s in [0, 1, 2, 3, 6, 7]])
    assert _cli(kafka_bootstrap, "--topic", topic,
                "--commit-every", "2", "--abort-every", "3") == 0
    # The same data without the flags has a gap at 4-5.
    assert _cli(kafka_bootstrap, "--topic", topic) == 1


def test_empty_group_exits_1(kafka_bootstrap: str, topic: str,
                             capsys: pytest.CaptureFixture[str]) -> None:
    _produce(kafka_bootstrap, topic,
             [orjson.dumps({"task": t, "seq": s}) for s in range(3) for t in (0, 2)])
    args = ["--topic", topic, "--group-field", "task"]
    assert _cli(kafka_bootstrap, *args, "--expect-groups", "0,1,2") == 1
    assert "VIOLATION: group 1: no records" in capsys.readouterr().out
    assert _cli(kafka_bootstrap, *args, "--expect-groups", "0,2") == 0


def test_unparseable_records_exit_1(kafka_bootstrap: str, topic: str,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    _produce(kafka_bootstrap, topic, [_value(0, 0), b"garbage", b'{"seq": 1}', _value(0, 1)])
    assert _cli(kafka_bootstrap, "--topic", topic) == 1
    assert "VIOLATION: 2 unparseable record(s)" in capsys.readouterr().out


def test_multiple_topics_are_one_sequence_space(kafka_bootstrap: str, topic: str,
                                                unique_name: Callable[[str], str]) -> None:
    other = unique_name("verify2")
    create_topic(kafka_bootstrap, other)
    _produce(kafka_bootstrap, topic, [_value(0, s) for s in (0, 1)])
    _produce(kafka_bootstrap, other, [_value(0, s) for s in (2, 3)])
    assert _cli(kafka_bootstrap, "--topic", topic, "--topic", other) == 0
    assert _cli(kafka_bootstrap, "--topic", other) == 1  # 0-1 missing


def test_bad_usage_exits_2(kafka_bootstrap: str) -> None:
    with pytest.raises(SystemExit) as e:
        _cli(kafka_bootstrap, "--topic", "t", "--abort-every", "3")
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["verify", "--topic", "t"])
    assert e.value.code == 2


def test_empty_topic_exits_1(kafka_bootstrap: str, topic: str) -> None:
    assert _cli(kafka_bootstrap, "--topic", topic) == 1


def test_unknown_topic_exits_1(kafka_bootstrap: str, unique_name: Callable[[str], str]) -> None:
    assert _cli(kafka_bootstrap, "--topic", unique_name("absent")) == 1
