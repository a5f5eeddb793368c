"""The physical limit: a raw confluent-kafka producer writing the same records.

One producer, one topic partition, values of the given size, committed every
N records, every T milliseconds, or not transactional at all (idempotent, the
same ``acks=all`` durability). The time runs from the first ``produce`` to the
last commit (or flush), so it is what a task pays for its transactions, minus
everything a framework adds.
"""

from __future__ import annotations

import os
import time
import uuid

from confluent_kafka import Producer

from bench.common import Measurement, create_topic

# The task producer's own settings (task_startup.producer_config), so the ratio
# measures what the framework adds, not a difference in client tuning.
COMMON = {"linger.ms": 5, "acks": "all", "queue.buffering.max.messages": 1_000_000,
          "queue.buffering.max.kbytes": 1_048_576}


def run_limit(bootstrap: str, records: int, value_size: int, every_records: int | None,
              every_ms: int | None, transactional: bool = True) -> Measurement:
    topic = f"bench-limit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    conf = {"bootstrap.servers": bootstrap, **COMMON}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    else:
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    if transactional:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)  # metadata before the clock starts
    value = b"x" * value_size
    produce = producer.produce
    cpu0, t0 = os.times(), time.perf_counter()
    transactions = 0
    in_txn = 0
    deadline = t0 + (every_ms or 0) / 1000
    for i in range(records):
        if transactional and in_txn == 0:
            producer.begin_transaction()
        while True:
            try:
                produce(topic, value, str(i % 16).encode())
                break
            except BufferError:
                producer.poll(0.005)
        in_txn += 1
        if transactional:
            due = (every_records is not None and in_txn >= every_records) or (
                every_ms is not None and in_txn % 256 == 0 and time.perf_counter() >= deadline)
            if due:
                producer.commit_transaction(30)
                transactions += 1
                in_txn = 0
                deadline = time.perf_counter() + (every_ms or 0) / 1000
    if transactional and in_txn:
        producer.commit_transaction(30)
        transactions += 1
    producer.flush(60)
    elapsed = time.perf_counter() - t0
    cpu1 = os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return Measurement(records=records, value_size=value_size, seconds=elapsed,
                       cpu_seconds=cpu, transactions=max(transactions, 1))


def warm_up(bootstrap: str, seconds: float = 40.0) -> None:
    """Transactional writes for ``seconds`` before anything is measured.

    A freshly started broker is several times slower at small transactions
    until its JVM has warmed up and its transaction coordinator has served a
    while: on one fresh broker, three back-to-back runs of 1,000-record
    transactions did 55k, 90k and 103k records/s, and 246-269k after 40 s of
    these writes. The limit runs first, so without this it measured the
    broker's warm-up, not the producer, and came out slower than the
    framework it bounds (docs/benchmarks.md).
    """
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        run_limit(bootstrap, 200_000, 100, 1000, None)
        run_limit(bootstrap, 1_000_000, 100, None, 100)
