"""``connect-runtime tail`` run as a user runs it, against the session's broker."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import orjson
from confluent_kafka import Producer
from support.kafka import create_topic


def _tail(bootstrap: str, topic: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "connect_runtime.cli", "tail", "--bootstrap-server", bootstrap,
         "--topic", topic, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_tail_waits_for_a_topic_that_does_not_exist_yet(kafka_bootstrap: str) -> None:
    """The README starts tail right after creating a connector, which creates its
    topic on its first write: tail must wait for the topic, not fail."""
    topic = f"tail-later-{uuid.uuid4().hex[:8]}"
    proc = _tail(kafka_bootstrap, topic, "--max", "2")
    try:
        time.sleep(3)  # tail is running (or, before the fix, has failed) by now
        create_topic(kafka_bootstrap, topic)
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        for n in range(2):
            producer.produce(topic, key=str(n), value=orjson.dumps({"n": n}))
        assert producer.flush(30) == 0
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert [orjson.loads(line)["value"] for line in out.splitlines()] == ['{"n":0}', '{"n":1}']
    assert f"tail: topic '{topic}' does not exist yet; waiting for it" in err


def test_tail_gives_up_waiting_after_its_timeout(kafka_bootstrap: str) -> None:
    proc = _tail(kafka_bootstrap, f"tail-never-{uuid.uuid4().hex[:8]}", "--timeout", "2")
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out) == (0, ""), err
    assert "does not exist yet" in err
