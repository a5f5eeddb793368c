"""WorkerConfig from a .properties file plus CONNECT_* overrides."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from connect_runtime.config.properties import (
    env_key_to_property,
    env_overrides,
    load_properties_file,
)
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException

MINIMAL = {
    "group.id": "cluster-a",
    "config.storage.topic": "cfg",
    "offset.storage.topic": "offs",
    "status.storage.topic": "stat",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "worker.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_from_file_with_env_overrides(tmp_path: Path) -> None:
    path = write(tmp_path, """
# a Connect worker
bootstrap.servers=broker1:9092, broker2:9092
group.id: from-file
config.storage.topic=cfg
offset.storage.topic=offs
status.storage.topic=stat
offset.flush.interval.ms=10000
""")
    env = {"CONNECT_GROUP_ID": "from-env", "CONNECT_OFFSET_FLUSH_INTERVAL_MS": "2500",
           "PATH": "/usr/bin", "CONNECT_": "ignored"}
    config = WorkerConfig.from_file(str(path), environ=env)
    assert config.group_id == "from-env"
    assert config["offset.flush.interval.ms"] == 2500
    assert config.bootstrap_servers == "broker1:9092,broker2:9092"
    assert config.eos_enabled  # this project's default
    assert config["config.storage.replication.factor"] == 3


def test_file_without_env_keeps_file_values(tmp_path: Path) -> None:
    path = write(tmp_path, "\n".join(f"{k}={v}" for k, v in MINIMAL.items()))
    assert WorkerConfig.from_file(str(path)).group_id == "cluster-a"


def test_later_files_override_earlier_ones_and_env_overrides_all(tmp_path: Path) -> None:
    base = tmp_path / "image-defaults.properties"
    base.write_text("plugin.path=\noffset.flush.interval.ms=1000\n", encoding="utf-8")
    main = write(tmp_path, "\n".join(f"{k}={v}" for k, v in MINIMAL.items())
                 + "\noffset.flush.interval.ms=2000\n")
    secret = tmp_path / "kafka-client.properties"
    secret.write_text("group.id=from-secret\n", encoding="utf-8")
    config = WorkerConfig.from_files([str(base), str(main), str(secret)],
                                     environ={"CONNECT_STATUS_STORAGE_TOPIC": "from-env"})
    assert config["offset.flush.interval.ms"] == 2000
    assert config.group_id == "from-secret"
    assert config["status.storage.topic"] == "from-env"


def test_missing_group_id_names_the_key() -> None:
    props = {k: v for k, v in MINIMAL.items() if k != "group.id"}
    with pytest.raises(ConfigException) as info:
        WorkerConfig(props)
    assert info.value.name == "group.id"
    assert "group.id" in str(info.value)


def test_invalid_eos_mode_names_the_key() -> None:
    with pytest.raises(ConfigException, match=r"exactly\.once\.source\.support"):
        WorkerConfig({**MINIMAL, "exactly.once.source.support": "ENABLED"})


def test_plugin_path_entries_must_be_existing_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert WorkerConfig(MINIMAL)["plugin.path"] == []
    (tmp_path / "plugins").mkdir()
    (tmp_path / "file.zip").write_bytes(b"")
    good = f"{tmp_path / 'plugins'} , {tmp_path}"
    assert WorkerConfig({**MINIMAL, "plugin.path": good})["plugin.path"] == [
        str(tmp_path / "plugins"), str(tmp_path)]
    for bad in (tmp_path / "absent", tmp_path / "file.zip"):
        with pytest.raises(ConfigException) as info:
            WorkerConfig({**MINIMAL, "plugin.path": f"{tmp_path},{bad}"})
        assert info.value.name == "plugin.path"
        assert f"plugin.path: '{bad}' is not an existing directory" in str(info.value)
    # The CLI exits with status 2, naming the key and the entry, before starting anything.
    from connect_runtime.cli import main

    props = write(tmp_path, "\n".join(f"{k}={v}" for k, v in MINIMAL.items())
                  + f"\nbootstrap.servers=127.0.0.1:1\nplugin.path={tmp_path / 'absent'}\n")
    assert main([str(props)]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "plugin.path" in err and "absent" in err
    # So does a plugin.path every user can write (issue 48, item 7), before Kafka.
    (tmp_path / "plugins").chmod(0o777)
    props.write_text(props.read_text().replace(str(tmp_path / "absent"),
                                               str(tmp_path / "plugins")))
    assert main([str(props)]) == 2
    err = capsys.readouterr().err
    assert (f"configuration error: Invalid value '{tmp_path / 'plugins'}' for configuration "
            f"plugin.path: {tmp_path / 'plugins'} is writable by every user") in err, err


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match="cannot read worker config file"):
        load_properties_file(tmp_path / "absent.properties")


def test_framework_owned_client_keys_are_ignored_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        config = WorkerConfig({**MINIMAL, "producer.transactional.id": "mine",
                               "producer.linger.ms": "7", "consumer.isolation.level": "x"})
    assert "producer.transactional.id" in caplog.text
    assert config.client_config("producer") == {
        "bootstrap.servers": "localhost:9092", "linger.ms": "7"}
    assert "isolation.level" not in config.client_config("consumer")


def test_spark_conf_and_listener() -> None:
    config = WorkerConfig({**MINIMAL, "spark.executor.cores": "2",
                           "listeners": "http://127.0.0.1:18083"})
    spark = config.spark_settings()
    assert spark.conf["spark.executor.cores"] == "2" and spark.master == "local[*,4]"
    assert config.listener() == ("127.0.0.1", 18083)
    assert config.advertised_url() == "http://127.0.0.1:18083"
    for listeners in ("ftp://:8443", "http://:8083,https://:8443", "http://:port"):
        with pytest.raises(ConfigException, match="configuration listeners"):
            WorkerConfig({**MINIMAL, "listeners": listeners})
    with pytest.raises(ConfigException, match=r"configuration ssl\.keystore\.location"):
        WorkerConfig({**MINIMAL, "listeners": "https://:8443"})


@pytest.mark.parametrize(
    ("env", "prop"),
    [
        ("CONNECT_BOOTSTRAP_SERVERS", "bootstrap.servers"),
        ("CONNECT_OFFSET_FLUSH_INTERVAL_MS", "offset.flush.interval.ms"),
        ("CONNECT_SPARK_EXECUTOR__CORES", "spark.executor_cores"),
        ("CONNECT_SOME___DASHED_KEY", "some-dashed.key"),
    ],
)
def test_env_key_to_property(env: str, prop: str) -> None:
    assert env_key_to_property(env) == prop


def test_env_overrides_only_take_connect_prefixed_names() -> None:
    assert env_overrides({"CONNECT_GROUP_ID": "g", "HOME": "/root", "CONNECT_": "x"}) == {
        "group.id": "g"}


def test_header_converter_and_the_converters_sub_configs() -> None:
    plain = WorkerConfig(MINIMAL)
    assert plain["header.converter"] == "org.apache.kafka.connect.storage.SimpleHeaderConverter"
    assert plain.converter_configs() == {}  # only what was given: tasks default the rest
    config = WorkerConfig({**MINIMAL, "header.converter": "JsonConverter",
                           "header.converter.schemas.enable": "true",
                           "value.converter.schemas.enable": "false",
                           "producer.acks": "all"})
    assert config["header.converter"] == "JsonConverter"
    assert config.converter_configs() == {
        "header.converter": "JsonConverter", "header.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "false"}


def test_tasks_per_process_is_bounded_and_refused_with_cores_per_task() -> None:
    assert WorkerConfig(MINIMAL).tasks_per_process is None  # auto
    assert WorkerConfig({**MINIMAL, "tasks.per.process": "64"}).tasks_per_process == 64
    assert WorkerConfig({**MINIMAL, "tasks.per.process": " Auto "}).tasks_per_process is None
    for bad in ("65", "0", "-1", "2.5", "many", ""):
        with pytest.raises(ConfigException, match=r"tasks\.per\.process.*auto or a whole "
                                                  r"number of tasks from 1 to 64"):
            WorkerConfig({**MINIMAL, "tasks.per.process": bad})
    with pytest.raises(ConfigException) as info:
        WorkerConfig({**MINIMAL, "tasks.per.process": "2", "spark.task.cpus": "2"})
    assert info.value.name == "tasks.per.process"
    assert "spark.task.cpus=2" in str(info.value)
    # Either alone is fine, and auto gives each task a process there.
    WorkerConfig({**MINIMAL, "tasks.per.process": "1", "spark.task.cpus": "2"})
    WorkerConfig({**MINIMAL, "spark.task.cpus": "2"})
