"""The Java limit: Kafka's own ``ProducerPerformance`` writing the same records.

``org.apache.kafka.tools.ProducerPerformance`` (the ``kafka-tools`` jar of the
broker's version, from Maven Central) with the same value size, one topic
partition, the same durability (``acks=all``, idempotence, Kafka's default) and
transactions committed every T milliseconds (``--transaction-duration-ms``; the
tool has no "every N records" mode, so count-based modes have no Java figure).
``batch.size`` is 1 MiB, librdkafka's default, instead of Java's 16 KiB: the
limit is what one producer can do, not what its default tuning does.

The tool times itself (first send to the last commit or flush) and prints one
summary line; its rate is the figure. The JVM needs about a million records to
warm up (300,000 records of 100 B ran at 116-159k records/s, 3,000,000 at
596k), so a run writes at least :data:`MIN_BYTES` of values, whatever the
scenario's record count. CPU is the JVM's, from the operating
system, minus that of a one-record run with the same settings (JVM start, JIT,
``initTransactions``), so it is what the records cost.

That is the "count" method. ``run_java_limit_window`` ("window") runs the tool
without end instead and measures it as ``bench.limit.run_limit_window`` does
the librdkafka producer: the growth of the topic's last stable offsets over a
steady-state window after a warm-up (JVM start and JIT excluded that way:
the window opens no earlier than ``WARMUP_BYTES`` of values), no consumer,
the JVM's CPU over the window.
"""

from __future__ import annotations

import functools
import re
import resource
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from bench.common import (
    WARMUP_S,
    CommittedOffsets,
    Measurement,
    create_topic,
    measure_window,
    tree_cpu_seconds,
)
from bench.kafka_connect import maven_jars

VERSION = "4.1.1"
REPO = Path(__file__).resolve().parents[1]
LIBS = REPO / ".cache" / f"kafka-tools-{VERSION}" / "libs"
POM = REPO / "bench" / "kafka-tools" / "pom.xml"
MAIN = "org.apache.kafka.tools.ProducerPerformance"
# "300000 records sent, 612345.1 records/sec (58.40 MB/sec), ..."
_SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec", re.M)
# The limit's settings where they differ from Java's defaults (see the module doc).
MIN_BYTES = 300_000_000
PRODUCER_PROPS = {"acks": "all", "linger.ms": "5", "batch.size": "1048576",
                  "buffer.memory": "268435456"}


def fetch() -> Path:
    """The kafka-tools jars, resolved with Maven once and cached (the tests' helper
    that fetches Kafka Connect's)."""
    return maven_jars(POM, LIBS)


def _command(bootstrap: str, topic: str, records: int, value_size: int, every_ms: int | None,
             transactional: bool) -> list[str]:
    props = {"bootstrap.servers": bootstrap, **PRODUCER_PROPS}
    command = ["java", "-Xms512m", "-Xmx1g", "-cp", f"{fetch()}/*", MAIN, "--topic", topic,
               "--num-records", str(records), "--record-size", str(value_size),
               "--throughput", "-1",
               "--producer-props", *(f"{k}={v}" for k, v in props.items())]
    if transactional:
        command += ["--transaction-duration-ms", str(every_ms),
                    "--transactional-id", f"bench-java-{uuid.uuid4().hex[:8]}"]
    return command


def _run(bootstrap: str, records: int, value_size: int, every_ms: int | None,
         transactional: bool) -> tuple[float, float]:
    """(records/s as the tool reports it, CPU seconds of its JVM)."""
    topic = f"bench-java-limit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    command = _command(bootstrap, topic, records, value_size, every_ms, transactional)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    summaries = _SUMMARY.findall(done.stdout)
    if done.returncode != 0 or not summaries:
        raise RuntimeError(f"ProducerPerformance failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    sent, rate = summaries[-1]  # the last line is the whole run's
    if int(sent) != records:
        raise RuntimeError(f"ProducerPerformance sent {sent} of {records} records")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return float(rate), cpu


@functools.cache
def _fixed_cpu(bootstrap: str, value_size: int, every_ms: int | None,
               transactional: bool) -> float:
    """CPU seconds of a one-record run: what every run pays before its records."""
    return _run(bootstrap, 1, value_size, every_ms, transactional)[1]


def run_java_limit(bootstrap: str, records: int, value_size: int, every_ms: int | None,
                   transactional: bool = True) -> Measurement:
    """One run of at least ``records`` records (see :data:`MIN_BYTES`); ``every_ms`` is
    the transaction duration (ignored without transactions)."""
    if transactional and not every_ms:
        raise ValueError("ProducerPerformance commits by time only: give every_ms")
    fixed = _fixed_cpu(bootstrap, value_size, every_ms, transactional)
    records = max(records, MIN_BYTES // value_size)
    rate, cpu = _run(bootstrap, records, value_size, every_ms, transactional)
    seconds = records / rate
    # The tool does not count its commits: one per transaction duration, at least one.
    transactions = max(1, round(seconds * 1000 / every_ms)) if transactional and every_ms else 1
    return Measurement(records=records, value_size=value_size, seconds=seconds,
                       cpu_seconds=max(0.0, cpu - fixed), transactions=transactions)


# Records for a run without end: the tool stops at --num-records, which this
# many would take hours to reach (its latency sample array stays bounded).
ENDLESS = 10_000_000_000
# The window opens once this much of values is committed too: the JIT has
# warmed up by then (about a million records of 100 B, see the module doc).
WARMUP_BYTES = 100_000_000


def run_java_limit_window(bootstrap: str, window_s: float, value_size: int,
                          every_ms: int | None, transactional: bool = True,
                          partitions: int = 1, warmup_s: float = WARMUP_S) -> Measurement:
    """The tool writing without end, measured over a steady-state window by the
    topic's last stable offsets; killed once the window has closed."""
    if transactional and not every_ms:
        raise ValueError("ProducerPerformance commits by time only: give every_ms")
    topic = f"bench-java-limit-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions)
    command = _command(bootstrap, topic, ENDLESS, value_size, every_ms, transactional)
    started = time.time()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err)
        try:
            def alive() -> None:
                if proc.poll() is not None:
                    err.seek(0)
                    raise RuntimeError(f"ProducerPerformance exited ({proc.returncode}):\n"
                                       f"{err.read().decode()[-2000:]}")

            window = measure_window(CommittedOffsets(bootstrap, topic, partitions), window_s,
                                    lambda: tree_cpu_seconds(proc.pid), started=started,
                                    warmup_s=warmup_s,
                                    warmup_records=WARMUP_BYTES // value_size,
                                    timeout=120, check=alive)
        finally:
            proc.kill()
            proc.wait(30)
    transactions = (max(1, round(window.seconds * 1000 / every_ms))
                    if transactional and every_ms else 1)
    return Measurement(records=window.records, value_size=value_size, seconds=window.seconds,
                       cpu_seconds=window.cpu_seconds, transactions=transactions,
                       startup_seconds=window.ready_seconds)
