"""Config providers (KIP-297/421/887/993): the variable syntax, the three built-ins,
the worker keys that set them up, and the reverse transform of task configs.

Expected values of the syntax cases were checked against Kafka 4.1.1's own
``ConfigTransformer`` (``kafka-clients-4.1.1.jar``) with the same inputs.
"""

from __future__ import annotations

import json
import logging
import pickle
import re
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest

from connect_runtime.cli import main
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException
from connect_runtime.logs import JsonLinesFormatter
from connect_runtime.security.providers import (
    ENV_VAR_PROVIDER,
    FILE_PROVIDER,
    AllowedPaths,
    ConfigProviders,
    ConfigResolver,
    DirectoryConfigProvider,
    EnvVarConfigProvider,
    FileConfigProvider,
    Variable,
    find_variables,
    reverse_transform,
)
from connect_runtime.security.redaction import MIN_SECRET_LENGTH, Redactor

MINIMAL = {"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
           "status.storage.topic": "s"}


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    """A secrets directory: db.properties (a properties file) and token (a file)."""
    folder = tmp_path / "secrets"
    folder.mkdir()
    (folder / "db.properties").write_text("password=from-file\nk\\:x=colon\n"
                                          "spaced = kept  \n", encoding="utf-8")
    (folder / "token").write_text("from-directory\n", encoding="utf-8")
    return folder


def resolver(secrets: Path, **params: dict[str, str]) -> ConfigResolver:
    file, directory = FileConfigProvider(), DirectoryConfigProvider()
    file.configure(params.get("file", {}))
    directory.configure(params.get("directory", {}))
    env = EnvVarConfigProvider({"DB_PASSWORD": "from-env", "HOME": "/home/x"})
    env.configure(params.get("env", {}))
    return ConfigResolver({"file": file, "directory": directory, "env": env})


# ---------------------------------------------------------------------------
# Syntax: Kafka's ConfigTransformer pattern


@pytest.mark.parametrize(("value", "found"), [
    ("${file:/a/b.properties:key}", [("file", "/a/b.properties", "key")]),
    ("${env:VAR}", [("env", "", "VAR")]),
    # The path ends at the first colon after the provider: the key may hold colons.
    ("${file:/a.properties:k:x}", [("file", "/a.properties", "k:x")]),
    ("${a:b:c:d}", [("a", "b", "c:d")]),
    ("x${env:A}y${env:B}", [("env", "", "A"), ("env", "", "B")]),
    ("$${env:A}}", [("env", "", "A")]),
    ("${:x}", [("", "", "x")]),
    ("${env:}", [("env", "", "")]),
    ("${env:A", []),
    ("${novariable}", []),  # Java's ${name} group syntax has no colon: not a variable
    ("plain", []),
])
def test_variables_are_found_as_kafkas_pattern_finds_them(
        value: str, found: list[tuple[str, str, str]]) -> None:
    assert [(v.provider, v.path, v.key) for v in find_variables(value)] == found


def test_each_variable_is_replaced_in_place_and_the_rest_kept(secrets: Path) -> None:
    props = secrets / "db.properties"
    config = {"a": f"${{file:{props}:password}}", "b": "x${env:DB_PASSWORD}y${env:DB_PASSWORD}",
              "c": f"${{file:{props}:k:x}}", "d": f"${{directory:{secrets}:token}}",
              "e": "no variable", "f": f"${{file:{props}:spaced}}"}
    result = resolver(secrets).resolve(config)
    assert result.errors == {}
    assert result.values == {"a": "from-file", "b": "xfrom-envyfrom-env", "c": "colon",
                             "d": "from-directory\n", "e": "no variable", "f": "kept  "}
    assert result.variable_keys == {"a", "b", "c", "d", "f"}
    assert result.secrets == {"from-file", "from-env", "colon", "from-directory\n", "kept  "}


def test_each_provider_and_path_is_asked_once_for_all_its_keys() -> None:
    calls: list[tuple[str, set[str]]] = []

    class Counting:
        def configure(self, params: dict[str, str]) -> None:
            pass

        def get(self, path: str, keys: set[str]) -> dict[str, str]:
            calls.append((path, keys))
            return {k: k.upper() for k in keys}

    config = {"a": "${c:p:x}", "b": "${c:p:y}-${c:q:x}", "c": "${c:p:x}"}
    assert ConfigResolver({"c": Counting()}).resolve(config).values == {
        "a": "X", "b": "Y-X", "c": "X"}
    assert sorted((p, sorted(k)) for p, k in calls) == [("p", ["x", "y"]), ("q", ["x"])]


# ---------------------------------------------------------------------------
# What cannot be resolved: an error on the key, the variable left as written


def test_an_unknown_provider_is_an_error_on_its_key(secrets: Path) -> None:
    result = resolver(secrets).resolve({"db.password": "${vault:secret/db:password}",
                                        "other": "fine"})
    assert result.values["db.password"] == "${vault:secret/db:password}"
    [message] = result.errors["db.password"]
    assert message == ("cannot resolve ${vault:secret/db:password}: no config provider named "
                       "'vault' in config.providers of this worker (configured: file, "
                       "directory, env)")
    with pytest.raises(ConfigException, match=r"^Configuration db\.password: cannot resolve") as e:
        result.raise_for_errors()
    assert e.value.name == "db.password"


def test_unknown_providers_may_be_left_alone_as_kafka_does(secrets: Path) -> None:
    result = resolver(secrets).resolve({"spark.x": "${system:user.home}"},
                                       unknown_providers_ok=True)
    assert result.errors == {} and result.values == {"spark.x": "${system:user.home}"}


@pytest.mark.parametrize(("variable", "reason"), [
    ("${file:{dir}/db.properties:nokey}",
     "config provider 'file' has no value for key 'nokey' at path {dir}/db.properties"),
    ("${file:{dir}/missing.properties:k}",
     "Could not read properties from file {dir}/missing.properties: No such file or directory"),
    ("${env:NOT_SET}", "config provider 'env' has no value for key 'NOT_SET'"),
    ("${env:/x:DB_PASSWORD}", "Path is not supported for EnvVarConfigProvider, invalid value "
                              "'/x'"),
    ("${directory:{dir}:nofile}",
     "config provider 'directory' has no value for key 'nofile' at path {dir}"),
    ("${directory:{dir}/token:x}", "the path {dir}/token is not a directory"),
    # A name is matched against the listing: it cannot climb out of the directory.
    ("${directory:{dir}:../secrets/token}",
     "config provider 'directory' has no value for key '../secrets/token' at path {dir}"),
    ("${file::k}", "config provider 'file' has no value for key 'k'"),
])
def test_a_missing_secret_is_an_error_naming_the_variable(secrets: Path, variable: str,
                                                          reason: str) -> None:
    text = variable.replace("{dir}", str(secrets))
    result = resolver(secrets).resolve({"key": text})
    assert result.errors == {"key": [f"cannot resolve {text}: "
                                     f"{reason.replace('{dir}', str(secrets))}"]}
    assert result.values == {"key": text}


def test_a_malformed_secrets_file_is_reported_without_its_lines(tmp_path: Path) -> None:
    bad = tmp_path / "bad.properties"
    bad.write_text("=s3cr3t-value-without-key\n", encoding="utf-8")
    result = resolver(tmp_path).resolve({"k": f"${{file:{bad}:x}}"})
    [message] = result.errors["k"]
    assert f"{bad}:1: a line has a value but no key" in message
    assert "s3cr3t" not in message


def test_a_failing_user_provider_is_reported_with_its_type() -> None:
    class Broken:
        def configure(self, params: dict[str, str]) -> None:
            pass

        def get(self, path: str, keys: set[str]) -> dict[str, str]:
            raise RuntimeError("vault unreachable")

    result = ConfigResolver({"v": Broken()}).resolve({"k": "${v:p:x}"})
    assert result.errors == {"k": ["cannot resolve ${v:p:x}: the config provider failed: "
                                   "RuntimeError: vault unreachable"]}


# ---------------------------------------------------------------------------
# allowed.paths (KIP-993) and allowlist.pattern (KIP-887)


def test_allowed_paths_limit_file_and_directory_providers(secrets: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.properties").write_text("k=v\n", encoding="utf-8")
    params = {"allowed.paths": str(secrets)}
    r = resolver(secrets, file=params, directory=params)
    ok = r.resolve({"a": f"${{file:{secrets}/db.properties:password}}",
                    "b": f"${{directory:{secrets}:token}}",
                    # normalised before the check, as Java's Path.normalize does
                    "c": f"${{file:{other}/../secrets/db.properties:password}}"})
    assert ok.errors == {} and ok.values["c"] == "from-file"
    refused = r.resolve({"a": f"${{file:{other}/x.properties:k}}",
                         "b": f"${{file:{secrets}/../other/x.properties:k}}",
                         "c": f"${{directory:{other}:x.properties}}",
                         # whole components: /tmp/secrets-other is not under /tmp/secrets
                         "d": f"${{file:{secrets}-other/x:k}}"})
    assert set(refused.errors) == {"a", "b", "c", "d"}
    assert refused.errors["a"] == [f"cannot resolve ${{file:{other}/x.properties:k}}: the path "
                                   f"{other}/x.properties is not in allowed.paths of this "
                                   "config provider"]


@pytest.mark.parametrize(("value", "message"), [
    ("relative/dir", "Path relative/dir is not absolute"),
    ("/does/not/exist", "Path /does/not/exist does not exist"),
    ("/tmp, /usr", "Path  /usr is not absolute"),  # not trimmed, as in Kafka
])
def test_allowed_paths_must_be_absolute_and_exist(value: str, message: str) -> None:
    with pytest.raises(ConfigException, match=re.escape(message)):
        AllowedPaths(value)


def test_the_env_allowlist_is_a_java_regex_matching_the_whole_name() -> None:
    env = EnvVarConfigProvider({"DB_PASSWORD": "p", "DB_USER": "u", "XDB_PASSWORD": "q"})
    env.configure({"allowlist.pattern": "DB_PASS\\p{Upper}+"})
    assert env.get("", {"DB_PASSWORD", "DB_USER", "XDB_PASSWORD"}) == {"DB_PASSWORD": "p"}
    env.configure({})
    assert env.get("", {"DB_USER"}) == {"DB_USER": "u"}
    with pytest.raises(ConfigException, match=r"allowlist\.pattern"):
        env.configure({"allowlist.pattern": "(unclosed"})


# ---------------------------------------------------------------------------
# The worker keys: config.providers, .class, .param.*


def test_worker_keys_name_classes_and_params_as_connect_does(secrets: Path) -> None:
    settings = ConfigProviders.from_worker_config({
        "config.providers": "file, env,dir",
        "config.providers.file.class": FILE_PROVIDER,
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.env.class": "EnvVarConfigProvider",  # Connect's alias
        "config.providers.env.param.allowlist.pattern": "DB_.*",
        "config.providers.dir.class": "Directory",  # the alias without ConfigProvider
        "config.providers.unlisted.class": FILE_PROVIDER,
    })
    assert settings.names == ["file", "env", "dir"]
    assert settings.settings[0].params == {"allowed.paths": str(secrets)}
    assert settings.settings[1].params == {"allowlist.pattern": "DB_.*"}
    providers = settings.instantiate().providers
    assert [type(p).__name__ for p in providers.values()] == [
        "FileConfigProvider", "EnvVarConfigProvider", "DirectoryConfigProvider"]
    # Shipped to executors in the TaskSpec: plain data that pickles, and no repr of params.
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert str(secrets) not in repr(settings)


@pytest.mark.parametrize(("props", "key"), [
    ({"config.providers": "file"}, "config.providers.file.class"),
    ({"config.providers": "v", "config.providers.v.class": "no.such.Provider"},
     "config.providers.v.class"),
    ({"config.providers": "v", "config.providers.v.class": "NoDots"}, "config.providers.v.class"),
    ({"config.providers": "v", "config.providers.v.class": "os.path"},  # not a class
     "config.providers.v.class"),
    ({"config.providers": "v", "config.providers.v.class": "pathlib.PurePath"},  # no get()
     "config.providers.v.class"),
    ({"config.providers": "file", "config.providers.file.class": FILE_PROVIDER,
      "config.providers.file.param.allowed.paths": "relative"},
     "config.providers.file.param.allowed.paths"),
    ({"config.providers": "env", "config.providers.env.class": ENV_VAR_PROVIDER,
      "config.providers.env.param.allowlist.pattern": "[a-"},
     "config.providers.env.param.allowlist.pattern"),
])
def test_a_bad_provider_setting_is_a_config_error_naming_the_key(
        props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigException) as e:
        WorkerConfig({**MINIMAL, **props})
    assert e.value.name == key
    assert key in str(e.value)


def test_a_user_provider_is_loaded_by_import_path(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_vault.py").write_text(
        "class Vault:\n"
        "    def configure(self, params):\n"
        "        self.prefix = params['prefix']\n"
        "    def get(self, path, keys):\n"
        "        return {k: self.prefix + path + '/' + k for k in keys if k != 'missing'}\n",
        encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    settings = ConfigProviders.from_worker_config({
        "config.providers": "vault", "config.providers.vault.class": "my_vault.Vault",
        "config.providers.vault.param.prefix": "v:"})
    result = settings.instantiate().resolve({"a": "${vault:db:user}", "b": "${vault:db:missing}"})
    assert result.values["a"] == "v:db/user"
    assert result.errors == {"b": ["cannot resolve ${vault:db:missing}: config provider 'vault' "
                                   "has no value for key 'missing' at path db"]}
    with pytest.raises(ConfigException) as e:
        ConfigProviders.from_worker_config({
            "config.providers": "vault",
            "config.providers.vault.class": "my_vault.Vault"}).instantiate()  # no prefix param
    assert e.value.name == "config.providers.vault.class"
    assert "KeyError" in str(e.value)


def test_the_worker_config_resolves_its_own_variables(secrets: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORKER_SASL_PASSWORD", "sasl-secret")
    config = WorkerConfig({
        **MINIMAL,
        "config.providers": "file,env",
        "config.providers.file.class": FILE_PROVIDER,
        "config.providers.env.class": ENV_VAR_PROVIDER,
        "group.id": f"${{file:{secrets}/db.properties:password}}",
        "producer.sasl.password": "${env:WORKER_SASL_PASSWORD}",
        # Spark's own ${env:..} and ${system:..} syntax: a provider this worker lacks
        "spark.executorEnv.X": "${system:java.home}",
    })
    assert config.group_id == "from-file"
    assert config.originals["producer.sasl.password"] == "sasl-secret"
    assert config.originals["spark.executorEnv.X"] == "${system:java.home}"
    assert config.config_providers.names == ["file", "env"]
    with pytest.raises(ConfigException) as e:
        WorkerConfig({**config.originals, "group.id": "${env:NOT_SET_ANYWHERE}"})
    assert e.value.name == "group.id"


def test_the_cli_exits_non_zero_naming_the_provider_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("".join(f"{k}={v}\n" for k, v in {
        **MINIMAL, "config.providers": "vault",
        "config.providers.vault.class": "com.example.VaultConfigProvider"}.items()),
        encoding="utf-8")
    assert main(["worker", str(props)]) == 2
    err = capsys.readouterr().err
    assert "configuration error" in err and "config.providers.vault.class" in err


# ---------------------------------------------------------------------------
# Reverse transform and redaction


def test_task_configs_get_the_placeholders_back() -> None:
    raw = {"db.password": "${file:/s.properties:password}", "user": "u",
           "url": "jdbc://h/${env:DB}", "unused": "${env:X}"}
    tasks = [{"db.password": "resolved", "user": "u", "url": "jdbc://h/db", "task.id": "0"},
             {"renamed.password": "resolved"}]
    assert reverse_transform(raw, tasks) == [
        {"db.password": "${file:/s.properties:password}", "user": "u",
         "url": "jdbc://h/${env:DB}", "task.id": "0"},
        # A key the connector invented is not reversible, in Connect as here.
        {"renamed.password": "resolved"}]


def test_the_redactor_hides_secrets_whole_and_stripped_but_not_tiny_ones() -> None:
    redactor = Redactor(["s3cret-token\n", "s3cret", "on"])
    assert redactor.scrub("bad token s3cret-token, and s3cret; on") == \
        "bad token [hidden], and [hidden]; on"
    assert len("on") < MIN_SECRET_LENGTH
    redactor.add_values(["db.password"], {"db.password": "literal-pw", "user": "admin"})
    assert redactor.scrub("literal-pw admin") == "[hidden] admin"


@pytest.mark.parametrize("secret", [
    "Enc\\Back\\SlashSecret", "it's \"quoted\"", "tab\tand\nnewline", "ünïcode-pässword",
    "a/b?c=d&e f"])
def test_a_secret_is_hidden_in_every_form_it_is_printed(secret: str) -> None:
    """A connector's exception that shows its config (repr, inside a dict), a
    JSON body, a URL, a log line: none shows the secret, in any form."""
    redactor = Redactor([secret])
    try:
        raise ValueError(f"cannot log in with {{'password': {secret!r}, 'nested': {[secret]!r}}}")
    except ValueError as e:
        trace = redactor.format_exception(e)
    printed = [trace, json.dumps({"trace": trace}), json.dumps({"pw": secret}),
               json.dumps({"pw": secret}, ensure_ascii=False), repr(secret), ascii(secret),
               f"https://registry/?password={quote_plus(secret)}",
               f"https://registry/{quote(secret, safe='')}/x"]
    for text in printed:
        scrubbed = redactor.scrub(text)
        assert secret not in scrubbed and "[hidden]" in scrubbed, (text, scrubbed)
        for inner in (repr(secret)[1:-1], ascii(secret)[1:-1], json.dumps(secret)[1:-1],
                      quote(secret, safe=""), quote_plus(secret)):
            assert inner not in scrubbed, (text, scrubbed)


def test_a_logged_exception_is_scrubbed_in_text_and_json(caplog: pytest.LogCaptureFixture
                                                         ) -> None:
    redactor = Redactor(["hunter22"])
    logger = logging.getLogger("test.redaction")
    try:
        raise ValueError("login failed with password hunter22")
    except ValueError as e:
        with caplog.at_level(logging.ERROR, logger="test.redaction"):
            redactor.log_exception(logger, logging.ERROR, e, "connector %s failed", "c",
                                   extra={"event": "connector_failed"})
    [record] = caplog.records
    text = logging.Formatter("%(message)s").format(record)
    assert text.startswith("connector c failed\nTraceback")
    assert "ValueError: login failed with password [hidden]" in text
    assert "hunter22" not in text
    entry = json.loads(JsonLinesFormatter().format(record))
    assert entry["event"] == "connector_failed" and entry["message"] == "connector c failed"
    assert entry["exc"].endswith("ValueError: login failed with password [hidden]")


def test_a_variable_keeps_its_text_for_messages() -> None:
    assert find_variables("a${env:A}b") == [Variable("${env:A}", "env", "", "A")]
