"""Config providers through the REST API and the real herder (its Kafka stores and
Spark runner replaced by in-memory ones: nothing here is about Kafka).

What a user sees: ``POST /connectors`` answers 400 naming the key of a variable
that cannot be resolved; the config and task configs hold placeholders, never
secrets; the connector instance gets the resolved config; the task spec shipped
to Spark carries placeholders and the provider settings; a connector's failure
trace is scrubbed.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from rest_checks import AppClient, assert_connect_error
from support.memory_herder import leading_herder

from connect_runtime.api.config_def import ConfigDef, Importance, Type
from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.task import SourceTask
from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.rest import create_app
from connect_runtime.security.providers import ENV_VAR_PROVIDER, FILE_PROVIDER

FILE_SECRET = "file-secret-0c41"
ENV_SECRET = "env-secret-ab29"
LITERAL = "literal-secret-77e1"
STARTED: list[dict[str, str]] = []  # configs the connector instances were started with


class CopyingSource(SourceConnector):
    """Hands its whole config to one task, as many connectors do; fails to start when
    ``fail`` is set, quoting its password."""

    def start(self, config: dict[str, str]) -> None:
        STARTED.append(dict(config))
        if config.get("fail"):
            raise RuntimeError(f"login refused for password {config['db.password']}")
        self.config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return SourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self.config, "task.only": "x"}]

    def stop(self) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return (ConfigDef().define("db.password", Type.PASSWORD, importance=Importance.HIGH)
                .define("api.key", Type.PASSWORD, None, importance=Importance.HIGH))


@pytest.fixture
def secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "db.properties").write_text(f"password={FILE_SECRET}\n", encoding="utf-8")
    monkeypatch.setenv("REST_TEST_API_KEY", ENV_SECRET)
    return tmp_path


@pytest.fixture
def herder(secrets: Path) -> Iterator[DistributedHerder]:
    herder = leading_herder({
        "config.providers": "file,env", "config.providers.file.class": FILE_PROVIDER,
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.env.class": ENV_VAR_PROVIDER})
    herder._reconciler.start()  # the one thread that acts; reconcile_now() steps it
    yield herder
    herder._reconciler.stop(timeout_s=10)


@pytest.fixture
def client(herder: DistributedHerder) -> Iterator[AppClient]:
    with AppClient(create_app(herder)) as app_client:
        yield app_client


def connector_config(secrets: Path, **extra: str) -> dict[str, str]:
    return {"connector.class": f"{__name__}.CopyingSource", "tasks.max": "1",
            "db.password": f"${{file:{secrets}/db.properties:password}}",
            "api.key": "${env:REST_TEST_API_KEY}", **extra}


@pytest.mark.parametrize(("key", "value", "why"), [
    ("db.password", "${vault:secret/db:password}", "no config provider named 'vault'"),
    ("db.password", "${file:{dir}/nosuch.properties:password}",
     "Could not read properties from file"),
    ("db.password", "${file:{dir}/db.properties:nokey}", "has no value for key 'nokey'"),
    ("db.password", "${file:/etc/passwd.properties:x}", "is not in allowed.paths"),
    ("api.key", "${env:NOT_SET_FOR_THIS_TEST}", "has no value for key 'NOT_SET_FOR_THIS_TEST'"),
])
def test_create_with_an_unresolvable_variable_is_a_400_naming_the_key(
        client: AppClient, herder: DistributedHerder, secrets: Path, key: str, value: str,
        why: str) -> None:
    value = value.replace("{dir}", str(secrets))
    response = client.post("/connectors", json={
        "name": "bad", "config": connector_config(secrets, **{key: value})})
    message = assert_connect_error(response, 400)
    assert message.startswith("Connector configuration is invalid and contains the following "
                              "1 error(s):\n")
    assert f"Invalid value for configuration {key}: cannot resolve {value}: " in message
    assert why in message
    assert herder.connectors() == []  # nothing was written


def test_config_and_task_configs_hold_placeholders_the_connector_gets_secrets(
        client: AppClient, herder: DistributedHerder, secrets: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    submitted = connector_config(secrets)
    STARTED.clear()
    with caplog.at_level(logging.DEBUG, logger="connect_runtime"):
        created = client.post("/connectors", json={"name": "c", "config": submitted})
        assert created.status_code == 201, created.text
        herder._reconciler.reconcile_now()  # starts the connector, writes its task configs
        herder._reconciler.reconcile_now()  # submits the tasks
    assert "connector c started" in caplog.text
    assert FILE_SECRET not in caplog.text and ENV_SECRET not in caplog.text
    assert STARTED[-1]["db.password"] == FILE_SECRET and STARTED[-1]["api.key"] == ENV_SECRET

    assert client.get("/connectors/c/config").json() == {**submitted, "name": "c"}
    [task] = client.get("/connectors/c/tasks").json()
    assert task["config"]["db.password"] == submitted["db.password"]
    assert task["config"]["api.key"] == "${env:REST_TEST_API_KEY}"
    assert task["config"]["task.only"] == "x"
    [spec] = herder.runner.submitted["c"]  # type: ignore[attr-defined]
    assert spec.task_config["db.password"] == submitted["db.password"]
    assert spec.config_providers.names == ["file", "env"]
    assert spec.password_keys == ("api.key", "db.password")
    for text in (json.dumps(herder.config_store.snapshot().__dict__, default=str), repr(spec),
                 client.get("/connectors?expand=info&expand=status").text):
        assert FILE_SECRET not in text and ENV_SECRET not in text


def test_validate_never_answers_with_a_secret(client: AppClient, secrets: Path) -> None:
    plugin = f"{__name__}.CopyingSource"
    for config in (connector_config(secrets, name="v"), connector_config(secrets, **{
            "name": "v", "db.password": LITERAL})):
        response = client.put(f"/connector-plugins/{plugin}/config/validate", json=config)
        assert response.status_code == 200 and response.json()["error_count"] == 0, response.text
        for secret in (FILE_SECRET, ENV_SECRET, LITERAL):
            assert secret not in response.text


def test_a_failing_connectors_trace_is_scrubbed(client: AppClient, herder: DistributedHerder,
                                                secrets: Path) -> None:
    assert client.post("/connectors", json={
        "name": "f", "config": connector_config(secrets, fail="yes")}).status_code == 201
    herder._reconciler.reconcile_now()
    state, trace = herder.status_store.connectors["f"]  # type: ignore[attr-defined]
    assert state == "FAILED"
    assert "RuntimeError: login refused for password [hidden]" in (trace or "")
    assert FILE_SECRET not in (trace or "")
