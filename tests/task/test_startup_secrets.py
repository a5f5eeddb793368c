"""Step 0 of task startup: the executor resolves config-provider variables from the
settings in its TaskSpec, and its failure traces are scrubbed of the values."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_runtime.errors import ConfigException
from connect_runtime.protocol.task_spec import TaskSpec
from connect_runtime.security.providers import (
    ENV_VAR_PROVIDER,
    FILE_PROVIDER,
    ConfigProviders,
    ProviderSetting,
)
from connect_runtime.security.redaction import Redactor
from connect_runtime.task.slot import _trace
from connect_runtime.task.startup import resolve_configs

SECRET = "executor-secret-3d9e"
LITERAL = "literal-pw-6a1f"


def spec(connector: dict[str, str], task: dict[str, str],
         providers: ConfigProviders) -> TaskSpec:
    return TaskSpec(
        connector="conn", task=0, generation=1, task_config=task, connector_config=connector,
        bootstrap_servers="127.0.0.1:9", group_id="g", config_topic="c", status_topic="s",
        global_offsets_topic="o", worker_url="http://127.0.0.1:1", worker_id="w",
        eos_support="enabled", offset_flush_interval_ms=1000, config_providers=providers,
        password_keys=("db.password", "literal.password"))


@pytest.fixture
def providers(tmp_path: Path) -> ConfigProviders:
    (tmp_path / "s.properties").write_text(f"password={SECRET}\n", encoding="utf-8")
    return ConfigProviders((ProviderSetting("file", FILE_PROVIDER,
                                            {"allowed.paths": str(tmp_path)}),
                            ProviderSetting("env", ENV_VAR_PROVIDER)))


def test_the_executor_resolves_both_configs_and_learns_what_to_hide(
        tmp_path: Path, providers: ConfigProviders) -> None:
    variable = f"${{file:{tmp_path}/s.properties:password}}"
    redactor = Redactor()
    connector, task = resolve_configs(spec({"db.password": variable, "name": "conn"},
                                           {"db.password": variable, "task.class": "x.T",
                                            "literal.password": LITERAL}, providers), redactor)
    assert connector == {"db.password": SECRET, "name": "conn"}
    assert task["db.password"] == SECRET and task["literal.password"] == LITERAL
    assert redactor.scrub(f"{SECRET} {LITERAL} conn") == "[hidden] [hidden] conn"


def test_an_unresolvable_variable_fails_the_task_naming_the_key_and_hiding_the_rest(
        tmp_path: Path, providers: ConfigProviders) -> None:
    redactor = Redactor()
    given = spec({"db.password": f"${{file:{tmp_path}/s.properties:password}}",
                  "api.key": "${env:NOT_ON_THIS_EXECUTOR}"}, {}, providers)
    with pytest.raises(ConfigException) as failed:
        resolve_configs(given, redactor)
    assert failed.value.name == "api.key"
    assert "cannot resolve ${env:NOT_ON_THIS_EXECUTOR}" in str(failed.value)
    # What did resolve is known to the redactor before the failure is reported.
    try:
        raise RuntimeError(f"connect failed: {SECRET}") from failed.value
    except RuntimeError as e:
        trace = _trace(e, given, redactor)
    assert trace.startswith("Task conn-0 (connector conn) failed:\n")
    assert "connect failed: [hidden]" in trace and SECRET not in trace


def test_a_provider_setting_this_executor_cannot_honour_names_the_worker_key() -> None:
    missing = ConfigProviders((ProviderSetting(
        "file", FILE_PROVIDER, {"allowed.paths": "/only/on/the/worker"}),))
    with pytest.raises(ConfigException) as failed:
        resolve_configs(spec({}, {}, missing), Redactor())
    assert failed.value.name == "config.providers.file.param.allowed.paths"


def test_the_spec_repr_shows_no_config_value(providers: ConfigProviders) -> None:
    text = repr(spec({"literal.password": LITERAL}, {"literal.password": LITERAL}, providers))
    assert LITERAL not in text and "allowed.paths" not in text
