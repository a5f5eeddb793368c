"""Framework connector keys, ConnectorConfig, and KIP-618 pre-flight validation."""

from __future__ import annotations

import logging
from typing import Any

import pytest

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


def test_framework_keys_and_groups() -> None:
    assert CONNECTOR_CONFIG_DEF.names() == [
        "name", "connector.class", "tasks.max", "key.converter", "value.converter",
        "exactly.once.support", "transaction.boundary", "transaction.boundary.interval.ms",
        "offsets.storage.topic", "topic.creation.default.replication.factor",
        "topic.creation.default.partitions",
    ]
    assert CONNECTOR_CONFIG_DEF.groups() == ["Common", "Exactly Once Support", "offsets.topic",
                                             "Topic Creation"]
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
    assert body["groups"] == ["Common", "Exactly Once Support", "offsets.topic",
                              "Topic Creation", "Tiny"]
    names = [c["definition"]["name"] for c in body["configs"]]
    assert names[:11] == CONNECTOR_CONFIG_DEF.names()  # framework keys first
    assert names[11:] == ["tiny.level"]
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
