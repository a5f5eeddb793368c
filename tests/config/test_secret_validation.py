"""Validation with config providers: variables are checked on their key, resolved
values and PASSWORD values never appear in the answer or the log."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from connect_runtime.api.config_def import Config, ConfigDef, Importance, Type
from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.task import SourceTask
from connect_runtime.config.validation import format_validation_errors, validate_connector_config
from connect_runtime.security.providers import (
    ENV_VAR_PROVIDER,
    FILE_PROVIDER,
    ConfigProviders,
    ConfigResolver,
)

FILE_SECRET = "file-secret-7f3a"
ENV_SECRET = "env-secret-91bc"
LITERAL = "literal-password-55d0"


class Guarded(SourceConnector):
    """``db.password`` is PASSWORD; ``fail.with`` makes validate() raise quoting the
    resolved password, as a careless connector would."""

    def start(self, config: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return SourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        pass

    def config_def(self) -> ConfigDef:
        return (ConfigDef()
                .define("db.password", Type.PASSWORD, importance=Importance.HIGH)
                .define("db.user", Type.STRING, "admin", importance=Importance.HIGH)
                .define("port", Type.INT, 5432, importance=Importance.LOW))

    def validate(self, config: dict[str, str]) -> Config:
        if config.get("fail.with") == "password":
            raise RuntimeError(f"cannot log in as {config.get('db.user', 'admin')} with "
                               f"{config['db.password']}")
        return super().validate(config)


@pytest.fixture
def resolver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ConfigResolver:
    (tmp_path / "db.properties").write_text(f"password={FILE_SECRET}\nuser={ENV_SECRET}x\n",
                                            encoding="utf-8")
    monkeypatch.setenv("TEST_DB_PASSWORD", ENV_SECRET)
    return ConfigProviders.from_worker_config({
        "config.providers": "file,env", "config.providers.file.class": FILE_PROVIDER,
        "config.providers.env.class": ENV_VAR_PROVIDER}).instantiate()


def config(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"name": "c", "connector.class": "Guarded",
            "db.password": f"${{file:{tmp_path}/db.properties:password}}", **extra}


def answer(infos: object) -> tuple[dict[str, dict[str, object]], str]:
    body = infos.to_dict()  # type: ignore[attr-defined]
    return {c["value"]["name"]: c["value"] for c in body["configs"]}, json.dumps(body)


def test_resolved_variables_validate_and_the_answer_shows_what_was_submitted(
        tmp_path: Path, resolver: ConfigResolver) -> None:
    submitted = config(tmp_path, **{"db.user": f"${{file:{tmp_path}/db.properties:user}}",
                                    "port": "${env:NO_SUCH_PORT_VAR}"})
    infos = validate_connector_config(Guarded(), submitted, "enabled", resolver=resolver)
    values, text = answer(infos)
    assert values["db.password"]["value"] == "[hidden]" and values["db.password"]["errors"] == []
    # Not PASSWORD, yet resolved from a provider: the placeholder is shown, not the value.
    assert values["db.user"]["value"] == f"${{file:{tmp_path}/db.properties:user}}"
    assert values["port"]["errors"][-1] == (
        "Invalid value for configuration port: cannot resolve ${env:NO_SUCH_PORT_VAR}: config "
        "provider 'env' has no value for key 'NO_SUCH_PORT_VAR'")
    assert FILE_SECRET not in text and ENV_SECRET not in text


@pytest.mark.parametrize(("value", "why"), [
    ("${vault:secret/db:password}", "no config provider named 'vault'"),
    ("${file:/nonexistent/db.properties:password}", "Could not read properties from file"),
    ("${env:NOT_DEFINED_ANYWHERE}", "config provider 'env' has no value"),
])
def test_an_unresolvable_variable_is_an_error_on_its_key(
        tmp_path: Path, resolver: ConfigResolver, value: str, why: str) -> None:
    infos = validate_connector_config(Guarded(), config(tmp_path, **{"db.password": value}),
                                      "enabled", resolver=resolver)
    values, _ = answer(infos)
    [error] = values["db.password"]["errors"]
    assert error.startswith(f"Invalid value for configuration db.password: cannot resolve "
                            f"{value}: {why}")
    assert infos.error_count == 1
    assert "db.password" in format_validation_errors(infos)  # the REST 400's message


def test_a_variable_on_a_key_nobody_defines_is_checked_too(tmp_path: Path,
                                                            resolver: ConfigResolver) -> None:
    infos = validate_connector_config(Guarded(), config(tmp_path, extra="${nope:x}"),
                                      "enabled", resolver=resolver)
    body = infos.to_dict()
    first = body["configs"][0]
    assert first["definition"] is None and first["value"]["name"] == "extra"
    assert first["value"]["value"] == "${nope:x}"
    assert "no config provider named 'nope'" in first["value"]["errors"][0]


def test_without_providers_every_variable_is_an_error(tmp_path: Path) -> None:
    infos = validate_connector_config(Guarded(), config(tmp_path), "enabled")
    values, _ = answer(infos)
    assert "(configured: none)" in values["db.password"]["errors"][0]


@pytest.mark.parametrize("password", ["file", "literal"])
def test_a_connector_error_quoting_a_secret_is_scrubbed_in_answer_and_log(
        tmp_path: Path, resolver: ConfigResolver, caplog: pytest.LogCaptureFixture,
        password: str) -> None:
    given = config(tmp_path, **{"fail.with": "password"})
    if password == "literal":
        given["db.password"] = LITERAL
    with caplog.at_level(logging.ERROR, logger="connect_runtime.config.validation"):
        infos = validate_connector_config(Guarded(), given, "enabled", resolver=resolver)
    values, text = answer(infos)
    [error] = values["connector.class"]["errors"]
    assert error == ("An unexpected error occurred during validation: cannot log in as admin "
                     "with [hidden]")
    logged = "\n".join(logging.Formatter("%(message)s").format(r) for r in caplog.records)
    assert "RuntimeError: cannot log in as admin with [hidden]" in logged
    for secret in (FILE_SECRET, LITERAL):
        assert secret not in text and secret not in logged
