"""One worker process: internal topics, stores, herder, Spark and the REST server.

Startup order matters:

1. create (or check) the internal topics;
2. read the status and offsets topics to the end;
3. claim write privileges on the config topic (``init_transactions`` of
   ``connect-cluster-<group.id>``: fences any zombie leader and aborts its open
   transaction), then read the config topic to the end;
4. start Spark in the background (a JVM start takes seconds; REST answers
   ``/health`` with 503 "starting" meanwhile);
5. start the herder, then serve REST until SIGTERM/SIGINT.

Shutdown (SIGTERM): REST stops accepting, tasks stop gracefully with a final
commit (``task.shutdown.graceful.timeout.ms``), then Spark and the stores stop.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import signal
import ssl
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from fastapi import Request

from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.cluster.membership import GroupMembership
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.kafka.clients import check_cluster_access, create_admin
from connect_runtime.kafka.topics import InternalTopicSettings, ensure_internal_topics
from connect_runtime.plugin_path import PluginPath
from connect_runtime.plugins import register_plugin_modules
from connect_runtime.rest import create_app
from connect_runtime.rest.routes.slots import slots_router
from connect_runtime.storage.config_store import ConfigStore
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.status_store import StatusStore

log = logging.getLogger(__name__)

STARTUP_READ_TIMEOUT_S = 120.0


class _WakeOnChange:
    """Config-topic listener: any change wakes the herder's reconcile thread; a
    logger level (KIP-976) is applied at once."""

    def __init__(self, herder: DistributedHerder) -> None:
        self._herder = herder

    def on_connector_config_update(self, name: str) -> None:
        self._herder.wake()

    def on_connector_config_remove(self, name: str) -> None:
        self._herder.wake()

    def on_task_configs_update(self, name: str) -> None:
        self._herder.wake()

    def on_target_state_change(self, name: str) -> None:
        self._herder.wake()

    def on_task_count_record(self, name: str) -> None:
        self._herder.wake()

    def on_session_key_update(self) -> None:
        self._herder.note_session_key()
        self._herder.wake()

    def on_logger_level(self, namespace: str, level: str) -> None:
        # Not a desired state to reconcile: the level applies here and now.
        self._herder.apply_cluster_logger_level(namespace, level)


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        admin = create_admin(config.client_config("admin"))
        self.admin = admin
        self.status_store = StatusStore.from_worker_config(config, admin=admin)
        self.offset_store = OffsetStore.from_worker_config(config, admin=admin)
        self.config_store = ConfigStore.from_worker_config(config, admin=admin)
        # plugin.path: importable here, and one zip per plugin shipped to the executors.
        self._plugin_staging = tempfile.mkdtemp(prefix="connect-plugins-")
        plugin_path = PluginPath.load(config["plugin.path"], self._plugin_staging)
        register_plugin_modules(plugin_path.modules)
        self.runner = SparkTaskRunner(config.spark_settings(), f"connect-runtime-{config.group_id}",
                                      on_job_failed=self._on_job_failed,
                                      py_files=plugin_path.archives)
        self.herder: DistributedHerder | None = None
        self.membership: GroupMembership | None = None

    def _on_job_failed(self, connector: str, generation: int, trace: str) -> None:
        if self.herder is not None:
            self.herder.on_job_failed(connector, generation, trace)

    def start(self) -> DistributedHerder:
        if self.config.rest_credentials == {}:
            log.warning("the REST credentials file is empty: every request is let through, "
                        "as Kafka Connect's basic-auth extension does")
        if not self.config.eos_enabled:
            log.warning("exactly.once.source.support=%s: tasks run at-least-once (no "
                        "transactions, no zombie fencing); duplicates are possible",
                        self.config.eos_support)
        self._check_kafka_access()
        ensure_internal_topics(self.admin, InternalTopicSettings.from_worker_config(self.config))
        cluster_id = self._cluster_id()
        self.status_store.start(STARTUP_READ_TIMEOUT_S)
        self.offset_store.start(STARTUP_READ_TIMEOUT_S)
        herder = DistributedHerder(self.config, self.config_store, self.status_store,
                                   self.offset_store, self.runner, cluster_id)
        self.herder = herder
        self.membership = GroupMembership(self._membership_config(),
                                          self.config["config.storage.topic"],
                                          on_elected=herder.become_leader,
                                          on_demoted=herder.step_down,
                                          on_rebalance=herder.metrics.counters.rebalanced)
        herder.is_member_leader = lambda: self.membership is not None and \
            self.membership.is_leader
        # Join before reading the config topic: if a dead leader left a transaction
        # open on it, the read below waits until the new leader's init_transactions
        # (possibly ours) aborts it.
        self.membership.start()
        self.config_store.start(STARTUP_READ_TIMEOUT_S)
        self.config_store.set_listener(_WakeOnChange(herder))
        # With a local master every worker starts Spark, leaders and standbys alike:
        # a follower that takes over then only needs its tasks to start, not a JVM.
        # With a cluster master only the leader does (SparkTaskRunner.per_leader).
        if not self.runner.per_leader:
            self.runner.start_in_background()
        herder.start()
        herder.started.set()
        return herder

    def _check_kafka_access(self) -> None:
        """Fail at once, saying why, if the brokers refuse the credentials of any
        client kind (``producer.sasl.jaas.config`` may differ from the top level's):
        one metadata request each. A cluster that does not answer at all is waited
        for once, not three times."""
        for kind in ("admin", "consumer", "producer"):
            if not check_cluster_access(self.config.client_config(kind), kind):
                return

    def _membership_config(self) -> dict[str, Any]:
        session = int(self.config["session.timeout.ms"])
        return {
            **self.config.client_config("consumer"),
            "group.id": self.config.group_id,
            "client.id": f"connect-runtime-member-{self.config.worker_id}",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": int(self.config["heartbeat.interval.ms"]),
            "max.poll.interval.ms": max(int(self.config["rebalance.timeout.ms"]), session),
        }

    def stop_tasks_and_leave(self) -> None:
        """Graceful part of shutdown: tasks stop (final commits), then the group is left
        so another worker takes over at once instead of after the session timeout."""
        if self.herder is not None:
            self.herder.stop()
        if self.membership is not None:
            self.membership.stop()

    def _cluster_id(self) -> str:
        try:
            cluster = self.admin.describe_cluster(request_timeout=30).result(timeout=30)
            return str(cluster.cluster_id)
        except Exception:  # describe_cluster is informational (GET /)
            log.warning("could not describe the Kafka cluster", exc_info=True)
            return "unknown"

    def stop(self) -> None:
        self.stop_tasks_and_leave()
        self.runner.shutdown()
        for store in (self.config_store, self.status_store, self.offset_store):
            try:
                store.stop()
            except Exception:
                log.warning("stopping %s failed", type(store).__name__, exc_info=True)
        shutil.rmtree(self._plugin_staging, ignore_errors=True)


def build_app(herder: DistributedHerder) -> Any:
    def verify(request: Request, body: bytes) -> None:
        # RequestSignatureException answers 400, 403 or 503 (connect_runtime.rest.errors).
        herder.verify_internal_request(dict(request.headers), body)

    return create_app(herder, extra_routers=[slots_router(herder)],
                      internal_request_verifier=verify,
                      allow_origin=str(herder.config["access.control.allow.origin"]),
                      allow_methods=str(herder.config["access.control.allow.methods"]),
                      basic_auth=herder.config.rest_credentials,
                      forward_tls=_client_context(herder.config))


def _client_context(config: WorkerConfig) -> ssl.SSLContext | None:
    """The TLS client context for requests to other workers; None over plain HTTP."""
    return config.rest_tls.client().context() if config.rest_tls is not None else None


class _Server(uvicorn.Server):
    """uvicorn with the worker's shutdown order.

    On SIGTERM/SIGINT the worker first stops its tasks gracefully, which needs
    REST (slots learn "stop" through their channels), and only then stops
    serving. uvicorn's own handling would close REST first and then re-raise the
    signal, killing the process before the tasks' final commits. A second signal
    skips the graceful part.
    """

    def __init__(self, config: uvicorn.Config, before_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._before_exit = before_exit
        self._exiting = threading.Event()

    def _on_signal(self, sig: int, frame: Any) -> None:
        if self._exiting.is_set():
            self.should_exit = True
            return
        self._exiting.set()
        log.info("received signal %d: stopping tasks, then REST", sig)

        def stop() -> None:
            try:
                self._before_exit()
            finally:
                self.should_exit = True
        threading.Thread(target=stop, name="graceful-shutdown", daemon=True).start()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self._on_signal)
                    for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def run_worker(config: WorkerConfig) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit status. Logging is the
    caller's to configure (the CLI: ``connect_runtime.logs.configure_logging``)."""
    worker = Worker(config)
    try:
        herder = worker.start()
        host, port = config.listener()
        # No WebSocket pings from the server: slot channels carry their own
        # keepalives, and 2,000 pings every 20 s would cost more than they do.
        # log_config=None: uvicorn's lines go through the root logger, in the
        # worker's log format, instead of uvicorn's own handlers.
        tls = config.rest_tls
        server = _Server(uvicorn.Config(
            build_app(herder), host=host, port=port, log_level="warning", log_config=None,
            lifespan="off", ws="websockets-sansio", ws_ping_interval=None,
            # The context is built here, from stores read when the config loaded.
            ssl_context_factory=(lambda *_: tls.server_context()) if tls is not None else None),
            before_exit=worker.stop_tasks_and_leave)
        log.info("worker %s serving REST on %s://%s:%d", config.worker_id,
                 config.listener_scheme, host, port)
        server.run()  # handles SIGTERM/SIGINT by returning
    finally:
        log.info("worker stopping")
        worker.stop()
        log.info("worker stopped")
    return 0
