"""One worker process: internal topics, stores, herder, Spark and the REST server.

Startup order matters:

1. REST listens first, serving a stand-in (:mod:`connect_runtime.rest.starting`):
   ``GET /health`` answers 503 saying what the worker waits for, every other
   request 503 "starting". Probes get an answer, not a refused connection.
2. The worker starts on a thread of its own (``worker-startup``, see
   :class:`_Startup`), in attempts. Each attempt

   a. checks that Kafka answers and accepts each client kind's credentials;
   b. creates (or checks) the internal topics;
   c. reads the status topic to the end, and starts reading the offsets topic
      (without waiting for its end: see :meth:`Worker._start`);
   d. joins the group, then reads the config topic to the end (the member
      elected leader claims write privileges on it first: ``init_transactions``
      of ``connect-cluster-<group.id>`` fences any zombie leader and aborts its
      open transaction);
   e. starts Spark in the background (a JVM start takes seconds; the herder's
      ``/health`` answers 503 "starting" meanwhile), then the herder.

3. The stand-in hands every request to Connect's REST API (:func:`build_app`).

An attempt that fails because Kafka did not answer, or answered too late
(:func:`retries_startup`), releases what it created and is tried again after
:func:`startup_retry_delay`, with one log line per failed attempt naming
``bootstrap.servers`` and the error, until one succeeds or SIGTERM comes. A
refused login or a configuration error still ends the process at once.

Shutdown (SIGTERM): once started, tasks stop gracefully with a final commit
(``task.shutdown.graceful.timeout.ms``) while REST still serves, then REST,
Spark and the stores stop. While starting, no attempt begins after the signal
and the current one has :data:`STARTUP_STOP_WAIT_S` to end.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import uvicorn
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from fastapi import Request

from connect_runtime.cluster.declared_connectors import check_connector_files
from connect_runtime.cluster.herder import DistributedHerder
from connect_runtime.cluster.membership import GroupMembership
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import KafkaAuthenticationError, KafkaClientError, KafkaTimeoutError
from connect_runtime.kafka.clients import check_cluster_access, create_admin
from connect_runtime.kafka.topics import InternalTopicSettings, ensure_internal_topics
from connect_runtime.plugin_path import PluginPath
from connect_runtime.plugins import register_plugin_modules
from connect_runtime.rest import create_app
from connect_runtime.rest.routes.slots import slots_router
from connect_runtime.rest.starting import StartupGate
from connect_runtime.storage.config_store import ConfigStore
from connect_runtime.storage.offsets.store import OffsetStore
from connect_runtime.storage.status_store import StatusStore
from connect_runtime.tempdirs import WorkerTempRoot, sweep_stale_roots

log = logging.getLogger(__name__)

STARTUP_READ_TIMEOUT_S = 120.0
# Between failed start attempts: 1 s, doubling, at most 30 s. Kubernetes starts
# a worker's pod and its broker's in any order; the first tries come quickly,
# and a long outage costs a connection attempt every 30 s.
STARTUP_RETRY_FIRST_S = 1.0
STARTUP_RETRY_MAX_S = 30.0
# How long SIGTERM waits for a start attempt to end. An attempt waiting for
# Kafka notices within a second; one reading a topic cannot be interrupted and
# is left behind (the process exits without it) rather than hold the pod.
STARTUP_STOP_WAIT_S = 10.0

# librdkafka's codes for "no broker answered, or not in time".
_NO_ANSWER_CODES = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_CONTROLLER,
})


def retries_startup(error: BaseException) -> bool:
    """Whether a start attempt that raised ``error`` is tried again.

    Yes when Kafka did not answer or answered too late: a KafkaTimeoutError, or
    a KafkaClientError with one of librdkafka's "no answer" codes or its
    retriable flag. No for a refused login (KafkaAuthenticationError) or a wrong
    configuration (ConfigException), which no retry fixes, and no for anything
    else: those ended the process before this rule existed and still do.
    """
    if isinstance(error, KafkaAuthenticationError):
        return False
    if isinstance(error, KafkaTimeoutError):
        return True
    return isinstance(error, KafkaClientError) and (
        error.retriable or error.code in _NO_ANSWER_CODES)


def startup_retry_delay(attempt: int) -> float:
    """Seconds to wait after failed start attempt number ``attempt`` (1, 2, ...):
    :data:`STARTUP_RETRY_FIRST_S` doubling up to :data:`STARTUP_RETRY_MAX_S`."""
    return min(STARTUP_RETRY_MAX_S, STARTUP_RETRY_FIRST_S * 2 ** min(max(attempt, 1) - 1, 16))


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


@dataclass(frozen=True)
class _Stores:
    """The admin client and the three stores of one start attempt. A store's log
    cannot be restarted once stopped, so each attempt builds its own."""

    admin: AdminClient
    status: StatusStore
    offsets: OffsetStore
    configs: ConfigStore

    @classmethod
    def create(cls, config: WorkerConfig) -> _Stores:
        admin = create_admin(config.client_config("admin"))
        return cls(admin, StatusStore.from_worker_config(config, admin=admin),
                   OffsetStore.from_worker_config(config, admin=admin),
                   ConfigStore.from_worker_config(config, admin=admin))

    def stop(self) -> None:
        for store in (self.configs, self.status, self.offsets):
            try:
                store.stop()
            except Exception:
                log.warning("stopping %s failed", type(store).__name__, exc_info=True)


class Worker:
    """One worker's parts. Its temporary files (:mod:`connect_runtime.tempdirs`:
    staged plugins, the Spark driver's temp dir), plugins and the Spark runner
    live as long as the process; the Kafka side (admin client, stores, group membership, herder) is
    built by each :meth:`start` attempt and released by an attempt that fails.

    Ownership: the thread running :meth:`start` until it returns; after that,
    the shutdown path (:meth:`stop_tasks_and_leave`, then :meth:`stop`).
    """

    def __init__(self, config: WorkerConfig, connector_files: Sequence[str] = ()) -> None:
        """``connector_files``: standalone mode's; checked here, before anything starts."""
        self.config = config
        self.connector_files = tuple(connector_files)
        if config.rest_credentials == {}:
            log.warning("the REST credentials file is empty: every request is let through, "
                        "as Kafka Connect's basic-auth extension does")
        if not config.eos_enabled:
            log.warning("exactly.once.source.support=%s: tasks run at-least-once (no "
                        "transactions, no zombie fencing); duplicates are possible",
                        config.eos_support)
        # A killed worker could not remove its temporary files; a start is when
        # someone is sure to come by and check whose owner is gone.
        sweep_stale_roots()
        self._temp = WorkerTempRoot.create()
        try:
            # plugin.path: importable here, and one zip per plugin shipped to the executors.
            plugin_path = PluginPath.load(
                config["plugin.path"], self._temp.plugins,
                allow_unsafe_permissions=config["plugin.path.allow.unsafe.permissions"])
            register_plugin_modules(plugin_path.modules, searched=config["plugin.path"])
            # A bad connector file stops standalone mode before it touches Kafka.
            check_connector_files(config, self.connector_files)
            self.runner = SparkTaskRunner(config.spark_settings(),
                                          f"connect-runtime-{config.group_id}",
                                          on_job_failed=self._on_job_failed,
                                          py_files=plugin_path.archives,
                                          driver_tmpdir=self._temp.spark)
        except BaseException:
            self._temp.remove()
            raise
        self._stores: _Stores | None = None
        self.herder: DistributedHerder | None = None
        self.membership: GroupMembership | None = None

    def _on_job_failed(self, connector: str, generation: int, trace: str) -> None:
        if self.herder is not None:
            self.herder.on_job_failed(connector, generation, trace)

    def start(self, stop: threading.Event,
              progress: Callable[[str], None]) -> DistributedHerder | None:
        """One start attempt (steps a-e of the module docstring); returns the
        running herder, or None if ``stop`` was set before the attempt finished.

        ``progress`` hears each step as it begins, for ``/health``. Whatever the
        attempt created is released before it returns None or raises, so the
        caller may try again. Raises what the steps raise; :func:`retries_startup`
        says which errors are worth another attempt.
        """
        progress(f"connecting to Kafka at bootstrap.servers={self.config.bootstrap_servers}")
        # Before any store exists: their clients would log every failed connection too.
        if not self._check_kafka_access(stop):
            return None
        stores = self._stores = _Stores.create(self.config)
        try:
            herder = self._start(stores, stop, progress)
        except BaseException:
            self._release()
            raise
        if herder is None:
            self._release()
        return herder

    def _start(self, stores: _Stores, stop: threading.Event,
               progress: Callable[[str], None]) -> DistributedHerder | None:
        progress("creating or checking the internal topics")
        ensure_internal_topics(stores.admin, InternalTopicSettings.from_worker_config(self.config))
        cluster_id = _cluster_id(stores.admin)
        progress("reading the status topic")
        stores.status.start(STARTUP_READ_TIMEOUT_S)
        # Not waiting for the offsets topic's end: a dead task's transaction may
        # be open on it, holding read_committed readers back until the task's
        # next instance fences it, which needs a leader, which may have to be
        # this worker (a restarted static member gets its leadership back).
        # Only REST offset queries use this store, and each reads to the end.
        stores.offsets.start(STARTUP_READ_TIMEOUT_S, wait_for_end=False)
        if stop.is_set():
            return None
        herder = DistributedHerder(self.config, stores.configs, stores.status,
                                   stores.offsets, self.runner, cluster_id,
                                   self.connector_files)
        self.herder = herder
        membership = GroupMembership(self._membership_config(),
                                     self.config["config.storage.topic"],
                                     on_elected=herder.become_leader,
                                     on_demoted=herder.step_down,
                                     on_rebalance=herder.metrics.counters.rebalanced)
        herder.is_member_leader = lambda: self.membership is not None and \
            self.membership.is_leader
        herder.membership_failure = lambda: (self.membership.failure
                                             if self.membership is not None else None)
        # Join before reading the config topic: if a dead leader left a transaction
        # open on it, the read below waits until the new leader's init_transactions
        # (possibly ours) aborts it.
        progress("joining the worker group and reading the config topic")
        membership.start()
        self.membership = membership
        stores.configs.start(STARTUP_READ_TIMEOUT_S)
        if stop.is_set():
            return None
        stores.configs.set_listener(_WakeOnChange(herder))
        # With a local master every worker starts Spark, leaders and standbys alike:
        # a follower that takes over then only needs its tasks to start, not a JVM.
        # With a cluster master only the leader does (SparkTaskRunner.per_leader).
        # A later attempt reuses a session an earlier one started.
        if not self.runner.per_leader:
            self.runner.start_in_background()
        herder.start()
        herder.started.set()
        return herder

    def _release(self) -> None:
        """Undo a failed or abandoned attempt, whose herder never started."""
        herder, self.herder = self.herder, None
        membership, self.membership = self.membership, None  # is_member_leader: False now
        stores, self._stores = self._stores, None
        if stores is not None:
            stores.stop()
        if herder is not None:
            # An election may have come before the attempt failed: become_leader()
            # then waits for a start that will not come. Let it go on: it fails
            # on the stopped config store, sees it no longer leads and returns,
            # so the membership's threads below can end.
            herder.started.set()
        if membership is not None:
            membership.stop()

    def _check_kafka_access(self, stop: threading.Event) -> bool:
        """Fail at once, saying why, if the brokers refuse the credentials of any
        client kind (``producer.sasl.jaas.config`` may differ from the top level's):
        one metadata request each. A cluster that does not answer at all fails the
        attempt at the first kind (:func:`check_cluster_access` raises). False if
        ``stop`` was set first."""
        return all(check_cluster_access(self.config.client_config(kind), kind, stop=stop)
                   for kind in ("admin", "consumer", "producer"))

    def _membership_config(self) -> dict[str, Any]:
        session = int(self.config["session.timeout.ms"])
        instance = self.config.get("group.instance.id")
        return {
            **self.config.client_config("consumer"),
            "group.id": self.config.group_id,
            "client.id": f"connect-runtime-member-{self.config.worker_id}",
            "session.timeout.ms": session,
            "heartbeat.interval.ms": int(self.config["heartbeat.interval.ms"]),
            "max.poll.interval.ms": max(int(self.config["rebalance.timeout.ms"]), session),
            **({"group.instance.id": instance} if instance else {}),
        }

    def stop_tasks_and_leave(self) -> None:
        """Graceful part of shutdown: tasks stop (final commits), then the group is left
        so another worker takes over at once instead of after the session timeout
        (under ``group.instance.id`` the worker keeps its place for the session
        timeout instead, waiting for its own restart)."""
        if self.herder is not None:
            self.herder.stop()
        if self.membership is not None:
            self.membership.stop()

    def stop(self) -> None:
        self.stop_tasks_and_leave()
        self.runner.shutdown()
        if self._stores is not None:
            self._stores.stop()
        # After Spark: the driver JVM kept its files under the root until its stop.
        self._temp.remove()


def _cluster_id(admin: AdminClient) -> str:
    try:
        cluster = admin.describe_cluster(request_timeout=30).result(timeout=30)
        return str(cluster.cluster_id)
    except Exception:  # describe_cluster is informational (GET /)
        log.warning("could not describe the Kafka cluster", exc_info=True)
        return "unknown"


class _Startup:
    """Starts the worker on the ``worker-startup`` thread while REST serves the
    stand-in (:attr:`gate`), and opens the gate to Connect's API once it has.

    Attempts follow one another until one succeeds, one fails with an error
    :func:`retries_startup` refuses (kept in :attr:`failure`; ``on_failure`` is
    called so the server exits, and ``run_worker`` raises it), or :meth:`stop`.

    Ownership: the ``worker-startup`` thread writes ``_progress`` (one ``str``,
    replaced whole: the event loop reads it for ``/health`` at any time) and
    ``failure`` (read only once that thread has ended). ``_lock`` guards only
    the pair "stop requested" / "thread started", so that :meth:`begin` and
    :meth:`stop` cannot cross.
    """

    def __init__(self, worker: Worker) -> None:
        self._worker = worker
        self._where = f"Kafka at bootstrap.servers={worker.config.bootstrap_servers}"
        self._progress = f"connecting to {self._where}"
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._stop_deadline: float | None = None
        self._on_failure: Callable[[], None] = lambda: None
        self._thread = threading.Thread(target=self._run, name="worker-startup", daemon=True)
        self.gate = StartupGate(lambda: self._progress)
        self.failure: BaseException | None = None

    def begin(self, on_failure: Callable[[], None]) -> None:
        """Start the first attempt (REST listens by now); nothing if :meth:`stop` came first."""
        with self._lock:
            if not self._stop.is_set():
                self._on_failure = on_failure
                self._thread.start()

    def stop(self) -> bool:
        """No attempt begins after this; the current one has until
        :data:`STARTUP_STOP_WAIT_S` after the first call to end. True if the
        startup thread has ended (or never began): the worker is then started or
        released, and its shutdown may run."""
        with self._lock:
            self._stop.set()
            began = self._thread.ident is not None
            if self._stop_deadline is None:
                self._stop_deadline = time.monotonic() + STARTUP_STOP_WAIT_S
        if began:
            self._thread.join(max(0.0, self._stop_deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _run(self) -> None:
        attempt, last_error = 0, ""

        def note(step: str) -> None:
            self._progress = step if not last_error else \
                f"{step} (attempt {attempt}; attempt {attempt - 1} failed: {last_error})"

        try:
            while not self._stop.is_set():
                attempt += 1
                try:
                    herder = self._worker.start(self._stop, note)
                except Exception as e:
                    if not retries_startup(e):
                        raise
                    last_error = str(e)
                    self._wait_after(attempt, last_error)
                    continue
                if herder is not None:
                    self.gate.open(build_app(herder))
                    log.info("worker %s started: REST serves Connect's API",
                             self._worker.config.worker_id)
                return
        except BaseException as e:
            self.failure = e
            self._on_failure()

    def _wait_after(self, attempt: int, error: str) -> None:
        delay = startup_retry_delay(attempt)
        self._progress = f"cannot reach {self._where}: {error}; retrying in {delay:.0f} s " \
                         f"(attempt {attempt} failed)"
        log.warning("cannot reach %s: %s; start attempt %d failed, retrying in %.0f s",
                    self._where, error, attempt, delay,
                    extra={"event": "kafka_unreachable", "attempt": attempt})
        self._stop.wait(delay)


def build_app(herder: DistributedHerder) -> Any:
    def verify(request: Request, body: bytes) -> None:
        # RequestSignatureException answers 400, 403 or 503 (connect_runtime.rest.errors).
        herder.verify_internal_request(dict(request.headers), body)

    return create_app(herder, extra_routers=[slots_router(herder)],
                      internal_request_verifier=verify,
                      allow_origin=str(herder.config["access.control.allow.origin"]),
                      allow_methods=str(herder.config["access.control.allow.methods"]),
                      basic_auth=herder.config.rest_credentials,
                      forward_tls=_client_context(herder.config),
                      max_body_bytes=int(herder.config["rest.request.max.bytes"]))


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

    ``on_listening`` runs once the listener is bound (the worker starts then).
    """

    def __init__(self, config: uvicorn.Config, before_exit: Callable[[], None],
                 on_listening: Callable[[], None]) -> None:
        super().__init__(config)
        self._before_exit = before_exit
        self._on_listening = on_listening
        self._exiting = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            self._on_listening()

    def exit_soon(self) -> None:
        """Stop serving (from any thread) without the graceful part: nothing started."""
        self.should_exit = True

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


def run_worker(config: WorkerConfig, connector_files: Sequence[str] = ()) -> int:
    """Run until SIGTERM/SIGINT; returns the process exit status. Logging is the
    caller's to configure (the CLI: ``connect_runtime.logs.configure_logging``).
    ``connector_files``: standalone mode's (the leader applies them as it does
    ``declared.connectors.dir``'s).

    Raises what ends the worker's start for good (ConfigException,
    KafkaAuthenticationError, ...: see :func:`retries_startup`) once REST has
    closed; the CLI turns it into the exit status."""
    worker = Worker(config, connector_files)
    startup = _Startup(worker)

    def stop_gracefully() -> None:
        # Tasks stop only once the startup thread has ended: it no longer touches
        # the worker, which is then either started or released.
        if startup.stop():
            worker.stop_tasks_and_leave()

    try:
        host, port = config.listener()
        # No WebSocket pings from the server: slot channels carry their own
        # keepalives, and 2,000 pings every 20 s would cost more than they do.
        # log_config=None: uvicorn's lines go through the root logger, in the
        # worker's log format, instead of uvicorn's own handlers.
        tls = config.rest_tls
        server = _Server(uvicorn.Config(
            startup.gate, host=host, port=port, log_level="warning", log_config=None,
            lifespan="off", ws="websockets-sansio", ws_ping_interval=None,
            # The context is built here, from stores read when the config loaded.
            ssl_context_factory=(lambda *_: tls.server_context()) if tls is not None else None),
            before_exit=stop_gracefully,
            on_listening=lambda: startup.begin(on_failure=server.exit_soon))
        log.info("worker %s serving REST on %s://%s:%d; starting", config.worker_id,
                 config.listener_scheme, host, port)
        server.run()  # handles SIGTERM/SIGINT by returning
    finally:
        log.info("worker stopping")
        ended = startup.stop()
        if ended:
            worker.stop()
            log.info("worker stopped")
        else:
            log.warning("a start attempt was still running %.0f s after the worker was told "
                        "to stop; exiting without it", STARTUP_STOP_WAIT_S)
    if ended and startup.failure is not None:
        raise startup.failure
    return 0
