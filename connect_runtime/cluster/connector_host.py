"""Hosting :class:`SourceConnector` instances on the leader (the Spark driver).

A connector instance only computes task configs; it never sees records. The
herder starts one per STARTED or PAUSED connector, stops it when the connector
is stopped, deleted or reconfigured, and asks it for task configs.

Secrets (decision 51 in docs/architecture.md): ``config`` is the connector's
config as the config topic holds it, ``${provider:path:key}`` placeholders
included. The instance is started with the config resolved here, on the worker
that hosts it; the task configs it returns are reverse-transformed
(:func:`~connect_runtime.security.providers.reverse_transform`) before the herder
writes them, and its traces and log lines are scrubbed of resolved and PASSWORD
values.

Lines logged while the host calls the instance (by the connector's code or by
ours) carry the connector's log context, Kafka Connect's ``[orders|worker]``
(:mod:`connect_runtime.logs`); the lifecycle lines logged around those calls
do not, as in the text format's earlier versions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from connect_runtime.api.connector import SourceConnector
from connect_runtime.api.task import OffsetStorageReader
from connect_runtime.config.connector_config import ConnectorConfig
from connect_runtime.errors import ConnectorContractException
from connect_runtime.logs import LogContext, log_context, trace_headline
from connect_runtime.plugins import resolve_connector_class
from connect_runtime.protocol.states import State
from connect_runtime.security.providers import NO_PROVIDERS, ConfigResolver, reverse_transform
from connect_runtime.security.redaction import Redactor, password_keys

log = logging.getLogger(__name__)


class _ConnectorContext:
    """The :class:`~connect_runtime.api.connector.ConnectorContext` of one instance."""

    def __init__(self, host: HostedConnector) -> None:
        self._host = host

    def request_task_reconfiguration(self) -> None:
        self._host.reconfiguration_requested = True
        self._host.on_request()

    def raise_error(self, error: BaseException) -> None:
        self._host.fail(error)
        self._host.on_request()

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self._host.offset_reader_factory()


def _password_keys(instance: SourceConnector) -> frozenset[str]:
    """The connector's PASSWORD keys; none if it cannot say (it fails elsewhere)."""
    try:
        return password_keys(instance.config_def())
    except Exception:
        return frozenset()


def _ask_version(connector: str, what: str, version: Callable[[], object]) -> str | None:
    """``version()`` as text; None (unknown) if it raises: a status still gets written."""
    try:
        return str(version())
    except Exception:
        log.warning("connector %s: cannot tell the %s version", connector, what, exc_info=True)
        return None


class HostedConnector:
    """One running connector instance and what the herder needs to know about it.

    ``config`` is the submitted config (placeholders, not secrets); ``resolver``
    holds the worker's config providers.
    """

    def __init__(
        self,
        name: str,
        config: dict[str, str],
        on_request: Callable[[], None],
        offset_reader_factory: Callable[[], OffsetStorageReader],
        resolver: ConfigResolver = NO_PROVIDERS,
    ) -> None:
        self.name = name
        self.config = dict(config)
        self._resolver = resolver
        self._resolved: dict[str, str] = {}
        self.redactor = Redactor()
        # The connector's PASSWORD keys: tasks hide their values in traces too.
        self.password_keys: frozenset[str] = frozenset()
        self.on_request = on_request
        self.offset_reader_factory = offset_reader_factory
        self.instance: SourceConnector | None = None
        self.state = State.UNASSIGNED
        self.trace: str | None = None
        # KIP-891 status versions: the connector's version(), and version() of an
        # instance of its task class, built here on the leader only to ask (the
        # executors run the same installation). None while unknown.
        self.version: str | None = None
        self.task_version: str | None = None
        # True after start and whenever the connector asks: task configs are due.
        self.reconfiguration_requested = True
        self._log_context = LogContext(name)

    def start(self) -> None:
        """Resolve the config, instantiate and start; on error the state is FAILED
        with the trace."""
        try:
            resolution = self._resolver.resolve(self.config)
            self.redactor = Redactor(resolution.secrets)
            resolution.raise_for_errors()  # a secret removed since the config was accepted
            self._resolved = resolution.values
            cls = resolve_connector_class(self._resolved["connector.class"])
            with log_context(self._log_context):
                instance = cls()
                self.password_keys = _password_keys(instance)
                self.redactor.add_values(self.password_keys, self.config, self._resolved)
                self.version = _ask_version(self.name, "connector", instance.version)
                instance.initialize(_ConnectorContext(self))
                instance.start(dict(self._resolved))
        except Exception as e:
            self.fail(e)
            return
        self.instance = instance
        self.state, self.trace = State.RUNNING, None
        self.reconfiguration_requested = True
        with log_context(self._log_context):
            self.task_version = _ask_version(self.name, "task",
                                             lambda: instance.task_class()().version())
        log.info("connector %s started (%s, version %s)", self.name,
                 self.config["connector.class"], self.version,
                 extra={"event": "connector_started", "connector": self.name})

    def fail(self, error: BaseException) -> None:
        self.state = State.FAILED
        self.trace = f"Connector {self.name} failed:\n" + self.redactor.format_exception(error)
        # The whole traceback too: this process is where it was raised.
        self.redactor.log_exception(
            log, logging.ERROR, error, "connector %s failed: %s", self.name,
            trace_headline(self.trace),
            extra={"event": "connector_failed", "connector": self.name})

    def task_configs(self) -> list[dict[str, str]] | None:
        """Fresh task configs (with ``task.class``), or None if the connector failed."""
        if self.instance is None:
            return None
        try:
            max_tasks = ConnectorConfig(self._resolved).tasks_max
            with log_context(self._log_context):
                task_class = self.instance.task_class()
                configs = self.instance.task_configs(max_tasks)
            if len(configs) > max_tasks:
                raise ConnectorContractException(
                    f"task_configs({max_tasks}) returned {len(configs)} configs; "
                    "at most tasks.max are allowed")
            path = f"{task_class.__module__}.{task_class.__qualname__}"
            out = []
            for i, cfg in enumerate(configs):
                if not isinstance(cfg, dict) or not all(
                        isinstance(k, str) and isinstance(v, str) for k, v in cfg.items()):
                    raise ConnectorContractException(
                        f"task config {i} is not a dict[str, str]: {cfg!r}")
                out.append({**cfg, "task.class": path})
            # The config topic gets placeholders back, never what they resolved to.
            out = reverse_transform(self.config, out)
        except Exception as e:
            self.fail(e)
            self.stop()
            return None
        self.reconfiguration_requested = False
        return out

    def stop(self) -> None:
        instance, self.instance = self.instance, None
        if instance is None:
            return
        try:
            with log_context(self._log_context):
                instance.stop()
        except Exception as e:
            self.redactor.log_exception(log, logging.WARNING, e, "connector %s: stop() raised",
                                        self.name)

