"""What idle transactional producers cost (issue 49): librdkafka's floor per task.

    bash bench/with_broker.sh idle 39493 bench.idle_producers [--producers 40]
        [--window 20] [--transactions-per-s 0] [--set key=value ...]

Creates ``--producers`` transactional producers in this one process (as a slot
hosting that many tasks does), with the task producer's defaults
(``task/startup.py``) and ``--set`` on top, initializes their transactions,
and then, for ``--window`` seconds, either leaves them idle or commits ``--transactions-per-s``
transactions per producer, of ``--records-per-transaction`` records produced
evenly over each (the density benchmark's idle task: 1 transaction and 10
records a second). Prints this process's CPU by
thread group (``bench.threads``) per producer.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
import uuid

from confluent_kafka import Producer

from bench import threads
from bench.common import create_topic
from connect_runtime.task.startup import TRANSACTIONAL_PRODUCER_DEFAULTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", required=True)
    parser.add_argument("--producers", type=int, default=40)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--partitions", type=int, default=1,
                        help="of the topic, records spread over them at random")
    parser.add_argument("--transactions-per-s", type=float, default=0.0)
    parser.add_argument("--records-per-transaction", type=int, default=1,
                        help="produced evenly spaced over the transaction's interval")
    parser.add_argument("--thread-each", action="store_true",
                        help="each producer's transactions on a thread of its own")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a producer setting on top of the runtime's")
    args = parser.parse_args(argv)
    extra = dict(kv.split("=", 1) for kv in args.set)
    topic = f"idle-{uuid.uuid4().hex[:8]}"
    create_topic(args.bootstrap_server, topic, args.partitions)
    producers = []
    for n in range(args.producers):
        producer = Producer({"bootstrap.servers": args.bootstrap_server,
                             **TRANSACTIONAL_PRODUCER_DEFAULTS,
                             "transactional.id": f"{topic}-{n}", **extra})
        producer.init_transactions(30)
        producers.append(producer)
    time.sleep(3)  # connections settle
    named: dict[tuple[int, int], str] = {}
    before, t0 = threads.snapshot(os.getpid(), named), time.monotonic()
    end = t0 + args.window
    every = 1 / args.transactions_per_s if args.transactions_per_s > 0 else None
    commits: list[float] = []

    def transactions(group: list[Producer]) -> None:
        """``group``'s transactions, on this thread, until the window ends."""
        next_round = t0
        while every is not None and time.monotonic() < end:
            for producer in group:
                producer.begin_transaction()
            for n in range(args.records_per_transaction):
                for producer in group:
                    producer.produce(topic, b"x" * 100)
                    producer.poll(0)
                time.sleep(max(0.0, next_round + every * (n + 1) / args.records_per_transaction
                               - time.monotonic()))
            for producer in group:
                started = time.monotonic()
                producer.commit_transaction(30)
                commits.append(time.monotonic() - started)
            next_round += every

    if every is None:
        time.sleep(args.window)
    elif args.thread_each:  # as tasks sharing a process do: a thread each
        workers = [threading.Thread(target=transactions, args=([p],)) for p in producers]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    else:
        transactions(producers)
    after, t1 = threads.snapshot(os.getpid(), named), time.monotonic()
    table = [r for r in threads.rows(before, after, t1 - t0)
             if r.group not in ("MainThread", "Thread-#")]
    print(f"{args.producers} producers, {args.transactions_per_s:g} transactions/s each, "
          f"settings {extra or 'default'}:")
    print(threads.markdown(table, args.producers, top=8))
    if commits:
        commits.sort()
        print(f"commit_transaction: median {commits[len(commits) // 2] * 1000:.1f} ms, "
              f"p99 {commits[int(len(commits) * 0.99)] * 1000:.1f} ms ({len(commits)})")
    for producer in producers:
        producer.flush(5)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
