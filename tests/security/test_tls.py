"""HTTPS settings of the REST listener, read from real stores (openssl and keytool):
which keys apply, every store format, and bad input named by its key."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from support.tls import PASSWORD, https_settings, make_pki, tools_missing

from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException
from connect_runtime.security.tls import ClientTls, load_rest_tls

MINIMAL = {"bootstrap.servers": "localhost:9092", "group.id": "g",
           "config.storage.topic": "c", "offset.storage.topic": "o",
           "status.storage.topic": "s"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if (why := tools_missing()) is not None:
        pytest.skip(why)
    return make_pki(tmp_path_factory.mktemp("rest-pki"))


def error(settings: dict[str, str]) -> ConfigException:
    with pytest.raises(ConfigException) as caught:
        load_rest_tls(settings)
    return caught.value


def test_an_https_listener_loads_keytool_stores_and_advertises_https(pki: Path) -> None:
    config = WorkerConfig({**MINIMAL, "listeners": "https://127.0.0.1:8443",
                           **https_settings(pki, "required")})
    assert config.listener_scheme == "https" and config.listener() == ("127.0.0.1", 8443)
    assert config.advertised_url() == "https://127.0.0.1:8443"
    tls = config.rest_tls
    assert tls is not None and tls.client_auth == "required" and tls.trusted is not None
    # Under mutual TLS the worker's certificate goes along as the client identity.
    client = tls.client()
    assert client.chain == tls.chain and client.key is not None
    # Task specs carry it pickled; no repr shows the key.
    assert pickle.loads(pickle.dumps(client)) == client
    assert "PRIVATE" not in repr(client) and "PRIVATE" not in repr(tls)


def test_without_client_auth_no_identity_leaves_the_worker(pki: Path) -> None:
    tls = load_rest_tls(https_settings(pki, "none"))
    assert tls.client() == ClientTls(trusted=tls.trusted, check_hostname=True)


def test_plain_http_reads_no_store(pki: Path) -> None:
    # Top-level ssl.* keys are the Kafka clients' too: what only an https listener
    # would refuse must not stop an http worker (Connect's KAFKA-14816).
    config = WorkerConfig({**MINIMAL, "ssl.client.auth": "sometimes"})
    assert config.rest_tls is None and config.listener_scheme == "http"
    with pytest.raises(ConfigException, match=r"ssl\.client\.auth"):
        WorkerConfig({**MINIMAL, "ssl.client.auth": "sometimes", "listeners": "https://:1",
                      "ssl.keystore.location": str(pki / "worker.p12"),
                      "ssl.keystore.password": PASSWORD})


def test_the_prefixed_keys_win_whole_over_the_top_level(pki: Path) -> None:
    top = {"ssl.keystore.location": str(pki / "worker.p12"),
           "ssl.keystore.password": PASSWORD, "ssl.client.auth": "required",
           "ssl.truststore.location": str(pki / "trust.p12"),
           "ssl.truststore.password": PASSWORD}
    assert load_rest_tls(top).client_auth == "required" and load_rest_tls(top).prefix == ""
    # One listeners.https. key: the top level is ignored entirely (all or nothing).
    both = {**top, "listeners.https.ssl.keystore.location": str(pki / "worker.p12"),
            "listeners.https.ssl.keystore.password": PASSWORD}
    tls = load_rest_tls(both)
    assert tls.prefix == "listeners.https." and tls.client_auth == "none"
    assert tls.trusted is None


def test_pem_keystores_file_and_inline(pki: Path) -> None:
    from_file = load_rest_tls({"ssl.keystore.type": "PEM",
                               "ssl.keystore.location": str(pki / "worker.pem"),
                               "ssl.key.password": PASSWORD,
                               "ssl.truststore.location": str(pki / "ca.crt")})
    inline = load_rest_tls({
        # One line, as a properties file's continuations leave it.
        "ssl.keystore.certificate.chain": " ".join((pki / "worker.crt").read_text().split("\n")),
        "ssl.keystore.key": (pki / "worker.key").read_text(),
        "ssl.truststore.certificates": (pki / "ca.crt").read_text()})
    keystore = load_rest_tls(https_settings(pki))
    assert from_file.chain == inline.chain == keystore.chain
    assert from_file.key == inline.key == keystore.key
    assert from_file.trusted == inline.trusted == keystore.trusted


def test_bad_stores_are_named_by_their_key(pki: Path) -> None:
    base = https_settings(pki)
    p = "listeners.https."
    cases = [
        ({**base, p + "ssl.keystore.location": str(pki / "nope.p12")},
         p + "ssl.keystore.location", "cannot read the file"),
        ({**base, p + "ssl.keystore.password": "wrong"},
         p + "ssl.keystore.password", "wrong password"),
        ({**base, p + "ssl.keystore.location": str(pki / "worker.jks")},
         p + "ssl.keystore.location", "keytool -importkeystore"),
        ({**base, p + "ssl.truststore.password": "wrong"},
         p + "ssl.truststore.password", "wrong password"),
        ({**base, p + "ssl.keystore.location": str(pki / "worker.ext")},
         p + "ssl.keystore.location", "neither PEM nor PKCS12"),
        ({**base, p + "ssl.client.auth": "sometimes"}, p + "ssl.client.auth", "required"),
        ({k: v for k, v in base.items() if "truststore" not in k}
         | {p + "ssl.client.auth": "required"}, p + "ssl.client.auth", "needs a truststore"),
        ({k: v for k, v in base.items() if "keystore" not in k},
         p + "ssl.keystore.location", "needs a keystore"),
        ({**base, p + "ssl.enabled.protocols": "TLSv1.1"}, p + "ssl.enabled.protocols",
         "TLSv1.2"),
        ({**base, p + "ssl.cipher.suites": "TLS_NOT_A_SUITE"}, p + "ssl.cipher.suites",
         "OpenSSL names"),
        ({p + "ssl.keystore.location": str(pki / "worker.pem"), p + "ssl.key.password": "no"},
         p + "ssl.key.password", "cannot decrypt"),
        ({p + "ssl.keystore.key": (pki / "worker.key").read_text()},
         p + "ssl.keystore.certificate.chain", "must be set too"),
        # A certificate with another's key.
        ({p + "ssl.keystore.certificate.chain": (pki / "worker.crt").read_text(),
          p + "ssl.keystore.key": (pki / "client.key").read_text()},
         p + "ssl.keystore.key", "do not make a TLS identity"),
    ]
    for settings, key, message in cases:
        e = error(settings)
        assert e.name == key and message in str(e), (key, str(e))
        assert PASSWORD not in str(e) and "wrong" not in repr(e.value)


def test_a_bad_store_stops_the_worker_config(pki: Path) -> None:
    with pytest.raises(ConfigException, match=r"listeners\.https\.ssl\.keystore\.password"):
        WorkerConfig({**MINIMAL, "listeners": "https://:8443",
                      **https_settings(pki), "listeners.https.ssl.keystore.password": "x"})


def test_protocols_and_host_name_checking(pki: Path) -> None:
    tls = load_rest_tls({**https_settings(pki),
                         "listeners.https.ssl.enabled.protocols": "TLSv1.3",
                         "listeners.https.ssl.endpoint.identification.algorithm": ""})
    ctx = tls.client().context()
    assert not ctx.check_hostname and ctx.minimum_version == ctx.maximum_version
