"""The physical limit: a raw confluent-kafka producer writing the same records.

One producer, one topic partition, values of the given size, committed every
N records, every T milliseconds, or not transactional at all (idempotent, the
same ``acks=all`` durability), so it is what a task pays for its
transactions, minus everything a framework adds. Two ways to measure it, the
two ways ``bench.run`` measures the product (``--method``):

* ``run_limit`` ("count"): a fixed number of records, timed from the first
  ``produce`` to the last commit (or flush), in this process.
* ``run_limit_window`` ("window"): this module run as a process of its own
  (``python -m bench.limit``) producing without end; once its first records
  are committed and a warm-up has passed, the records committed over a window
  are the growth of the topic's last stable offsets, with no consumer reading
  the topic, and CPU is that process's over the same window: exactly how
  ``bench.steady`` measures a connector.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable

from confluent_kafka import Producer

from bench.common import (
    REPO,
    WARMUP_S,
    CommittedOffsets,
    Measurement,
    create_topic,
    measure_window,
    tree_cpu_seconds,
)
from connect_runtime.task.startup import PRODUCER_DEFAULTS, TRANSACTIONAL_PRODUCER_DEFAULTS


def run_limit(bootstrap: str, records: int, value_size: int, every_records: int | None,
              every_ms: int | None, transactional: bool = True) -> Measurement:
    topic = f"bench-limit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    producer = _producer(bootstrap, topic, transactional)
    cpu0, t0 = os.times(), time.perf_counter()
    transactions = _produce(producer, topic, value_size, range(records), every_records,
                            every_ms, transactional)
    producer.flush(60)
    elapsed = time.perf_counter() - t0
    cpu1 = os.times()
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return Measurement(records=records, value_size=value_size, seconds=elapsed,
                       cpu_seconds=cpu, transactions=max(transactions, 1))


def _producer(bootstrap: str, topic: str, transactional: bool) -> Producer:
    # The task producer's own settings, so the ratio measures what the framework
    # adds, not a difference in client tuning.
    defaults = TRANSACTIONAL_PRODUCER_DEFAULTS if transactional else PRODUCER_DEFAULTS
    conf = {"bootstrap.servers": bootstrap, **defaults}
    if transactional:
        conf["transactional.id"] = f"bench-{uuid.uuid4().hex[:8]}"
    else:
        conf["enable.idempotence"] = True
    producer = Producer(conf)
    if transactional:
        producer.init_transactions(30)
    producer.list_topics(topic, timeout=30)  # metadata before the clock starts
    return producer


def _produce(producer: Producer, topic: str, value_size: int, indices: Iterable[int],
             every_records: int | None, every_ms: int | None, transactional: bool) -> int:
    """The loop both methods time: one record per index, committed as the mode
    says (the last, partial transaction too). Returns the transactions committed."""
    value = b"x" * value_size
    produce = producer.produce
    transactions = 0
    in_txn = 0
    deadline = time.perf_counter() + (every_ms or 0) / 1000
    for i in indices:
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
    return transactions


def run_limit_window(bootstrap: str, window_s: float, value_size: int,
                     every_records: int | None, every_ms: int | None,
                     transactional: bool = True, partitions: int = 1,
                     warmup_s: float = WARMUP_S) -> Measurement:
    """The same producer loop in a process of its own, without end, measured over
    a steady-state window by the topic's last stable offsets (see the module
    doc); the process is killed once the window has closed."""
    topic = f"bench-limit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    command = [sys.executable, "-m", "bench.limit", "--bootstrap-server", bootstrap,
               "--topic", topic, "--value-size", str(value_size)]
    if every_records is not None:
        command += ["--every-records", str(every_records)]
    if every_ms is not None:
        command += ["--every-ms", str(every_ms)]
    if not transactional:
        command.append("--no-transactions")
    started = time.time()
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        def alive() -> None:
            if proc.poll() is not None:
                raise RuntimeError(f"the limit's producer exited ({proc.returncode}): "
                                   f"{proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")

        window = measure_window(CommittedOffsets(bootstrap, topic, partitions), window_s,
                                lambda: tree_cpu_seconds(proc.pid), started=started,
                                warmup_s=warmup_s, timeout=120, check=alive)
    finally:
        proc.kill()
        proc.wait(30)
    transactions = 1
    if transactional and every_records:
        transactions = round(window.records / every_records)
    elif transactional and every_ms:
        transactions = round(window.seconds * 1000 / every_ms)
    return Measurement(records=window.records, value_size=value_size, seconds=window.seconds,
                       cpu_seconds=window.cpu_seconds, transactions=max(transactions, 1),
                       startup_seconds=window.ready_seconds)


def main(argv: list[str] | None = None) -> int:
    """The producer of ``run_limit_window``: writes until it is killed."""
    parser = argparse.ArgumentParser(prog="bench.limit", description=main.__doc__)
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--value-size", type=int, required=True)
    parser.add_argument("--every-records", type=int, default=None)
    parser.add_argument("--every-ms", type=int, default=None)
    parser.add_argument("--no-transactions", action="store_true")
    args = parser.parse_args(argv)
    transactional = not args.no_transactions
    producer = _producer(args.bootstrap_server, args.topic, transactional)
    _produce(producer, args.topic, args.value_size, itertools.count(), args.every_records,
             args.every_ms, transactional)
    return 0


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


if __name__ == "__main__":
    sys.exit(main())
