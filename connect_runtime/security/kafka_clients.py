"""How every Kafka client reaches a secured cluster: Kafka Connect's keys, in librdkafka's names.

Kafka Connect configures TLS and SASL with Java client keys (``security.protocol``,
``ssl.*``, ``sasl.*``); this runtime's clients are librdkafka's, which share some
of those names, lack others and add their own. This module turns one layer of
such keys into librdkafka settings, so an existing ``connect-distributed.properties``
works as is (docs/configuration.md, "Secured Kafka").

Contract:

* **Which keys.** :func:`is_client_security_key`: ``security.protocol``,
  ``ssl.*``, ``sasl.*`` and ``client.dns.lookup``. Keys of other subsystems
  start with other prefixes (``listeners.https.ssl.*`` is for a REST listener)
  and are never touched here.
* **Layers.** The worker's top-level keys form one layer, applied to every
  client the worker and its tasks create; ``producer.``, ``consumer.`` and
  ``admin.`` prefixed keys form one layer per client kind, translated on their
  own and laid over the top-level result key by key (a
  ``producer.security.protocol`` wins for producers). A prefixed layer that
  names a store location without its type inherits the top-level type.
* **Translation** (:func:`translate`) is deterministic and raises nothing but
  :class:`ConfigException`: librdkafka names pass through; Java-only names with
  a librdkafka equivalent are translated (``sasl.jaas.config`` with the PLAIN
  or SCRAM login module, PEM and PKCS#12 stores, inline PEM, an empty
  ``ssl.endpoint.identification.algorithm``); Java-only names without one are
  dropped and reported (:attr:`Translated.dropped`); unsupported combinations
  (JKS stores, other JAAS login modules, ...) raise, naming the key and what is
  supported. Names that are neither are left for librdkafka to judge
  (:func:`check_client_config`).
* **Secrets** (:data:`SECRET_KEYS`) never appear in a log line or an exception
  message: errors carry ``[hidden]`` as their value, and librdkafka's messages
  are scrubbed of secret values before they are re-raised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from connect_runtime.errors import ConfigException

HIDDEN = "[hidden]"

_FAMILY_PREFIXES = ("ssl.", "sasl.")
_FAMILY_KEYS = frozenset({"security.protocol", "client.dns.lookup"})

# Values that are credentials, in Java's and librdkafka's names.
SECRET_KEYS = frozenset({
    "sasl.jaas.config", "sasl.password", "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.config", "ssl.key.password", "ssl.keystore.password",
    "ssl.truststore.password", "ssl.key.pem", "ssl.keystore.key",
})

# Java-only keys without a librdkafka equivalent: dropped, each with the reason
# logged once. `sasl.login.*` (Java's login refresh and callback settings) too.
_JAVA_ONLY = {
    "ssl.protocol": "OpenSSL negotiates the TLS version",
    "ssl.enabled.protocols": "OpenSSL negotiates the TLS version",
    "ssl.provider": "a Java security provider",
    "ssl.keymanager.algorithm": "a Java KeyManagerFactory algorithm",
    "ssl.trustmanager.algorithm": "a Java TrustManagerFactory algorithm",
    "ssl.secure.random.implementation": "a Java SecureRandom implementation",
    "ssl.engine.factory.class": "a Java SSLEngine factory class",
    "ssl.client.auth": "a server-side (broker or REST listener) setting",
    "ssl.principal.mapping.rules": "a broker setting",
    "sasl.client.callback.handler.class": "a Java callback handler class",
    "sasl.kerberos.ticket.renew.window.factor": "Java's Kerberos ticket renewal",
    "sasl.kerberos.ticket.renew.jitter": "Java's Kerberos ticket renewal",
    "sasl.oauthbearer.scope.claim.name": "a Java OAUTHBEARER token-parsing setting",
    "sasl.oauthbearer.sub.claim.name": "a Java OAUTHBEARER token-parsing setting",
    "sasl.oauthbearer.clock.skew.seconds": "a Java OAUTHBEARER token-parsing setting",
}
_JAVA_ONLY_PREFIXES = {"sasl.login.": "Java's login refresh and callback settings"}

# Keys this module consumes (and re-emits under librdkafka names where needed).
_STORE_KEYS = frozenset({
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates", "ssl.keystore.type", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
})

# Kafka's default store type. Java 9+ also reads a PKCS#12 file through a "JKS"
# keystore (keystore.type.compat), so a JKS-typed file is sniffed before refusing it.
_DEFAULT_STORE_TYPE = "JKS"

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_JAAS_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})

_SASL_MECHANISMS = ("GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def is_client_security_key(key: str) -> bool:
    """True for the keys this module owns (unprefixed: ``ssl.truststore.location``)."""
    return key in _FAMILY_KEYS or key.startswith(_FAMILY_PREFIXES)


def is_secret(key: str) -> bool:
    """True if ``key`` (possibly ``producer.``-prefixed) holds a credential."""
    return any(key == s or key.endswith("." + s) for s in SECRET_KEYS)


def shown(key: str, value: object) -> object:
    """``value`` as it may appear in a message about ``key``: secrets are ``[hidden]``."""
    return HIDDEN if is_secret(key) else value


@dataclass(frozen=True)
class Translated:
    """One layer of client keys in librdkafka's names.

    ``settings``: librdkafka property -> value. ``sources``: librdkafka property ->
    the key it came from, as the user wrote it (with its prefix), for messages.
    ``dropped``: Java-only key -> why it has no effect. ``notes``: one line per
    translation, safe to log (names only).
    """

    settings: dict[str, str] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    dropped: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


class _Builder:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.out = Translated()

    def name(self, key: str) -> str:
        return self.prefix + key

    def put(self, lib_key: str, value: str, source: str, given: Mapping[str, str]) -> None:
        """Set ``lib_key`` from ``source``; refuse if the layer also sets it directly."""
        if lib_key != source and lib_key in given:
            raise ConfigException(f"both {self.name(source)} and {self.name(lib_key)} are set; "
                                  f"set one of them", name=self.name(source),
                                  value=shown(source, given[source]))
        self.out.settings[lib_key] = value
        self.out.sources[lib_key] = self.name(source)
        if lib_key != source:
            self.out.notes.append(f"{self.name(source)} -> librdkafka {lib_key}")

    def drop(self, key: str, why: str) -> None:
        self.out.dropped[self.name(key)] = why


def translate(keys: Mapping[str, str], prefix: str = "",
              inherited: Mapping[str, str] | None = None) -> Translated:
    """Translate one layer: ``keys`` are unprefixed family keys, ``prefix`` (``""``,
    ``"producer."``, ...) only names them in messages. ``inherited`` is the
    top-level layer as given, consulted for store types a prefixed layer omits.
    Reads the first bytes of a store file whose type is JKS or unset, to tell
    PEM, PKCS#12 and JKS apart. Raises ConfigException.
    """
    b = _Builder(prefix)
    for key, value in keys.items():
        if key in _STORE_KEYS:
            continue
        if key == "sasl.jaas.config":
            username, password, ignored = _jaas_credentials(value, b.name(key))
            b.put("sasl.username", username, key, keys)
            b.put("sasl.password", password, key, keys)
            for option in ignored:
                b.drop(f"{key} option {option}", "a JAAS option librdkafka does not use")
        elif key == "ssl.endpoint.identification.algorithm":
            # Java's "" turns host name verification off; librdkafka spells it "none".
            b.put(key, value.strip().lower() or "none", key, keys)
        elif key in _JAVA_ONLY:
            b.drop(key, _JAVA_ONLY[key])
        elif any(key.startswith(p) for p in _JAVA_ONLY_PREFIXES):
            b.drop(key, next(why for p, why in _JAVA_ONLY_PREFIXES.items() if key.startswith(p)))
        else:
            b.put(key, value, key, keys)  # librdkafka's own name, or left for it to refuse
    _truststore(b, keys, inherited or {})
    _keystore(b, keys, inherited or {})
    return b.out


# --------------------------------------------------------------------- stores


def _store_type(b: _Builder, keys: Mapping[str, str], inherited: Mapping[str, str],
                kind: str) -> str:
    """``ssl.<kind>.type`` of the layer (or inherited), upper-cased; sniffed if JKS."""
    type_key, location_key = f"ssl.{kind}.type", f"ssl.{kind}.location"
    declared = (keys.get(type_key) or inherited.get(type_key) or _DEFAULT_STORE_TYPE)
    declared = declared.strip().upper()
    if declared != _DEFAULT_STORE_TYPE:
        return declared
    path = keys[location_key]
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise ConfigException(f"cannot read the {kind} file: {e.strerror}",
                              name=b.name(location_key), value=path) from e
    return store_format(head)


def store_format(head: bytes) -> str:
    """A key or trust store's format from its first bytes: ``PEM``, ``PKCS12`` (a DER
    SEQUENCE, which Java also reads when told ``JKS``), ``JKS``, ``JCEKS`` or
    ``unknown``."""
    if head.lstrip().startswith(b"-----BEGIN"):
        return "PEM"
    if head[:1] == b"\x30":
        return "PKCS12"
    return {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}.get(head[:4], "unknown")


def _truststore(b: _Builder, keys: Mapping[str, str], inherited: Mapping[str, str]) -> None:
    if "ssl.truststore.certificates" in keys:
        b.put("ssl.ca.pem", normalize_pem(keys["ssl.truststore.certificates"],
                                          b.name("ssl.truststore.certificates")),
              "ssl.truststore.certificates", keys)
    if "ssl.truststore.location" in keys:
        store = _store_type(b, keys, inherited, "truststore")
        if store != "PEM":
            raise ConfigException(
                f"librdkafka cannot read a {store} truststore; use the CA "
                f"certificate(s) in PEM: ssl.truststore.type=PEM and ssl.truststore.location="
                f"<ca.crt> (Strimzi's cluster CA secret has ca.crt), or librdkafka's "
                f"ssl.ca.location", name=b.name("ssl.truststore.location"),
                value=keys["ssl.truststore.location"])
        b.put("ssl.ca.location", keys["ssl.truststore.location"], "ssl.truststore.location",
              keys)
    if "ssl.truststore.password" in keys:
        b.drop("ssl.truststore.password", "PEM truststores have no password")


def _keystore(b: _Builder, keys: Mapping[str, str], inherited: Mapping[str, str]) -> None:
    chain, key = keys.get("ssl.keystore.certificate.chain"), keys.get("ssl.keystore.key")
    if (chain is None) != (key is None):
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise _missing(b.name(missing), "must be set too: an inline PEM keystore needs both "
                                        "the certificate chain and the private key")
    if chain is not None and key is not None:
        b.put("ssl.certificate.pem", normalize_pem(chain, b.name("ssl.keystore.certificate.chain")),
              "ssl.keystore.certificate.chain", keys)
        b.put("ssl.key.pem", normalize_pem(key, b.name("ssl.keystore.key")), "ssl.keystore.key",
              keys)
    if "ssl.keystore.location" not in keys:
        if "ssl.keystore.password" in keys:
            b.put("ssl.keystore.password", keys["ssl.keystore.password"],
                  "ssl.keystore.password", keys)
        return
    location = keys["ssl.keystore.location"]
    store = _store_type(b, keys, inherited, "keystore")
    if store == "PKCS12":  # librdkafka reads PKCS#12 under the same names
        b.put("ssl.keystore.location", location, "ssl.keystore.location", keys)
        if "ssl.keystore.password" in keys:
            b.put("ssl.keystore.password", keys["ssl.keystore.password"],
                  "ssl.keystore.password", keys)
    elif store == "PEM":
        # OpenSSL skips the blocks it is not looking for, so one file holding the
        # private key and the certificate chain (Java's PEM keystore) serves both.
        b.put("ssl.certificate.location", location, "ssl.keystore.location", keys)
        b.put("ssl.key.location", location, "ssl.keystore.location", keys)
        if "ssl.keystore.password" in keys:
            b.drop("ssl.keystore.password", "a PEM keystore's key is decrypted with "
                                            "ssl.key.password")
    else:
        raise ConfigException(
            f"a {store} keystore cannot be read by librdkafka; use PKCS12 "
            f"(ssl.keystore.type=PKCS12, e.g. Strimzi's user.p12 with user.password; convert "
            f"with keytool -importkeystore -deststoretype PKCS12) or PEM "
            f"(ssl.keystore.certificate.chain and ssl.keystore.key, or librdkafka's "
            f"ssl.certificate.location and ssl.key.location)",
            name=b.name("ssl.keystore.location"), value=location)


def normalize_pem(value: str, key: str) -> str:
    """Every PEM block of ``value``, re-wrapped at 64 columns.

    Java accepts a PEM value on one line (a properties file's ``\\`` continuations
    join lines without newlines); OpenSSL needs the header, body and footer on
    their own lines. Blocks with RFC 1421 headers (``Proc-Type:``) are kept as
    they are. The value is never shown in the error.
    """
    blocks = _PEM_BLOCK.findall(value)
    if not blocks:
        raise ConfigException("no PEM block (-----BEGIN ...----- ... -----END ...-----) found",
                              name=key, value=shown(key, "<not PEM>"))
    out = []
    for label, body in blocks:
        if ":" in body:
            out.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        data = "".join(body.split())
        lines = "\n".join(data[i:i + 64] for i in range(0, len(data), 64))
        out.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    return "".join(out)


# ----------------------------------------------------------------------- JAAS


@dataclass(frozen=True)
class JaasEntry:
    """One login module of a ``sasl.jaas.config`` value."""

    module: str
    flag: str
    options: dict[str, str]


def parse_jaas_config(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Parse ``<LoginModule> <flag> [name=value ...];`` as Kafka's JaasConfig does.

    Values are words or quoted strings (``"`` or ``'``, with backslash escapes
    such as ``\\"``); ``//`` and ``/* */`` comments are skipped; exactly one login
    module is allowed. Errors name ``key`` and the problem, never a value.
    """
    tokens = _jaas_tokens(text, key)
    pos = 0

    def expect_word(what: str) -> str:
        nonlocal pos
        if pos >= len(tokens) or tokens[pos][0] != "word":
            raise ConfigException(f"expected {what}", name=key, value=HIDDEN)
        pos += 1
        return tokens[pos - 1][1]

    module = expect_word("a login module class name")
    flag = expect_word("a control flag (required)")
    if flag.lower() not in _JAAS_FLAGS:
        raise ConfigException(f"{flag!r} is not a JAAS control flag (required, requisite, "
                              f"sufficient, optional)", name=key, value=HIDDEN)
    options: dict[str, str] = {}
    while pos < len(tokens) and tokens[pos] != ("op", ";"):
        name = expect_word("an option name or ';'")
        if pos >= len(tokens) or tokens[pos] != ("op", "="):
            raise ConfigException(f"option {name!r} has no '=value'", name=key, value=HIDDEN)
        pos += 1
        if pos >= len(tokens) or tokens[pos][0] not in ("word", "quoted"):
            raise ConfigException(f"option {name!r} has no value", name=key, value=HIDDEN)
        options[name] = tokens[pos][1]
        pos += 1
    if pos >= len(tokens):
        raise ConfigException("the login module entry must end with ';'", name=key, value=HIDDEN)
    if pos + 1 != len(tokens):
        raise ConfigException("only one login module is allowed", name=key, value=HIDDEN)
    return JaasEntry(module, flag.lower(), options)


_JAAS_SIMPLE_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "a": "\a",
                        "v": "\v"}


def _jaas_tokens(text: str, key: str) -> list[tuple[str, str]]:
    """("word" | "quoted" | "op", text) tokens, java.io.StreamTokenizer-style."""
    tokens: list[tuple[str, str]] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ConfigException("unterminated /* comment", name=key, value=HIDDEN)
            i = end + 2
        elif ch in "=;":
            tokens.append(("op", ch))
            i += 1
        elif ch in "\"'":
            value, i = _jaas_quoted(text, i, key)
            tokens.append(("quoted", value))
        else:
            start = i
            while i < n and not text[i].isspace() and text[i] not in "=;\"'":
                i += 1
            tokens.append(("word", text[start:i]))
    return tokens


def _jaas_quoted(text: str, start: int, key: str) -> tuple[str, int]:
    quote, i = text[start], start + 1
    out: list[str] = []
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            octal = re.match(r"[0-7]{1,3}", text[i + 1:i + 4])
            if octal:
                out.append(chr(int(octal.group(), 8) & 0xFF))
                i += 1 + len(octal.group())
                continue
            out.append(_JAAS_SIMPLE_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise ConfigException("unterminated quoted value", name=key, value=HIDDEN)


def _jaas_credentials(text: str, key: str) -> tuple[str, str, list[str]]:
    """(username, password, other option names) from a PLAIN or SCRAM login module;
    anything else raises."""
    entry = parse_jaas_config(text, key)
    if entry.module not in (_PLAIN_MODULE, _SCRAM_MODULE):
        raise ConfigException(
            f"login module {entry.module} cannot be translated for librdkafka; supported: "
            f"{_PLAIN_MODULE} and {_SCRAM_MODULE} with username and password (SASL/PLAIN, "
            f"SCRAM-SHA-256, SCRAM-SHA-512). For OAUTHBEARER use librdkafka's sasl.oauthbearer.* "
            f"keys; Kerberos (GSSAPI) is not available", name=key, value=HIDDEN)
    if entry.options.get("tokenauth", "false").lower() == "true":
        raise ConfigException("delegation tokens (tokenauth=true) are not supported by "
                              "librdkafka", name=key, value=HIDDEN)
    missing = [o for o in ("username", "password") if not entry.options.get(o)]
    if missing:
        raise ConfigException(f"the login module needs {' and '.join(missing)}", name=key,
                              value=HIDDEN)
    ignored = sorted(set(entry.options) - {"username", "password", "tokenauth"})
    return entry.options["username"], entry.options["password"], ignored


# ---------------------------------------------------------- librdkafka's view

# The confluent-kafka class of each client kind (kafka/clients.py uses it too).
CLIENT_CLASSES: dict[str, Any] = {"producer": Producer, "consumer": Consumer,
                                  "admin": AdminClient}
# Swallows the warning a client built without bootstrap.servers logs.
_SILENT = logging.getLogger(__name__ + ".probe")
_SILENT.addHandler(logging.NullHandler())
_SILENT.propagate = False


def check_client_config(kind: str, conf: Mapping[str, Any],
                        sources: Mapping[str, str] | None = None) -> None:
    """Refuse a client config librdkafka would refuse, naming the user's key.

    ``kind`` is producer, consumer or admin; ``sources`` maps librdkafka names
    back to the keys the user wrote. Checks first what librdkafka only finds
    out when connecting (a SASL mechanism it does not know, PLAIN or SCRAM
    without credentials), then builds the client once without
    ``bootstrap.servers``, which opens no connection.

    Why build a client rather than keep a list of librdkafka's properties:
    librdkafka is the authority on its names *and* values, and on what its
    build supports (this wheel has no GSSAPI); building one also reads the
    CA, certificate and key files and checks PKCS#12 passwords. A static list
    would go stale with every librdkafka release and miss all of that, leaving
    the errors to surface later as a task FAILED on an executor. It costs
    about 1-15 ms per client.
    """
    sources = sources or {}
    _check_sasl(conf, sources)
    probe = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    probe["logger"] = _SILENT
    if kind == "consumer":
        probe.setdefault("group.id", "connect-runtime-config-check")
    try:
        CLIENT_CLASSES[kind](probe)
    except (KafkaException, TypeError, ValueError) as e:
        err = e.args[0] if e.args else e
        message = str(err.str() if hasattr(err, "str") else err)
        raise _rejected(kind, message, conf, sources) from None


def _check_sasl(conf: Mapping[str, Any], sources: Mapping[str, str]) -> None:
    protocol = str(conf.get("security.protocol", "plaintext")).upper()
    if not protocol.startswith("SASL"):
        return
    mechanism = str(conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "GSSAPI"))).upper()
    name = sources.get("sasl.mechanism", "sasl.mechanism")
    if mechanism not in _SASL_MECHANISMS:
        raise ConfigException(f"unknown SASL mechanism; one of {', '.join(_SASL_MECHANISMS)}",
                              name=name, value=conf.get("sasl.mechanism"))
    if mechanism.startswith(("PLAIN", "SCRAM")) and not (conf.get("sasl.username")
                                                         and conf.get("sasl.password")):
        raise _missing(
            sources.get("sasl.username", "sasl.jaas.config"),
            f"security.protocol={protocol} with sasl.mechanism={mechanism} needs credentials: "
            f"sasl.jaas.config (PlainLoginModule or ScramLoginModule with username and "
            f"password) or librdkafka's sasl.username and sasl.password")


def _missing(key: str, message: str) -> ConfigException:
    """A ConfigException about ``key`` that has no value to show."""
    e = ConfigException(f"{key}: {message}")
    e.name = key
    return e


def _rejected(kind: str, message: str, conf: Mapping[str, Any],
              sources: Mapping[str, str]) -> ConfigException:
    message = _scrub(message, conf)
    # The longest property librdkafka names is the culprit ("ssl.key.location"
    # over "ssl.key"); a missing SASL provider names only the mechanism.
    named = sorted((k for k in conf if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])",
                                                   message)), key=len, reverse=True)
    lib_key = named[0] if named else ("sasl.mechanism" if "SASL mechanism" in message else None)
    if lib_key is None:
        return ConfigException(f"librdkafka refuses the {kind} settings: {message}")
    source = sources.get(lib_key, lib_key)
    value = conf.get(lib_key, "GSSAPI" if lib_key == "sasl.mechanism" else None)
    value = shown(source, shown(lib_key, value))
    return ConfigException(f"librdkafka refuses the {kind} setting {lib_key}: {message}",
                           name=source, value=_scrub(value, conf) if isinstance(value, str)
                           else value)


def _scrub(text: str, conf: Mapping[str, Any]) -> str:
    """``text`` with every secret value of ``conf`` replaced by ``[hidden]``
    (librdkafka quotes values and paths in its messages)."""
    for key, value in conf.items():
        if is_secret(key) and isinstance(value, str) and value:
            text = text.replace(value, HIDDEN)
    return text
