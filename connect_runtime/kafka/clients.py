"""Factories for confluent-kafka clients with the runtime's defaults.

Every factory takes a *base* librdkafka config (usually
``WorkerConfig.client_config("producer" | "consumer" | "admin")``: bootstrap
servers plus the worker's prefixed overrides) and optional *overrides* on top.
A few settings are then forced because the runtime's correctness depends on them:

* producers: ``partitioner=murmur2_random``. librdkafka's default (CRC32) puts a
  key on a different partition than the Java client does; on a compacted topic
  that the Java runtime may also write, a key must always land on the same
  partition whoever wrote it, or compaction and "later record wins" break.
* consumers: ``enable.auto.commit=false`` and ``auto.offset.reset=earliest``:
  internal topics are always read in full, with ``assign()``, never as a group.

Client errors and librdkafka log lines go to :mod:`logging` rather than stderr
(the lines through :class:`~connect_runtime.kafka.client_log.ClientLog`, which
demotes the retries of InitProducerId that restarts and fencing cause).
Construction errors (``KafkaException``) are translated to our error tree here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from connect_runtime.errors import (
    ConnectError,
    KafkaAuthenticationError,
    KafkaClientError,
    KafkaTimeoutError,
    translate_kafka_error,
)
from connect_runtime.kafka.client_log import ClientLog
from connect_runtime.security.kafka_clients import CLIENT_CLASSES

if TYPE_CHECKING:
    from connect_runtime.config.worker_config import WorkerConfig

log = logging.getLogger(__name__)

# Kafka Connect's Java clients hash keys with murmur2; "murmur2_random" is
# librdkafka's Java-compatible partitioner (null keys go to a random partition).
JAVA_COMPATIBLE_PARTITIONER = "murmur2_random"

# librdkafka refuses to build a Consumer without group.id even when it will only
# ever use assign(); this id is never joined and never committed to.
ASSIGN_ONLY_GROUP_ID = "connect-runtime-assign-only"

DEFAULT_REQUEST_TIMEOUT = 30.0
_RETRY_BACKOFF_MIN, _RETRY_BACKOFF_MAX = 0.05, 1.0
# Leadership moving or not yet established; the request succeeds once it settles.
_TRANSIENT_CODES = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.NOT_COORDINATOR,
    KafkaError._TRANSPORT,
    # Stale leadership metadata, e.g. while several workers create the same new
    # internal topic at once; the next metadata refresh resolves it.
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
})

ACCESS_CHECK_TIMEOUT = 30.0
_LOG_CRITICAL_ONLY = 2  # librdkafka's log_level takes syslog(3) levels

ClientConfig = Mapping[str, Any]


@dataclass(frozen=True)
class ClientSettings:
    """How to reach one Kafka cluster: bootstrap servers plus per-client-kind overrides.

    Overrides use librdkafka property names (the worker's ``producer.*``,
    ``consumer.*`` and ``admin.*`` keys with the prefix removed).
    """

    bootstrap_servers: str
    producer_overrides: Mapping[str, Any] = field(default_factory=dict)
    consumer_overrides: Mapping[str, Any] = field(default_factory=dict)
    admin_overrides: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_worker_config(cls, config: WorkerConfig) -> ClientSettings:
        def overrides(kind: str) -> dict[str, Any]:
            conf = dict(config.client_config(kind))
            conf.pop("bootstrap.servers", None)
            return conf

        return cls(config.bootstrap_servers, overrides("producer"), overrides("consumer"),
                   overrides("admin"))

    @classmethod
    def of(
        cls,
        bootstrap_servers: str,
        producer_overrides: Mapping[str, Any] | None = None,
        consumer_overrides: Mapping[str, Any] | None = None,
        admin_overrides: Mapping[str, Any] | None = None,
    ) -> ClientSettings:
        """Like the constructor, with None meaning "no overrides"."""
        return cls(bootstrap_servers, dict(producer_overrides or {}),
                   dict(consumer_overrides or {}), dict(admin_overrides or {}))

    def _base(self, overrides: Mapping[str, Any]) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers, **overrides}

    def producer_config(self) -> dict[str, Any]:
        return self._base(self.producer_overrides)

    def consumer_config(self) -> dict[str, Any]:
        return self._base(self.consumer_overrides)

    def admin_config(self) -> dict[str, Any]:
        return self._base(self.admin_overrides)


def error_logger(logger: logging.Logger, client: str) -> Callable[[KafkaError], None]:
    """An ``error_cb`` that logs client-level errors (fatal ones at ERROR) instead of printing."""

    def on_error(err: KafkaError) -> None:
        level = logging.ERROR if err.fatal() else logging.WARNING
        logger.log(level, "%s: %s: %s", client, err.name(), err.str())

    return on_error


def _merge(
    base: ClientConfig, overrides: ClientConfig | None, client_id: str | None
) -> dict[str, Any]:
    conf: dict[str, Any] = dict(base)
    conf.update(overrides or {})
    if client_id and "client.id" not in conf:
        conf["client.id"] = client_id
    conf.setdefault("logger", ClientLog(log))
    conf.setdefault("error_cb", error_logger(log, str(conf.get("client.id", "kafka client"))))
    return conf


def producer_config(
    base: ClientConfig,
    overrides: ClientConfig | None = None,
    *,
    transactional_id: str | None = None,
    client_id: str | None = None,
) -> dict[str, Any]:
    """The effective producer config: idempotent by default, Java-compatible partitioner.

    With ``transactional_id`` the producer is transactional (which implies
    idempotence); otherwise ``enable.idempotence`` defaults to true so retries
    neither duplicate nor reorder records.
    """
    conf = _merge(base, overrides, client_id)
    conf.setdefault("enable.idempotence", True)
    if conf.get("partitioner", JAVA_COMPATIBLE_PARTITIONER) != JAVA_COMPATIBLE_PARTITIONER:
        log.warning("Ignoring partitioner=%s: internal topics need %s (Java-compatible)",
                    conf["partitioner"], JAVA_COMPATIBLE_PARTITIONER)
    conf["partitioner"] = JAVA_COMPATIBLE_PARTITIONER
    if transactional_id is not None:
        conf["transactional.id"] = transactional_id
        conf["enable.idempotence"] = True
    return conf


def create_producer(
    base: ClientConfig,
    overrides: ClientConfig | None = None,
    *,
    transactional_id: str | None = None,
    client_id: str | None = None,
) -> Producer:
    """A producer built from :func:`producer_config`. Does not call ``init_transactions``."""
    conf = producer_config(base, overrides, transactional_id=transactional_id,
                           client_id=client_id)
    return _construct(Producer, conf, "create producer")


def consumer_config(
    base: ClientConfig,
    overrides: ClientConfig | None = None,
    *,
    isolation_level: str = "read_committed",
    client_id: str | None = None,
) -> dict[str, Any]:
    """The effective config of an assign-only consumer that reads a topic in full."""
    if isolation_level not in ("read_committed", "read_uncommitted"):
        raise ValueError(f"isolation_level must be read_committed or read_uncommitted, "
                         f"not {isolation_level!r}")
    conf = _merge(base, overrides, client_id)
    conf.setdefault("group.id", ASSIGN_ONLY_GROUP_ID)
    conf["enable.auto.commit"] = False
    conf["auto.offset.reset"] = "earliest"
    conf["isolation.level"] = isolation_level
    return conf


def create_consumer(
    base: ClientConfig,
    overrides: ClientConfig | None = None,
    *,
    isolation_level: str = "read_committed",
    client_id: str | None = None,
) -> Consumer:
    """A consumer built from :func:`consumer_config`; the caller ``assign()``s partitions."""
    conf = consumer_config(base, overrides, isolation_level=isolation_level,
                           client_id=client_id)
    return _construct(Consumer, conf, "create consumer")


def create_admin(
    base: ClientConfig, overrides: ClientConfig | None = None, *, client_id: str | None = None
) -> AdminClient:
    """An admin client with logging wired to :mod:`logging`."""
    return _construct(AdminClient, _merge(base, overrides, client_id), "create admin client")


def _construct(cls: Any, conf: dict[str, Any], context: str) -> Any:
    try:
        return cls(conf)
    except KafkaException as e:
        raise translate_kafka_error(e, context) from e


def check_cluster_access(
    conf: ClientConfig, kind: str = "admin", timeout: float = ACCESS_CHECK_TIMEOUT,
    stop: threading.Event | None = None,
) -> bool:
    """First contact: return True once the brokers answer a metadata request
    from a ``kind`` client (producer, consumer, admin) built from ``conf``;
    False if ``stop`` is set first (it is looked at about once a second).

    Raises KafkaAuthenticationError as soon as they refuse its SASL credentials
    or TLS handshake (within a second or so). Without this, a refused login is
    invisible: the worker's admin client is never polled, so librdkafka's error
    is never delivered, and every request just times out.

    Raises KafkaClientError when librdkafka has reported every bootstrap broker
    down for a second (connection refused, name not resolved), and
    KafkaTimeoutError when the brokers do not answer within ``timeout`` for
    another reason; both messages name ``bootstrap.servers`` and the latest
    error of each kind librdkafka reported. The refused login is looked for
    first: a broker that refuses one closes the connection, so "all brokers
    down" follows it.
    """
    errors: list[KafkaError] = []
    probe: dict[str, Any] = {**conf, "error_cb": errors.append}
    probe.setdefault("logger", log)
    # What goes wrong reaches error_cb and is reported once, in the error raised
    # below; librdkafka would also log each failed connection (several a second).
    probe.setdefault("log_level", _LOG_CRITICAL_ONLY)
    probe.setdefault("client.id", f"connect-runtime-access-check-{kind}")
    if kind == "consumer":
        probe.setdefault("group.id", ASSIGN_ONLY_GROUP_ID)
    client = _construct(CLIENT_CLASSES[kind], probe, f"create {kind} client")
    where = conf.get("bootstrap.servers")
    deadline = time.monotonic() + timeout
    all_down = False  # seen in an earlier round: a refused login had a round to show
    try:
        while True:
            remaining = deadline - time.monotonic()
            try:
                client.list_topics(timeout=min(1.0, max(remaining, 0.1)))
                return True
            except KafkaException:
                pass
            # librdkafka reports a refused login or TLS handshake through error_cb
            # only, and only when the client is polled; it then retries forever.
            client.poll(0)
            for error in errors:
                translated = translate_kafka_error(
                    KafkaException(error), f"Kafka at {where} refused the {kind} client: check "
                    f"security.protocol, sasl.mechanism and the credentials (sasl.jaas.config, "
                    f"or sasl.username and sasl.password), or the TLS settings")
                if isinstance(translated, KafkaAuthenticationError):
                    raise translated
            if stop is not None and stop.is_set():
                return False
            latest = {e.name(): e.str() for e in errors}  # later errors overwrite
            seen = "; ".join(f"{name}: {text}" for name, text in sorted(latest.items()))
            if all_down:
                raise KafkaClientError(
                    f"no answer from Kafka at bootstrap.servers={where} to the {kind} "
                    f"client: {seen}", code=KafkaError._ALL_BROKERS_DOWN)
            all_down = "_ALL_BROKERS_DOWN" in latest
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"no answer from Kafka at bootstrap.servers={where} to the {kind} "
                    f"client within {timeout:.0f} s: {seen or 'no error reported'}",
                    code=KafkaError._TIMED_OUT)
    finally:
        if isinstance(client, Consumer):
            client.close()


def topic_partitions(
    admin: AdminClient, topic: str, timeout: float = DEFAULT_REQUEST_TIMEOUT
) -> list[int]:
    """The partition ids of ``topic`` from cluster metadata; [] if the topic does not exist."""
    try:
        metadata = admin.list_topics(topic=topic, timeout=timeout)
    except KafkaException as e:
        raise translate_kafka_error(e, f"list metadata of topic {topic}") from e
    info = metadata.topics.get(topic)
    if info is None or info.error is not None:
        return []
    return sorted(info.partitions)


def read_end_offsets(
    admin: AdminClient,
    topic: str,
    isolation: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
    timeout: float = DEFAULT_REQUEST_TIMEOUT,
    partitions: list[int] | None = None,
) -> dict[int, int]:
    """End offset of every partition of ``topic`` (or of ``partitions``), by partition id.

    READ_UNCOMMITTED (the default) returns the high watermark, which counts the
    records of still-open transactions: reading up to it with a read_committed
    consumer therefore waits for those transactions to be resolved (KIP-618
    "Offset reads"). READ_COMMITTED returns the last stable offset instead.

    Retriable errors are retried until ``timeout``: a new topic's partitions
    are in metadata a moment before their leader serves requests, and answer
    NOT_LEADER_FOR_PARTITION meanwhile (Connect retries here too). Raises
    ConnectError if the topic does not exist.
    """
    deadline = time.monotonic() + timeout
    if partitions is None:
        partitions = topic_partitions(admin, topic, timeout)
        if not partitions:
            raise ConnectError(f"Topic '{topic}' does not exist or has no partitions")
    specs = {TopicPartition(topic, p): OffsetSpec.latest() for p in partitions}
    backoff = _RETRY_BACKOFF_MIN
    while True:
        remaining = deadline - time.monotonic()
        try:
            futures = admin.list_offsets(specs, isolation_level=isolation,
                                         request_timeout=max(remaining, 0.1))
            return {tp.partition: int(f.result().offset) for tp, f in futures.items()}
        except KafkaException as e:
            if not _retriable(e) or remaining <= backoff:
                raise translate_kafka_error(e, f"list end offsets of topic {topic}") from e
            log.debug("Retrying end offsets of %s after %s", topic, e)
            if _stale_leadership(e):
                _refresh_metadata(admin, topic, min(remaining, 5.0))
        time.sleep(backoff)
        backoff = min(backoff * 2, _RETRY_BACKOFF_MAX)


_STALE_LEADERSHIP = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH,
})


def _stale_leadership(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and err.code() in _STALE_LEADERSHIP


def _refresh_metadata(admin: AdminClient, topic: str, timeout: float) -> None:
    """Ask for ``topic``'s metadata now: librdkafka's admin client sends the leader
    epoch it has cached with ListOffsets and refreshes that cache only every
    ``topic.metadata.refresh.interval.ms`` (5 minutes). After the broker bumps
    its partitions' leader epochs (a KRaft broker fenced and unfenced by its
    controller under load, say), every retry answered FENCED_LEADER_EPOCH until
    then, and a worker could not take over as leader for minutes."""
    try:
        admin.list_topics(topic, timeout=max(timeout, 0.1))
    except KafkaException as e:
        log.debug("Metadata refresh of %s failed: %s", topic, e)


def _retriable(e: KafkaException) -> bool:
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _TRANSIENT_CODES)
