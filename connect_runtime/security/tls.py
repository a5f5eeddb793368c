"""HTTPS for the REST listener and for requests between workers, read as Kafka Connect does.

A worker serves HTTPS when its listener is ``https://host:port``. Its TLS
settings are Connect's: the ``listeners.https.``-prefixed ``ssl.*`` keys if any
key has that prefix, else the top-level ``ssl.*`` keys (Connect's
``valuesWithPrefixAllOrNothing``: the prefixed set is taken whole, never mixed
with the top level). The same settings configure both sides, as in Connect's
``SSLUtils``:

* the server: ``ssl.keystore.*`` (its certificate), ``ssl.truststore.*`` and
  ``ssl.client.auth`` (``none``, ``requested``, ``required``: mutual TLS);
* the client (requests forwarded to the leader, and the slots on the Spark
  executors, whose channel and fence request go to their worker):
  ``ssl.truststore.*`` to trust the workers' certificates (none given: the
  system's CAs), the keystore as the client certificate, and
  ``ssl.endpoint.identification.algorithm`` (``https``, the default, checks the
  host name; empty turns that off).

Stores: PKCS12 and PEM files (``ssl.keystore.location``,
``ssl.truststore.location``; the type is read from the file, as Java reads a
PKCS12 file declared ``JKS``), or PEM text in ``ssl.keystore.key`` plus
``ssl.keystore.certificate.chain`` and ``ssl.truststore.certificates``. A JKS
file cannot be read from Python: the error says how to convert it. Everything is
loaded when the worker config loads, so a wrong path or password stops the
worker at start, naming the key.

The Spark executors do not read these files: the worker hands them
:class:`ClientTls` in each task spec (the trusted certificates and, only when
the listener requires client certificates, the worker's client identity), so a
Kubernetes executor pod needs no store mounted.
"""

from __future__ import annotations

import base64
import functools
import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connect_runtime.errors import ConfigException
from connect_runtime.security.kafka_clients import store_format

HTTPS_PREFIX = "listeners.https."
CLIENT_AUTH = ("none", "requested", "required")
DEFAULT_PROTOCOLS = "TLSv1.2,TLSv1.3"

# The keys read here (unprefixed). Java-only ones (ssl.provider, ssl.keymanager.
# algorithm, ...) configure a JVM's TLS stack and mean nothing to OpenSSL.
_KEYS = ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
         "ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
         "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
         "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
         "ssl.cipher.suites", "ssl.endpoint.identification.algorithm")
_PEM_BLOCK = re.compile(rb"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


def _cryptography() -> Any:
    """The ``cryptography`` modules, imported on first use: only HTTPS needs them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12
    return x509, serialization, pkcs12


@dataclass(frozen=True, repr=False)
class ClientTls:
    """What a client of a worker's HTTPS listener needs; picklable (task specs carry it).

    ``trusted``: PEM certificates to trust (None: the system's CAs). ``chain`` and
    ``key``: a PEM certificate chain and unencrypted PKCS#8 private key to present
    (None: no client certificate). Never printed: ``repr`` shows no key.
    """

    trusted: bytes | None = None
    chain: bytes | None = None
    key: bytes | None = field(default=None)
    check_hostname: bool = True
    min_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_2
    max_version: ssl.TLSVersion = ssl.TLSVersion.TLSv1_3

    def __repr__(self) -> str:
        return (f"ClientTls(trusted={self.trusted is not None}, "
                f"identity={self.chain is not None}, check_hostname={self.check_hostname})")

    def context(self) -> ssl.SSLContext:
        """A client context: verifies the server (and its host name unless turned off)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version, ctx.maximum_version = self.min_version, self.max_version
        ctx.check_hostname = self.check_hostname
        if self.trusted is not None:
            ctx.load_verify_locations(cadata=self.trusted.decode("ascii"))
        else:
            ctx.load_default_certs()
        if self.chain is not None and self.key is not None:
            load_identity(ctx, self.chain, self.key)
        return ctx


@functools.lru_cache(maxsize=4)
def client_context(tls: ClientTls) -> ssl.SSLContext:
    """``tls.context()``, built once per process: a slot process opens channels
    and fence requests again and again with the same settings."""
    return tls.context()


@dataclass(frozen=True, repr=False)
class RestTls:
    """A worker's HTTPS settings, loaded and checked. ``prefix`` is where they came
    from (``listeners.https.`` or the top level), for messages."""

    prefix: str
    chain: bytes
    key: bytes
    trusted: bytes | None
    client_auth: str
    check_hostname: bool
    min_version: ssl.TLSVersion
    max_version: ssl.TLSVersion
    ciphers: str | None

    def __repr__(self) -> str:
        return f"RestTls(prefix={self.prefix!r}, client_auth={self.client_auth!r})"

    def server_context(self) -> ssl.SSLContext:
        """The listener's context: this worker's certificate; client certificates
        checked against the truststore as ``ssl.client.auth`` says."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._common(ctx)
        if self.trusted is not None:
            ctx.load_verify_locations(cadata=self.trusted.decode("ascii"))
        ctx.verify_mode = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                           "required": ssl.CERT_REQUIRED}[self.client_auth]
        return ctx

    def client(self) -> ClientTls:
        """The client side, for forwarding and for the executors. The worker's
        certificate goes along only when the listener asks clients for one."""
        identity = self.client_auth != "none"
        return ClientTls(trusted=self.trusted, chain=self.chain if identity else None,
                         key=self.key if identity else None,
                         check_hostname=self.check_hostname, min_version=self.min_version,
                         max_version=self.max_version)

    def _common(self, ctx: ssl.SSLContext) -> None:
        ctx.minimum_version, ctx.maximum_version = self.min_version, self.max_version
        if self.ciphers is not None:
            ctx.set_ciphers(self.ciphers)  # checked at load
        load_identity(ctx, self.chain, self.key)


def load_identity(ctx: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    """Load a PEM chain and private key into ``ctx``.

    OpenSSL loads them only from files: they are written to a private temporary
    directory, the key encrypted with a one-time passphrase (never on disk in
    clear), and removed at once.
    """
    _, serialization, _ = _cryptography()
    passphrase = secrets.token_bytes(32)
    private = serialization.load_pem_private_key(key, password=None)
    encrypted = private.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(passphrase))
    with tempfile.TemporaryDirectory(prefix="connect-tls-") as tmp:
        cert_file, key_file = Path(tmp, "chain.pem"), Path(tmp, "key.pem")
        cert_file.write_bytes(chain)
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(encrypted)
        ctx.load_cert_chain(cert_file, key_file, password=passphrase)


def rest_tls_settings(originals: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(prefix, the TLS keys unprefixed): Connect's all-or-nothing choice."""
    if any(k.startswith(HTTPS_PREFIX) for k in originals):
        return HTTPS_PREFIX, {k[len(HTTPS_PREFIX):]: v for k, v in originals.items()
                              if k.startswith(HTTPS_PREFIX)}
    return "", {k: v for k, v in originals.items() if k in _KEYS}


def load_rest_tls(originals: Mapping[str, str]) -> RestTls:
    """Read and check the HTTPS settings of a worker config (see the module doc);
    raises :class:`ConfigException` naming the key at fault."""
    prefix, keys = rest_tls_settings(originals)
    loader = _Loader(prefix, keys)
    chain, key = loader.identity()
    trusted = loader.trusted()
    client_auth = (keys.get("ssl.client.auth") or "none").strip().lower()
    if client_auth not in CLIENT_AUTH:
        raise loader.error("ssl.client.auth", f"must be one of {', '.join(CLIENT_AUTH)}")
    if client_auth != "none" and trusted is None:
        raise loader.error("ssl.client.auth", "checking client certificates needs a truststore "
                           "(ssl.truststore.location or ssl.truststore.certificates)")
    low, high = loader.versions()
    tls = RestTls(prefix=prefix, chain=chain, key=key, trusted=trusted,
                  client_auth=client_auth,
                  check_hostname=(keys.get("ssl.endpoint.identification.algorithm", "https")
                                  .strip() != ""),
                  min_version=low, max_version=high, ciphers=loader.ciphers())
    try:
        tls.server_context()
        tls.client().context()
    except ssl.SSLError as e:
        where = ("ssl.keystore.key" if "ssl.keystore.key" in keys else "ssl.keystore.location")
        raise loader.error(where, f"the certificate and key do not make a TLS identity: "
                                  f"{e.reason or e}") from e
    return tls


def load_client_tls(prefix: str, keys: Mapping[str, str]) -> ClientTls:
    """A TLS client's settings from Connect-style ``ssl.*`` keys, given unprefixed in
    ``keys`` (``prefix`` is how the user wrote them, for messages; e.g.
    ``value.converter.schema.registry.``): the truststore (none: the system's CAs),
    the keystore as client certificate if one is set, host name checking
    (``ssl.endpoint.identification.algorithm``) and protocols. Raises
    :class:`ConfigException` naming the key at fault."""
    loader = _Loader(prefix, keys)
    has_identity = any(keys.get(k) for k in (
        "ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain"))
    chain, key = loader.identity() if has_identity else (None, None)
    low, high = loader.versions()
    tls = ClientTls(trusted=loader.trusted(), chain=chain, key=key,
                    check_hostname=(keys.get("ssl.endpoint.identification.algorithm", "https")
                                    or "").strip() != "",
                    min_version=low, max_version=high)
    try:
        tls.context()
    except ssl.SSLError as e:
        raise loader.error("ssl.keystore.location", f"the certificate and key do not make a "
                                                    f"TLS identity: {e.reason or e}") from e
    return tls


class _Loader:
    def __init__(self, prefix: str, keys: Mapping[str, str]) -> None:
        self.prefix = prefix
        self.keys = keys

    def error(self, key: str, message: str) -> ConfigException:
        shown = "[hidden]" if key.endswith("password") or key == "ssl.keystore.key" \
            else self.keys.get(key)
        return ConfigException(message, name=self.prefix + key, value=shown)

    def _read(self, key: str) -> bytes:
        path = self.keys[key]
        try:
            return Path(path).read_bytes()
        except OSError as e:
            raise self.error(key, f"cannot read the file: {e.strerror}") from e

    def _kind(self, data: bytes, location_key: str, type_key: str) -> str:
        """PEM or PKCS12, from the content; JKS and anything else is refused."""
        declared = (self.keys.get(type_key) or "").strip().upper()
        found = store_format(data[:64])
        if found in ("PEM", "PKCS12"):
            return found
        if found in ("JKS", "JCEKS"):
            path = self.keys[location_key]
            raise self.error(location_key, (
                f"a {found} store cannot be read "
                f"outside a JVM; convert it to PKCS12 with keytool -importkeystore "
                f"-srckeystore {path} -destkeystore {path}.p12 -deststoretype PKCS12, or use "
                f"PEM ({self.prefix}{type_key}=PEM)"))
        raise self.error(location_key, f"neither PEM nor PKCS12 (declared "
                                       f"{declared or 'JKS, the default'})")

    def identity(self) -> tuple[bytes, bytes]:
        """(PEM chain, unencrypted PKCS#8 key) of the keystore; an HTTPS listener needs one."""
        _, serialization, _ = _cryptography()
        inline_chain = self.keys.get("ssl.keystore.certificate.chain")
        inline_key = self.keys.get("ssl.keystore.key")
        key_password = self.keys.get("ssl.key.password")
        if inline_chain is not None or inline_key is not None:
            if inline_chain is None or inline_key is None:
                missing = ("ssl.keystore.key" if inline_key is None
                           else "ssl.keystore.certificate.chain")
                raise self.error(missing, "must be set too: a PEM keystore given inline needs "
                                          "the certificate chain and the private key")
            certs = self._certificates(inline_chain.encode(), "ssl.keystore.certificate.chain")
            return certs, self._pem_key(inline_key.encode(), "ssl.keystore.key", key_password)
        if not self.keys.get("ssl.keystore.location"):
            raise self.error("ssl.keystore.location", "an https listener needs a keystore "
                             "holding the worker's certificate and private key")
        data = self._read("ssl.keystore.location")
        if self._kind(data, "ssl.keystore.location", "ssl.keystore.type") == "PEM":
            return (self._certificates(data, "ssl.keystore.location"),
                    self._pem_key(data, "ssl.keystore.location", key_password))
        store = self._pkcs12(data, "keystore")
        if store.key is None or store.cert is None:
            raise self.error("ssl.keystore.location", "the keystore holds no private key "
                                                      "with its certificate")
        chain = [store.cert.certificate, *(c.certificate for c in store.additional_certs)]
        return (b"".join(c.public_bytes(serialization.Encoding.PEM) for c in chain),
                _pkcs8(store.key))

    def trusted(self) -> bytes | None:
        """PEM certificates of the truststore; None when there is none."""
        _, serialization, _ = _cryptography()
        if self.keys.get("ssl.truststore.certificates"):
            return self._certificates(self.keys["ssl.truststore.certificates"].encode(),
                                      "ssl.truststore.certificates")
        if not self.keys.get("ssl.truststore.location"):
            return None
        data = self._read("ssl.truststore.location")
        if self._kind(data, "ssl.truststore.location", "ssl.truststore.type") == "PEM":
            return self._certificates(data, "ssl.truststore.location")
        store = self._pkcs12(data, "truststore")
        certs = [c.certificate for c in ([store.cert] if store.cert else [])]
        certs += [c.certificate for c in store.additional_certs]
        if not certs:
            raise self.error("ssl.truststore.location", "the truststore holds no certificate")
        return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)

    def _pkcs12(self, data: bytes, kind: str) -> Any:
        """Open the PKCS12 ``kind`` (keystore or truststore) with its password."""
        _, _, pkcs12 = _cryptography()
        password = self.keys.get(f"ssl.{kind}.password")
        try:
            return pkcs12.load_pkcs12(data, password.encode() if password else None)
        except ValueError as e:
            raise self.error(f"ssl.{kind}.password", f"cannot open the PKCS12 {kind} "
                             f"{self.keys[f'ssl.{kind}.location']}: wrong password, or not a "
                             f"{kind}") from e

    def _certificates(self, data: bytes, key: str) -> bytes:
        x509, serialization, _ = _cryptography()
        blocks = [m.group(0) for m in _PEM_BLOCK.finditer(data)
                  if m.group(1) == b"CERTIFICATE"]
        if not blocks:
            raise self.error(key, "no PEM certificate (-----BEGIN CERTIFICATE-----) found")
        out = []
        for block in blocks:
            # Java takes a PEM value on one line (properties continuations drop the
            # newlines): re-read through the DER body, which tolerates that.
            body = b"".join(block.split(b"-----")[2].split())
            try:
                cert = x509.load_der_x509_certificate(base64.b64decode(body))
            except ValueError as e:
                raise self.error(key, f"a certificate does not parse: {e}") from e
            out.append(cert.public_bytes(serialization.Encoding.PEM))
        return b"".join(out)

    def _pem_key(self, data: bytes, key: str, password: str | None) -> bytes:
        _, serialization, _ = _cryptography()
        blocks = [m for m in _PEM_BLOCK.finditer(data) if m.group(1).endswith(b"PRIVATE KEY")]
        if not blocks:
            raise self.error(key, "no PEM private key (-----BEGIN PRIVATE KEY-----) found")
        label, body = blocks[0].group(1), b"".join(blocks[0].group(2).split())
        pem = b"-----BEGIN " + label + b"-----\n" + b"\n".join(
            body[i:i + 64] for i in range(0, len(body), 64)) + b"\n-----END " + label + b"-----\n"
        try:
            private = serialization.load_pem_private_key(
                pem, password=password.encode() if password else None)
        except (ValueError, TypeError) as e:
            raise self.error("ssl.key.password", "cannot decrypt the private key: wrong or "
                             "missing password, or not a private key") from e
        return _pkcs8(private)

    def versions(self) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
        raw = self.keys.get("ssl.enabled.protocols") or DEFAULT_PROTOCOLS
        names = [p.strip() for p in raw.split(",") if p.strip()]
        unknown = [n for n in names if n not in _VERSIONS]
        if unknown or not names:
            raise self.error("ssl.enabled.protocols",
                             f"supported protocols are {', '.join(_VERSIONS)}")
        chosen = sorted(_VERSIONS[n] for n in names)
        return chosen[0], chosen[-1]

    def ciphers(self) -> str | None:
        raw = self.keys.get("ssl.cipher.suites")
        if not raw or not raw.strip():
            return None
        suites = ":".join(s.strip() for s in raw.split(",") if s.strip())
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(suites)
        except ssl.SSLError as e:
            raise self.error("ssl.cipher.suites", "no cipher suite OpenSSL knows; give OpenSSL "
                             "names (ECDHE-RSA-AES128-GCM-SHA256), not Java's") from e
        return suites


def _pkcs8(private: Any) -> bytes:
    _, serialization, _ = _cryptography()
    pem: bytes = private.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption())
    return pem
