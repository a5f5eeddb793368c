"""librdkafka's log lines, into :mod:`logging` at the level they deserve.

confluent-kafka hands each line of a client to its ``logger`` setting as
``logger.log(level, "%s [%s] %s", facility, client_name, message)``, the level
already a :mod:`logging` one. :class:`ClientLog` is that logger for every client
``kafka/clients.py`` builds. It passes every line through unchanged but the
retries of InitProducerId that the broker asks for in normal operation::

    GETPID [<client>] [thrd:main]: Failed to acquire transactional PID from broker
    TxnCoordinator/1: Broker: Producer attempted to update a transaction while
    another concurrent operation on the same transaction was ongoing: retrying

* CONCURRENT_TRANSACTIONS (above): the transaction coordinator is finishing the
  transaction the previous producer of the same ``transactional.id`` left: an
  abort or commit whose markers it is still writing, or an open transaction that
  this very InitProducerId makes it abort (Kafka's
  ``TransactionCoordinator.handleInitProducerId`` answers so for an ongoing
  transaction, after starting its abort). Task restarts, reconfigurations and
  fencing do this whenever the previous producer had a transaction in flight.
* COORDINATOR_LOAD_IN_PROGRESS ("Coordinator load in progress"), for
  transactional and idempotent producers alike: the broker is loading the
  coordinator's state after taking it over, or asking the controller for a new
  block of producer ids (KIP-730), which it does once every thousand producers.

Both end within a second or so. Java's producer retries them without a word
(``TransactionManager.InitProducerIdHandler`` re-enqueues on any retriable
error); librdkafka logs a WARNING per retry, which told new users something was
wrong when nothing was. So such a retry is DEBUG, until one client has been
retrying for :data:`PID_RETRY_WARN_AFTER_S`: then it is a WARNING that says
what is waited for, repeated at most once per that interval while it lasts.
:class:`PidRetries` decides; it only reads the clock it is given.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import KafkaError

PID_FACILITY = "GETPID"

# librdkafka's text for each error (as it appears in the line) -> what is waited for.
_WAITING_FOR = {
    KafkaError(KafkaError.CONCURRENT_TRANSACTIONS).str():
        "the transaction coordinator to finish the previous transaction of this "
        "transactional.id (CONCURRENT_TRANSACTIONS). After a task restart, a "
        "reconfiguration or fencing this usually takes under a second; this long, a "
        "partition of that transaction may have no leader, or the coordinator is moving",
    KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS).str():
        "the broker to load the coordinator's state or to get a new block of producer "
        "ids from the controller (COORDINATOR_LOAD_IN_PROGRESS). This usually takes under "
        "a second; this long, the broker or the controller may be overloaded or "
        "unreachable",
}

# Both answers above resolve in milliseconds on a healthy cluster; seconds of
# them mean the broker cannot finish what it is doing.
PID_RETRY_WARN_AFTER_S = 5.0
# librdkafka retries InitProducerId every 500 ms or so; a pause this long ends a
# run of retries (the PID was acquired, or the client gave up).
_RUN_GAP_S = 2.0


@dataclass
class _Run:
    """One client's current run of retries."""

    started: float
    last: float
    warned: float | None = None


class PidRetries:
    """Decides the level of each InitProducerId retry line, per client.

    :meth:`level` is called with the time of each retry of ``client``: DEBUG while
    the client's run of retries is younger than ``warn_after``, then WARNING at
    most once per ``warn_after``. A pause longer than ``gap`` starts a new run.
    Not thread-safe: :class:`ClientLog` holds a lock around it.
    """

    def __init__(self, warn_after: float = PID_RETRY_WARN_AFTER_S,
                 gap: float = _RUN_GAP_S) -> None:
        self._warn_after = warn_after
        self._gap = gap
        self._runs: dict[str, _Run] = {}

    def level(self, client: str, now: float) -> tuple[int, float]:
        """(logging level, seconds the client has been retrying) for a retry at ``now``."""
        # Runs that ended are forgotten, so a long-lived worker (a new client name
        # for every fencing) keeps only the live ones.
        self._runs = {c: r for c, r in self._runs.items() if now - r.last <= self._gap}
        run = self._runs.setdefault(client, _Run(now, now))
        run.last = now
        age = now - run.started
        if age < self._warn_after or (run.warned is not None
                                      and now - run.warned < self._warn_after):
            return logging.DEBUG, age
        run.warned = now
        return logging.WARNING, age

    def __len__(self) -> int:
        """How many clients are in a run of retries (ended runs are dropped)."""
        return len(self._runs)


def waiting_for(facility: str, message: str) -> str | None:
    """What a librdkafka line that is a retry of InitProducerId the broker asked for
    waits for (an explanation for users); None for any other line."""
    if facility != PID_FACILITY or not message.endswith(": retrying"):
        return None
    return next((why for error, why in _WAITING_FOR.items() if f": {error}: " in message),
                None)


class ClientLog:
    """The ``logger`` of a librdkafka client: ``logger`` with those retries demoted.

    confluent-kafka calls :meth:`log` from whichever thread serves the client's
    queue; ``_lock`` guards ``_retries``, the only state.
    """

    def __init__(self, logger: logging.Logger,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._logger = logger
        self._clock = clock
        self._lock = threading.Lock()
        self._retries = PidRetries()

    def log(self, level: int, msg: str, *args: object) -> None:
        """Log one line (``msg % args``), as :meth:`logging.Logger.log` would."""
        why = waiting_for(str(args[0]), str(args[2])) if len(args) == 3 else None
        if why is not None:
            with self._lock:
                level, age = self._retries.level(str(args[1]), self._clock())
            if level >= logging.WARNING:
                self._logger.warning(
                    "%s: still acquiring a producer id after %.0f s, waiting for %s. The "
                    "producer keeps retrying (a task's until its init_transactions times "
                    "out). librdkafka: %s",
                    args[1], age, why, args[2])
                return
        self._logger.log(level, msg, *args)
