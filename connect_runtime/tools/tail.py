"""``connect-runtime tail``: print a topic's committed records, one JSON line each."""

from __future__ import annotations

import sys
import time
import uuid

import orjson
from confluent_kafka import Consumer, KafkaError


def tail(bootstrap: str, topic: str, max_records: int, idle_timeout_s: float) -> int:
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"connect-runtime-tail-{uuid.uuid4().hex[:8]}",
        # Only what committed transactions made visible: what downstream consumers see.
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    seen = 0
    last = time.monotonic()
    try:
        while not max_records or seen < max_records:
            msg = consumer.poll(0.5)
            if msg is None:
                if idle_timeout_s and time.monotonic() - last > idle_timeout_s:
                    break
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                print(f"tail: {error}", file=sys.stderr)
                return 1
            last = time.monotonic()
            seen += 1
            key = msg.key()
            line = {
                "partition": msg.partition(), "offset": msg.offset(),
                "key": key.decode("utf-8", "replace") if key is not None else None,
                "value": (msg.value() or b"").decode("utf-8", "replace"),
            }
            sys.stdout.write(orjson.dumps(line).decode() + "\n")
            sys.stdout.flush()
    finally:
        consumer.close()
    return 0
