"""Framework connector keys, ConnectorConfig, and KIP-618 pre-flight validation."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from support.converter_names import KEY_VALUE_CONVERTERS

import connect_runtime
from connect_runtime.api.config_def import Config, ConfigDef, ConfigValue, Range, Type
from connect_runtime.api.connector import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
)
from connect_runtime.api.task import SourceTask
from connect_runtime.config.connector_config import (
    CONNECTOR_CONFIG_DEF,
    ConnectorConfig,
    ExactlyOnceSupportLevel,
    TransactionBoundary,
)
from connect_runtime.config.validation import (
    ConfigInfos,
    format_validation_errors,
    validate_connector_config,
)
from connect_runtime.errors import ConfigException

BASE = {"name": "c1", "connector.class": "Tiny"}


# --- connectors used by the pre-flight tests -------------------------------


class Tiny(SourceConnector):
    """Answers the KIP-618 questions with class attributes; own key ``tiny.level``."""

    eos: Any = ExactlyOnceSupport.SUPPORTED
    boundaries: Any = ConnectorTransactionBoundaries.SUPPORTED

    def start(self, config: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("tiny.level", Type.INT, 1, Range.between(1, 3),
                                  group="Tiny")

    def exactly_once_support(self, config: dict[str, str]) -> ExactlyOnceSupport | None:
        if isinstance(self.eos, Exception):
            raise self.eos
        return self.eos

    def can_define_transaction_boundaries(
        self, config: dict[str, str]
    ) -> ConnectorTransactionBoundaries:
        if isinstance(self.boundaries, Exception):
            raise self.boundaries
        return self.boundaries


def tiny(eos: Any = ExactlyOnceSupport.SUPPORTED,
         boundaries: Any = ConnectorTransactionBoundaries.SUPPORTED) -> Tiny:
    connector = Tiny()
    connector.eos, connector.boundaries = eos, boundaries
    return connector


def errors(infos: ConfigInfos) -> dict[str, list[str]]:
    return {value.name: value.errors for _, value in infos.configs if value.errors}


# --- CONNECTOR_CONFIG_DEF / ConnectorConfig ---------------------------------


# (name, type, default, importance, group, order, width, display name) of every framework
# key, as Kafka Connect 4.1.1 (exactly.once.source.support=enabled) lists them for
# FileStreamSourceConnector in GET /connector-plugins/<plugin>/config.
CONNECT_FRAMEWORK_KEYS = [
    ("name", "STRING", None, "HIGH", "Common", 1, "MEDIUM", "Connector name"),
    ("connector.class", "STRING", None, "HIGH", "Common", 2, "LONG", "Connector class"),
    ("connector.plugin.version", "STRING", None, "MEDIUM", "Common", 3, "MEDIUM",
     "Connector version"),
    ("tasks.max", "INT", "1", "HIGH", "Common", 4, "SHORT", "Tasks max"),
    ("tasks.max.enforce", "BOOLEAN", "true", "LOW", "Common", 5, "SHORT", "Enforce tasks max"),
    ("key.converter", "CLASS", None, "LOW", "Common", 6, "SHORT", "Key converter class"),
    ("key.converter.plugin.version", "STRING", None, "LOW", "Common", 7, "SHORT",
     "Key converter version"),
    ("value.converter", "CLASS", None, "LOW", "Common", 8, "SHORT", "Value converter class"),
    ("value.converter.plugin.version", "STRING", None, "LOW", "Common", 9, "SHORT",
     "Value converter version"),
    ("header.converter", "CLASS", None, "LOW", "Common", 10, "SHORT", "Header converter class"),
    ("header.converter.plugin.version", "STRING", None, "LOW", "Common", 11, "SHORT",
     "Header converter version"),
    ("transforms", "LIST", "", "LOW", "Transforms", 12, "LONG", "Transforms"),
    ("predicates", "LIST", "", "LOW", "Predicates", 13, "LONG", "Predicates"),
    ("config.action.reload", "STRING", "restart", "LOW", "Common", 14, "MEDIUM",
     "Reload Action"),
    ("errors.retry.timeout", "LONG", "0", "MEDIUM", "Error Handling", 1, "MEDIUM",
     "Retry Timeout for Errors"),
    ("errors.retry.delay.max.ms", "LONG", "60000", "MEDIUM", "Error Handling", 2, "MEDIUM",
     "Maximum Delay Between Retries for Errors"),
    ("errors.tolerance", "STRING", "none", "MEDIUM", "Error Handling", 3, "SHORT",
     "Error Tolerance"),
    ("errors.log.enable", "BOOLEAN", "false", "MEDIUM", "Error Handling", 4, "SHORT",
     "Log Errors"),
    ("errors.log.include.messages", "BOOLEAN", "false", "MEDIUM", "Error Handling", 5, "SHORT",
     "Log Error Details"),
    ("topic.creation.groups", "LIST", "", "LOW", "Topic Creation", 1, "LONG",
     "Topic Creation Groups"),
    ("exactly.once.support", "STRING", "requested", "MEDIUM", "Exactly Once Support", 2,
     "SHORT", "Exactly once support"),
    ("transaction.boundary", "STRING", "poll", "MEDIUM", "Exactly Once Support", 3, "SHORT",
     "Transaction Boundary"),
    ("transaction.boundary.interval.ms", "LONG", None, "LOW", "Exactly Once Support", 4,
     "SHORT", "Transaction boundary interval"),
    ("offsets.storage.topic", "STRING", None, "LOW", "offsets.topic", 1, "LONG",
     "Offsets topic"),
]


# Automatic restarts and the stall threshold (not Kafka Connect's): after Connect's
# error-handling keys, off (unset) by default.
RUNTIME_KEYS = [
    ("errors.restart.policy", "STRING", "none", "MEDIUM", "Error Handling", 6, "SHORT",
     "Restart Policy"),
    ("errors.restart.max.attempts", "INT", "10", "LOW", "Error Handling", 7, "SHORT",
     "Maximum Restart Attempts"),
    ("errors.restart.backoff.initial.ms", "LONG", "1000", "LOW", "Error Handling", 8, "SHORT",
     "Initial Restart Delay"),
    ("errors.restart.backoff.max.ms", "LONG", "300000", "LOW", "Error Handling", 9, "SHORT",
     "Maximum Restart Delay"),
    ("errors.restart.reset.after.ms", "LONG", "600000", "LOW", "Error Handling", 10, "SHORT",
     "Stable Period Before Reset"),
    ("task.stall.threshold.ms", "LONG", None, "LOW", "Error Handling", 11, "SHORT",
     "Stall Threshold"),
]

# Tasks sharing a Spark slot's process (not Kafka Connect's): last of the Common group's
# keys (Connect numbers its Transforms and Predicates keys in that sequence too).
PROCESS_KEYS = [
    ("tasks.per.process", "STRING", None, "LOW", "Common", 15, "SHORT", "Tasks per process"),
]


def test_framework_keys_and_groups_are_connects() -> None:
    infos = [key.to_info_dict() for key in CONNECTOR_CONFIG_DEF.config_keys.values()]
    listed = [(i["name"], i["type"], i["default_value"], i["importance"], i["group"],
               i["order"], i["width"], i["display_name"]) for i in infos]
    assert [k for k in listed if k not in RUNTIME_KEYS + PROCESS_KEYS] == CONNECT_FRAMEWORK_KEYS
    ours = [k for k in listed if k in RUNTIME_KEYS]
    assert ours == RUNTIME_KEYS
    # Right after Connect's config.action.reload, the last key it numbers in Common.
    assert listed.index(PROCESS_KEYS[0]) == 1 + next(
        i for i, k in enumerate(listed) if k[0] == "config.action.reload")
    # Right after Connect's error-handling keys, in the same group.
    assert listed.index(ours[0]) == 1 + next(
        i for i, k in enumerate(listed) if k[0] == "errors.log.include.messages")
    assert CONNECTOR_CONFIG_DEF.groups() == [
        "Common", "Transforms", "Predicates", "Error Handling", "Topic Creation",
        "Exactly Once Support", "offsets.topic"]
    info = CONNECTOR_CONFIG_DEF.config_keys["exactly.once.support"].to_info_dict()
    assert (info["default_value"], info["importance"], info["group"]) == (
        "requested", "MEDIUM", "Exactly Once Support")


def test_connector_config_defaults() -> None:
    c = ConnectorConfig(BASE)
    assert (c.name, c.connector_class, c.tasks_max) == ("c1", "Tiny", 1)
    assert c.key_converter is None and c.value_converter is None
    assert c.exactly_once_support is ExactlyOnceSupportLevel.REQUESTED
    assert not c.exactly_once_required
    assert c.transaction_boundary is TransactionBoundary.POLL
    assert c.transaction_boundary_interval_ms(60000) == 60000
    assert c.offsets_storage_topic is None


def test_connector_config_values_are_case_insensitive_where_connect_is() -> None:
    c = ConnectorConfig({**BASE, "exactly.once.support": "REQUIRED",
                         "transaction.boundary": " Interval ",
                         "transaction.boundary.interval.ms": "250",
                         "offsets.storage.topic": "my-offsets", "tasks.max": "4"})
    assert c.exactly_once_required
    assert c.transaction_boundary is TransactionBoundary.INTERVAL
    assert c.transaction_boundary_interval_ms(60000) == 250
    assert c.offsets_storage_topic == "my-offsets"
    assert c.tasks_max == 4


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({"connector.class": "Tiny"}, "name"),
        ({"name": "c1"}, "connector.class"),
        ({**BASE, "name": "  "}, "name"),
        ({**BASE, "name": "bad\x07name"}, "name"),
        ({**BASE, "tasks.max": "0"}, "tasks.max"),
        ({**BASE, "transaction.boundary": "sometimes"}, "transaction.boundary"),
        ({**BASE, "exactly.once.support": "maybe"}, "exactly.once.support"),
        ({**BASE, "transaction.boundary.interval.ms": "-1"}, "transaction.boundary.interval.ms"),
        ({**BASE, "offsets.storage.topic": ""}, "offsets.storage.topic"),
        ({**BASE, "value.converter": "no.such.Converter"}, "value.converter"),
        ({**BASE, "task.stall.threshold.ms": "0"}, "task.stall.threshold.ms"),
        ({**BASE, "tasks.per.process": "0"}, "tasks.per.process"),
        ({**BASE, "tasks.per.process": "65"}, "tasks.per.process"),
    ],
)
def test_connector_config_errors_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigException) as info:
        ConnectorConfig(props)
    assert key in str(info.value)


def test_converters_accept_connect_names_and_aliases() -> None:
    c = ConnectorConfig({
        **BASE,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "JsonConverter",
    })
    assert c.key_converter == "org.apache.kafka.connect.storage.StringConverter"
    assert c.value_converter == "JsonConverter"


def test_transaction_boundary_parse() -> None:
    assert TransactionBoundary.parse("CONNECTOR") is TransactionBoundary.CONNECTOR
    with pytest.raises(ConfigException) as info:
        TransactionBoundary.parse("never")
    assert info.value.name == "transaction.boundary"


def test_client_overrides_strip_prefix_and_drop_framework_owned_keys(
    caplog: pytest.LogCaptureFixture,
) -> None:
    c = ConnectorConfig({
        **BASE,
        "producer.override.linger.ms": "5",
        "producer.override.transactional.id": "mine",
        "consumer.override.isolation.level": "read_uncommitted",
        "consumer.override.fetch.max.bytes": "1000",
        "admin.override.bootstrap.servers": "other:9092",
        "producer.linger.ms": "not an override",
    })
    with caplog.at_level(logging.WARNING):
        producer = c.client_overrides("producer.override.")
        consumer = c.client_overrides("consumer")
    assert producer == {"linger.ms": "5"}
    assert consumer == {"fetch.max.bytes": "1000"}
    assert c.client_overrides("admin.override.") == {"bootstrap.servers": "other:9092"}
    warned = " ".join(r.getMessage() for r in caplog.records)
    assert "producer.override.transactional.id" in warned
    assert "consumer.override.isolation.level" in warned
    with pytest.raises(ValueError, match="prefix"):
        c.client_overrides("spark.")


def test_originals_with_prefix() -> None:
    c = ConnectorConfig({**BASE, "value.converter.schemas.enable": "true"})
    assert c.originals_with_prefix("value.converter.") == {"schemas.enable": "true"}


# --- validate_connector_config ----------------------------------------------


def test_valid_config_has_no_errors_and_connect_shape() -> None:
    infos = validate_connector_config(tiny(), {**BASE, "tiny.level": "2"}, "enabled")
    assert infos.error_count == 0
    body = infos.to_dict()
    assert list(body) == ["name", "error_count", "groups", "configs"]
    assert body["name"] == "Tiny"
    assert body["groups"] == ["Common", "Transforms", "Predicates", "Error Handling",
                              "Topic Creation", "Exactly Once Support", "offsets.topic", "Tiny"]
    names = [c["definition"]["name"] for c in body["configs"]]
    framework = CONNECTOR_CONFIG_DEF.names()
    assert names[:len(framework)] == framework  # framework keys first
    assert names[len(framework):] == ["tiny.level"]
    level = body["configs"][-1]
    assert level["value"] == {"name": "tiny.level", "value": "2", "recommended_values": [],
                              "errors": [], "visible": True}
    assert set(level["definition"]) == {
        "name", "type", "required", "default_value", "importance", "documentation",
        "group", "width", "display_name", "dependents", "order"}


def test_error_count_counts_messages_across_framework_and_connector_keys() -> None:
    infos = validate_connector_config(
        tiny(), {"connector.class": "Tiny", "tasks.max": "x", "tiny.level": "9"}, "enabled")
    assert errors(infos) == {
        "name": ['Missing required configuration "name" which has no default value.'],
        "tasks.max": ["Invalid value x for configuration tasks.max: Not a number of type INT"],
        "tiny.level": ["Invalid value 9 for configuration tiny.level: "
                       "Value must be no more than 3"],
    }
    assert infos.error_count == 3


def test_required_eos_with_supported_connector_passes() -> None:
    infos = validate_connector_config(tiny(), {**BASE, "exactly.once.support": "required"},
                                      "enabled")
    assert infos.error_count == 0


def test_required_eos_with_unsupported_connector_fails_on_that_key() -> None:
    infos = validate_connector_config(tiny(eos=ExactlyOnceSupport.UNSUPPORTED),
                                      {**BASE, "exactly.once.support": "Required"}, "enabled")
    assert list(errors(infos)) == ["exactly.once.support"]
    assert "does not support exactly-once" in errors(infos)["exactly.once.support"][0]


class Explaining(Tiny):
    """UNSUPPORTED, saying why on ``exactly.once.support`` from its own validate."""

    eos = ExactlyOnceSupport.UNSUPPORTED

    def validate(self, config: dict[str, str]) -> Config:
        result = super().validate(config)
        result.config_values.append(ConfigValue("exactly.once.support",
                                                errors=["set tiny.level=3"]))
        return result


@pytest.mark.parametrize(("worker_eos", "before"), [
    ("enabled", []), ("disabled", ["does not have exactly-once source support enabled"])])
def test_a_connectors_own_reason_replaces_the_generic_unsupported_message(
        worker_eos: str, before: list[str]) -> None:
    infos = validate_connector_config(Explaining(), {**BASE, "exactly.once.support": "required"},
                                      worker_eos)
    *framework, reason = errors(infos)["exactly.once.support"]
    assert reason == "set tiny.level=3"  # and never the generic "does not support"
    assert len(framework) == len(before)
    assert all(words in message for words, message in zip(before, framework, strict=True))
    [shown] = [v for _, v in infos.configs if v.name == "exactly.once.support"]
    assert shown.value == "required"  # the framework's value, not the connector's bare one


def test_required_eos_with_undecided_connector_points_at_docs_and_requested() -> None:
    infos = validate_connector_config(tiny(eos=None),
                                      {**BASE, "exactly.once.support": "required"}, "enabled")
    (message,) = errors(infos)["exactly.once.support"]
    assert "cannot determine" in message
    assert "documentation" in message
    assert '"requested"' in message


def test_requested_eos_never_asks_the_connector() -> None:
    infos = validate_connector_config(tiny(eos=RuntimeError("must not be called")), BASE,
                                      "enabled")
    assert infos.error_count == 0


@pytest.mark.parametrize("worker_eos", ["disabled", "preparing"])
def test_required_eos_on_a_worker_without_eos(worker_eos: str) -> None:
    infos = validate_connector_config(tiny(eos=RuntimeError("not asked without EOS")),
                                      {**BASE, "exactly.once.support": "required"}, worker_eos)
    (message,) = errors(infos)["exactly.once.support"]
    assert "does not have exactly-once source support enabled" in message


def test_connector_exception_becomes_an_error_on_the_key() -> None:
    infos = validate_connector_config(tiny(eos=ValueError("boom")),
                                      {**BASE, "exactly.once.support": "required"}, "enabled")
    assert errors(infos) == {
        "exactly.once.support": ["An unexpected error occurred during validation: boom"]}


@pytest.mark.parametrize("answer", [ConnectorTransactionBoundaries.UNSUPPORTED, None])
def test_connector_boundary_needs_a_connector_that_supports_it(answer: Any) -> None:
    infos = validate_connector_config(tiny(boundaries=answer),
                                      {**BASE, "transaction.boundary": "connector"}, "enabled")
    (message,) = errors(infos)["transaction.boundary"]
    assert "poll or interval" in message
    assert infos.error_count == 1


def test_connector_boundary_supported_passes_and_exceptions_are_caught() -> None:
    props = {**BASE, "transaction.boundary": "CONNECTOR"}
    assert validate_connector_config(tiny(), props, "enabled").error_count == 0
    infos = validate_connector_config(tiny(boundaries=KeyError()), props, "enabled")
    (message,) = errors(infos)["transaction.boundary"]
    assert message.startswith("An unexpected error occurred during validation")


def test_invalid_boundary_value_skips_the_connector_check() -> None:
    infos = validate_connector_config(tiny(boundaries=RuntimeError("not asked")),
                                      {**BASE, "transaction.boundary": "bogus"}, "enabled")
    (message,) = errors(infos)["transaction.boundary"]
    assert message.startswith("Invalid value bogus for configuration transaction.boundary")


class Broken(Tiny):
    def validate(self, config: dict[str, str]) -> Config:
        raise RuntimeError("validate exploded")


class Extra(Tiny):
    """Adds an error on a key it never defined, and one on a framework key."""

    def validate(self, config: dict[str, str]) -> Config:
        result = super().validate(config)
        result.config_values.append(ConfigValue("undeclared", "v", errors=["odd key"]))
        result.config_values.append(ConfigValue("tasks.max", 1, errors=["too few for me"]))
        return result


def test_connector_validate_exception_lands_on_connector_class() -> None:
    infos = validate_connector_config(Broken(), BASE, "enabled")
    assert errors(infos) == {
        "connector.class": ["An unexpected error occurred during validation: validate exploded"]}


def test_values_without_definition_come_first_and_framework_errors_are_kept() -> None:
    infos = validate_connector_config(Extra(), {**BASE, "tasks.max": "0"}, "enabled")
    key, first = infos.configs[0]
    assert key is None and first.name == "undeclared"
    assert infos.to_dict()["configs"][0]["definition"] is None
    tasks = next(v for k, v in infos.configs if k is not None and k.name == "tasks.max")
    assert tasks.errors == ["Invalid value 0 for configuration tasks.max: Value must be at least 1",
                            "too few for me"]
    assert infos.error_count == 3


def test_null_values_are_errors() -> None:
    infos = validate_connector_config(tiny(), {**BASE, "tiny.level": None}, "enabled")  # type: ignore[dict-item]
    assert errors(infos)["tiny.level"] == [
        "Null value can not be supplied as the configuration value."]


def test_format_validation_errors_matches_connect() -> None:
    infos = validate_connector_config(tiny(eos=None), {
        "connector.class": "Tiny", "exactly.once.support": "required"}, "enabled")
    text = format_validation_errors(infos)
    lines = text.split("\n")
    assert lines[0] == "Connector configuration is invalid and contains the following 2 error(s):"
    assert lines[1] == 'Missing required configuration "name" which has no default value.'
    assert "cannot determine" in lines[2]
    assert lines[3] == ("You can also find the above list of errors at the endpoint "
                        "`/connector-plugins/{connectorType}/config/validate`")


def test_connector_boundary_is_checked_even_without_worker_eos() -> None:
    # As Kafka Connect does: the config would break the day EOS is enabled.
    infos = validate_connector_config(tiny(boundaries=ConnectorTransactionBoundaries.UNSUPPORTED),
                                      {**BASE, "transaction.boundary": "connector"}, "disabled")
    assert list(errors(infos)) == ["transaction.boundary"]


# --- framework keys of features this runtime lacks; KIP-891 version pins -----------


def value_of(infos: ConfigInfos, name: str) -> ConfigValue:
    return next(value for _, value in infos.configs if value.name == name)


def test_defaults_of_unsupported_features_are_accepted() -> None:
    config = {**BASE, "transforms": "", "predicates": " ", "errors.tolerance": "none",
              "errors.retry.timeout": "0", "errors.log.enable": "false",
              "tasks.max.enforce": "true", "topic.creation.groups": "",
              # These change nothing here: no config providers, no retries, no error log.
              "config.action.reload": "none", "errors.retry.delay.max.ms": "5",
              "errors.log.include.messages": "true"}
    assert errors(validate_connector_config(tiny(), config, "enabled")) == {}


@pytest.mark.parametrize(("key", "value", "message"), [
    ("tasks.max.enforce", "false", "connect-runtime always enforces tasks.max"),
    ("topic.creation.groups", "big", "topic creation groups other than the default are not "
                                     "supported yet by connect-runtime"),
])
def test_other_values_of_unsupported_features_fail_validation(key: str, value: str,
                                                              message: str) -> None:
    infos = validate_connector_config(tiny(), {**BASE, key: value}, "enabled")
    assert errors(infos) == {key: [message]}
    assert message in format_validation_errors(infos)  # what POST /connectors answers


def test_header_converter_is_validated_like_the_other_converters() -> None:
    worker = {"header.converter": "org.apache.kafka.connect.storage.SimpleHeaderConverter"}
    infos = validate_connector_config(tiny(), dict(BASE), "enabled", worker)
    assert errors(infos) == {}
    keys = {key.name: key for key, _ in infos.configs if key is not None}
    assert keys["header.converter"].default == worker["header.converter"]
    assert keys["header.converter.plugin.version"].default == connect_runtime.__version__
    assert "org.apache.kafka.connect.storage.SimpleHeaderConverter" in value_of(
        infos, "header.converter").recommended_values
    for name in ("JsonConverter", "Simple", "org.apache.kafka.connect.storage.StringConverter"):
        ok = validate_connector_config(tiny(), {**BASE, "header.converter": name}, "enabled")
        assert errors(ok) == {}
        assert ConnectorConfig({**BASE, "header.converter": name}).header_converter == name
    bad = validate_connector_config(tiny(), {**BASE, "header.converter": "no.such.Header"},
                                    "enabled")
    assert list(errors(bad)) == ["header.converter"]
    assert "no.such.Header" in errors(bad)["header.converter"][0]


def test_error_handling_keys_are_honoured() -> None:
    config = {**BASE, "errors.tolerance": "all", "errors.retry.timeout": "-1",
              "errors.retry.delay.max.ms": "1000", "errors.log.enable": "true",
              "errors.log.include.messages": "true"}
    assert errors(validate_connector_config(tiny(), config, "enabled")) == {}


def test_a_malformed_value_gets_its_type_error_not_the_unsupported_one() -> None:
    infos = validate_connector_config(tiny(), {**BASE, "errors.tolerance": "some"}, "enabled")
    assert errors(infos) == {"errors.tolerance": [
        "Invalid value some for configuration errors.tolerance: String must be one of: "
        "none, all"]}


class UpperConverter:
    """A converter that is not built in: its version is unknown."""

    def configure(self, configs: dict[str, str], is_key: bool) -> None:
        pass

    def from_connect(self, topic: str, schema: Any, value: Any) -> bytes | None:
        return None if value is None else str(value).upper().encode()


def test_plugin_versions_default_to_the_installed_ones() -> None:
    worker = {"key.converter": "org.apache.kafka.connect.storage.StringConverter",
              "value.converter": f"{__name__}.UpperConverter"}
    infos = validate_connector_config(tiny(), dict(BASE), "enabled", worker)
    assert errors(infos) == {}
    keys = {key.name: key for key, _ in infos.configs if key is not None}
    assert keys["connector.plugin.version"].default == "unknown"  # Tiny has no version()
    assert keys["key.converter"].default == worker["key.converter"]
    assert keys["key.converter.plugin.version"].default == connect_runtime.__version__
    assert keys["value.converter.plugin.version"].default is None  # not ours: unknown
    connector_version = value_of(infos, "connector.plugin.version")
    assert (connector_version.value, connector_version.recommended_values) == (
        "unknown", ["unknown"])
    assert value_of(infos, "key.converter").recommended_values == KEY_VALUE_CONVERTERS


def test_a_pinned_version_must_be_the_installed_one() -> None:
    assert errors(validate_connector_config(
        tiny(), {**BASE, "connector.plugin.version": "unknown"}, "enabled")) == {}
    infos = validate_connector_config(
        tiny(), {**BASE, "connector.plugin.version": "9.9"}, "enabled")
    message = (f"Plugin {Tiny.__module__}.Tiny not found that matches the version range "
               "[9.9,9.9], available versions: [unknown]")
    assert errors(infos) == {"connector.class": [message], "connector.plugin.version": [message]}
    infos = validate_connector_config(
        tiny(), {**BASE, "value.converter": "String",
                 "value.converter.plugin.version": "[1.0,2.0)"}, "enabled")
    assert errors(infos)["value.converter.plugin.version"] == [
        "Plugin String not found that matches the version range [1.0,2.0), available "
        f"versions: [{connect_runtime.__version__}]"]


def test_topic_creation_default_keys_are_listed_only_when_set() -> None:
    plain = validate_connector_config(tiny(), dict(BASE), "enabled")
    assert not any(key is not None and key.name.startswith("topic.creation.default.")
                   for key, _ in plain.configs)
    infos = validate_connector_config(
        tiny(), {**BASE, "topic.creation.default.partitions": "x"}, "enabled")
    assert errors(infos) == {"topic.creation.default.partitions": [
        "Invalid value x for configuration topic.creation.default.partitions: "
        "Not a number of type INT"]}
    config = ConnectorConfig({**BASE, "topic.creation.default.partitions": "3",
                              "topic.creation.default.replication.factor": "1"})
    assert config.topic_creation() == (3, 1)


def test_a_worker_converter_that_does_not_resolve_is_no_default() -> None:
    infos = validate_connector_config(tiny(), dict(BASE), "enabled",
                                      {"value.converter": "no.such.Converter"})
    assert errors(infos) == {}
    assert value_of(infos, "value.converter").value is None


def test_sharing_a_process_is_refused_where_the_worker_gives_each_task_cores() -> None:
    shared = {**BASE, "tasks.max": "4", "tasks.per.process": "4"}
    assert errors(validate_connector_config(tiny(), shared, "enabled")) == {}
    assert errors(validate_connector_config(
        tiny(), {**shared, "tasks.per.process": "1"}, "enabled", worker_task_cpus=2)) == {}
    assert errors(validate_connector_config(
        tiny(), {**shared, "tasks.per.process": "65"}, "enabled")) == {
        "tasks.per.process": ["Invalid value 65 for configuration tasks.per.process: "
                              "Value must be auto or a whole number of tasks from 1 to 64"]}
    assert errors(validate_connector_config(
        tiny(), {**shared, "tasks.per.process": "auto"}, "enabled", worker_task_cpus=2)) == {}
    assert errors(validate_connector_config(tiny(), shared, "enabled", worker_task_cpus=2)) == {
        "tasks.per.process": [
            "tasks cannot share a process on this worker: its spark.task.cpus=2 gives each "
            "task cores of its own; set tasks.per.process=1, auto or leave it unset"]}
