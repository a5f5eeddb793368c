"""Altering and resetting a stopped connector's source offsets (KIP-875).

``PATCH /connectors/<name>/offsets`` (alter) and ``DELETE`` (reset) are served by the
leader, in Kafka Connect's order:

1. The connector must exist (404) and be STOPPED with no task configs (400 with
   Connect's message): stopping empties its task configs, so no task of it runs
   or will start from a config the leader still knows.
2. With ``exactly.once.source.support=enabled``, the previous task generation is
   fenced (:class:`~connect_runtime.cluster.fencing.ZombieFencer`): a zombie task
   still holding a transaction open can no longer commit. The checks of step 1 are
   made again after fencing, under the fencer's per-connector lock, which is held
   until the write is done; a task of a newer generation asks for fencing before it
   starts, so it waits and then reads the offsets written here.
3. The offsets are normalised (a JSON round trip, so the connector sees exactly
   what tasks will read back) and the connector's ``alter_offsets(config,
   offsets)`` is consulted on a fresh instance; an exception from it refuses the
   request (400, nothing written).
4. The offsets are written to the connector's own offsets topic and to the
   worker's global one. With exactly-once enabled both go in ONE transaction of a
   producer whose ``transactional.id`` is that of the connector's task 0, as
   Connect does: a zombie task 0 is fenced by it too, and readers (tasks read
   ``read_committed``) see both topics change at once. Without exactly-once they
   are written with an idempotent producer, global topic first, so a reset's
   tombstone never leaves the connector's topic empty over a stale global offset
   (KAFKA-15018).

Creating a connector with ``initial_offsets`` (KIP-995, which Connect 4.1 does not
have) goes through steps 3 and 4 too, in :meth:`OffsetAlteration.initialize`, for a
connector whose config is valid but not written yet: the config writer writes it
only after the offsets, so no task can start before they are there, and nothing
is written if the connector refuses them.

The answer says whether the connector acknowledged the change (Connect's messages).
A reset writes a tombstone for every partition of the connector's current combined
view; with none, it writes nothing and still succeeds, as Connect does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Producer

from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.record import SourceOffset, SourcePartition
from connect_runtime.cluster.fencing import ZombieFencer
from connect_runtime.errors import (
    BadRequestException,
    ConnectError,
    InvalidOffsetException,
    NotFoundException,
    translate_kafka_error,
)
from connect_runtime.kafka.clients import create_producer
from connect_runtime.storage.offsets.format import (
    deserialize_key,
    deserialize_value,
    serialize_key,
    serialize_value,
)

log = logging.getLogger(__name__)

__all__ = ["OffsetAlteration", "OffsetPairs", "OffsetTopics", "modified_message"]

OffsetPairs = list[tuple[SourcePartition, SourceOffset | None]]
"""``(source partition, offset)`` pairs; an offset of None removes the partition's offset."""

# Connect's REST request timeout: the whole procedure must fit in it.
TIMEOUT_S = 90.0


def not_stopped_message(connector: str) -> str:
    """Connect's answer when the connector is not STOPPED (word for word)."""
    return ("Connectors must be in the STOPPED state before their offsets can be modified. "
            "This can be done for the specified connector by issuing a 'PUT' request to the "
            f"'/connectors/{connector}/stop' endpoint")


def modified_message(acknowledged: bool, reset: bool) -> str:
    """Connect's success message: did the connector acknowledge the change?"""
    done = "reset" if reset else "altered"
    if acknowledged:
        return f"The offsets for this connector have been {done} successfully"
    return (f"The Connect framework-managed offsets for this connector have been {done} "
            "successfully. However, if this connector manages offsets externally, they will "
            f"need to be manually {done} in the system that the connector uses.")


class ConfigView(Protocol):
    """What the procedure reads of the config topic (a ``ClusterConfigState`` has it)."""

    def connector_config(self, name: str) -> dict[str, Any] | None: ...

    def target_state(self, name: str) -> str: ...

    def task_count(self, name: str) -> int: ...


@dataclass(frozen=True)
class OffsetTopics:
    """Where a connector's offsets live: the global topic and, if any, its own."""

    global_topic: str
    connector_topic: str | None

    @property
    def all(self) -> list[str]:
        """The global topic first (see the module docstring), then the connector's."""
        if self.connector_topic in (None, self.global_topic):
            return [self.global_topic]
        return [self.global_topic, self.connector_topic]


def normalize(offsets: Sequence[tuple[Any, Any]], field: str = "offsets") -> OffsetPairs:
    """Validate and round-trip ``offsets`` through the offsets topic's JSON format.

    Raises :class:`BadRequestException` naming the entry of the request's ``field``
    and the problem (a partition that is not a flat dict of primitives, an offset
    that is neither that nor None). Later duplicates of a partition win, as when
    written.
    """
    out: dict[bytes, tuple[SourcePartition, SourceOffset | None]] = {}
    for index, (partition, offset) in enumerate(offsets):
        try:
            if partition is None:
                raise InvalidOffsetException("the source partition is null")
            key = serialize_key("", partition)
            value = serialize_value(offset)
        except InvalidOffsetException as e:
            raise BadRequestException(f"Invalid {field}[{index}]: {e}") from e
        out[key] = (deserialize_key(key)[1], deserialize_value(value))
    return list(out.values())


class OffsetAlteration:
    """The leader's KIP-875 procedure (see the module docstring).

    * ``read_config()`` reads the config topic to its end and returns the view.
    * ``current_partitions(name, config)`` lists the partitions of the connector's
      combined offsets view (what a reset removes).
    * ``connector(config)`` returns a fresh, unstarted connector instance.
    * ``producer_config(name, config)`` is the librdkafka config for the writes
      (without ``transactional.id``).
    * ``ensure_topic(topic)`` creates the connector's own offsets topic if missing.
    * ``topics(config)`` says where the connector's offsets live.

    The caller checks leadership.
    """

    def __init__(self, *, exactly_once: bool, group_id: str, fencer: ZombieFencer,
                 read_config: Callable[[], ConfigView],
                 current_partitions: Callable[[str, dict[str, str]], list[SourcePartition]],
                 connector: Callable[[dict[str, str]], SourceConnector],
                 producer_config: Callable[[str, dict[str, str]], dict[str, Any]],
                 ensure_topic: Callable[[str], None],
                 topics: Callable[[dict[str, str]], OffsetTopics]) -> None:
        self._exactly_once = exactly_once
        self._group_id = group_id
        self._fencer = fencer
        self._read_config = read_config
        self._current_partitions = current_partitions
        self._connector = connector
        self._producer_config = producer_config
        self._ensure_topic = ensure_topic
        self._topics = topics

    def alter(self, name: str, offsets: Sequence[tuple[Any, Any]]) -> str:
        """Write ``offsets`` for the stopped connector ``name``; return Connect's message.

        ``offsets`` must not be empty (the REST layer refuses that with Connect's
        message). Raises NotFoundException, BadRequestException (not stopped, invalid
        offsets, refused by the connector), ConflictException (reconfigured during
        fencing) or ConnectError (Kafka failed; nothing or everything was written).
        """
        normalized = normalize(offsets)
        return self._modify(name, lambda config: normalized, reset=False)

    def reset(self, name: str) -> str:
        """Remove every offset of the stopped connector ``name``; see :meth:`alter`."""
        return self._modify(
            name, lambda config: [(p, None) for p in self._current_partitions(name, config)],
            reset=True)

    def initialize(self, name: str, config: dict[str, str],
                   offsets: Sequence[tuple[Any, Any]]) -> bool:
        """Write ``offsets`` for ``name``, a connector about to be created with
        ``config`` (KIP-995, beyond Connect 4.1: ``initial_offsets`` of ``POST
        /connectors``); returns whether the connector acknowledged them.

        The caller has validated ``config`` and writes it only after this returns,
        so no task of the connector runs yet, and none can start before the offsets
        are there: there is nothing to fence. The offsets are checked as an alter
        checks them (normalised, then the connector's ``alter_offsets``), and
        written as an alter writes them (both topics; with exactly-once in one
        transaction under task 0's ``transactional.id``). Raises
        BadRequestException (invalid or refused, nothing written) or ConnectError
        (Kafka failed: nothing or everything was written).
        """
        normalized = normalize(offsets, "initial_offsets")
        acknowledged = self._consult(name, config, normalized, initial=True)
        if normalized:
            self._write_records(name, config, normalized, time.monotonic() + TIMEOUT_S)
            log.info("Wrote %d initial source offset(s) of connector %s", len(normalized), name)
        return acknowledged

    def _modify(self, name: str, offsets_of: Callable[[dict[str, str]], OffsetPairs],
                reset: bool) -> str:
        self._check(name)
        if self._exactly_once:
            return self._fencer.fence_then(name, lambda: self._write(name, offsets_of, reset))
        return self._write(name, offsets_of, reset)

    def _check(self, name: str) -> dict[str, str]:
        view = self._read_config()
        config = view.connector_config(name)
        if config is None:
            raise NotFoundException(f"Connector {name} not found")
        if view.target_state(name) != "STOPPED" or view.task_count(name) != 0:
            raise BadRequestException(not_stopped_message(name))
        return dict(config)

    def _write(self, name: str, offsets_of: Callable[[dict[str, str]], OffsetPairs],
               reset: bool) -> str:
        deadline = time.monotonic() + TIMEOUT_S
        config = self._check(name)  # again: fencing took time, the connector may have moved
        offsets = offsets_of(config)
        acknowledged = self._consult(name, config, offsets)
        if not offsets:
            log.info("No offsets found for source connector %s; this can occur after a prior "
                     "reset or if it has not committed any offsets yet", name)
            return modified_message(acknowledged, reset)
        topics = self._write_records(name, config, offsets, deadline)
        log.info("%s %d source offset(s) of connector %s in %s", "Reset" if reset else "Altered",
                 len(offsets), name, ", ".join(topics.all))
        return modified_message(acknowledged, reset)

    def _write_records(self, name: str, config: dict[str, str], offsets: OffsetPairs,
                       deadline: float) -> OffsetTopics:
        """Step 4: ``offsets`` into the connector's topics; returns them."""
        records = [(serialize_key(name, partition), serialize_value(offset))
                   for partition, offset in offsets]
        topics = self._topics(config)
        if topics.connector_topic is not None:
            self._ensure_topic(topics.connector_topic)
        conf = self._producer_config(name, config)
        if self._exactly_once:
            self._write_transactionally(name, conf, topics, records, deadline)
        else:
            self._write_idempotently(name, conf, topics, records, deadline)
        return topics

    def _consult(self, name: str, config: dict[str, str], offsets: OffsetPairs,
                 initial: bool = False) -> bool:
        """Ask the connector (step 3); any exception refuses the request. ``initial``:
        the offsets are a create's ``initial_offsets``, which the messages name."""
        failed = (f"Invalid value for field 'initial_offsets': connector {name} cannot take "
                  "initial offsets" if initial
                  else f"Failed to modify offsets for connector {name}")
        try:
            connector = self._connector(config)
        except ConnectError as e:
            raise BadRequestException(f"{failed}: cannot load its class: {e}") from e
        try:
            return bool(connector.alter_offsets(dict(config), [(dict(p), None if o is None
                                                                else dict(o))
                                                               for p, o in offsets]))
        except NotImplementedError as e:
            raise BadRequestException(
                f"{failed} because it doesn't support external modification of offsets"
            ) from e
        except Exception as e:
            log.info("Connector %s refused %s", name,
                     "its initial offsets" if initial else "an offsets modification",
                     exc_info=True)
            raise BadRequestException(
                f"{failed}: the connector refused them: {str(e) or type(e).__name__}") from e

    def _write_transactionally(self, name: str, conf: dict[str, Any], topics: OffsetTopics,
                               records: list[tuple[bytes, bytes | None]],
                               deadline: float) -> None:
        transactional_id = f"{self._group_id}-{name}-0"  # task 0's: KIP-875 and Connect
        producer = create_producer(conf, transactional_id=transactional_id,
                                   client_id=f"connect-offsets-{transactional_id}")
        what = f"writing the offsets of connector {name} with transactional.id {transactional_id}"
        try:
            producer.init_transactions(_remaining(deadline))
            producer.begin_transaction()
            _produce(producer, topics.all, records)
            producer.commit_transaction(_remaining(deadline))
        except Exception as e:
            raise translate_kafka_error(e, what) from e
        finally:
            producer.flush(0)

    def _write_idempotently(self, name: str, conf: dict[str, Any], topics: OffsetTopics,
                            records: list[tuple[bytes, bytes | None]], deadline: float) -> None:
        producer = create_producer({**conf, "enable.idempotence": True, "acks": "all"},
                                   client_id=f"connect-offsets-{self._group_id}-{name}")
        for topic in topics.all:  # one topic at a time: global first (module docstring)
            errors: list[str] = []
            try:
                _produce(producer, [topic], records, errors)
                left = producer.flush(_remaining(deadline))
            except Exception as e:
                raise translate_kafka_error(e, f"writing the offsets of connector {name}") from e
            if left or errors:
                raise ConnectError(
                    f"Failed to write the offsets of connector {name} to {topic}: "
                    + ("; ".join(errors) or f"{left} record(s) not delivered in time"))


def _produce(producer: Producer, topics: list[str], records: list[tuple[bytes, bytes | None]],
             errors: list[str] | None = None) -> None:
    def delivered(err: Any, msg: Any) -> None:
        if err is not None and errors is not None:
            errors.append(str(err))

    for topic in topics:
        for key, value in records:
            producer.produce(topic, key=key, value=value, on_delivery=delivered)


def _remaining(deadline: float) -> float:
    return max(deadline - time.monotonic(), 1.0)
