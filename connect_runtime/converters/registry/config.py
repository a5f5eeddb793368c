"""The keys every Schema Registry converter reads, as Confluent's converters name them.

``registry_config_def()`` is what ``GET /connector-plugins/<converter>/config``
lists and what ``PUT .../config/validate`` checks under ``key.converter.`` /
``value.converter.``; :class:`RegistrySettings` is the parsed, checked result a
converter keeps. Only keys this runtime acts on are defined: a key of Confluent's
that is not here is ignored, as Connect ignores unknown converter keys.

Subject name strategies are Confluent's three, by their Java class names (the
simple name is accepted too):

* ``TopicNameStrategy`` (the default): ``<topic>-key`` / ``<topic>-value``;
* ``RecordNameStrategy``: the schema's full name (an Avro record's
  ``namespace.name``; a primitive's type name);
* ``TopicRecordNameStrategy``: ``<topic>-<full name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    ConfigDef,
    Importance,
    Range,
    Type,
    Width,
)
from connect_runtime.errors import ConfigException

if TYPE_CHECKING:
    from connect_runtime.security.tls import ClientTls

URL = "schema.registry.url"
CREDENTIALS_SOURCE = "basic.auth.credentials.source"
USER_INFO = "basic.auth.user.info"
# Confluent accepts the user info under this older name too.
REGISTRY_USER_INFO = "schema.registry.basic.auth.user.info"
AUTO_REGISTER = "auto.register.schemas"
USE_LATEST = "use.latest.version"
LATEST_STRICT = "latest.compatibility.strict"
LATEST_TTL = "latest.cache.ttl.sec"
NORMALIZE = "normalize.schemas"
KEY_STRATEGY = "key.subject.name.strategy"
VALUE_STRATEGY = "value.subject.name.strategy"
MAX_SCHEMAS = "max.schemas.per.subject"
MAX_RETRIES = "max.retries"
RETRIES_WAIT = "retries.wait.ms"
RETRIES_MAX_WAIT = "retries.max.wait.ms"
CONNECT_TIMEOUT = "http.connect.timeout.ms"
READ_TIMEOUT = "http.read.timeout.ms"
TLS_PREFIX = "schema.registry."
TLS_KEYS = ("ssl.truststore.location", "ssl.truststore.password", "ssl.truststore.type",
            "ssl.truststore.certificates", "ssl.keystore.location", "ssl.keystore.password",
            "ssl.keystore.type", "ssl.key.password", "ssl.keystore.key",
            "ssl.keystore.certificate.chain", "ssl.endpoint.identification.algorithm",
            "ssl.enabled.protocols")

_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SubjectStrategy = Callable[[str, bool, str], str]
"""``strategy(topic, is_key, record_name)`` -> the subject."""


def _topic_name(topic: str, is_key: bool, record_name: str) -> str:
    return f"{topic}-{'key' if is_key else 'value'}"


def _record_name(topic: str, is_key: bool, record_name: str) -> str:
    return record_name


def _topic_record_name(topic: str, is_key: bool, record_name: str) -> str:
    return f"{topic}-{record_name}"


STRATEGIES: dict[str, SubjectStrategy] = {
    "TopicNameStrategy": _topic_name,
    "RecordNameStrategy": _record_name,
    "TopicRecordNameStrategy": _topic_record_name,
}
_STRATEGY_NAMES = tuple(_STRATEGY_PACKAGE + name for name in STRATEGIES)


class _StrategyName:
    """One of Confluent's subject name strategies, by class name or simple name."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and strategy_named(str(value)) is None:
            raise ConfigException(
                "Unknown subject name strategy; this runtime has Confluent's "
                + ", ".join(_STRATEGY_NAMES), name=name, value=value)

    def __str__(self) -> str:
        return f"[{', '.join(_STRATEGY_NAMES)}]"


def strategy_named(name: str) -> SubjectStrategy | None:
    """The strategy ``name`` (Confluent's class name or its simple name), or None."""
    name = name.strip()
    return STRATEGIES.get(name.removeprefix(_STRATEGY_PACKAGE))


def registry_config_def() -> ConfigDef:
    """The registry keys shared by the Avro, Protobuf and JSON Schema converters."""
    group = "Schema Registry"
    d = ConfigDef()
    order = iter(range(100))

    def define(name: str, type_: Type, default: Any, doc: str, *, validator: Any = None,
               importance: Importance = Importance.MEDIUM) -> None:
        d.define(name, type_, default, validator, importance, doc, group=group,
                 order_in_group=next(order), width=Width.LONG, display_name=name)

    define(URL, Type.LIST, NO_DEFAULT, "Comma-separated list of URLs of the Schema Registry "
           "(tried in order; the next one when one cannot be reached).",
           importance=Importance.HIGH)
    define(CREDENTIALS_SOURCE, Type.STRING, "URL", "Where the registry's basic-auth "
           "credentials come from: USER_INFO (basic.auth.user.info) or URL (user:password@ "
           "in schema.registry.url).",
           validator=CaseInsensitiveValidString.in_("URL", "USER_INFO"))
    define(USER_INFO, Type.PASSWORD, None, "user:password for the registry, with "
           "basic.auth.credentials.source=USER_INFO. A config provider placeholder "
           "(${file:...}) keeps it out of the connector config.")
    define(REGISTRY_USER_INFO, Type.PASSWORD, None, f"Confluent's older name of {USER_INFO}.",
           importance=Importance.LOW)
    define(AUTO_REGISTER, Type.BOOLEAN, True, "Register a record's schema under its subject "
           "when it is not there yet; false: only look it up, and fail if the registry does "
           "not have it.")
    define(USE_LATEST, Type.BOOLEAN, False, "Write every record with the latest version of "
           "its subject instead of its own schema (needs auto.register.schemas=false).")
    define(LATEST_STRICT, Type.BOOLEAN, True, "With use.latest.version: refuse records whose "
           "schema the latest version cannot read (the registry checks).")
    define(LATEST_TTL, Type.LONG, -1, "Seconds the latest version of a subject is cached "
           "(-1: for the life of the task).")
    define(NORMALIZE, Type.BOOLEAN, False, "Ask the registry to normalize schemas when "
           "registering and looking them up.")
    define(KEY_STRATEGY, Type.STRING, _STRATEGY_PACKAGE + "TopicNameStrategy",
           "The subject of record keys' schemas.", validator=_StrategyName())
    define(VALUE_STRATEGY, Type.STRING, _STRATEGY_PACKAGE + "TopicNameStrategy",
           "The subject of record values' schemas.", validator=_StrategyName())
    define(MAX_SCHEMAS, Type.INT, 1000, "Schemas cached per converter.",
           validator=Range.at_least(1), importance=Importance.LOW)
    define(MAX_RETRIES, Type.INT, 3, "Retries of a registry request that could not connect "
           "or got a 5xx/429 answer, per URL.", validator=Range.at_least(0))
    define(RETRIES_WAIT, Type.INT, 1000, "First wait before a retry, in milliseconds "
           "(doubling, with jitter).", validator=Range.at_least(0))
    define(RETRIES_MAX_WAIT, Type.INT, 20000, "Longest wait between retries, in "
           "milliseconds.", validator=Range.at_least(0))
    define(CONNECT_TIMEOUT, Type.INT, 60000, "Connect timeout of a registry request, in "
           "milliseconds.", validator=Range.at_least(1))
    define(READ_TIMEOUT, Type.INT, 60000, "Read timeout of a registry request, in "
           "milliseconds.", validator=Range.at_least(1))
    for key in TLS_KEYS:
        secret = key.endswith("password") or key == "ssl.keystore.key"
        define(TLS_PREFIX + key, Type.PASSWORD if secret else Type.STRING, None,
               f"The registry's HTTPS client setting {key}, as the Kafka clients read it "
               "(PKCS12 or PEM stores).", importance=Importance.LOW)
    return d


@dataclass(frozen=True)
class RegistrySettings:
    """What a converter needs of its registry keys, parsed and checked once."""

    urls: tuple[str, ...]
    user_info: str | None
    tls: ClientTls | None
    auto_register: bool
    use_latest: bool
    latest_strict: bool
    latest_ttl_s: float | None
    normalize: bool
    subject: SubjectStrategy
    cache_size: int
    max_retries: int
    retries_wait_ms: int
    retries_max_wait_ms: int
    connect_timeout_s: float
    read_timeout_s: float

    def client_conf(self) -> dict[str, Any]:
        """confluent-kafka's ``SchemaRegistryClient`` conf (TLS is set on its session)."""
        conf: dict[str, Any] = {
            "url": ",".join(self.urls), "max.retries": self.max_retries,
            "retries.wait.ms": self.retries_wait_ms,
            "retries.max.wait.ms": self.retries_max_wait_ms,
            "cache.capacity": self.cache_size,
            # httpx's (connect, read, write, pool): writes and waits for a pooled
            # connection are bounded like reads and connects.
            "timeout": (self.connect_timeout_s, self.read_timeout_s, self.read_timeout_s,
                        self.connect_timeout_s)}
        if self.latest_ttl_s is not None:
            conf["cache.latest.ttl.sec"] = self.latest_ttl_s
        if self.user_info is not None:
            conf["basic.auth.user.info"] = self.user_info
        return conf


def parse_settings(configs: Mapping[str, str], is_key: bool, prefix: str,
                   config_def: ConfigDef) -> tuple[RegistrySettings, dict[str, Any]]:
    """(the registry settings, every parsed value of ``config_def``) from a converter's
    sub-config. ``prefix`` (``value.converter.``) is how the user wrote the keys:
    every ConfigException names the key as written there."""
    try:
        values = config_def.parse(configs)
    except ConfigException as e:
        raise _prefixed(e, prefix) from None
    urls = tuple(u.strip() for u in values[URL] if u.strip())
    if not urls:
        raise ConfigException("needs at least one URL of a Schema Registry",
                              name=prefix + URL, value=configs.get(URL))
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigException(f"{url!r} is not an http:// or https:// URL",
                                  name=prefix + URL, value=configs.get(URL))
    user_info = _user_info(values, configs, prefix, urls)
    tls_keys = {k: str(configs[TLS_PREFIX + k]) for k in TLS_KEYS
                if configs.get(TLS_PREFIX + k) not in (None, "")}
    tls = None
    if tls_keys:
        # Imported here: security/ loads the Kafka client's modules, which a process
        # that only imports converters (the connector test kit) must not pay for.
        from connect_runtime.security.tls import load_client_tls
        tls = load_client_tls(prefix + TLS_PREFIX, tls_keys)
    use_latest, auto_register = bool(values[USE_LATEST]), bool(values[AUTO_REGISTER])
    if use_latest and auto_register:
        raise ConfigException(f"use.latest.version=true needs {prefix}{AUTO_REGISTER}=false "
                              "(Confluent's rule: a converter either registers its schemas "
                              "or writes with the latest one)", name=prefix + USE_LATEST,
                              value=configs.get(USE_LATEST))
    strategy_key = KEY_STRATEGY if is_key else VALUE_STRATEGY
    strategy = strategy_named(str(values[strategy_key]))
    assert strategy is not None  # the validator checked it
    ttl = int(values[LATEST_TTL])
    settings = RegistrySettings(
        urls=urls, user_info=user_info, tls=tls, auto_register=auto_register,
        use_latest=use_latest, latest_strict=bool(values[LATEST_STRICT]),
        latest_ttl_s=None if ttl < 0 else float(ttl), normalize=bool(values[NORMALIZE]),
        subject=strategy, cache_size=int(values[MAX_SCHEMAS]),
        max_retries=int(values[MAX_RETRIES]), retries_wait_ms=int(values[RETRIES_WAIT]),
        retries_max_wait_ms=int(values[RETRIES_MAX_WAIT]),
        connect_timeout_s=int(values[CONNECT_TIMEOUT]) / 1000,
        read_timeout_s=int(values[READ_TIMEOUT]) / 1000)
    return settings, values


def _user_info(values: Mapping[str, Any], configs: Mapping[str, str], prefix: str,
               urls: tuple[str, ...]) -> str | None:
    source = str(values[CREDENTIALS_SOURCE]).upper()
    if source == "URL":
        return None  # the client reads user:password@ from the URL itself
    info = values[USER_INFO] if values[USER_INFO] is not None else values[REGISTRY_USER_INFO]
    if info is None or ":" not in str(info):
        raise ConfigException(f"basic.auth.credentials.source=USER_INFO needs {prefix}"
                              f"{USER_INFO} as user:password", name=prefix + USER_INFO,
                              value="[hidden]" if info is not None else None)
    if any("@" in url.split("//", 1)[-1].split("/", 1)[0] for url in urls):
        raise ConfigException("credentials are given both in the URL and in "
                              f"{prefix}{USER_INFO}; keep one", name=prefix + URL,
                              value=configs.get(URL))
    return str(info)


def _prefixed(error: ConfigException, prefix: str) -> ConfigException:
    """``error`` with its key written as the user wrote it (``value.converter.<key>``)."""
    if error.name is None:
        return error
    shown = "[hidden]" if "password" in error.name or "user.info" in error.name \
        else error.value
    message = str(error).split(f"for configuration {error.name}: ", 1)[-1]
    return ConfigException(message, name=prefix + error.name, value=shown)
