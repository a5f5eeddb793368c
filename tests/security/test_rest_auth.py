"""Kafka Connect's basic-auth files, read unchanged; each mistake named by its key."""

from __future__ import annotations

from pathlib import Path

import pytest

from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException
from connect_runtime.security.rest_auth import (
    BASIC_AUTH_EXTENSION,
    PROPERTY_FILE_LOGIN_MODULE,
    basic_auth_credentials,
    jaas_path,
)


def files(tmp_path: Path, jaas: str | None = None, credentials: str = "alice: s3cret\n"
          ) -> str:
    creds = tmp_path / "credentials.properties"
    creds.write_text(credentials)
    path = tmp_path / "connect_jaas.conf"
    path.write_text(jaas if jaas is not None else f"""
// Kafka Connect's own example
KafkaConnect {{
  {PROPERTY_FILE_LOGIN_MODULE} required
  file="{creds}";
}};
""")
    return str(path)


def test_connects_jaas_and_credentials_files_are_read_unchanged(tmp_path: Path) -> None:
    jaas = files(tmp_path, credentials="# users\nalice: s3cret\nbob=pa\\:ss word\n")
    assert basic_auth_credentials([BASIC_AUTH_EXTENSION], jaas) == {
        "alice": "s3cret", "bob": "pa:ss word"}
    assert basic_auth_credentials([], jaas) is None  # no extension: no authentication
    assert basic_auth_credentials([BASIC_AUTH_EXTENSION], files(tmp_path, credentials="")) == {}


def test_the_jaas_path_comes_from_the_worker_or_kafka_opts() -> None:
    assert jaas_path({"java.security.auth.login.config": "/a"}, {}) == "/a"
    opts = {"KAFKA_OPTS": "-Xmx1g -Djava.security.auth.login.config=/etc/jaas.conf -Dx=y"}
    assert jaas_path({}, opts) == "/etc/jaas.conf"
    assert jaas_path({}, {}) is None


@pytest.mark.parametrize(("jaas", "message"), [
    ("Other { x required; };", "has no KafkaConnect entry (entries: Other)"),
    ("KafkaConnect { com.example.Ldap required; };",
     "must name exactly one login module, " + PROPERTY_FILE_LOGIN_MODULE + " (found: "
     "com.example.Ldap)"),
    (f"KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required; }};", 'needs file="'),
    (f'KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required file="/nope/creds"; }};',
     "cannot read the credentials file /nope/creds: No such file or directory"),
])
def test_a_wrong_jaas_file_is_named(tmp_path: Path, jaas: str, message: str) -> None:
    with pytest.raises(ConfigException,
                       match=r"configuration java\.security\.auth\.login\.config") as e:
        basic_auth_credentials([BASIC_AUTH_EXTENSION], files(tmp_path, jaas))
    assert message in str(e.value)


def test_missing_files_and_unknown_extensions_stop_the_worker_config() -> None:
    minimal = {"bootstrap.servers": "k:9092", "group.id": "g", "config.storage.topic": "c",
               "offset.storage.topic": "o", "status.storage.topic": "s"}
    base = {**minimal, "rest.extension.classes": BASIC_AUTH_EXTENSION}
    with pytest.raises(ConfigException, match=r"java\.security\.auth\.login\.config: cannot "
                       r"read the JAAS file: No such file"):
        WorkerConfig({**base, "java.security.auth.login.config": "/nope/jaas.conf"})
    with pytest.raises(ConfigException, match="needs a JAAS file"):
        WorkerConfig(base)
    with pytest.raises(ConfigException, match=r"configuration rest\.extension\.classes: REST "
                       r"extension\(s\) com\.example\.Audit are not available"):
        WorkerConfig({**base, "rest.extension.classes": "com.example.Audit"})
    assert WorkerConfig(minimal).rest_credentials is None
