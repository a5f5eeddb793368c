"""The worker's configuration: Kafka Connect's distributed-worker keys, plus ``spark.*``.

Keys, defaults and meanings follow Kafka Connect so an existing
``connect-distributed.properties`` mostly works as is. Differences (see
docs/configuration.md): ``exactly.once.source.support`` defaults to ``enabled``
(the point of this project), converters default to schemaless JSON, and
``spark.*`` keys configure the SparkContext that hosts the tasks.

Client overrides use Connect's prefixes, with librdkafka property names:
``producer.*``, ``consumer.*``, ``admin.*`` (worker-wide) and
``producer.override.*`` etc. in connector configs. Top-level ``security.protocol``,
``ssl.*`` and ``sasl.*`` keys (Java's names or librdkafka's) reach every client
of the worker and its tasks, under the prefixed ones
(:mod:`connect_runtime.security.kafka_clients`).
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from connect_runtime.api.config_def import (
    NO_DEFAULT,
    ConfigDef,
    Importance,
    NonEmptyString,
    Range,
    Type,
    ValidString,
)
from connect_runtime.config.connector_config import (
    TASKS_PER_PROCESS_AUTO,
    TASKS_PER_PROCESS_CONFIG,
    ValidTasksPerProcess,
    parse_tasks_per_process,
)
from connect_runtime.config.properties import env_overrides, load_properties_file
from connect_runtime.config.spark_settings import SparkSettings, spark_settings
from connect_runtime.errors import ConfigException
from connect_runtime.security.kafka_clients import (
    Translated,
    check_client_config,
    is_client_security_key,
    translate,
)
from connect_runtime.security.providers import (
    CONFIG_PROVIDERS_CONFIG,
    ConfigProviders,
    ConfigResolver,
)
from connect_runtime.security.rest_auth import basic_auth_credentials, jaas_path
from connect_runtime.security.tls import RestTls, load_rest_tls

log = logging.getLogger(__name__)

EOS_DISABLED, EOS_PREPARING, EOS_ENABLED = "disabled", "preparing", "enabled"

# Keys the framework owns for exactly-once; user values are ignored with a
# warning, as KIP-618 specifies.
_IGNORED_CLIENT_KEYS = {
    "producer.transactional.id": "task producers use <group.id>-<connector>-<task>",
    "transactional.id": "the leader uses connect-cluster-<group.id>",
    "consumer.isolation.level": "offsets are always read with read_committed",
}

CLIENT_KINDS = ("producer", "consumer", "admin")
# Connect's admin REST listener (KIP-495) shares the "admin." prefix with the
# admin client's settings; its keys are not client settings.
_ADMIN_LISTENER_KEY = "admin.listeners"


@dataclass(frozen=True)
class _ExistingDirectories:
    """Every entry of a list names an existing directory (``plugin.path``). None passes."""

    def __call__(self, name: str, value: Any) -> None:
        for entry in value or ():
            if not os.path.isdir(entry):
                raise ConfigException(f"{entry!r} is not an existing directory", name=name,
                                      value=value)

    def __str__(self) -> str:
        return "list of existing directories"


WORKER_CONFIG_DEF = (
    ConfigDef()
    .define("bootstrap.servers", Type.LIST, "localhost:9092", None, Importance.HIGH,
            "Kafka brokers for the internal topics and, by default, for connectors.")
    .define("group.id", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH,
            "Identifies the Connect cluster; workers sharing it form one cluster.")
    .define("group.instance.id", Type.STRING, None, None, Importance.MEDIUM,
            "Static group membership (KIP-345), not a Kafka Connect key: a name unique "
            "to this worker and kept across its restarts (the chart uses the pod's "
            "name). A worker that stops or dies keeps its place in the group, "
            "leadership included, for session.timeout.ms: back within it, it takes its "
            "role again without moving anything; not back, another worker takes over "
            "then. Set session.timeout.ms above the time a restart takes. Unset: a "
            "stopping worker leaves the group at once (docs/cluster.md).")
    .define("config.storage.topic", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH,
            "Topic holding connector and task configurations (1 partition, compacted).")
    .define("offset.storage.topic", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH,
            "Global topic holding source offsets (compacted).")
    .define("status.storage.topic", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH,
            "Topic holding connector and task statuses (compacted).")
    .define("config.storage.replication.factor", Type.INT, 3, Range.at_least(-1), Importance.LOW,
            "Replication factor of the config topic; -1 uses the broker default.")
    .define("offset.storage.replication.factor", Type.INT, 3, Range.at_least(-1), Importance.LOW,
            "Replication factor of the offsets topic; -1 uses the broker default.")
    .define("offset.storage.partitions", Type.INT, 25, Range.at_least(1), Importance.LOW,
            "Partitions of the offsets topic.")
    .define("status.storage.replication.factor", Type.INT, 3, Range.at_least(-1), Importance.LOW,
            "Replication factor of the status topic; -1 uses the broker default.")
    .define("status.storage.partitions", Type.INT, 5, Range.at_least(1), Importance.LOW,
            "Partitions of the status topic.")
    .define("offset.flush.interval.ms", Type.LONG, 60000, Range.at_least(1), Importance.LOW,
            "Offset commit interval; the default transaction.boundary.interval.ms.")
    .define("offset.flush.timeout.ms", Type.LONG, 5000, Range.at_least(0), Importance.LOW,
            "Ignored for exactly-once tasks (KIP-618); used when exactly-once is disabled.")
    .define("task.shutdown.graceful.timeout.ms", Type.LONG, 5000, Range.at_least(0),
            Importance.LOW, "How long a stopping task may take before it is cancelled.")
    .define("task.stall.threshold.ms", Type.LONG, 300000, Range.at_least(1), Importance.LOW,
            "A task whose poll() or commit has not returned for this long is reported stuck "
            "(its status trace, /ui, /metrics and a log line name the call and the task "
            "thread's stack) until the call returns; a connector may set its own.")
    .define(TASKS_PER_PROCESS_CONFIG, Type.STRING, TASKS_PER_PROCESS_AUTO,
            ValidTasksPerProcess(), Importance.LOW,
            "How many tasks of a connector one Spark task slot hosts, in one Python process, "
            "for connectors that do not set their own tasks.per.process. auto: one process "
            "per core Spark has, at most 64 tasks to a process (a process per task when "
            "spark.task.cpus is above 1); 1: a process per task; N: up to N to a process. "
            "A number above 1 is not allowed with spark.task.cpus above 1.")
    .define("exactly.once.source.support", Type.STRING, EOS_ENABLED,
            ValidString.in_(EOS_DISABLED, EOS_PREPARING, EOS_ENABLED), Importance.HIGH,
            "KIP-618: disabled, preparing (leader transactional, tasks at-least-once) "
            "or enabled.")
    .define("listeners", Type.LIST, "http://:8083", None, Importance.LOW,
            "The REST listener: one URL, http://host:port or https://host:port (TLS settings: "
            "the listeners.https.ssl.* keys, else the top-level ssl.* keys).")
    .define("rest.advertised.host.name", Type.STRING, None, None, Importance.LOW,
            "Host name other workers use to reach this one.")
    .define("rest.advertised.port", Type.INT, None, None, Importance.LOW,
            "Port other workers use to reach this one.")
    .define("rest.advertised.listener", Type.STRING, None, None, Importance.LOW,
            "Scheme other workers use (http or https); default: the listener's.")
    .define("rest.extension.classes", Type.LIST, "", None, Importance.LOW,
            "Comma-separated names of ConnectRestExtension classes to load. connect-runtime "
            "has one: org.apache.kafka.connect.rest.basic.auth.extension."
            "BasicAuthSecurityRestExtension (HTTP Basic authentication, as Connect's).")
    .define("java.security.auth.login.config", Type.STRING, None, None, Importance.LOW,
            "The JAAS file whose KafkaConnect entry names the basic-auth credentials "
            "file (a JVM system property for Kafka Connect; -D... in KAFKA_OPTS works too).")
    .define("rest.request.max.bytes", Type.INT, 5 * 1024 * 1024, Range.at_least(1024),
            Importance.LOW,
            "The largest request body the REST server accepts, in bytes: a larger "
            "Content-Length is answered 413 before the body is read, a chunked body as "
            "soon as it passes the limit (beyond Kafka Connect, which has no limit; "
            "docs/rest.md#limits). A body that sends nothing for 30 s is answered 408.")
    .define("access.control.allow.origin", Type.STRING, "", None, Importance.LOW,
            "Value to set the Access-Control-Allow-Origin header to for REST API requests. "
            "To enable cross origin access, set this to the domain of the application that "
            "should be permitted to access the API, or '*' to allow access from any domain. "
            "The default value only allows access from the domain of the REST API.")
    .define("access.control.allow.methods", Type.STRING, "", None, Importance.LOW,
            "Sets the methods supported for cross origin requests by setting the "
            "Access-Control-Allow-Methods header. The default value of the "
            "Access-Control-Allow-Methods header allows cross origin requests for GET, POST "
            "and HEAD.")
    .define(CONFIG_PROVIDERS_CONFIG, Type.LIST, "", None, Importance.LOW,
            "Comma-separated names of config providers, each set up by "
            "config.providers.<name>.class (Kafka's class name of a built-in: "
            "org.apache.kafka.common.config.provider.FileConfigProvider, "
            "EnvVarConfigProvider or DirectoryConfigProvider; or a module.Class path) and "
            "config.providers.<name>.param.<param> keys. Connector configs (and this "
            "config) then refer to secrets as ${<name>:[path:]key}, resolved where they are "
            "used and never stored resolved (docs/security.md).")
    .define("key.converter", Type.CLASS, "connect_runtime.converters.JsonConverter", None,
            Importance.HIGH, "Default converter for record keys.")
    .define("value.converter", Type.CLASS, "connect_runtime.converters.JsonConverter", None,
            Importance.HIGH, "Default converter for record values.")
    .define("header.converter", Type.CLASS,
            "org.apache.kafka.connect.storage.SimpleHeaderConverter", None, Importance.LOW,
            "Default converter for record header values (Connect's default: values as "
            "text). Header values that are bytes are written as they are.")
    .define("session.timeout.ms", Type.INT, 10000, Range.at_least(1), Importance.HIGH,
            "Group session timeout: how soon a dead leader is replaced.")
    .define("heartbeat.interval.ms", Type.INT, 3000, Range.at_least(1), Importance.HIGH,
            "Group heartbeat interval.")
    .define("rebalance.timeout.ms", Type.INT, 60000, Range.at_least(1), Importance.HIGH,
            "Maximum time for a rebalance.")
    .define("request.timeout.ms", Type.INT, 40000, Range.at_least(1), Importance.LOW,
            "Kafka client request timeout.")
    .define("inter.worker.key.generation.algorithm", Type.STRING, "HmacSHA256", None,
            Importance.LOW, "Algorithm of the session key for internal requests (KIP-507).")
    .define("inter.worker.key.size", Type.INT, None, None, Importance.LOW,
            "Session key size in bits; default: the algorithm's block size.")
    .define("inter.worker.key.ttl.ms", Type.INT, 3600000, Range.at_least(0), Importance.LOW,
            "Session key rotation interval.")
    .define("inter.worker.signature.algorithm", Type.STRING, "HmacSHA256", None,
            Importance.LOW, "Algorithm used to sign internal requests.")
    .define("inter.worker.verification.algorithms", Type.LIST, "HmacSHA256", None,
            Importance.LOW, "Algorithms accepted when verifying internal requests.")
    .define("plugin.path", Type.LIST, "", _ExistingDirectories(), Importance.LOW,
            "List of paths separated by commas (,) that contain plugins (connectors). Each "
            "entry of such a directory is one plugin: a Python package directory, a module "
            "(name.py), a pure-Python wheel (.whl) or a .zip of packages and modules. "
            "Plugins are importable on the worker and shipped to the Spark executors (one "
            "zip each, SparkContext.addPyFile); ones with compiled extensions must be "
            "installed in the executors' environment instead.")
    .define("plugin.path.allow.unsafe.permissions", Type.BOOLEAN, False, None, Importance.LOW,
            "Not a Kafka Connect key. A plugin.path directory, or a plugin in it, that "
            "every user of the machine can write (o+w) stops the worker at startup: "
            "whatever is imported from there runs as the worker's user. true loads it "
            "anyway, with an ERROR naming the path.")
    # Declared connectors (docs/operations.md#declared-connectors): not Kafka Connect keys.
    .define("declared.connectors.dir", Type.STRING, None, None, Importance.MEDIUM,
            "A directory of connector files (.properties or .json, one connector each, the "
            "formats of connect-standalone) that the leader keeps the cluster's connectors "
            "matching: it creates, reconfigures and deletes the connectors the files declare, "
            "and leaves connectors created by REST alone. Empty: no declared connectors.")
    .define("declared.connectors.poll.interval.ms", Type.LONG, 5000, Range.at_least(100),
            Importance.LOW, "How often the leader re-reads declared.connectors.dir.")
    # KIP-558 active topics (GET /connectors/<name>/topics).
    .define("topic.tracking.enable", Type.BOOLEAN, True, None, Importance.LOW,
            "Enable tracking the set of active topics per connector during runtime.")
    .define("topic.tracking.allow.reset", Type.BOOLEAN, True, None, Importance.LOW,
            "If set to true, it allows user requests to reset the set of active topics per "
            "connector.")
)


STANDALONE_DEFAULTS = {
    "group.id": "connect-standalone",
    "config.storage.topic": "connect-standalone-configs",
    "offset.storage.topic": "connect-standalone-offsets",
    "status.storage.topic": "connect-standalone-status",
    # A standalone worker usually meets a development broker: its default.
    "config.storage.replication.factor": "-1",
    "offset.storage.replication.factor": "-1",
    "status.storage.replication.factor": "-1",
}
"""What ``connect-runtime standalone`` fills in for keys its worker file leaves out:
connect-standalone's files have none of them. Offsets, configs and statuses live
in Kafka topics all the same, so that offsets commit in the records' transaction."""

_STANDALONE_FILE_KEY = "offset.storage.file.filename"


def standalone_props(props: Mapping[str, str]) -> dict[str, str]:
    """A connect-standalone worker file, made a worker config: defaults for what it
    leaves out (:data:`STANDALONE_DEFAULTS`), and its offsets file dropped, loudly.
    Two standalone workers on one Kafka cluster need distinct ``group.id`` s (and
    topics), or they form one cluster."""
    out = {**STANDALONE_DEFAULTS, **props}
    if out.pop(_STANDALONE_FILE_KEY, None) is not None:
        log.warning("Ignoring worker config %s: offsets go to offset.storage.topic (%s), in "
                    "the same Kafka transaction as the records they describe; a file could "
                    "not commit atomically with them", _STANDALONE_FILE_KEY,
                    out["offset.storage.topic"])
    return out


CONVERTER_KEYS = ("key.converter", "value.converter", "header.converter")
"""The worker's converter keys; each may have a sub-config (``value.converter.schemas.enable``)."""


class WorkerConfig:
    """Parsed, validated worker configuration.

    ``originals`` keeps every key as given (strings), so prefixed client
    overrides and ``spark.*`` keys pass through untouched.

    Loading parses and validates here; every step that reads a secret, a store
    or a credentials file is a call into :mod:`connect_runtime.security`
    (resolving ``${provider:...}``, translating and checking the Kafka clients'
    TLS and SASL keys, the basic-auth files, the HTTPS stores). The calls are
    made at construction, not when a value is first used, so a bad file stops
    the worker at start with a :class:`ConfigException` naming its key.
    """

    def __init__(self, props: Mapping[str, str]) -> None:
        given = {str(k): str(v) for k, v in props.items()}
        # Connect resolves ${provider:path:key} in the worker config with the providers
        # the same config defines; their settings also go to executors (TaskSpec).
        self.config_providers = ConfigProviders.from_worker_config(given)
        self.config_resolver: ConfigResolver = self.config_providers.instantiate()
        resolution = self.config_resolver.resolve(given, unknown_providers_ok=True)
        resolution.raise_for_errors()
        self.originals: dict[str, str] = resolution.values
        for key, why in _IGNORED_CLIENT_KEYS.items():
            if key in self.originals:  # the value may be a resolved secret: not logged
                log.warning("Ignoring worker config %s: %s (KIP-618)", key, why)
        self.values: dict[str, Any] = WORKER_CONFIG_DEF.parse(self.originals)
        self._spark = spark_settings(self.originals)
        _check_sharing(self.tasks_per_process, self._spark.task_cpus)
        self._clients = self._client_configs()
        # Read at load time: a wrong JAAS or credentials file stops the worker, named.
        self.rest_credentials = basic_auth_credentials(
            list(self.values["rest.extension.classes"]), jaas_path(self.originals))
        self._listener = _listener(self.values["listeners"])
        # Loaded only for an https listener (Connect's KAFKA-14816): top-level ssl.*
        # keys are the Kafka clients' too, and may be stores this side need not read.
        self.rest_tls: RestTls | None = (
            load_rest_tls(self.originals) if self._listener[0] == "https" else None)

    @classmethod
    def from_file(cls, path: str, environ: Mapping[str, str] | None = None) -> WorkerConfig:
        """Load ``path``, then apply ``CONNECT_*`` environment overrides."""
        return cls.from_files([path], environ)

    @classmethod
    def from_files(cls, paths: Sequence[str],
                   environ: Mapping[str, str] | None = None, *,
                   standalone: bool = False) -> WorkerConfig:
        """Load ``paths`` in order (a later file's keys override an earlier one's),
        then apply ``CONNECT_*`` environment overrides.

        Layering is how a deployment keeps secrets out of the main file: the
        Helm chart passes its ConfigMap's file, then files mounted from Secrets.
        """
        props: dict[str, str] = {}
        for path in paths:
            props.update(load_properties_file(path))
        if environ is not None:
            props.update(env_overrides(environ))
        return cls(standalone_props(props) if standalone else props)

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def converter_configs(self) -> dict[str, str]:
        """The converter keys as given, with their sub-configs (``key.converter``,
        ``value.converter.schemas.enable``, ``header.converter``, ...): what a task
        needs of the worker's converters (``TaskSpec.worker_converters``)."""
        return {k: v for k, v in self.originals.items() if k.startswith(CONVERTER_KEYS)}

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(self.values["bootstrap.servers"])

    @property
    def group_id(self) -> str:
        return str(self.values["group.id"])

    @property
    def eos_support(self) -> str:
        return str(self.values["exactly.once.source.support"])

    @property
    def eos_enabled(self) -> bool:
        return self.eos_support == EOS_ENABLED

    def client_config(self, prefix: str) -> dict[str, str]:
        """librdkafka settings for one client kind (``producer``, ``consumer``, ``admin``).

        Layered, later wins: ``bootstrap.servers``; the top-level client security
        keys (translated); the ``<prefix>.*`` keys (their security keys translated
        too). Checked by librdkafka when the config was loaded.
        """
        if prefix not in self._clients:
            raise ValueError(f"client kind must be one of {', '.join(CLIENT_KINDS)}, "
                             f"not {prefix!r}")
        return dict(self._clients[prefix])

    def _client_configs(self) -> dict[str, dict[str, str]]:
        top = {k: v for k, v in self.originals.items() if is_client_security_key(k)}
        common = translate(top)
        _log_translation(common)
        out: dict[str, dict[str, str]] = {}
        for kind in CLIENT_KINDS:
            dotted = kind + "."
            own = {key[len(dotted):]: value for key, value in self.originals.items()
                   if key.startswith(dotted) and key not in _IGNORED_CLIENT_KEYS
                   and not _is_admin_listener_key(key)}
            layer = translate({k: v for k, v in own.items() if is_client_security_key(k)},
                              dotted, inherited=top)
            _log_translation(layer)
            plain = {k: v for k, v in own.items() if not is_client_security_key(k)}
            conf = {"bootstrap.servers": self.bootstrap_servers, **common.settings, **plain,
                    **layer.settings}
            sources = {**common.sources, **{k: dotted + k for k in plain}, **layer.sources}
            check_client_config(kind, conf, sources)
            out[kind] = conf
        return out

    def spark_settings(self) -> SparkSettings:
        """The SparkContext settings from the ``spark.*`` keys, validated when the
        config was loaded (:mod:`connect_runtime.config.spark_settings`)."""
        return self._spark

    def listener(self) -> tuple[str, int]:
        """(host, port) of the REST listener; host ``0.0.0.0`` means all interfaces."""
        return self._listener[1], self._listener[2]

    @property
    def listener_scheme(self) -> str:
        """``http`` or ``https``."""
        return self._listener[0]

    def advertised_url(self, bound_port: int | None = None) -> str:
        """The REST URL other workers and executors use to reach this worker."""
        host, port = self.listener()
        adv_host = self.values.get("rest.advertised.host.name") or (
            host if host not in ("0.0.0.0", "::", "") else socket.gethostname()
        )
        adv_port = self.values.get("rest.advertised.port") or bound_port or port
        scheme = (self.values.get("rest.advertised.listener") or self.listener_scheme).lower()
        return f"{scheme}://{adv_host}:{adv_port}"

    @property
    def tasks_per_process(self) -> int | None:
        """The worker's ``tasks.per.process`` for connectors without their own; None
        is ``auto`` (the Spark runner decides from its cores)."""
        return parse_tasks_per_process(self.values[TASKS_PER_PROCESS_CONFIG])

    @property
    def worker_id(self) -> str:
        """Connect's worker id: ``host:port`` of the advertised REST URL."""
        return self.advertised_url().split("://", 1)[1]


def _check_sharing(tasks_per_process: int | None, task_cpus: int) -> None:
    """Tasks that share a process share its cores: a worker cannot promise each one
    ``spark.task.cpus`` cores and also put several in one slot (``auto`` gives each
    task a process then)."""
    if tasks_per_process is not None and tasks_per_process > 1 and task_cpus > 1:
        raise ConfigException(
            f"tasks cannot share a process when spark.task.cpus={task_cpus} gives each task "
            "cores of its own: set tasks.per.process=1, or spark.task.cpus=1",
            name=TASKS_PER_PROCESS_CONFIG, value=tasks_per_process)


def _listener(listeners: Sequence[str]) -> tuple[str, str, int]:
    """(scheme, host, port) of the one REST listener ``listeners`` names.

    Connect serves every listener of the list; a worker here serves one, so a
    second is refused rather than silently left unserved.
    """
    if len(listeners) != 1:
        raise ConfigException("give exactly one REST listener (http://host:port or "
                              "https://host:port); a worker serves one", name="listeners",
                              value=",".join(listeners))
    url = urlparse(listeners[0])
    scheme = url.scheme.lower() or "http"
    if scheme not in ("http", "https"):
        raise ConfigException("a listener is http://host:port or https://host:port",
                              name="listeners", value=listeners[0])
    try:
        port = url.port or 8083
    except ValueError as e:
        raise ConfigException(f"bad port: {e}", name="listeners", value=listeners[0]) from e
    return scheme, url.hostname or "0.0.0.0", port


def _is_admin_listener_key(key: str) -> bool:
    return key == _ADMIN_LISTENER_KEY or key.startswith(_ADMIN_LISTENER_KEY + ".")


def _log_translation(layer: Translated) -> None:
    for note in layer.notes:
        log.info("Kafka client setting %s", note)
    for key, why in layer.dropped.items():
        log.warning("Ignoring worker config %s (no librdkafka equivalent): %s", key, why)
