"""Source task startup on the executor, in KIP-618's order ("Source task startup").

0. Resolve the ``${provider:path:key}`` variables of the connector and task
   configs with the worker's config providers (``TaskSpec.config_providers``),
   here on the executor: the spec carries placeholders, never secrets, so the
   executor needs the same secret files and variables as workers. A variable
   that cannot be resolved fails the task naming its key.
1. Ask the leader to fence the previous generation: ``PUT /connectors/<c>/fence``.
   Failure: the task FAILS with the leader's message as its trace.
2. Read the config topic to the end; a task-count record must follow the latest
   task configs and the generation must still be ours, else abandon startup.
3. Create the connector's own offsets topic if it uses one.
4. Create the transactional producer and ``init_transactions()`` (this also
   aborts whatever a previous instance of this task left open).
5. Read the config topic to the end again; abandon if a newer generation exists.
6. Build converters, read offsets, instantiate the task, ``task.start(config)``
   (:class:`TaskFactory`, kept: a task that rewinds its transaction is replaced
   by a new instance that reads the offsets committed by then).

"Abandon" is not failure: a newer generation of tasks replaces this one, so the
slot ends quietly and its status is left to the newer generation.

At-least-once mode (``exactly.once.source.support`` is ``disabled`` or
``preparing``; Kafka Connect's regular source task): steps 1, 2 and 5 are
skipped (no fencing, no generation checks: nothing is transactional, so there is
nothing to fence), and step 4 creates an idempotent producer *without* a
``transactional.id``. Offsets are still read ``read_committed`` in step 6: that
is what Connect does for regular tasks too (``isolation.level`` defaults to
read_committed for their offset consumers), and after a soft downgrade from
``enabled`` it keeps offsets of aborted transactions out of the view. The
``transaction.boundary`` keys do not apply: offsets are flushed every
``offset.flush.interval.ms``; a non-default boundary is logged once at start.
"""

from __future__ import annotations

import dataclasses
import http.client
import importlib
import json
import logging
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from connect_runtime.api.config_def import originals_with_prefix
from connect_runtime.api.task import OffsetStorageReader, SourceTask, TransactionContext
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.converters import (
    Converter,
    HeaderConverter,
    load_converter,
    load_header_converter,
)
from connect_runtime.errors import (
    ConfigException,
    StartupAbandoned,
    StartupFailed,
    translate_kafka_error,
)
from connect_runtime.kafka.clients import create_admin, create_producer
from connect_runtime.kafka.topics import ensure_topic
from connect_runtime.protocol import signing
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.security.redaction import Redactor
from connect_runtime.security.tls import client_context
from connect_runtime.storage.config_store import read_config_snapshot
from connect_runtime.storage.offsets.reader import TaskOffsetStorageReader
from connect_runtime.task import shared_reads
from connect_runtime.task.boundaries import BoundaryPolicy, TaskTransactionContext
from connect_runtime.task.error_handler import ErrorHandler

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from connect_runtime.protocol.task_spec import TaskSpec
    from connect_runtime.task.record_sender import TransformationChain

log = logging.getLogger(__name__)

# Kafka Connect's internal request timeout; fencing may wait on transaction coordinators.
FENCE_REQUEST_TIMEOUT_S = 90.0
CONFIG_READ_TIMEOUT_S = 60.0
DEFAULT_TRANSACTION_TIMEOUT_MS = 60000

PRODUCER_DEFAULTS: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    # A deep local queue lets poll batches of 10k+ records go out without
    # BufferError round trips.
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}
"""A task producer's settings before the worker's ``producer.*`` and the
connector's overrides (at-least-once tasks: these alone)."""

TRANSACTIONAL_PRODUCER_DEFAULTS: dict[str, Any] = {
    **PRODUCER_DEFAULTS,
    "transaction.timeout.ms": DEFAULT_TRANSACTION_TIMEOUT_MS,
    # linger.ms stays 5 here, for now. Nothing a transaction writes is visible
    # before its commit, so lingering until it (1000 ms) looked free: an idle
    # task's librdkafka threads used a third of the CPU and the loop alone ran
    # up to 2x faster at a 100 ms interval; but 40 busy tasks in the worker then
    # fell to half their rate with librdkafka's broker threads at 0.5-1.3 cores,
    # which no benchmark without the worker reproduced (docs/benchmarks.md#idle-cost).
}
"""What exactly-once task producers start from: :data:`PRODUCER_DEFAULTS` and a
transaction timeout."""

DEFAULT_CONVERTER = "connect_runtime.converters.JsonConverter"
DEFAULT_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


@dataclass
class StartedTask:
    """A started task and what its loop needs.

    ``mode`` (the spec's) picks the loop (:func:`~connect_runtime.task.slot.loop_for`).
    ``EXACTLY_ONCE``: ``boundary`` is set, and the loop also uses
    ``transaction_timeout_s``. ``AT_LEAST_ONCE``: ``boundary`` is None, and the loop
    uses ``offset_flush_interval_s`` and ``offset_flush_timeout_s`` instead.
    ``factory`` started ``task`` and starts its replacements (:meth:`rewound`).
    """

    mode: TaskMode
    task: SourceTask
    producer: Producer
    offsets_topic: str
    connector_offsets_topic: str | None
    key_converter: Converter
    value_converter: Converter
    boundary: BoundaryPolicy | None
    transaction_timeout_s: float
    create_topic: Callable[[str], None] | None = None
    offset_flush_interval_s: float = 60.0
    offset_flush_timeout_s: float = 5.0
    header_converter: HeaderConverter | None = None
    transforms: TransformationChain | None = None
    errors: ErrorHandler | None = None
    factory: TaskFactory | None = None

    def rewound(self) -> StartedTask:
        """A new, started instance of the task in place of ``task``, which the
        caller has stopped after the loop gave up its transaction (Outcome.
        REWOUND). The new instance reads the offsets committed by now and gets a
        new transaction context; the producer, converters, transforms and error
        handler stay. Raises what the new instance's ``start`` raises."""
        if self.factory is None:
            raise ValueError("this task was not started by a TaskFactory; it cannot rewind")
        task, boundary = self.factory.start()
        return dataclasses.replace(self, task=task, boundary=boundary)


@dataclass(frozen=True, kw_only=True)
class TaskFactory:
    """Starts instances of the task class: the end of step 6.

    ``read_offsets()`` reads the committed offsets afresh (a snapshot reader, see
    :class:`~connect_runtime.storage.offsets.reader.TaskOffsetStorageReader`).
    ``boundary_kind`` is the connector's ``transaction.boundary`` in exactly-once
    mode and None in at-least-once mode (no boundary and, as in Connect, no
    transaction context).
    """

    task_class: type[SourceTask]
    config: dict[str, str]
    read_offsets: Callable[[], OffsetStorageReader]
    boundary_kind: str | None
    interval_ms: int

    def start(self) -> tuple[SourceTask, BoundaryPolicy | None]:
        """A new instance, ``initialize``d and ``start``ed, and the boundary policy
        over its transaction context. Raises what ``start`` raises."""
        reader = self.read_offsets()
        txn = TaskTransactionContext() if self.boundary_kind == "connector" else None
        task = self.task_class()
        task.initialize(TaskContext(dict(self.config), reader, txn))
        task.start(dict(self.config))
        if self.boundary_kind is None:
            return task, None
        return task, BoundaryPolicy(self.boundary_kind, self.interval_ms, txn)


class TaskContext:
    """The :class:`~connect_runtime.api.task.SourceTaskContext` given to the task.

    Any offsets reader and transaction context will do, so the connector tests
    and the loop benchmark hand tasks this same class with in-memory ones.
    """

    def __init__(self, config: dict[str, str], reader: OffsetStorageReader,
                 txn: TransactionContext | None = None) -> None:
        self._config = config
        self._reader = reader
        self._txn = txn

    @property
    def config(self) -> dict[str, str]:
        return self._config

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._reader

    def transaction_context(self) -> TransactionContext | None:
        return self._txn


def request_fencing(spec: TaskSpec) -> None:
    """Step 1. Raises StartupFailed with the leader's answer if it is not 200.

    The standard library's client, not httpx: importing httpx costs every task
    process about 8 MB (it brings its command line's rich, pygments and click),
    for one request per task start. Like the slot channel, it goes to the worker
    directly, whatever proxy the executor's environment names."""
    url = f"{spec.worker_url}/connectors/{quote(spec.connector, safe='')}/fence"
    body = b""
    headers = signing.sign_headers(spec.session_key, spec.session_key_algorithm, body)
    tls = spec.rest_tls
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({}),
        urllib.request.HTTPSHandler(context=client_context(tls) if tls is not None else None))
    request = urllib.request.Request(url, data=body, headers=headers, method="PUT")
    try:
        with opener.open(request, timeout=FENCE_REQUEST_TIMEOUT_S) as response:
            status, text = response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8", "replace")
    except (OSError, http.client.HTTPException) as e:
        raise StartupFailed(f"Zombie fencing request to the leader at {url} failed: {e!r}") from e
    if status != 200:
        try:
            answer = json.loads(text)
            message = answer.get("message", text) if isinstance(answer, dict) else text
        except ValueError:
            message = text
        raise StartupFailed(
            f"Zombie fencing request to the leader at {url} failed with HTTP "
            f"{status}; task startup aborted. Leader said:\n{message}")


def check_generation(spec: TaskSpec, step: str) -> None:
    """Steps 2 and 5: the config topic must still hold our generation, fenced.

    The read is shared with the tasks of this process that ask at the same time
    (:mod:`~connect_runtime.task.shared_reads`): each still gets a read that
    started after it asked."""
    snapshot = shared_reads.CONFIG_READS.get(
        ("config", spec.bootstrap_servers, spec.config_topic,
         shared_reads.settings_key(spec.consumer_overrides, spec.admin_overrides)),
        lambda: read_config_snapshot(
            spec.bootstrap_servers, spec.config_topic, spec.consumer_overrides,
            admin_overrides=spec.admin_overrides, timeout=CONFIG_READ_TIMEOUT_S))
    current = snapshot.config_generation(spec.connector)
    if current != spec.generation:
        raise StartupAbandoned(
            f"{step}: task configs of {spec.connector} changed (generation {spec.generation} "
            f"-> {current}); a newer generation replaces task {spec.task_label}")
    if snapshot.pending_fencing(spec.connector):
        raise StartupAbandoned(
            f"{step}: no task-count record follows the latest task configs of "
            f"{spec.connector}; zombie fencing has not completed")


def producer_config(spec: TaskSpec, connector_config: ConnectorConfig,
                    transactional: bool = True) -> dict[str, Any]:
    """Task producer settings: defaults < worker producer.* < connector overrides.

    ``transactional``: ``transactional.id`` is always ``<group.id>-<connector>-<task>``
    (KIP-618). Otherwise (at-least-once) there is none, whatever the user set, and
    no ``transaction.timeout.ms`` default; idempotence and ``acks=all`` stay the
    defaults, which the user may override (as in Connect).
    """
    conf: dict[str, Any] = {
        "bootstrap.servers": spec.bootstrap_servers,
        **(TRANSACTIONAL_PRODUCER_DEFAULTS if transactional else PRODUCER_DEFAULTS),
    }
    conf.update(spec.producer_overrides)
    conf.update(connector_config.client_overrides("producer"))
    conf["client.id"] = f"connect-{spec.transactional_id}"
    if transactional:
        conf["transactional.id"] = spec.transactional_id
    elif conf.pop("transactional.id", None) is not None:
        log.warning("Task %s: ignoring the producer's transactional.id: with "
                    "exactly.once.source.support=%s task producers are not transactional",
                    spec.task_label, spec.eos_support)
    return conf


def create_transactional_producer(spec: TaskSpec, conf: dict[str, Any]) -> Producer:
    """Step 4."""
    producer = create_producer(conf, transactional_id=spec.transactional_id)
    timeout = float(conf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)) / 1000
    try:
        producer.init_transactions(max(timeout, 30.0))
    except Exception as e:
        raise translate_kafka_error(e, f"init_transactions for task {spec.task_label}") from e
    return producer


def create_idempotent_producer(conf: dict[str, Any]) -> Producer:
    """Step 4 of at-least-once startup: no transactions, so nothing to initialise."""
    return create_producer(conf)


def load_task_class(path: str) -> type[SourceTask]:
    module_name, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError, ValueError) as e:
        raise ConfigException(f"cannot import task class: {e}", name="task.class",
                              value=path) from e
    if not (isinstance(cls, type) and issubclass(cls, SourceTask)):
        raise ConfigException("not a SourceTask subclass", name="task.class", value=path)
    return cls


def _converter_choice(spec: TaskSpec, connector_config: dict[str, str], kind: str,
                      default: str) -> tuple[str, dict[str, str]]:
    """(class name, sub-config) of converter key ``kind``: the connector's if it sets
    one, else the worker's, else ``default``; the sub-config comes with the choice."""
    source = connector_config if connector_config.get(kind) else spec.worker_converters
    return source.get(kind) or default, originals_with_prefix(source, kind + ".")


def _converters(spec: TaskSpec, connector_config: dict[str, str]) -> tuple[Converter, Converter]:
    key, value = (load_converter(*_converter_choice(spec, connector_config, kind,
                                                    DEFAULT_CONVERTER),
                                 is_key=kind == "key.converter", config_key=kind)
                  for kind in ("key.converter", "value.converter"))
    return key, value


def _header_converter(spec: TaskSpec, connector_config: dict[str, str]) -> HeaderConverter:
    """``header.converter`` of the connector, else the worker's, else Connect's default."""
    return load_header_converter(*_converter_choice(spec, connector_config, "header.converter",
                                                    DEFAULT_HEADER_CONVERTER))


def _topic_creator(spec: TaskSpec,
                   connector_config: ConnectorConfig) -> Callable[[str], None] | None:
    """KIP-158: with ``topic.creation.default.*`` set, a missing topic is created
    (not compacted) the first time the task writes to it; existing ones are left as
    they are."""
    settings = connector_config.topic_creation()
    if settings is None:
        return None
    partitions, replication = settings
    admin = create_admin({"bootstrap.servers": spec.bootstrap_servers}, spec.admin_overrides)

    def create(topic: str) -> None:
        ensure_topic(admin, topic, partitions, replication, compacted=False)
    return create


def resolve_configs(spec: TaskSpec, redactor: Redactor) -> tuple[dict[str, str],
                                                                   dict[str, str]]:
    """Step 0: (connector config, task config) resolved. ``redactor`` learns every
    value a provider supplied and the values of the connector's PASSWORD keys, first,
    so that even a failure here is reported scrubbed. ConfigException naming the
    key at fault (or the provider setting this executor cannot load)."""
    resolver = spec.config_providers.instantiate()
    connector = resolver.resolve(spec.connector_config)
    task = resolver.resolve(spec.task_config)
    redactor.add(connector.secrets | task.secrets)
    redactor.add_values(spec.password_keys, spec.connector_config, spec.task_config,
                        connector.values, task.values)
    connector.raise_for_errors()
    task.raise_for_errors()
    return connector.values, task.values


STARTUP_CONCURRENCY = 4
KAFKA_STARTUPS = threading.BoundedSemaphore(STARTUP_CONCURRENCY)
"""How many tasks of one process make their own Kafka clients at once (steps 3
and 4: the producer and its ``init_transactions``). 200 tasks starting together
in 10 processes opened over a thousand clients within seconds, and a 2-core
broker stalled long enough for its controller to fence it. The fence request and
the config and offsets reads (steps 1, 2, 5 and 6) are shared by the tasks of a
process instead (:mod:`~connect_runtime.task.shared_reads`). The task's own
``start()`` is not held back: one that blocks must not keep its siblings from
starting."""


def start_task(spec: TaskSpec, should_stop: Any,
               redactor: Redactor | None = None) -> StartedTask:
    """Run steps 0-6 (in at-least-once mode only 0, 3, 4 and 6). ``should_stop()`` is
    checked between steps. ``redactor`` (filled by step 0) is what the caller
    scrubs the task's traces with."""
    redactor = Redactor() if redactor is None else redactor
    resolved_connector, resolved_task = resolve_configs(spec, redactor)  # step 0
    connector_config = ConnectorConfig(resolved_connector)
    exactly_once = spec.mode is TaskMode.EXACTLY_ONCE
    own_topic = connector_config.offsets_storage_topic
    conf = producer_config(spec, connector_config, transactional=exactly_once)
    if exactly_once:
        shared_reads.fence_once(  # step 1, once per generation in this process
            (spec.bootstrap_servers, spec.config_topic, spec.connector, spec.generation),
            lambda: request_fencing(spec))
        check_generation(spec, "startup read of the config topic")  # step 2
    with KAFKA_STARTUPS:  # steps 3-4 of several tasks sharing this process, a few at a time
        if own_topic and own_topic != spec.global_offsets_topic:  # step 3
            admin = create_admin({"bootstrap.servers": spec.bootstrap_servers},
                                 spec.admin_overrides)
            ensure_topic(admin, own_topic, spec.offsets_topic_partitions,
                         spec.offsets_topic_replication_factor, compacted=True)
        if should_stop():
            raise StartupAbandoned("stop requested during startup")
        producer = (create_transactional_producer(spec, conf) if exactly_once  # step 4
                    else create_idempotent_producer(conf))
    transforms: TransformationChain | None = None
    try:
        if exactly_once:
            check_generation(spec, "config topic read after creating the producer")  # 5
        else:
            _log_ignored_boundary(spec, connector_config)
        key_conv, value_conv = _converters(spec, resolved_connector)  # step 6
        header_conv = _header_converter(spec, resolved_connector)
        transforms = _transformation_chain(connector_config)

        connector_topic = own_topic if own_topic != spec.global_offsets_topic else None

        def read_offsets() -> OffsetStorageReader:
            # Shared with the siblings asking at the same time; the reader is
            # read-only and each caller's read started after it asked.
            reader: OffsetStorageReader = shared_reads.OFFSET_READS.get(
                ("offsets", spec.connector, spec.bootstrap_servers, spec.global_offsets_topic,
                 connector_topic,
                 shared_reads.settings_key(spec.consumer_overrides, spec.admin_overrides)),
                lambda: TaskOffsetStorageReader(
                    connector=spec.connector,
                    bootstrap_servers=spec.bootstrap_servers,
                    global_topic=spec.global_offsets_topic,
                    connector_topic=connector_topic,
                    consumer_overrides=spec.consumer_overrides,
                    admin_overrides=spec.admin_overrides,
                ))
            return reader
        factory = TaskFactory(
            task_class=load_task_class(resolved_task["task.class"]),
            config=dict(resolved_task), read_offsets=read_offsets,
            # Connect hands regular tasks no boundary and no transaction context.
            boundary_kind=connector_config.transaction_boundary.value if exactly_once else None,
            interval_ms=connector_config.transaction_boundary_interval_ms(
                spec.offset_flush_interval_ms))
        task, boundary = factory.start()
    except BaseException:
        producer.flush(1)
        if transforms is not None:  # built before a later step failed
            transforms.close()
        raise
    errors = ErrorHandler.from_config(connector_config.values, spec.task_label, should_stop)
    return StartedTask(
        mode=spec.mode,
        create_topic=_topic_creator(spec, connector_config),
        task=task,
        producer=producer,
        offsets_topic=own_topic or spec.global_offsets_topic,
        connector_offsets_topic=own_topic if own_topic != spec.global_offsets_topic else None,
        key_converter=key_conv,
        value_converter=value_conv,
        boundary=boundary,
        transaction_timeout_s=float(
            conf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS)) / 1000,
        offset_flush_interval_s=spec.offset_flush_interval_ms / 1000,
        offset_flush_timeout_s=spec.offset_flush_timeout_ms / 1000,
        header_converter=header_conv,
        transforms=transforms,
        errors=errors,
        factory=factory,
    )


def _transformation_chain(connector_config: ConnectorConfig) -> TransformationChain | None:
    """The connector's transforms and predicates, or None when it has none."""
    if not connector_config.values.get("transforms"):
        return None
    from connect_runtime.transforms import TransformationChain as Chain

    chain: TransformationChain = Chain.from_config(connector_config.originals)
    return chain


def _log_ignored_boundary(spec: TaskSpec, connector_config: ConnectorConfig) -> None:
    """At-least-once tasks have no transactions; say so once if the user asked for
    a boundary other than the default."""
    boundary = connector_config.transaction_boundary.value
    if boundary != "poll":
        log.warning("Task %s: ignoring transaction.boundary=%s: with "
                    "exactly.once.source.support=%s tasks are at-least-once and write "
                    "offsets every offset.flush.interval.ms (%d ms)", spec.task_label,
                    boundary, spec.eos_support, spec.offset_flush_interval_ms)
