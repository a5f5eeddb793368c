"""TaskSpecBuilder: what a Spark executor receives for one task."""

from __future__ import annotations

import base64

import pytest

from connect_runtime.cluster.fencing import transactional_ids
from connect_runtime.cluster.task_specs import TaskSpecBuilder
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.protocol.task_spec import TaskMode
from connect_runtime.storage.config_store import SessionKey

MINIMAL = {
    "bootstrap.servers": "b1:9092,b2:9092",
    "group.id": "cluster-a",
    "config.storage.topic": "cfg",
    "offset.storage.topic": "offs",
    "status.storage.topic": "stat",
}


def builder(**extra: str) -> TaskSpecBuilder:
    return TaskSpecBuilder(WorkerConfig({**MINIMAL, **extra}), "http://w1:8083", "w1:8083")


@pytest.mark.parametrize(("support", "mode"), [
    ("enabled", TaskMode.EXACTLY_ONCE),
    ("preparing", TaskMode.AT_LEAST_ONCE),
    ("disabled", TaskMode.AT_LEAST_ONCE),
])
def test_the_mode_follows_exactly_once_source_support(support: str, mode: TaskMode) -> None:
    spec = builder(**{"exactly.once.source.support": support}).build(
        "conn", 0, 5, {}, {}, None)
    assert spec.eos_support == support
    assert spec.mode is mode


def test_task_identity_configs_and_worker_settings() -> None:
    spec = builder(**{"offset.flush.interval.ms": "1500", "offset.flush.timeout.ms": "700",
                      "offset.storage.partitions": "3",
                      "offset.storage.replication.factor": "1"}).build(
        "conn", 2, 41, {"task.k": "v"}, {"connector.class": "X", "name": "conn"}, None)
    assert (spec.connector, spec.task, spec.generation) == ("conn", 2, 41)
    assert spec.task_config == {"task.k": "v"}
    assert spec.connector_config == {"connector.class": "X", "name": "conn"}
    assert spec.bootstrap_servers == "b1:9092,b2:9092"
    assert spec.group_id == "cluster-a"
    assert (spec.config_topic, spec.status_topic, spec.global_offsets_topic) == (
        "cfg", "stat", "offs")
    assert (spec.worker_url, spec.worker_id) == ("http://w1:8083", "w1:8083")
    assert (spec.offset_flush_interval_ms, spec.offset_flush_timeout_ms) == (1500, 700)
    assert (spec.offsets_topic_partitions, spec.offsets_topic_replication_factor) == (3, 1)


def test_transactional_ids_match_the_ones_fencing_targets() -> None:
    specs = [builder().build("conn", i, 1, {}, {}, None) for i in range(3)]
    assert [s.transactional_id for s in specs] == transactional_ids("cluster-a", "conn", 3)
    assert specs[1].transactional_id == "cluster-a-conn-1"


def test_client_overrides_by_prefix_without_bootstrap() -> None:
    b = builder(**{"producer.linger.ms": "7", "producer.bootstrap.servers": "p:1",
                   "consumer.fetch.min.bytes": "9", "admin.request.timeout.ms": "11",
                   "producerx.ignored": "1", "producer.transactional.id": "mine"})
    spec = b.build("conn", 0, 1, {}, {}, None)
    # transactional.id is the framework's (KIP-618); bootstrap travels separately.
    assert spec.producer_overrides == {"linger.ms": "7"}
    assert spec.consumer_overrides == {"fetch.min.bytes": "9"}
    assert spec.admin_overrides == {"request.timeout.ms": "11"}
    assert b.client_overrides("consumer") == {"fetch.min.bytes": "9"}


def test_worker_converters_are_passed_through() -> None:
    spec = builder(**{"key.converter": "connect_runtime.converters.StringConverter",
                      "value.converter.schemas.enable": "false",
                      "header.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "header.converter.schemas.enable": "true",
                      "offset.flush.interval.ms": "1000"}).build("conn", 0, 1, {}, {}, None)
    assert spec.worker_converters == {
        "key.converter": "connect_runtime.converters.StringConverter",
        "value.converter.schemas.enable": "false",
        "header.converter": "org.apache.kafka.connect.json.JsonConverter",
        "header.converter.schemas.enable": "true"}


def test_session_key_is_base64_and_signs_with_the_signature_algorithm() -> None:
    b = builder(**{"inter.worker.signature.algorithm": "HmacSHA512"})
    unsigned = b.build("conn", 0, 1, {}, {}, None)
    assert unsigned.session_key is None
    spec = b.build("conn", 0, 1, {}, {}, SessionKey(b"\xff\x00key", "HmacSHA256", 5))
    assert spec.session_key is not None
    assert base64.b64decode(spec.session_key) == b"\xff\x00key"
    assert spec.session_key_algorithm == "HmacSHA512"


def test_specs_do_not_share_the_callers_dicts() -> None:
    task_config, connector_config = {"a": "1"}, {"name": "conn"}
    b = builder(**{"producer.acks": "all"})
    first = b.build("conn", 0, 1, task_config, connector_config, None)
    second = b.build("conn", 1, 1, task_config, connector_config, None)
    task_config["a"] = "changed"
    connector_config["name"] = "changed"
    first.producer_overrides["acks"] = "1"
    assert first.task_config == {"a": "1"} and first.connector_config == {"name": "conn"}
    assert second.producer_overrides == {"acks": "all"}


def test_the_stall_threshold_is_the_connectors_else_the_workers() -> None:
    assert builder().build("conn", 0, 1, {}, {}, None).stall_threshold_ms == 300000
    worker = builder(**{"task.stall.threshold.ms": "60000"})
    assert worker.build("conn", 0, 1, {}, {}, None).stall_threshold_ms == 60000
    own = {"task.stall.threshold.ms": "2000"}
    assert worker.build("conn", 0, 1, {}, own, None).stall_threshold_ms == 2000
    # A value a config provider supplies is not known on the worker: the worker's.
    provided = {"task.stall.threshold.ms": "${env:STALL_MS}"}
    assert worker.build("conn", 0, 1, {}, provided, None).stall_threshold_ms == 60000


def test_the_workers_stall_threshold_must_be_positive() -> None:
    from connect_runtime.errors import ConfigException

    with pytest.raises(ConfigException, match=r"task\.stall\.threshold\.ms"):
        WorkerConfig({**MINIMAL, "task.stall.threshold.ms": "0"})


def test_tasks_per_process_is_the_connectors_else_the_workers() -> None:
    # The worker's default is auto (None): the Spark runner packs by its cores.
    assert builder().build("conn", 0, 1, {}, {}, None).tasks_per_process is None
    assert builder().build("conn", 0, 1, {}, {"tasks.per.process": "1"},
                           None).tasks_per_process == 1
    assert builder(**{"tasks.per.process": "8"}).build(
        "conn", 0, 1, {}, {"tasks.per.process": "AUTO"}, None).tasks_per_process is None
    worker = builder(**{"tasks.per.process": "8"})
    assert worker.build("conn", 0, 1, {}, {}, None).tasks_per_process == 8
    own = {"tasks.per.process": "3"}
    assert worker.build("conn", 0, 1, {}, own, None).tasks_per_process == 3
    provided = {"tasks.per.process": "${env:PER_PROCESS}"}
    assert worker.build("conn", 0, 1, {}, provided, None).tasks_per_process == 8


def test_a_worker_giving_each_task_cores_shares_no_process() -> None:
    # Validation refuses sharing there; a config written before spark.task.cpus
    # changed still gets a process per task.
    worker = builder(**{"spark.task.cpus": "2"})
    assert worker.build("conn", 0, 1, {}, {"tasks.per.process": "4"}, None).tasks_per_process == 1
    assert worker.build("conn", 0, 1, {}, {}, None).tasks_per_process == 1  # auto
