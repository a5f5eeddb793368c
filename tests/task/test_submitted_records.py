"""Which offsets an at-least-once task may commit: pure logic, no broker.

Delivery reports are simulated by calling each tracker the way confluent-kafka
calls ``on_delivery``; the broker-facing behaviour is in test_at_least_once_loop.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError

from connect_runtime.api.record import SourceRecord
from connect_runtime.errors import InvalidOffsetException
from connect_runtime.task.submitted_records import SubmittedRecord, SubmittedRecords


def submit(tracked: SubmittedRecords, part: str | None, seq: int) -> SubmittedRecord:
    # A fresh partition dict per record, as many connectors build them.
    record = SourceRecord(None if part is None else {"p": part}, {"seq": seq}, "t")
    return tracked.track(record)


def committable(tracked: SubmittedRecords) -> dict[str, object]:
    return {partition["p"]: offset
            for partition, offset in tracked.take_committable().values()}


def test_an_offset_waits_for_every_earlier_record_of_its_source_partition() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    a1, a2, b1, a3 = (submit(tracked, "a", 1), submit(tracked, "a", 2),
                      submit(tracked, "b", 1), submit(tracked, "a", 3))
    a2(None, None)  # acked before a1: a different Kafka partition, say
    b1(None, None)
    assert committable(tracked) == {"b": {"seq": 1}}
    a1(None, None)
    assert committable(tracked) == {"a": {"seq": 2}}  # a3 is still in flight
    assert tracked.in_flight == 1 and tracked.pending() == 1
    a3(None, None)
    assert committable(tracked) == {"a": {"seq": 3}}
    assert committable(tracked) == {}  # taken once
    assert tracked.in_flight == 0 and tracked.acknowledged == 4


def test_a_failed_record_blocks_its_partition_for_good_but_not_the_others() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    a1, a2, a3, b1 = (submit(tracked, "a", 1), submit(tracked, "a", 2),
                      submit(tracked, "a", 3), submit(tracked, "b", 1))
    a1(None, None)
    a2(KafkaError(KafkaError._MSG_TIMED_OUT), None)
    a3(None, None)
    b1(None, None)
    assert committable(tracked) == {"a": {"seq": 1}, "b": {"seq": 1}}
    assert tracked.failure is not None and tracked.failure.record is a2.record
    assert tracked.failure.error.code() == KafkaError._MSG_TIMED_OUT
    assert tracked.in_flight == 0 and tracked.pending() == 2  # a2 and a3 stay


def test_records_without_a_source_partition_are_tracked_for_delivery_only() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    loose = submit(tracked, None, 1)
    assert tracked.in_flight == 1
    loose(None, None)
    assert committable(tracked) == {} and tracked.in_flight == 0


def test_a_source_partition_that_is_not_flat_is_rejected_before_producing() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    with pytest.raises(InvalidOffsetException, match="partition"):
        tracked.track(SourceRecord({"p": {"nested": 1}}, {"seq": 1}, "t"))
    assert tracked.in_flight == 0


def test_a_record_the_producer_refused_is_forgotten() -> None:
    tracked = SubmittedRecords("c", keep_metadata=False)
    a1 = submit(tracked, "a", 1)
    refused = submit(tracked, "a", 2)
    tracked.untrack(refused)  # produce() raised: no delivery report will ever come
    a1(None, None)
    assert committable(tracked) == {"a": {"seq": 1}}
    assert tracked.in_flight == 0 and tracked.pending() == 0
