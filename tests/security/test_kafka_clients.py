"""Kafka Connect's client security keys become librdkafka settings on every client.

Translation is checked on its own; the layering and librdkafka's verdict through
``WorkerConfig`` (which builds each client kind once, with no broker, when the
config is loaded), with real certificates and stores made by openssl and keytool.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from pathlib import Path

import pytest

from connect_runtime.cluster.task_specs import TaskSpecBuilder
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException, KafkaAuthenticationError, translate_kafka_error
from connect_runtime.kafka.clients import ClientSettings
from connect_runtime.security.kafka_clients import (
    check_client_config,
    normalize_pem,
    parse_jaas_config,
    translate,
)

MINIMAL = {"group.id": "g", "config.storage.topic": "c", "offset.storage.topic": "o",
           "status.storage.topic": "s"}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
SECRET = "s3cr3t-Pa55"
SASL = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": f'{PLAIN} required username="alice" password="{SECRET}";'}


def worker(**props: str) -> WorkerConfig:
    return WorkerConfig({**MINIMAL, **props})


def refused(props: dict[str, str]) -> ConfigException:
    with pytest.raises(ConfigException) as info:
        worker(**props)
    return info.value


# --------------------------------------------------------------------- JAAS


@pytest.mark.parametrize("module", [PLAIN, SCRAM])
def test_plain_and_scram_jaas_become_username_and_password(module: str) -> None:
    out = translate({"sasl.jaas.config": f'{module} required username="alice" '
                                         f'password="{SECRET}";'})
    assert out.settings == {"sasl.username": "alice", "sasl.password": SECRET}
    assert out.sources == {"sasl.username": "sasl.jaas.config",
                           "sasl.password": "sasl.jaas.config"}


def test_jaas_quoting_escapes_comments_and_unquoted_words() -> None:
    entry = parse_jaas_config(
        f'/* Strimzi */ {PLAIN}  Required\n username = alice // the user\n'
        ' password="a \\"quoted\\" pa$$\\\\word" extra=\'single;quoted\' ;')
    assert entry.module == PLAIN and entry.flag == "required"
    assert entry.options == {"username": "alice", "password": 'a "quoted" pa$$\\word',
                             "extra": "single;quoted"}


@pytest.mark.parametrize("text, problem", [
    (f'{PLAIN} required username="alice" password="{SECRET}"', "must end with ';'"),
    (f'{PLAIN} required username="alice" password="{SECRET};', "unterminated quoted value"),
    (f'{PLAIN} mandatory username="alice" password="{SECRET}";', "not a JAAS control flag"),
    (f'{PLAIN} required username="alice" password;', "option 'password' has no '=value'"),
    (f'{PLAIN} required username="a" password="{SECRET}"; {PLAIN} required;',
     "only one login module"),
    (f'{PLAIN} required username="alice";', "needs password"),
    (f'{SCRAM} required username="alice" password="{SECRET}" tokenauth="true";',
     "delegation tokens"),
])
def test_bad_jaas_names_the_key_never_the_password(text: str, problem: str) -> None:
    with pytest.raises(ConfigException) as info:
        translate({"sasl.jaas.config": text}, "producer.")
    assert info.value.name == "producer.sasl.jaas.config"
    assert problem in str(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("module", [
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule",
    "com.sun.security.auth.module.Krb5LoginModule"])
def test_other_login_modules_are_refused_saying_what_is_supported(module: str) -> None:
    error = refused({**SASL, "sasl.jaas.config": f'{module} required clientSecret="{SECRET}";'})
    assert error.name == "sasl.jaas.config"
    assert module in str(error) and PLAIN in str(error) and SCRAM in str(error)
    assert SECRET not in str(error)


def test_unknown_jaas_options_are_dropped_by_name() -> None:
    out = translate({"sasl.jaas.config": f'{PLAIN} required username="u" password="p" '
                                         f'serviceName="kafka";'})
    assert list(out.dropped) == ["sasl.jaas.config option serviceName"]


def test_jaas_and_librdkafkas_own_credentials_in_one_layer_conflict() -> None:
    error = refused({**SASL, "sasl.username": "bob"})
    assert error.name == "sasl.jaas.config" and "sasl.username" in str(error)
    assert SECRET not in str(error)


# -------------------------------------------------------------------- TLS


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA, a client certificate and key, and every store format Java users have."""
    if shutil.which("openssl") is None or shutil.which("keytool") is None:
        pytest.skip("openssl and keytool are needed to make certificates")
    d = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run(args, cwd=d, check=True, capture_output=True)

    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
        "-out", "ca.crt", "-days", "2", "-subj", "/CN=test-ca")
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "user.key", "-out",
        "user.csr", "-subj", "/CN=user")
    run("openssl", "x509", "-req", "-in", "user.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "user.crt", "-days", "2")
    run("openssl", "pkcs12", "-export", "-in", "user.crt", "-inkey", "user.key", "-out",
        "user.p12", "-passout", f"pass:{SECRET}")
    run("openssl", "pkcs8", "-topk8", "-in", "user.key", "-out", "user.enc.key", "-passout",
        f"pass:{SECRET}")
    (d / "user.pem").write_text((d / "user.key").read_text() + (d / "user.crt").read_text())
    for store in ("JKS", "PKCS12"):
        run("keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", "ca.crt",
            "-keystore", f"trust.{store.lower()}", "-storepass", "changeit", "-storetype", store)
    run("keytool", "-importkeystore", "-srckeystore", "user.p12", "-srcstoretype", "PKCS12",
        "-srcstorepass", SECRET, "-destkeystore", "user.jks", "-deststoretype", "JKS",
        "-deststorepass", SECRET)
    return d


def one_line(pem: str) -> str:
    """How a PEM value looks after a properties file's ``\\`` continuations."""
    return " ".join(pem.split("\n"))


def test_pem_truststore_file_becomes_ssl_ca_location(pki: Path) -> None:
    config = worker(**{"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                       "ssl.truststore.location": str(pki / "ca.crt")})
    conf = config.client_config("consumer")
    assert conf["ssl.ca.location"] == str(pki / "ca.crt")
    assert not any(k.startswith("ssl.truststore") for k in conf)


def test_a_pem_file_without_a_type_is_recognised(pki: Path) -> None:
    out = translate({"ssl.truststore.location": str(pki / "ca.crt")})
    assert out.settings == {"ssl.ca.location": str(pki / "ca.crt")}


def test_inline_truststore_certificates_become_ssl_ca_pem_librdkafka_can_read(pki: Path) -> None:
    pem = (pki / "ca.crt").read_text()
    config = worker(**{"security.protocol": "SSL", "ssl.truststore.type": "PEM",
                       "ssl.truststore.certificates": one_line(pem)})
    assert config.client_config("admin")["ssl.ca.pem"].split() == pem.split()


@pytest.mark.parametrize("store, store_type", [("trust.jks", "JKS"), ("trust.jks", None),
                                               ("trust.pkcs12", "PKCS12")])
def test_jks_and_pkcs12_truststores_are_refused_pointing_at_pem(
        pki: Path, store: str, store_type: str | None) -> None:
    props = {"security.protocol": "SSL", "ssl.truststore.location": str(pki / store),
             "ssl.truststore.password": "changeit"}
    if store_type:
        props["ssl.truststore.type"] = store_type
    error = refused(props)
    assert error.name == "ssl.truststore.location"
    assert "ssl.truststore.type=PEM" in str(error) and "ca.crt" in str(error)
    assert "changeit" not in str(error)


def test_pkcs12_keystore_keeps_its_names_and_librdkafka_opens_it(pki: Path) -> None:
    config = worker(**{"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                       "ssl.keystore.location": str(pki / "user.p12"),
                       "ssl.keystore.password": SECRET, "ssl.key.password": SECRET})
    conf = config.client_config("producer")
    assert conf["ssl.keystore.location"] == str(pki / "user.p12")
    assert conf["ssl.keystore.password"] == SECRET
    assert "ssl.keystore.type" not in conf


def test_a_wrong_keystore_password_fails_at_load_without_showing_it(pki: Path) -> None:
    error = refused({"security.protocol": "SSL", "ssl.keystore.type": "PKCS12",
                     "ssl.keystore.location": str(pki / "user.p12"),
                     "ssl.keystore.password": "wrong-" + SECRET})
    assert error.name == "ssl.keystore.location" and "PKCS#12" in str(error)
    assert SECRET not in str(error)


def test_jks_keystore_is_refused_pointing_at_pkcs12_or_pem(pki: Path) -> None:
    error = refused({"security.protocol": "SSL", "ssl.keystore.location": str(pki / "user.jks"),
                     "ssl.keystore.password": SECRET})
    assert error.name == "ssl.keystore.location"
    assert "PKCS12" in str(error) and "ssl.keystore.certificate.chain" in str(error)
    assert SECRET not in str(error)


def test_pem_keystore_file_serves_as_certificate_and_key(pki: Path) -> None:
    config = worker(**{"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                       "ssl.keystore.location": str(pki / "user.pem")})
    conf = config.client_config("admin")
    assert conf["ssl.certificate.location"] == conf["ssl.key.location"] == str(pki / "user.pem")


def test_inline_pem_keystore_becomes_certificate_and_key_pem(pki: Path) -> None:
    config = worker(**{"security.protocol": "SSL", "ssl.keystore.type": "PEM",
                       "ssl.keystore.certificate.chain": one_line((pki / "user.crt").read_text()),
                       "ssl.keystore.key": one_line((pki / "user.enc.key").read_text()),
                       "ssl.key.password": SECRET})
    conf = config.client_config("consumer")
    assert conf["ssl.certificate.pem"].startswith("-----BEGIN CERTIFICATE-----\n")
    assert conf["ssl.key.pem"].startswith("-----BEGIN ENCRYPTED PRIVATE KEY-----\n")
    assert conf["ssl.key.password"] == SECRET


def test_an_inline_key_without_its_chain_names_the_missing_key() -> None:
    error = refused({"ssl.keystore.key": f"-----BEGIN PRIVATE KEY-----{SECRET}"
                                         "-----END PRIVATE KEY-----"})
    assert error.name == "ssl.keystore.certificate.chain" and SECRET not in str(error)


def test_a_value_that_is_not_pem_is_refused_without_showing_it() -> None:
    with pytest.raises(ConfigException) as info:
        normalize_pem(SECRET, "ssl.keystore.key")
    assert info.value.name == "ssl.keystore.key" and SECRET not in str(info.value)


@pytest.mark.parametrize("java, librdkafka", [("", "none"), ("https", "https"),
                                              ("HTTPS", "https")])
def test_endpoint_identification(java: str, librdkafka: str) -> None:
    conf = worker(**{"ssl.endpoint.identification.algorithm": java}).client_config("producer")
    assert conf["ssl.endpoint.identification.algorithm"] == librdkafka


# ------------------------------------------------ dropped, unknown, layers


def test_java_only_keys_are_dropped_with_one_warning_each(
        pki: Path, caplog: pytest.LogCaptureFixture) -> None:
    java_only = {"ssl.protocol": "TLSv1.3", "ssl.enabled.protocols": "TLSv1.3,TLSv1.2",
                 "ssl.keymanager.algorithm": "SunX509", "ssl.trustmanager.algorithm": "PKIX",
                 "sasl.login.refresh.window.factor": "0.8",
                 "sasl.client.callback.handler.class": "com.example.Handler"}
    with caplog.at_level(logging.WARNING):
        config = worker(**SASL, **java_only, **{
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki / "ca.crt"),
            "ssl.truststore.password": "changeit"})
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for key in [*java_only, "ssl.truststore.password"]:
        assert sum(f"Ignoring worker config {key} " in m for m in warned) == 1, (key, warned)
        assert key not in config.client_config("producer")
    assert not any(v in m for m in warned for v in ("changeit", SECRET, "TLSv1.3"))


def test_unknown_keys_fail_at_load_naming_the_key() -> None:
    assert refused({"ssl.nonsense": "1"}).name == "ssl.nonsense"
    assert refused({"consumer.sasl.nonsense": "1"}).name == "consumer.sasl.nonsense"
    assert refused({"security.protocol": "SASL_TLS"}).name == "security.protocol"


def test_sasl_without_a_usable_mechanism_or_credentials_fails_at_load() -> None:
    assert refused({"security.protocol": "SASL_SSL", "sasl.mechanism": "AWS_MSK_IAM",
                    **{"sasl.jaas.config": SASL["sasl.jaas.config"]}}).name == "sasl.mechanism"
    # Java's default mechanism, GSSAPI, is not in librdkafka's wheel build.
    no_mechanism = refused({"security.protocol": "SASL_SSL",
                            "sasl.jaas.config": SASL["sasl.jaas.config"]})
    assert no_mechanism.name == "sasl.mechanism" and "GSSAPI" in str(no_mechanism)
    no_credentials = refused({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"})
    assert no_credentials.name == "sasl.jaas.config"


def test_librdkafka_messages_are_scrubbed_of_secrets(tmp_path: Path) -> None:
    # Contrived so that librdkafka's message (which quotes the path) holds the secret.
    path = str(tmp_path / SECRET)
    with pytest.raises(ConfigException) as info:
        check_client_config("producer", {"ssl.keystore.location": path,
                                         "ssl.keystore.password": SECRET,
                                         "security.protocol": "SSL"})
    assert info.value.name == "ssl.keystore.location"
    assert SECRET not in str(info.value) and "[hidden]" in str(info.value)


def test_security_keys_reach_every_client_kind_under_the_prefixed_ones() -> None:
    config = worker(**SASL, **{
        "producer.security.protocol": "SASL_SSL",
        "producer.sasl.mechanism": "SCRAM-SHA-512",
        "producer.sasl.jaas.config": f'{SCRAM} required username="bob" password="{SECRET}2";',
        "producer.linger.ms": "7", "client.dns.lookup": "use_all_dns_ips"})
    shared = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
              "sasl.username": "alice", "sasl.password": SECRET,
              "client.dns.lookup": "use_all_dns_ips"}
    for kind in ("consumer", "admin"):
        assert config.client_config(kind) == {"bootstrap.servers": "localhost:9092", **shared}
    assert config.client_config("producer") == {
        "bootstrap.servers": "localhost:9092", **shared, "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
        "sasl.password": SECRET + "2", "linger.ms": "7"}


def test_a_prefixed_store_location_inherits_the_top_level_type(pki: Path) -> None:
    config = worker(**{"ssl.truststore.type": "PEM",
                       "consumer.ssl.truststore.location": str(pki / "ca.crt")})
    assert config.client_config("consumer")["ssl.ca.location"] == str(pki / "ca.crt")
    assert "ssl.ca.location" not in config.client_config("producer")


def test_keys_of_other_subsystems_are_not_client_settings() -> None:
    config = worker(**{"listeners.https.ssl.keystore.location": "/rest/keystore.jks",
                       "admin.listeners": "http://:9999",
                       "admin.listeners.https.ssl.keystore.location": "/rest/admin.jks"})
    for kind in ("producer", "consumer", "admin"):
        assert config.client_config(kind) == {"bootstrap.servers": "localhost:9092"}


def test_settings_reach_the_stores_and_the_task_specs_without_showing_the_password() -> None:
    config = worker(**SASL)
    settings = ClientSettings.from_worker_config(config)
    spec = TaskSpecBuilder(config, "http://w:8083", "w:8083").build("conn", 0, 1, {}, {}, None)
    for conf in (settings.producer_config(), settings.consumer_config(),
                 settings.admin_config(), spec.producer_overrides, spec.consumer_overrides,
                 spec.admin_overrides):
        assert conf["security.protocol"] == "SASL_PLAINTEXT"
        assert (conf["sasl.username"], conf["sasl.password"]) == ("alice", SECRET)
    assert SECRET not in repr(spec)


def test_a_refused_login_is_an_authentication_error() -> None:
    from confluent_kafka import KafkaError, KafkaException

    error = translate_kafka_error(KafkaException(KafkaError(KafkaError._AUTHENTICATION,
                                                            "SASL authentication error")), "x")
    assert isinstance(error, KafkaAuthenticationError) and not error.retriable
