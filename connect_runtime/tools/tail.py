"""``connect-runtime tail``: print a topic's committed records, one JSON line each."""

from __future__ import annotations

import sys
import time
import uuid

import orjson
from confluent_kafka import Consumer, KafkaError


def tail(bootstrap: str, topic: str, max_records: int, idle_timeout_s: float) -> int:
    """Print ``topic``'s committed records, one JSON line each; 0 when done, 1 on an error.

    A topic that does not exist yet is waited for (saying so once on stderr), as
    Kafka's console consumer does: a connector creates its topic on its first
    write, so a ``tail`` started right after creating the connector would
    otherwise fail. ``idle_timeout_s`` (0: none) bounds that wait too.
    """
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"connect-runtime-tail-{uuid.uuid4().hex[:8]}",
        # Only what committed transactions made visible: what downstream consumers see.
        "isolation.level": "read_committed",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    seen = 0
    last = time.monotonic()
    try:
        if not _wait_for_topic(consumer, topic, idle_timeout_s):
            return 0
        consumer.subscribe([topic])
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


def _wait_for_topic(consumer: Consumer, topic: str, idle_timeout_s: float) -> bool:
    """Whether ``topic`` exists, waiting for it (``idle_timeout_s``, 0: no limit).

    Subscribing first would not do: librdkafka reports a subscribed topic that
    does not exist as an error (``Subscribed topic not available``), and would
    notice its creation only at a later metadata refresh
    (``topic.metadata.refresh.interval.ms``, 5 minutes by default).
    """
    start = time.monotonic()
    said = False
    while True:
        found = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if found is not None and found.error is None:
            return True
        if not said:
            print(f"tail: topic {topic!r} does not exist yet; waiting for it", file=sys.stderr)
            said = True
        if idle_timeout_s and time.monotonic() - start > idle_timeout_s:
            return False
        time.sleep(0.5)
