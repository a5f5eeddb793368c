"""Creating the internal topics the way Kafka Connect does.

* Creation is idempotent: a topic that already exists is used as it is (its
  partition count is not changed), except that an internal topic must be
  ``cleanup.policy=compact`` and the config topic must have exactly one
  partition; otherwise :class:`~connect_runtime.errors.ConfigException`, as
  Connect refuses to start on such topics.
* A replication factor of -1 means "the broker's default.replication.factor".
* Brokers acknowledge CreateTopics before every broker's metadata cache knows
  the topic, so after creating one we wait until metadata shows all of its
  partitions with a leader; callers can produce and consume right away.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from connect_runtime.errors import ConfigException, KafkaTimeoutError, translate_kafka_error
from connect_runtime.kafka.clients import read_end_offsets

if TYPE_CHECKING:
    from connect_runtime.config.worker_config import WorkerConfig

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 30.0
_METADATA_POLL_INTERVAL = 0.1

# Failures after which Connect assumes the topic exists (or will be created by
# someone allowed to) and goes on to look it up, rather than failing outright.
_ASSUME_EXISTS = {
    KafkaError.TOPIC_ALREADY_EXISTS,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
}
_BAD_TOPIC_SETTINGS = {
    KafkaError.INVALID_CONFIG,
    KafkaError.INVALID_REPLICATION_FACTOR,
    KafkaError.INVALID_PARTITIONS,
    KafkaError.POLICY_VIOLATION,
}


def ensure_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int = -1,
    compacted: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    config_key: str | None = None,
) -> int:
    """Create ``name`` unless it exists; return its actual partition count.

    ``compacted`` sets ``cleanup.policy=compact`` on creation and, for an
    existing topic, requires exactly that policy (ConfigException otherwise).
    ``config_key`` names the setting that chose the topic, for error messages.
    Blocks until metadata shows every partition with a leader, at most ``timeout``.
    """
    deadline = time.monotonic() + timeout
    created = _create(admin, name, partitions, replication_factor, compacted, timeout)
    count = wait_for_topic(admin, name, partitions if created else None,
                           max(0.0, deadline - time.monotonic()))
    if compacted and not created:
        verify_compact_policy(admin, name, config_key, max(1.0, deadline - time.monotonic()))
    return count


def _create(
    admin: AdminClient, name: str, partitions: int, replication_factor: int,
    compacted: bool, timeout: float,
) -> bool:
    """Try to create the topic; True if this call created it."""
    settings = {"cleanup.policy": "compact"} if compacted else {}
    new_topic = NewTopic(name, num_partitions=partitions,
                         replication_factor=replication_factor, config=settings)
    try:
        admin.create_topics([new_topic], operation_timeout=timeout,
                            request_timeout=timeout)[name].result()
    except KafkaException as e:
        code = e.args[0].code() if e.args and isinstance(e.args[0], KafkaError) else None
        if code in _ASSUME_EXISTS:
            log.debug("Not creating topic %s (%s); using it as it is", name, e)
            return False
        if code in _BAD_TOPIC_SETTINGS:
            raise ConfigException(f"Unable to create topic '{name}': {e}") from e
        raise translate_kafka_error(e, f"create topic {name}") from e
    log.info("Created topic %s (partitions=%d, replication factor=%s, compacted=%s)",
             name, partitions, replication_factor if replication_factor > 0 else "default",
             compacted)
    return True


def wait_for_topic(
    admin: AdminClient, name: str, partitions: int | None, timeout: float
) -> int:
    """Wait until metadata shows ``name`` with ``partitions`` partitions (any count if
    None), each with a leader; return the partition count. KafkaTimeoutError on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        count = _ready_partition_count(admin, name, min(5.0, max(0.5, timeout)))
        if count and (partitions is None or count >= partitions):
            # Leaders in metadata may not serve requests yet; this retries until they do.
            read_end_offsets(admin, name, timeout=max(0.1, deadline - time.monotonic()),
                             partitions=list(range(count)))
            return count
        if time.monotonic() >= deadline:
            raise KafkaTimeoutError(
                f"Topic '{name}' not visible in metadata with "
                f"{partitions or 'its'} partitions after {timeout:.1f}s")
        time.sleep(_METADATA_POLL_INTERVAL)


def _ready_partition_count(admin: AdminClient, name: str, timeout: float) -> int:
    """Partition count if every partition has a leader, else 0 (not ready or missing)."""
    try:
        topic = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
    except KafkaException as e:
        log.debug("Metadata request for %s failed: %s", name, e)
        return 0
    if topic is None or topic.error is not None or not topic.partitions:
        return 0
    if any(p.leader < 0 for p in topic.partitions.values()):
        return 0
    return len(topic.partitions)


def verify_compact_policy(
    admin: AdminClient, name: str, config_key: str | None, timeout: float
) -> None:
    """Raise ConfigException unless ``name`` has ``cleanup.policy=compact`` and nothing else.

    Like Connect, skip the check (with a log line) if the configs cannot be read.
    """
    resource = ConfigResource(ResourceType.TOPIC, name)
    try:
        entries = admin.describe_configs([resource], request_timeout=timeout)[resource].result()
    except KafkaException as e:
        log.info("Cannot verify cleanup.policy of topic %s (%s); assuming compact", name, e)
        return
    entry = entries.get("cleanup.policy")
    policies = {p.strip() for p in str(entry.value if entry else "").split(",") if p.strip()}
    if policies != {"compact"}:
        found = ",".join(sorted(policies)) or "<none>"
        raise ConfigException(
            f"Topic '{name}'{_via(config_key)} must have cleanup.policy=compact so that it "
            f"keeps the latest record of every key, but it has cleanup.policy={found}. "
            f"Use a topic with cleanup.policy=compact.")


def _via(config_key: str | None) -> str:
    return f" (set by '{config_key}')" if config_key else ""


@dataclass(frozen=True)
class InternalTopicSettings:
    """Names and shapes of the worker's internal topics (Connect's worker keys)."""

    config_topic: str
    offsets_topic: str
    status_topic: str
    config_replication_factor: int = -1
    offsets_partitions: int = 25
    offsets_replication_factor: int = -1
    status_partitions: int = 5
    status_replication_factor: int = -1

    @classmethod
    def from_worker_config(cls, config: WorkerConfig) -> InternalTopicSettings:
        v = config.values
        return cls(
            config_topic=str(v["config.storage.topic"]),
            offsets_topic=str(v["offset.storage.topic"]),
            status_topic=str(v["status.storage.topic"]),
            config_replication_factor=int(v["config.storage.replication.factor"]),
            offsets_partitions=int(v["offset.storage.partitions"]),
            offsets_replication_factor=int(v["offset.storage.replication.factor"]),
            status_partitions=int(v["status.storage.partitions"]),
            status_replication_factor=int(v["status.storage.replication.factor"]),
        )


def ensure_internal_topics(
    admin: AdminClient, settings: InternalTopicSettings, timeout: float = 60.0
) -> None:
    """Create (or check) the config, offsets and status topics.

    The config topic must have exactly one partition: its records are a
    write-ahead log whose order matters across keys (task configs before their
    commit record, task-count records after them).
    """
    count = ensure_topic(admin, settings.config_topic, 1, settings.config_replication_factor,
                         timeout=timeout, config_key="config.storage.topic")
    if count != 1:
        raise ConfigException(
            f"Topic '{settings.config_topic}' supplied via the 'config.storage.topic' property "
            f"must have a single partition to keep connector configurations consistent, "
            f"but it has {count} partitions.")
    ensure_topic(admin, settings.offsets_topic, settings.offsets_partitions,
                 settings.offsets_replication_factor, timeout=timeout,
                 config_key="offset.storage.topic")
    ensure_topic(admin, settings.status_topic, settings.status_partitions,
                 settings.status_replication_factor, timeout=timeout,
                 config_key="status.storage.topic")
