"""The framework's own connector keys, as Kafka Connect's SourceConnectorConfig defines them.

Every connector config holds these keys next to the connector's own ones.
``CONNECTOR_CONFIG_DEF`` drives validation (REST pre-flight) and
:class:`ConnectorConfig` gives typed access once a config is accepted.

Keys, groups and their order are Connect 4.1's SourceConnectorConfig: "Common"
(name, class, tasks, converters and KIP-891's ``*.plugin.version``),
"Transforms", "Predicates", "Error Handling", "Topic Creation", "Exactly Once
Support" (KIP-618) and "offsets.topic". Some of them name features this runtime
does not have yet (error tolerance, topic creation groups): their defaults are
accepted, and
:func:`unsupported_value` says why any other value is refused, so a config is
never half-honoured in silence. KIP-158's ``topic.creation.default.*`` keys are
parsed too (:data:`TOPIC_CREATION_DEFAULT_DEF`); Connect's validation does not
list them.

Client overrides (KIP-458 prefixes ``producer.override.``, ``consumer.override.``,
``admin.override.``) take librdkafka property names. Two of them are owned by
the framework under exactly-once and are dropped with a warning (KIP-618):
``producer.override.transactional.id`` and ``consumer.override.isolation.level``.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Callable, Mapping
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
    ValidString,
    Width,
    originals_with_prefix,
)
from connect_runtime.converters import resolve_converter_class, resolve_header_converter_class
from connect_runtime.errors import ConfigException

log = logging.getLogger(__name__)

NAME_CONFIG = "name"
CONNECTOR_CLASS_CONFIG = "connector.class"
TASKS_MAX_CONFIG = "tasks.max"
TASKS_MAX_ENFORCE_CONFIG = "tasks.max.enforce"
KEY_CONVERTER_CONFIG = "key.converter"
VALUE_CONVERTER_CONFIG = "value.converter"
HEADER_CONVERTER_CONFIG = "header.converter"
# KIP-891: "<plugin key>.plugin.version" pins the version of the plugin that key names.
PLUGIN_VERSION_SUFFIX = ".plugin.version"
CONNECTOR_PLUGIN_VERSION_CONFIG = "connector" + PLUGIN_VERSION_SUFFIX
TRANSFORMS_CONFIG = "transforms"
PREDICATES_CONFIG = "predicates"
CONFIG_RELOAD_ACTION_CONFIG = "config.action.reload"
ERRORS_RETRY_TIMEOUT_CONFIG = "errors.retry.timeout"
TASK_STALL_THRESHOLD_CONFIG = "task.stall.threshold.ms"
TASKS_PER_PROCESS_CONFIG = "tasks.per.process"
TASKS_PER_PROCESS_AUTO = "auto"
"""``tasks.per.process=auto`` (the worker's default): the Spark runner packs a
connector's tasks into one process per core, at most MAX_TASKS_PER_PROCESS to a
process (``cluster/spark_runner.py``, ``auto_slots``)."""
MAX_TASKS_PER_PROCESS = 64
"""The most tasks one Spark slot's Python process may host: beyond it, a process's
threads and GIL are shared too thinly to keep a stop or a commit prompt."""

ERRORS_RETRY_MAX_DELAY_CONFIG = "errors.retry.delay.max.ms"
ERRORS_TOLERANCE_CONFIG = "errors.tolerance"
ERRORS_LOG_ENABLE_CONFIG = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES_CONFIG = "errors.log.include.messages"
# Automatic task restarts (cluster/auto_restart.py): not Kafka Connect's, off by default.
ERRORS_RESTART_POLICY_CONFIG = "errors.restart.policy"
ERRORS_RESTART_MAX_ATTEMPTS_CONFIG = "errors.restart.max.attempts"
ERRORS_RESTART_BACKOFF_INITIAL_CONFIG = "errors.restart.backoff.initial.ms"
ERRORS_RESTART_BACKOFF_MAX_CONFIG = "errors.restart.backoff.max.ms"
ERRORS_RESTART_RESET_AFTER_CONFIG = "errors.restart.reset.after.ms"
RESTART_KEYS = frozenset({
    ERRORS_RESTART_POLICY_CONFIG, ERRORS_RESTART_MAX_ATTEMPTS_CONFIG,
    ERRORS_RESTART_BACKOFF_INITIAL_CONFIG, ERRORS_RESTART_BACKOFF_MAX_CONFIG,
    ERRORS_RESTART_RESET_AFTER_CONFIG})
TOPIC_CREATION_GROUPS_CONFIG = "topic.creation.groups"
TOPIC_CREATION_RF_CONFIG = "topic.creation.default.replication.factor"
TOPIC_CREATION_PARTITIONS_CONFIG = "topic.creation.default.partitions"
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
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
TOPIC_CREATION_GROUP = "Topic Creation"
EXACTLY_ONCE_SUPPORT_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"


def parse_tasks_per_process(value: object) -> int | None:
    """A ``tasks.per.process`` value: a number of tasks (1 to MAX_TASKS_PER_PROCESS),
    or None for ``auto``. Raises ValueError naming what is wrong otherwise."""
    text = str(value).strip()
    if text.lower() == TASKS_PER_PROCESS_AUTO:
        return None
    if not text.isdigit() or not 1 <= int(text) <= MAX_TASKS_PER_PROCESS:
        raise ValueError(f"must be {TASKS_PER_PROCESS_AUTO} or a whole number of tasks from "
                         f"1 to {MAX_TASKS_PER_PROCESS}")
    return int(text)


@dataclass(frozen=True)
class ValidTasksPerProcess:
    """``auto`` or a number of tasks from 1 to MAX_TASKS_PER_PROCESS. None passes."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            parse_tasks_per_process(value)
        except ValueError as e:
            raise ConfigException(f"Value {e}", name=name, value=value) from None

    def __str__(self) -> str:
        return f"{TASKS_PER_PROCESS_AUTO}, or [1,...,{MAX_TASKS_PER_PROCESS}]"


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
class _UniqueAliases:
    """Connect's alias validator of ``transforms`` and ``predicates``: no alias twice
    (the second would silently share the first one's keys)."""

    kind: str

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and len(set(value)) != len(value):
            raise ConfigException("Duplicate alias provided.", name=name, value=value)

    def __str__(self) -> str:
        return f"unique {self.kind} aliases"


@dataclass(frozen=True)
class _ConverterClass:
    """A converter class name or alias that resolves (see ``connect_runtime.converters``)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            resolve_converter_class(value, name)

    def __str__(self) -> str:
        return "a built-in converter (Connect's class name or alias) or a module.Class converter"


@dataclass(frozen=True)
class _HeaderConverterClass:
    """A header converter class name or alias that resolves (``connect_runtime.converters``)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            resolve_header_converter_class(value, name)

    def __str__(self) -> str:
        return ("a built-in header converter (Connect's class name or alias) or a module.Class "
                "header converter")


# Connect's documentation of the keys it defines; ours where behaviour differs.
_CONVERTER_DOC = ("Converter class for record {what}: a class path, or Connect's class name or "
                  "alias of a built-in converter (JsonConverter, StringConverter, "
                  "ByteArrayConverter, IntegerConverter, ...). Unset uses the worker's {key}.")
_NOT_YET = " connect-runtime does not support this yet: only the default is accepted."


def _plugin_version(d: ConfigDef, plugin_key: str, default: str | None, importance: Importance,
                    width: Width, display_name: str, order: int) -> ConfigDef:
    """KIP-891's ``<plugin_key>.plugin.version``; ``default`` is the installed version."""
    what = "connector" if plugin_key == "connector" else plugin_key.replace(".", " ")
    return d.define(plugin_key + PLUGIN_VERSION_SUFFIX, Type.STRING, default,
                    importance=importance, documentation=f"Version of the {what}.",
                    group=COMMON_GROUP, order_in_group=order, width=width,
                    display_name=display_name)


def _define_common(d: ConfigDef, versions: Mapping[str, str | None],
                   converters: Mapping[str, str | None]) -> ConfigDef:
    g = COMMON_GROUP
    d.define(NAME_CONFIG, Type.STRING, validator=_ConnectorName(),
             importance=Importance.HIGH,
             documentation="Globally unique name to use for this connector.",
             group=g, order_in_group=1, width=Width.MEDIUM, display_name="Connector name")
    d.define(CONNECTOR_CLASS_CONFIG, Type.STRING, importance=Importance.HIGH,
             documentation="Name or alias of the SourceConnector class: an entry point "
             "name, a module.Class path, the class name with or without its "
             "'Connector' suffix (e.g. SequenceSource), or Connect's class name of a "
             "bundled connector (org.apache.kafka.connect.file.FileStreamSourceConnector).",
             group=g, order_in_group=2, width=Width.LONG, display_name="Connector class")
    _plugin_version(d, "connector", versions.get("connector"), Importance.MEDIUM,
                    Width.MEDIUM, "Connector version", 3)
    d.define(TASKS_MAX_CONFIG, Type.INT, 1, Range.at_least(1), Importance.HIGH,
             "Maximum number of tasks to use for this connector.",
             group=g, order_in_group=4, width=Width.SHORT, display_name="Tasks max")
    d.define(TASKS_MAX_ENFORCE_CONFIG, Type.BOOLEAN, True, importance=Importance.LOW,
             documentation="(Deprecated) Whether to enforce that the tasks.max property is "
             "respected by the connector. A connector that generates more task configs "
             "than tasks.max fails." + _NOT_YET,
             group=g, order_in_group=5, width=Width.SHORT, display_name="Enforce tasks max")
    for order, (key, what, display) in enumerate(
            [(KEY_CONVERTER_CONFIG, "keys", "Key"), (VALUE_CONVERTER_CONFIG, "values", "Value")]):
        d.define(key, Type.CLASS, converters.get(key), _ConverterClass(), Importance.LOW,
                 _CONVERTER_DOC.format(what=what, key=key), group=g,
                 order_in_group=6 + 2 * order, width=Width.SHORT,
                 display_name=f"{display} converter class")
        _plugin_version(d, key, versions.get(key), Importance.LOW, Width.SHORT,
                        f"{display} converter version", 7 + 2 * order)
    d.define(HEADER_CONVERTER_CONFIG, Type.CLASS, converters.get(HEADER_CONVERTER_CONFIG),
             _HeaderConverterClass(), importance=Importance.LOW,
             documentation="HeaderConverter class used to convert between Kafka Connect "
             "format and the serialized form that is written to Kafka. Header values that "
             "are bytes are written as they are. Unset uses the worker's header.converter.",
             group=g, order_in_group=10, width=Width.SHORT,
             display_name="Header converter class")
    _plugin_version(d, HEADER_CONVERTER_CONFIG, versions.get(HEADER_CONVERTER_CONFIG),
                    Importance.LOW, Width.SHORT, "Header converter version", 11)
    return d


def _define_transforms_and_reload(d: ConfigDef) -> ConfigDef:
    # Connect numbers these in the "Common" sequence, whatever their group.
    return (
        d.define(TRANSFORMS_CONFIG, Type.LIST, [], _UniqueAliases("transformation"),
                 Importance.LOW, "Aliases for the transformations to be applied to records.",
                 group=TRANSFORMS_GROUP, order_in_group=12, width=Width.LONG,
                 display_name="Transforms")
        .define(PREDICATES_CONFIG, Type.LIST, [], _UniqueAliases("predicate"), Importance.LOW,
                "Aliases for the predicates used by transformations.",
                group=PREDICATES_GROUP, order_in_group=13, width=Width.LONG,
                display_name="Predicates")
        .define(CONFIG_RELOAD_ACTION_CONFIG, Type.STRING, "restart",
                ValidString.in_("none", "restart"), Importance.LOW,
                "The action that Connect should take on the connector when changes in "
                "external configuration providers result in a change in the connector's "
                "configuration properties. connect-runtime resolves config providers each "
                "time a connector or task starts and never schedules a reload (Connect's "
                "TTL-driven restarts), so either value has the same effect.",
                group=COMMON_GROUP, order_in_group=14, width=Width.MEDIUM,
                display_name="Reload Action")
        .define(TASKS_PER_PROCESS_CONFIG, Type.STRING, None, ValidTasksPerProcess(),
                Importance.LOW,
                "How many of this connector's tasks one Spark task slot hosts, in one "
                "Python process: auto packs them into one process per core Spark has "
                "(at most 64 to a process); 1 gives each task a process of its own; "
                "a number N puts up to N in each. Sharing saves memory (a process costs "
                "about 80 MB, a task in a shared one a few MB) but the tasks share the "
                "process's CPU (one GIL), and a crash of the process fails every task "
                "in it (connect-runtime only; docs/spark.md). Not allowed above 1 when "
                "the worker sets spark.task.cpus above 1. Unset uses the worker's "
                "tasks.per.process.",
                group=COMMON_GROUP, order_in_group=15, width=Width.SHORT,
                display_name="Tasks per process")
    )


def _define_error_handling(d: ConfigDef) -> ConfigDef:
    g = ERROR_GROUP
    return (
        d.define(ERRORS_RETRY_TIMEOUT_CONFIG, Type.LONG, 0, importance=Importance.MEDIUM,
                 documentation="The maximum duration in milliseconds that a failed operation "
                 "will be reattempted. The default is 0, which means no retries will be "
                 "attempted. Use -1 for infinite retries.",
                 group=g, order_in_group=1, width=Width.MEDIUM,
                 display_name="Retry Timeout for Errors")
        .define(ERRORS_RETRY_MAX_DELAY_CONFIG, Type.LONG, 60000, importance=Importance.MEDIUM,
                documentation="The maximum duration in milliseconds between consecutive "
                "retry attempts. Jitter will be added to the delay once this limit is "
                "reached to prevent thundering herd issues.",
                group=g, order_in_group=2, width=Width.MEDIUM,
                display_name="Maximum Delay Between Retries for Errors")
        .define(ERRORS_TOLERANCE_CONFIG, Type.STRING, "none", ValidString.in_("none", "all"),
                Importance.MEDIUM,
                "Behavior for tolerating errors during connector operation. 'none' is the "
                "default value and signals that any error will result in an immediate "
                "connector task failure; 'all' changes the behavior to skip over "
                "problematic records.",
                group=g, order_in_group=3, width=Width.SHORT, display_name="Error Tolerance")
        .define(ERRORS_LOG_ENABLE_CONFIG, Type.BOOLEAN, False, importance=Importance.MEDIUM,
                documentation="If true, write each error and the details of the failed "
                "operation and problematic record to the Connect application log.",
                group=g, order_in_group=4, width=Width.SHORT, display_name="Log Errors")
        .define(ERRORS_LOG_INCLUDE_MESSAGES_CONFIG, Type.BOOLEAN, False,
                importance=Importance.MEDIUM,
                documentation="Whether to include in the log the Connect record that "
                "resulted in a failure. This is 'false' by default, which will prevent "
                "record keys, values, and headers from being written to log files.",
                group=g, order_in_group=5, width=Width.SHORT, display_name="Log Error Details")
        .define(ERRORS_RESTART_POLICY_CONFIG, Type.STRING, "none",
                ValidString.in_("none", "on-failure"), Importance.MEDIUM,
                "What the leader does when a task fails: 'none' (the default, as in Kafka "
                "Connect) leaves it FAILED until restarted through REST; 'on-failure' "
                "restarts it after a delay that doubles with each consecutive failure "
                "(connect-runtime only; docs/operations.md).",
                group=g, order_in_group=6, width=Width.SHORT, display_name="Restart Policy")
        .define(ERRORS_RESTART_MAX_ATTEMPTS_CONFIG, Type.INT, 10, Range.at_least(-1),
                Importance.LOW,
                "With errors.restart.policy=on-failure: how many consecutive failures are "
                "restarted before the task is left FAILED; -1 for no limit.",
                group=g, order_in_group=7, width=Width.SHORT,
                display_name="Maximum Restart Attempts")
        .define(ERRORS_RESTART_BACKOFF_INITIAL_CONFIG, Type.LONG, 1000, Range.at_least(0),
                Importance.LOW,
                "With errors.restart.policy=on-failure: the delay before the first restart "
                "in milliseconds; each consecutive one doubles it, with jitter.",
                group=g, order_in_group=8, width=Width.SHORT,
                display_name="Initial Restart Delay")
        .define(ERRORS_RESTART_BACKOFF_MAX_CONFIG, Type.LONG, 300000, Range.at_least(0),
                Importance.LOW,
                "With errors.restart.policy=on-failure: the longest delay between restarts "
                "in milliseconds.",
                group=g, order_in_group=9, width=Width.SHORT,
                display_name="Maximum Restart Delay")
        .define(ERRORS_RESTART_RESET_AFTER_CONFIG, Type.LONG, 600000, Range.at_least(0),
                Importance.LOW,
                "With errors.restart.policy=on-failure: a task that runs this long in "
                "milliseconds after a restart starts its count of consecutive failures "
                "afresh.",
                group=g, order_in_group=10, width=Width.SHORT,
                display_name="Stable Period Before Reset")
        .define(TASK_STALL_THRESHOLD_CONFIG, Type.LONG, None, Range.at_least(1),
                Importance.LOW,
                "A task whose poll() or commit has not returned for this long in "
                "milliseconds is reported stuck in its status trace until the call returns "
                "(connect-runtime only; docs/operations.md). Unset uses the worker's "
                "task.stall.threshold.ms.",
                group=g, order_in_group=11, width=Width.SHORT,
                display_name="Stall Threshold")
    )


def _define_topic_creation_groups(d: ConfigDef) -> ConfigDef:
    return d.define(
        TOPIC_CREATION_GROUPS_CONFIG, Type.LIST, [], importance=Importance.LOW,
        documentation="Groups of configurations for topics created by source connectors. "
        f"connect-runtime supports only the default group ({TOPIC_CREATION_RF_CONFIG}, "
        f"{TOPIC_CREATION_PARTITIONS_CONFIG}) yet: only the default (none) is accepted.",
        group=TOPIC_CREATION_GROUP, order_in_group=1, width=Width.LONG,
        display_name="Topic Creation Groups")


def _define_exactly_once(d: ConfigDef) -> ConfigDef:
    # Connect numbers these after topic.creation.groups (2, 3, 4), in their own group.
    g = EXACTLY_ONCE_SUPPORT_GROUP
    return (
        d.define(EXACTLY_ONCE_SUPPORT_CONFIG, Type.STRING, "requested",
                 CaseInsensitiveValidString.in_("requested", "required"), Importance.MEDIUM,
                 "requested or required. With required, creating or validating the "
                 "connector fails unless the connector reports that it delivers "
                 "exactly once with this configuration and the worker has "
                 "exactly.once.source.support=enabled.",
                 group=g, order_in_group=2, width=Width.SHORT,
                 display_name="Exactly once support")
        .define(TRANSACTION_BOUNDARY_CONFIG, Type.STRING, "poll",
                CaseInsensitiveValidString.in_("poll", "interval", "connector"),
                Importance.MEDIUM,
                "poll: commit a transaction for every batch a task returns; interval: "
                "commit every transaction.boundary.interval.ms; connector: the tasks "
                "decide, which only connectors that support it accept.",
                group=g, order_in_group=3, width=Width.SHORT,
                display_name="Transaction Boundary")
        .define(TRANSACTION_BOUNDARY_INTERVAL_CONFIG, Type.LONG, None, Range.at_least(0),
                Importance.LOW,
                "With transaction.boundary=interval, how often tasks commit; unset uses "
                "the worker's offset.flush.interval.ms. Ignored for other boundaries.",
                group=g, order_in_group=4, width=Width.SHORT,
                display_name="Transaction boundary interval")
        .define(OFFSETS_STORAGE_TOPIC_CONFIG, Type.STRING, None, NonEmptyString(),
                Importance.LOW,
                "A separate offsets topic for this connector, created if missing on the "
                "cluster the connector's producer targets. Unset: the worker's global "
                "offsets topic.",
                group=OFFSETS_TOPIC_GROUP, order_in_group=1, width=Width.LONG,
                display_name="Offsets topic")
    )


def _define_topic_creation_default(d: ConfigDef) -> ConfigDef:
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


def connector_config_def(versions: Mapping[str, str | None] | None = None,
                         converters: Mapping[str, str | None] | None = None) -> ConfigDef:
    """The framework keys of a (source) connector config, in Connect 4.1's order and groups.

    ``versions`` gives the installed version of the plugin behind ``connector``,
    ``key.converter``, ``value.converter`` and ``header.converter``: the defaults of
    their ``*.plugin.version`` keys. ``converters`` gives the three converter keys'
    defaults (the worker's, as Connect shows them when validating). Both default to
    unset, which is how ``CONNECTOR_CONFIG_DEF`` is built.
    """
    d = _define_common(ConfigDef(), versions or {}, converters or {})
    return _define_exactly_once(_define_topic_creation_groups(
        _define_error_handling(_define_transforms_and_reload(d))))


CONNECTOR_CONFIG_DEF: ConfigDef = connector_config_def()
"""The framework keys of every (source) connector config, framework groups first."""

TOPIC_CREATION_DEFAULT_DEF: ConfigDef = _define_topic_creation_default(ConfigDef())
"""KIP-158's default topic creation group, parsed by :class:`ConnectorConfig`. Connect's
validation does not list these keys; ours lists them when a config sets one."""

_PARSED_DEF = CONNECTOR_CONFIG_DEF.merged(TOPIC_CREATION_DEFAULT_DEF)


def unsupported_value(key: str, value: Any) -> str | None:
    """Why this runtime cannot honour the parsed ``value`` of framework ``key`` yet, or None.

    Only keys naming features that do not exist here have an answer; their
    defaults (and values that change nothing) are honoured.
    """
    check = _UNSUPPORTED.get(key)
    return check[1] if check is not None and check[0](value) else None


_UNSUPPORTED: dict[str, tuple[Callable[[Any], bool], str]] = {
    TASKS_MAX_ENFORCE_CONFIG: (
        lambda v: v is False, "connect-runtime always enforces tasks.max"),
    TOPIC_CREATION_GROUPS_CONFIG: (
        bool, "topic creation groups other than the default are not supported yet by "
        "connect-runtime"),
}

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
        self.values: dict[str, Any] = _PARSED_DEF.parse(self.originals)

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
    def header_converter(self) -> str | None:
        """The connector's header converter class, or None to use the worker's."""
        value = self.values[HEADER_CONVERTER_CONFIG]
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
        return originals_with_prefix(self.originals, prefix)

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
                # No value: on an executor it may be a secret a provider resolved.
                log.warning("Ignoring connector config %s for connector %s: %s (KIP-618)",
                            key, self.originals.get(NAME_CONFIG), _IGNORED_OVERRIDES[key])
                continue
            out[key[len(full):]] = value
        return out
