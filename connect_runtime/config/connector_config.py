"""The framework's own connector keys, as Kafka Connect's SourceConnectorConfig defines them.

Every connector config holds these keys next to the connector's own ones.
``CONNECTOR_CONFIG_DEF`` drives validation (REST pre-flight) and
:class:`ConnectorConfig` gives typed access once a config is accepted.

Groups follow Connect: "Common" (name, class, tasks, converters), "Exactly Once
Support" (KIP-618's per-connector keys) and "offsets.topic". Connect's
"Transforms", "Predicates", "Error Handling" and "Topic Creation" keys are not
supported here.

Client overrides (KIP-458 prefixes ``producer.override.``, ``consumer.override.``,
``admin.override.``) take librdkafka property names. Two of them are owned by
the framework under exactly-once and are dropped with a warning (KIP-618):
``producer.override.transactional.id`` and ``consumer.override.isolation.level``.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from connect_runtime.api.config_def import (
    CaseInsensitiveValidString,
    ConfigDef,
    Importance,
    NonEmptyString,
    Range,
    Type,
    Width,
)
from connect_runtime.converters import resolve_converter_class
from connect_runtime.errors import ConfigException

log = logging.getLogger(__name__)

NAME_CONFIG = "name"
CONNECTOR_CLASS_CONFIG = "connector.class"
TASKS_MAX_CONFIG = "tasks.max"
KEY_CONVERTER_CONFIG = "key.converter"
VALUE_CONVERTER_CONFIG = "value.converter"
EXACTLY_ONCE_SUPPORT_CONFIG = "exactly.once.support"
TRANSACTION_BOUNDARY_CONFIG = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_CONFIG = "transaction.boundary.interval.ms"
OFFSETS_STORAGE_TOPIC_CONFIG = "offsets.storage.topic"

PRODUCER_OVERRIDE_PREFIX = "producer.override."
CONSUMER_OVERRIDE_PREFIX = "consumer.override."
ADMIN_OVERRIDE_PREFIX = "admin.override."
_OVERRIDE_PREFIXES = {
    "producer": PRODUCER_OVERRIDE_PREFIX,
    "consumer": CONSUMER_OVERRIDE_PREFIX,
    "admin": ADMIN_OVERRIDE_PREFIX,
}

# KIP-618: task producers always use <group.id>-<connector>-<task>, and offsets
# are always read with read_committed; user values would break fencing or let a
# task read offsets of aborted transactions.
_IGNORED_OVERRIDES = {
    PRODUCER_OVERRIDE_PREFIX + "transactional.id":
        "task producers use the transactional.id <group.id>-<connector>-<task>",
    CONSUMER_OVERRIDE_PREFIX + "isolation.level":
        "source offsets are always read with isolation.level=read_committed",
}

_E = TypeVar("_E", bound=Enum)

COMMON_GROUP = "Common"
EXACTLY_ONCE_SUPPORT_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"


class ExactlyOnceSupportLevel(Enum):
    """Values of ``exactly.once.support``."""

    REQUESTED = "requested"
    REQUIRED = "required"

    @classmethod
    def parse(cls, value: str) -> ExactlyOnceSupportLevel:
        """Case-insensitive, trimmed. ConfigException naming the key if unknown."""
        return _parse_enum(cls, EXACTLY_ONCE_SUPPORT_CONFIG, value)


class TransactionBoundary(Enum):
    """Values of ``transaction.boundary``: when a task's transaction is committed.

    POLL: after every non-empty batch from ``poll``. INTERVAL: every
    ``transaction.boundary.interval.ms``. CONNECTOR: when the task asks through
    its ``TransactionContext``.
    """

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"

    @classmethod
    def parse(cls, value: str) -> TransactionBoundary:
        """Case-insensitive, trimmed. ConfigException naming the key if unknown."""
        return _parse_enum(cls, TRANSACTION_BOUNDARY_CONFIG, value)


def _parse_enum(cls: type[_E], key: str, value: str) -> _E:
    folded = str(value).strip().lower()
    for member in cls:
        if member.value == folded:
            return member
    allowed = ", ".join(str(m.value) for m in cls)
    raise ConfigException(f"String must be one of (case insensitive): {allowed}",
                          name=key, value=value)


@dataclass(frozen=True)
class _ConnectorName:
    """Non-empty and free of control characters: the name ends up in topic keys
    and transactional ids, where an invisible character is a debugging trap."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        NonEmptyString()(name, value)
        controls = [ord(c) for c in value if unicodedata.category(c) == "Cc"]
        if controls:
            raise ConfigException(
                "String may not contain control characters but had the following: "
                + ", ".join(map(str, controls)), name=name, value=value)

    def __str__(self) -> str:
        return "non-empty string without control characters"


@dataclass(frozen=True)
class _ConverterClass:
    """A converter class name or alias that resolves (see ``connect_runtime.converters``)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            resolve_converter_class(value, name)

    def __str__(self) -> str:
        return "JsonConverter, StringConverter, ByteArrayConverter or a module.Class converter"


def _define_common(d: ConfigDef) -> ConfigDef:
    g = COMMON_GROUP
    return (
        d.define(NAME_CONFIG, Type.STRING, validator=_ConnectorName(),
                 importance=Importance.HIGH,
                 documentation="Globally unique name to use for this connector.",
                 group=g, order_in_group=1, width=Width.MEDIUM, display_name="Connector name")
        .define(CONNECTOR_CLASS_CONFIG, Type.STRING, importance=Importance.HIGH,
                documentation="Name or alias of the SourceConnector class: an entry point "
                "name, a module.Class path, or the class name with or without its "
                "'Connector' suffix (e.g. SequenceSource).",
                group=g, order_in_group=2, width=Width.LONG, display_name="Connector class")
        .define(TASKS_MAX_CONFIG, Type.INT, 1, Range.at_least(1), Importance.HIGH,
                "Maximum number of tasks to use for this connector.",
                group=g, order_in_group=3, width=Width.SHORT, display_name="Tasks max")
        .define(KEY_CONVERTER_CONFIG, Type.CLASS, None, _ConverterClass(), Importance.LOW,
                "Converter for record keys; unset uses the worker's key.converter.",
                group=g, order_in_group=4, width=Width.SHORT,
                display_name="Key converter class")
        .define(VALUE_CONVERTER_CONFIG, Type.CLASS, None, _ConverterClass(), Importance.LOW,
                "Converter for record values; unset uses the worker's value.converter.",
                group=g, order_in_group=5, width=Width.SHORT,
                display_name="Value converter class")
    )


def _define_exactly_once(d: ConfigDef) -> ConfigDef:
    g = EXACTLY_ONCE_SUPPORT_GROUP
    return (
        d.define(EXACTLY_ONCE_SUPPORT_CONFIG, Type.STRING, "requested",
                 CaseInsensitiveValidString.in_("requested", "required"), Importance.MEDIUM,
                 "requested or required. With required, creating or validating the "
                 "connector fails unless the connector reports that it delivers "
                 "exactly once with this configuration and the worker has "
                 "exactly.once.source.support=enabled.",
                 group=g, order_in_group=1, width=Width.SHORT,
                 display_name="Exactly once support")
        .define(TRANSACTION_BOUNDARY_CONFIG, Type.STRING, "poll",
                CaseInsensitiveValidString.in_("poll", "interval", "connector"),
                Importance.MEDIUM,
                "poll: commit a transaction for every batch a task returns; interval: "
                "commit every transaction.boundary.interval.ms; connector: the tasks "
                "decide, which only connectors that support it accept.",
                group=g, order_in_group=2, width=Width.SHORT,
                display_name="Transaction Boundary")
        .define(TRANSACTION_BOUNDARY_INTERVAL_CONFIG, Type.LONG, None, Range.at_least(0),
                Importance.LOW,
                "With transaction.boundary=interval, how often tasks commit; unset uses "
                "the worker's offset.flush.interval.ms. Ignored for other boundaries.",
                group=g, order_in_group=3, width=Width.SHORT,
                display_name="Transaction boundary interval")
        .define(OFFSETS_STORAGE_TOPIC_CONFIG, Type.STRING, None, NonEmptyString(),
                Importance.LOW,
                "A separate offsets topic for this connector, created if missing on the "
                "cluster the connector's producer targets. Unset: the worker's global "
                "offsets topic.",
                group=OFFSETS_TOPIC_GROUP, order_in_group=1, width=Width.LONG,
                display_name="Offsets topic")
    )


TOPIC_CREATION_GROUP = "Topic Creation"
TOPIC_CREATION_RF_CONFIG = "topic.creation.default.replication.factor"
TOPIC_CREATION_PARTITIONS_CONFIG = "topic.creation.default.partitions"


def _define_topic_creation(d: ConfigDef) -> ConfigDef:
    """KIP-158's default group: with both keys set, tasks create missing topics."""
    g = TOPIC_CREATION_GROUP
    return (
        d.define(TOPIC_CREATION_RF_CONFIG, Type.INT, None, Range.at_least(-1), Importance.LOW,
                 "Replication factor of topics the tasks create when they first write to "
                 "a topic that does not exist (-1: broker default). Topic creation is on "
                 f"when this and {TOPIC_CREATION_PARTITIONS_CONFIG} are both set.",
                 group=g, order_in_group=1, width=Width.SHORT,
                 display_name="Default replication factor for new topics")
        .define(TOPIC_CREATION_PARTITIONS_CONFIG, Type.INT, None, Range.at_least(-1),
                Importance.LOW,
                "Partitions of topics the tasks create (-1: broker default).",
                group=g, order_in_group=2, width=Width.SHORT,
                display_name="Default partitions for new topics")
    )


CONNECTOR_CONFIG_DEF: ConfigDef = _define_topic_creation(
    _define_exactly_once(_define_common(ConfigDef())))
"""The framework keys of every (source) connector config, framework groups first."""


class ConnectorConfig:
    """Typed view of an accepted connector config.

    ``originals`` keeps every key as given (connector keys, ``*.override.*``,
    converter sub-configs). Raises ConfigException naming the first bad
    framework key; the connector's own keys are its own business.
    """

    def __init__(self, props: Mapping[str, str]) -> None:
        self.originals: dict[str, str] = {
            str(k): str(v) for k, v in props.items() if v is not None
        }
        self.values: dict[str, Any] = CONNECTOR_CONFIG_DEF.parse(self.originals)

    @property
    def name(self) -> str:
        return str(self.values[NAME_CONFIG])

    @property
    def connector_class(self) -> str:
        return str(self.values[CONNECTOR_CLASS_CONFIG])

    @property
    def tasks_max(self) -> int:
        return int(self.values[TASKS_MAX_CONFIG])

    @property
    def key_converter(self) -> str | None:
        """The connector's key converter class, or None to use the worker's."""
        value = self.values[KEY_CONVERTER_CONFIG]
        return None if value is None else str(value)

    @property
    def value_converter(self) -> str | None:
        """The connector's value converter class, or None to use the worker's."""
        value = self.values[VALUE_CONVERTER_CONFIG]
        return None if value is None else str(value)

    @property
    def exactly_once_support(self) -> ExactlyOnceSupportLevel:
        return ExactlyOnceSupportLevel.parse(self.values[EXACTLY_ONCE_SUPPORT_CONFIG])

    @property
    def exactly_once_required(self) -> bool:
        return self.exactly_once_support is ExactlyOnceSupportLevel.REQUIRED

    @property
    def transaction_boundary(self) -> TransactionBoundary:
        return TransactionBoundary.parse(self.values[TRANSACTION_BOUNDARY_CONFIG])

    def transaction_boundary_interval_ms(self, worker_offset_flush_interval_ms: int) -> int:
        """``transaction.boundary.interval.ms``, defaulting to the worker's flush interval."""
        value = self.values[TRANSACTION_BOUNDARY_INTERVAL_CONFIG]
        return int(worker_offset_flush_interval_ms if value is None else value)

    @property
    def offsets_storage_topic(self) -> str | None:
        """The connector's own offsets topic, or None for the worker's global one."""
        value = self.values[OFFSETS_STORAGE_TOPIC_CONFIG]
        return None if value is None else str(value)

    def topic_creation(self) -> tuple[int, int] | None:
        """(partitions, replication factor) for new topics, or None if creation is off."""
        partitions = self.values.get(TOPIC_CREATION_PARTITIONS_CONFIG)
        replication = self.values.get(TOPIC_CREATION_RF_CONFIG)
        if partitions is None or replication is None:
            return None
        return int(partitions), int(replication)

    def originals_with_prefix(self, prefix: str) -> dict[str, str]:
        """Keys starting with ``prefix``, with the prefix stripped (e.g. converter sub-configs)."""
        return {k[len(prefix):]: v for k, v in self.originals.items() if k.startswith(prefix)}

    def client_overrides(self, prefix: str) -> dict[str, str]:
        """librdkafka overrides for one client: ``producer.override.*`` etc., prefix stripped.

        ``prefix`` is ``producer.override.`` / ``consumer.override.`` /
        ``admin.override.`` or just ``producer`` / ``consumer`` / ``admin``.
        Keys the framework owns under KIP-618 are dropped with a warning.
        """
        full = _OVERRIDE_PREFIXES.get(prefix, prefix)
        if full not in _OVERRIDE_PREFIXES.values():
            raise ValueError(f"unknown client override prefix {prefix!r}; expected one of "
                             f"{', '.join(_OVERRIDE_PREFIXES.values())}")
        out: dict[str, str] = {}
        for key, value in self.originals.items():
            if not key.startswith(full):
                continue
            if key in _IGNORED_OVERRIDES:
                log.warning("Ignoring connector config %s=%s for connector %s: %s (KIP-618)",
                            key, value, self.originals.get(NAME_CONFIG), _IGNORED_OVERRIDES[key])
                continue
            out[key[len(full):]] = value
        return out
