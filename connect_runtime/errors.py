"""Every error the runtime raises on purpose descends from :class:`ConnectError`.

::

    ConnectError
    ├── ConfigException              a configuration value is missing or invalid
    ├── DataException                a record or offset cannot be converted/serialized
    │   ├── InvalidOffsetException   a source partition/offset is not a dict of primitives
    │   └── ParseError               (transforms.simple_date_format) a text does not match
    │                                its date pattern
    ├── RetriableException           the operation may succeed if tried again
    ├── ServiceException             a service a record stage needs (a schema registry)
    │   │                            failed, not the record: errors.tolerance never drops
    │   │                            a record for it
    │   └── ServiceUnavailableException  the service cannot be reached (also Retriable)
    ├── ConnectorContractException   a connector broke the API contract (e.g. task_configs
    │                                returned more than tasks.max configs, or not dict[str, str])
    ├── TopicNotFound                a topic read from the beginning does not exist
    ├── NotFoundException            no such connector, task or plugin   (REST 404)
    ├── AlreadyExistsException       the connector already exists        (REST 409)
    ├── ConflictException            state changed under the request     (REST 409)
    ├── BadRequestException          the request itself is malformed     (REST 400)
    │   ├── RecordTooLargeException  (storage.config_store) a config is larger than a
    │   │                            config-topic record may be
    │   └── InvalidSlotMessage       (protocol.slot_channel) a slot's hello, report or
    │       │                        answer is malformed
    │       └── InvalidSlotMetrics   its metrics do not parse: ignored, as a keepalive
    ├── RequestSignatureException    an internal request's KIP-507 signature is missing,
    │                                forged or cannot be checked yet     (REST 400/403/503)
    ├── NotLeaderException           only the leader may do this; carries the leader URL
    ├── HttpError                    (connect_runtime.rest.errors) an explicit HTTP status
    ├── IllegalStateTransition       a lifecycle move the state diagram forbids: a runtime bug
    ├── OwnershipError               a thread other than its owner touched state one thread
    │                                owns (the reconcile state, a slot channel's): a bug
    ├── StartupFailed                a task cannot start; the message is its FAILED trace
    ├── StartupAbandoned             a newer task generation exists: this one ends quietly
    ├── RecordSkipped                (task.error_handler) a record failed a stage and
    │                                errors.tolerance=all drops it
    ├── ColumnProblem                (connectors.sql.reflect) a configured column is missing
    │                                or of the wrong type
    └── KafkaClientError             a confluent-kafka error, translated once at the boundary
        ├── ProducerFencedError      a newer producer owns this transactional.id: stop quietly
        ├── TransactionAbortableError  the current transaction must be aborted, then may retry
        ├── KafkaTimeoutError        the broker did not answer in time
        └── KafkaAuthenticationError the broker refused the client's SASL credentials, or
                                     the TLS handshake failed

Connector authors raise :class:`ConnectError` subclasses (or any exception) from
their code; the framework turns an exception in a task into a FAILED status whose
``trace`` holds the formatted traceback.

A plain ``ValueError``, ``TypeError`` or ``RuntimeError`` from the runtime means
its own code broke an internal invariant (a bug), never that a user's input or
connector was wrong: those raise the classes above, with a message naming the
key, record or connector at fault.

``translate_kafka_error`` is the single place where ``confluent_kafka.KafkaException``
becomes one of ours; callers re-raise ``from`` the original so no detail is lost.
"""

from __future__ import annotations

from typing import Any


class ConnectError(Exception):
    """Root of the runtime's exception tree."""


class ConfigException(ConnectError):
    """A configuration is invalid. ``name`` names the offending key when known."""

    def __init__(self, message: str, name: str | None = None, value: Any = None) -> None:
        if name is not None:
            message = f"Invalid value {value!r} for configuration {name}: {message}"
        super().__init__(message)
        self.name = name
        self.value = value


class DataException(ConnectError):
    """A record, key, value or offset cannot be converted or serialized."""


class InvalidOffsetException(DataException):
    """A source partition or offset is not a flat ``dict[str, primitive]``."""


class RetriableException(ConnectError):
    """A transient failure; the operation may be retried."""


class ServiceException(ConnectError):
    """A service a record stage depends on (a schema registry) failed or refused the
    stage, through no fault of the record: the message names the service's URL.

    ``errors.tolerance=all`` never skips a record for it (the task's error handler
    fails the task instead): dropping records because a service is down or
    misconfigured would lose data that is perfectly good.
    """


class ServiceUnavailableException(ServiceException, RetriableException):
    """The service cannot be reached (connection refused, timeouts, 5xx after the
    client's own retries). Retried within ``errors.retry.timeout`` like any
    RetriableException; then it fails the task, never skips the record."""


class ConnectorContractException(ConnectError):
    """A connector or task returned something its API contract forbids; a connector bug."""


class TopicNotFound(ConnectError):
    """A topic read from the beginning does not exist (``kafka.log.read_topic_to_end``)."""


class NotFoundException(ConnectError):
    """The named connector, task or plugin does not exist (REST 404)."""


class AlreadyExistsException(ConnectError):
    """The connector being created already exists (REST 409)."""


class ConflictException(ConnectError):
    """The cluster state changed under the request, e.g. new task configs (REST 409)."""


class BadRequestException(ConnectError):
    """The request is malformed or not allowed as sent (REST 400)."""


class RecordTooLargeException(BadRequestException):
    """What a request asked to write would be a record larger than its topic takes
    (the producer's ``message.max.bytes``, or the broker's MSG_SIZE_TOO_LARGE):
    nothing was written."""


class RequestSignatureException(ConnectError):
    """An internal request failed KIP-507 verification.

    ``status`` is the HTTP status to answer: 400 (signature headers missing or an
    algorithm not accepted), 403 (the signature does not match), 503 (this
    worker has no session key yet; retry shortly).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class NotLeaderException(ConnectError):
    """The request must be served by the leader. ``leader_url`` is None if unknown."""

    def __init__(self, message: str, leader_url: str | None = None) -> None:
        super().__init__(message)
        self.leader_url = leader_url


class IllegalStateTransition(ConnectError):
    """A lifecycle transition the state diagram (``protocol.states``) forbids.

    A bug in the runtime, not user error: raised so that tests catch it rather
    than the status topic recording it.
    """


class OwnershipError(ConnectError):
    """A thread other than the one that owns some state touched it (the reconcile
    state, ``cluster.reconciler``; a slot channel's, ``task.slot_control``): a bug
    in the runtime, a code path that should have sent the owner a message."""


class StartupFailed(ConnectError):
    """A task cannot start; the message becomes the task's FAILED trace."""


class StartupAbandoned(ConnectError):
    """A newer generation of task configs exists; this task must not run.

    Not a failure: the slot ends quietly and the newer generation reports status.
    """


class KafkaClientError(ConnectError):
    """An error reported by the Kafka client, translated from ``KafkaException``.

    ``retriable`` / ``fatal`` / ``txn_requires_abort`` mirror librdkafka's flags.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        retriable: bool = False,
        fatal: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.retriable = retriable
        self.fatal = fatal
        self.txn_requires_abort = txn_requires_abort


class KafkaAuthenticationError(KafkaClientError):
    """The brokers refused the client's SASL credentials, or the TLS handshake failed.

    Not retriable: librdkafka would retry forever with the same credentials.
    """


class ProducerFencedError(KafkaClientError):
    """A newer producer with the same ``transactional.id`` exists: this one is a zombie."""


class TransactionAbortableError(KafkaClientError):
    """The current transaction failed and must be aborted before anything else."""


class KafkaTimeoutError(KafkaClientError):
    """The broker did not answer within the deadline."""


def translate_kafka_error(exc: BaseException, context: str) -> KafkaClientError:
    """Map a ``confluent_kafka.KafkaException`` (or ``KafkaError``) to our tree.

    ``context`` says what was being done ("commit_transaction for task x-0"); it
    leads the message so a status trace tells the user where it happened.
    Callers write ``raise translate_kafka_error(e, ctx) from e``.
    """
    from confluent_kafka import KafkaError, KafkaException

    err: Any = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if not isinstance(err, KafkaError):
        return KafkaClientError(f"{context}: {exc}")
    code = err.code()
    message = f"{context}: {err.name()}: {err.str()}"
    flags: dict[str, Any] = {
        "code": code,
        "retriable": bool(err.retriable()),
        "fatal": bool(err.fatal()),
        "txn_requires_abort": bool(err.txn_requires_abort()),
    }
    fenced_codes = {
        KafkaError._FENCED,  # librdkafka's local "producer fenced" state
        KafkaError.PRODUCER_FENCED,
        KafkaError.INVALID_PRODUCER_EPOCH,
    }
    if code in fenced_codes:
        return ProducerFencedError(message, **flags)
    if code in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
        return KafkaTimeoutError(message, **flags)
    if code in (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED,
                KafkaError._SSL):
        return KafkaAuthenticationError(message, **flags)
    if flags["txn_requires_abort"]:
        return TransactionAbortableError(message, **flags)
    return KafkaClientError(message, **flags)
