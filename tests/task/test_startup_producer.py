"""A task producer's settings: the runtime's defaults < the worker's ``producer.*``
< the connector's ``producer.override.*``; the ids are the runtime's (pure logic)."""

from __future__ import annotations

from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.task.startup import producer_config


def spec(**producer: str) -> TaskSpec:
    return TaskSpec(connector="orders", task=3, generation=1, task_config={},
                    connector_config={}, bootstrap_servers="k:9092", group_id="g",
                    config_topic="c", status_topic="s", global_offsets_topic="o",
                    worker_url="http://w:8083", worker_id="w", eos_support="enabled",
                    offset_flush_interval_ms=1000, producer_overrides=dict(producer))


def connector(**overrides: str) -> ConnectorConfig:
    return ConnectorConfig({"name": "orders", "connector.class": "SequenceSourceConnector",
                            **{f"producer.override.{k}": v for k, v in overrides.items()}})


def test_exactly_once_producers_are_transactional_with_the_runtimes_ids() -> None:
    conf = producer_config(spec(), connector(), transactional=True)
    assert conf["transactional.id"] == "g-orders-3" and conf["client.id"] == "connect-g-orders-3"
    assert conf["enable.idempotence"] is True and conf["acks"] == "all"
    assert conf["transaction.timeout.ms"] == 60000 and conf["linger.ms"] == 5


def test_at_least_once_producers_have_no_transaction_settings() -> None:
    conf = producer_config(spec(), connector(), transactional=False)
    assert conf["enable.idempotence"] is True and conf["linger.ms"] == 5
    assert "transactional.id" not in conf and "transaction.timeout.ms" not in conf


def test_the_worker_and_then_the_connector_override_the_defaults() -> None:
    conf = producer_config(spec(**{"linger.ms": "50"}), connector(), transactional=True)
    assert conf["linger.ms"] == "50"
    conf = producer_config(spec(**{"linger.ms": "50"}), connector(**{"linger.ms": "0"}),
                           transactional=True)
    assert conf["linger.ms"] == "0"
