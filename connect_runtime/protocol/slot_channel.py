"""The slot channel: the one conversation between a task slot and its worker.

A slot (a long-running Spark task on an executor, :mod:`connect_runtime.task.slot`)
holds one WebSocket to the worker that submitted it for as long as it runs::

    GET /internal/tasks/{connector}/{task}/channel      (WebSocket upgrade)

    worker -> slot   a SlotChallenge (JSON): a fresh random nonce
    slot -> worker   a SignedHello (JSON): the SlotHello's JSON bytes, naming the
                     connector, the task and the nonce, with their KIP-507
                     signature (protocol.signing) as an internal request would
                     carry it in headers; nothing else is read or answered
                     before it checks out (HELLO_TIMEOUT_S)
    slot -> worker   a SlotReport (JSON) when its state changes, at once;
                     a SlotTopics (JSON) naming the topics its task produced
                     to (KIP-558 active topics), see :class:`SlotTopics`;
                     every KEEPALIVE_INTERVAL_S a SlotMetrics (JSON) if its
                     task's metrics changed since the last one; an empty
                     frame (keepalive) when it sent nothing else for that long
    worker -> slot   a SlotAnswer (JSON) right after the hello, and again
                     whenever the command, the restart counter, the session
                     key or the logger levels change (pushed: pause/stop/restart
                     reach the slot in one network round trip, not a polling
                     interval)

Why a connection and not a request per heartbeat: the leader's cost. A signed
HTTP heartbeat every 250 ms cost the worker about 0.75 ms of CPU each, 3 ms per
task per second, and capped one worker near 330 tasks. An idle WebSocket costs
nothing; a keepalive costs about 0.2 ms every few seconds; the report of a
change is as rare as the change (docs/benchmarks.md, control plane).

Liveness: the worker declares a slot lost (its task FAILED, with where it ran)

* at once when the connection closes without a normal close (code 1000): the
  Python process or the executor running it died; the kernel closed its socket;
* after :data:`LIVENESS_TIMEOUT_S` without any frame: the host vanished, the
  network broke, or the process is frozen.

A lost slot that speaks again (same process, new connection) gets its state
back; Spark re-running it (a new process, ``attempt`` > 0) reports anew.

Why a challenge: a hello signed once would be good for ever and on any channel.
Over plain HTTP someone who captured one could open a channel as the slot
(the worker then disconnects the real one) or as any other task. A hello that
names its task and answers a nonce the worker chose for this connection is good
once. A timestamp would do the same only if every executor's clock agreed with
the worker's.

Refusals close the channel with ``4000 + HTTP status`` and a reason:
:data:`CLOSE_BAD_REQUEST` (the hello does not parse, its signature is missing,
or it names another task or another connection's challenge),
:data:`CLOSE_FORBIDDEN` (the key is no longer accepted: read the current one
from the config topic and reconnect), :data:`CLOSE_UNAVAILABLE` (the worker has
no session key yet), :data:`CLOSE_LOST` (no hello within
:data:`HELLO_TIMEOUT_S`), :data:`CLOSE_NO_SUCH_TASK` (this worker
hosts no such task, or not this generation of it: the slot stops). Both ends
parse with this module, so a field renamed on one side fails the other's tests
rather than silently reading a default.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar
from urllib.parse import quote

import orjson

from connect_runtime.errors import BadRequestException
from connect_runtime.log_levels import LEVELS, LevelSetting
from connect_runtime.protocol import signing
from connect_runtime.protocol.states import State

__all__ = [
    "CLOSE_BAD_REQUEST",
    "CLOSE_DONE",
    "CLOSE_FORBIDDEN",
    "CLOSE_LOST",
    "CLOSE_NO_SUCH_TASK",
    "CLOSE_UNAVAILABLE",
    "ERROR_COUNTS",
    "HELLO_TIMEOUT_S",
    "KEEPALIVE",
    "KEEPALIVE_INTERVAL_S",
    "LIVENESS_TIMEOUT_S",
    "SLOT_CHANNEL_ROUTE",
    "Command",
    "InvalidSlotMessage",
    "InvalidSlotMetrics",
    "SignedHello",
    "SlotAnswer",
    "SlotChallenge",
    "SlotHello",
    "SlotMetrics",
    "SlotReport",
    "SlotTopics",
    "TaskStall",
    "channel_url",
    "close_code",
    "parse_slot_message",
]

KEEPALIVE_INTERVAL_S = 3.0
"""A slot that sent nothing for this long sends :data:`KEEPALIVE`."""

LIVENESS_TIMEOUT_S = 10.0
"""A slot not heard from for this long is lost (three keepalives missed, plus
slack for a loaded machine). A closed connection is noticed at once."""

KEEPALIVE = b""
SLOT_CHANNEL_ROUTE = "/internal/tasks/{connector}/{task}/channel"

HELLO_TIMEOUT_S = 10.0
"""A channel whose hello has not come this long after the challenge is closed
(:data:`CLOSE_LOST`): an open socket that says nothing holds nothing for long."""
CHALLENGE_BYTES = 16  # of randomness in a SlotChallenge's nonce

CLOSE_DONE = 1000  # the slot ended deliberately; its last report stands
CLOSE_BAD_REQUEST = 4400
CLOSE_FORBIDDEN = 4403
CLOSE_NO_SUCH_TASK = 4404
CLOSE_LOST = 4408  # the worker gave up on a silent slot; if it is alive, it reconnects
CLOSE_UNAVAILABLE = 4503


def close_code(http_status: int) -> int:
    """The channel's close code for a refusal that would be ``http_status`` over HTTP."""
    return 4000 + http_status


def channel_url(worker_url: str, connector: str, task: int) -> str:
    """The channel URL (``ws://`` or ``wss://``) of ``connector``'s task ``task``."""
    scheme, sep, rest = worker_url.partition("://")
    ws_scheme = {"http": "ws", "https": "wss"}.get(scheme.lower(), scheme) if sep else "ws"
    return (f"{ws_scheme}://{rest if sep else worker_url}"
            + SLOT_CHANNEL_ROUTE.format(connector=quote(connector, safe=""), task=task))


class Command(StrEnum):
    """What the worker tells a slot to do with its task instance."""

    RUN = "run"
    PAUSE = "pause"  # keep the task and its producer; stop polling
    STOP = "stop"  # stop the task and end the slot (the Spark task returns)


class InvalidSlotMessage(BadRequestException):
    """A slot-channel message that does not parse; the worker refuses it (400)."""


class InvalidSlotMetrics(InvalidSlotMessage):
    """A SlotMetrics that does not parse; the worker ignores it (a keepalive)
    rather than declaring a working task lost over its numbers."""


def _object(body: bytes | str, what: str) -> dict[str, Any]:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise InvalidSlotMessage(f"Invalid {what}: not JSON ({e})") from None
    if not isinstance(value, dict):
        raise InvalidSlotMessage(
            f"Invalid {what}: expected a JSON object, got {type(value).__name__}")
    return value


def _field(message: dict[str, Any], what: str, name: str, kind: type,
           *, optional: bool = False) -> Any:
    value = message.get(name)
    if value is None and optional:
        return None
    # bool is an int in Python; a JSON true is not a count.
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise InvalidSlotMessage(
            f"Invalid {what}: field '{name}' must be {'null or ' if optional else ''}"
            f"{kind.__name__}, got {value!r}")
    return value


_E = TypeVar("_E", bound=StrEnum)


def _choice(message: dict[str, Any], what: str, name: str, kind: type[_E]) -> _E:
    value = _field(message, what, name, str)
    try:
        return kind(value)
    except ValueError:
        raise InvalidSlotMessage(f"Invalid {what}: unknown {name} {value!r}") from None


@dataclass(frozen=True, slots=True)
class SlotChallenge:
    """The worker's first frame on every new channel: a nonce the slot's hello must
    carry, signed. A hello answers one challenge of one connection, so a hello
    captured on the wire is worth nothing on any other connection, of this task
    or another (no clocks involved: executors' clocks need not agree with the
    worker's)."""

    nonce: str

    @classmethod
    def new(cls) -> SlotChallenge:
        return cls(secrets.token_urlsafe(CHALLENGE_BYTES))

    def to_json(self) -> bytes:
        return orjson.dumps({"nonce": self.nonce})

    @classmethod
    def from_json(cls, body: bytes | str) -> SlotChallenge:
        what = "slot challenge"
        return cls(nonce=_field(_object(body, what), what, "nonce", str))


@dataclass(frozen=True, slots=True)
class SlotHello:
    """Who is calling: sent once per connection, signed, answering the worker's
    :class:`SlotChallenge` (see :meth:`answer`).

    ``connector``, ``task`` and ``nonce`` bind the hello to one channel: the task
    the channel's URL names, and the challenge of that connection
    (:meth:`SignedHello.hello_for` checks both). ``run_id`` is one per slot process
    attempt: a reconnect of the same process keeps it, a re-run by Spark has a new
    one (and ``attempt`` > 0). ``submission`` names the Spark job the slot belongs
    to (``TaskSpec.submission``): Spark's attempt numbers start again in a job
    submitted anew.
    """

    connector: str
    task: int
    run_id: str
    generation: int  # the connector generation the slot was submitted for
    attempt: int  # Spark's attempt number of the slot
    pid: int
    host: str
    submission: str = ""
    nonce: str = ""  # the challenge answered; set by answer()

    def to_json(self) -> bytes:
        return orjson.dumps({"connector": self.connector, "task": self.task,
                             "run_id": self.run_id, "generation": self.generation,
                             "attempt": self.attempt, "pid": self.pid, "host": self.host,
                             "submission": self.submission, "nonce": self.nonce})

    @classmethod
    def from_json(cls, body: bytes) -> SlotHello:
        what = "slot hello"
        m = _object(body, what)
        return cls(connector=_field(m, what, "connector", str),
                   task=_field(m, what, "task", int),
                   run_id=_field(m, what, "run_id", str),
                   generation=_field(m, what, "generation", int),
                   attempt=_field(m, what, "attempt", int),
                   pid=_field(m, what, "pid", int), host=_field(m, what, "host", str),
                   submission=_field(m, what, "submission", str),
                   nonce=_field(m, what, "nonce", str))

    def answer(self, challenge: bytes | str, key_b64: str | None, algorithm: str) -> bytes:
        """The hello frame answering the worker's ``challenge`` frame (as the
        WebSocket client received it, binary or text), signed with
        ``key_b64`` (unsigned without one: the worker refuses it, 4400). Raises
        :class:`InvalidSlotMessage` if ``challenge`` is not one."""
        hello = replace(self, nonce=SlotChallenge.from_json(challenge).nonce)
        return SignedHello.sign(hello.to_json(), key_b64, algorithm).to_json()


@dataclass(frozen=True, slots=True)
class SignedHello:
    """The hello frame: the hello's JSON bytes and their KIP-507 signature
    (:mod:`connect_runtime.protocol.signing`), as an internal request carries
    them in headers. The bytes travel base64url-encoded, so the worker checks
    the signature of exactly the bytes the slot signed."""

    body: bytes
    signature: str | None
    algorithm: str | None

    @classmethod
    def sign(cls, body: bytes, key_b64: str | None, algorithm: str) -> SignedHello:
        headers = signing.sign_headers(key_b64, algorithm, body)
        return cls(body, headers.get(signing.AUTH_HEADER),
                   headers.get(signing.ALGORITHM_HEADER))

    @property
    def headers(self) -> dict[str, str]:
        """The signature as an internal request's headers, for the worker's check."""
        return {name: value for name, value in ((signing.AUTH_HEADER, self.signature),
                                                (signing.ALGORITHM_HEADER, self.algorithm))
                if value is not None}

    def to_json(self) -> bytes:
        return orjson.dumps({"hello": base64.urlsafe_b64encode(self.body).decode("ascii"),
                             "signature": self.signature, "algorithm": self.algorithm})

    @classmethod
    def from_json(cls, data: bytes) -> SignedHello:
        what = "slot hello"
        m = _object(data, what)
        encoded = _field(m, what, "hello", str)
        try:
            body = base64.b64decode(encoded.encode("ascii"), altchars=b"-_", validate=True)
        except (binascii.Error, UnicodeEncodeError):
            raise InvalidSlotMessage("Invalid slot hello: field 'hello' is not base64url") \
                from None
        return cls(body, _field(m, what, "signature", str, optional=True),
                   _field(m, what, "algorithm", str, optional=True))

    def hello_for(self, connector: str, task: int, challenge: SlotChallenge) -> SlotHello:
        """The hello, if it was made for the channel of ``connector``'s task ``task``
        and answers ``challenge``; call after the signature was checked. Raises
        :class:`InvalidSlotMessage` naming what does not match."""
        hello = SlotHello.from_json(self.body)
        if (hello.connector, hello.task) != (connector, task):
            raise InvalidSlotMessage(
                f"Invalid slot hello: it names task {hello.connector!r}-{hello.task}, not "
                f"this channel's task {connector!r}-{task}")
        if not hmac.compare_digest(hello.nonce.encode(), challenge.nonce.encode()):
            raise InvalidSlotMessage(
                "Invalid slot hello: it does not answer this connection's challenge "
                "(a hello made for another connection, replayed?)")
        return hello


@dataclass(frozen=True, slots=True)
class TaskStall:
    """A call of the task loop that has not returned for ``task.stall.threshold.ms``
    (``connect_runtime.task.stall_watch``): which call, how long, and the task
    thread's stack when the slot looked.

    ``call`` is ``"poll()"`` or ``"commit"`` (the commit path: a transaction's
    steps 3-6, or an offset flush and ``commit()``); ``stalled_ms`` is how long it
    had not returned when the slot sent this; ``since_ms`` is when it began (the
    executor's wall clock, ms since the epoch: for people, not for arithmetic);
    ``stack`` is ``traceback.format_list`` text, innermost call last.
    """

    call: str
    stalled_ms: int
    since_ms: int
    threshold_ms: int
    stack: str

    def to_object(self) -> dict[str, Any]:
        return {"call": self.call, "stalled_ms": self.stalled_ms, "since_ms": self.since_ms,
                "threshold_ms": self.threshold_ms, "stack": self.stack}

    @classmethod
    def from_object(cls, m: Any, what: str = "slot report") -> TaskStall:
        if not isinstance(m, dict):
            raise InvalidSlotMessage(f"Invalid {what}: field 'stall' must be null or object")
        return cls(call=_field(m, what, "call", str),
                   stalled_ms=_field(m, what, "stalled_ms", int),
                   since_ms=_field(m, what, "since_ms", int),
                   threshold_ms=_field(m, what, "threshold_ms", int),
                   stack=_field(m, what, "stack", str))

    def trace(self, label: str) -> str:
        """The status trace of task ``label`` (``orders-0``) while the call is stuck."""
        since = datetime.fromtimestamp(self.since_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (f"Task {label} is stuck: {self.call} has not returned for "
                f"{self.stalled_ms // 1000} s (since {since}; task.stall.threshold.ms="
                f"{self.threshold_ms}). Its state does not change; this trace clears when the "
                "call returns. Stack of the task thread "
                f"(most recent call last):\n{self.stack}")


@dataclass(frozen=True, slots=True)
class SlotReport:
    """A slot's state as it reports it. ``restart_seq`` is the last restart counter
    the slot heard (None before the first answer): a report older than a restart
    describes the instance being restarted and must not overwrite RESTARTING.
    ``stall`` (None: none) is a loop call stuck past ``task.stall.threshold.ms``;
    the worker shows it in the status of a RUNNING or PAUSED task only. A worker
    of an older version ignores it (unknown fields are)."""

    state: State
    trace: str | None
    restart_seq: int | None
    fenced: bool  # the slot's producer was fenced by another with its transactional.id
    stall: TaskStall | None = None

    def to_json(self) -> bytes:
        return orjson.dumps({"state": self.state.value, "trace": self.trace,
                             "restart_seq": self.restart_seq, "fenced": self.fenced,
                             "stall": None if self.stall is None else self.stall.to_object()})

    @classmethod
    def from_json(cls, body: bytes) -> SlotReport:
        """Parse a report; raises :class:`InvalidSlotMessage` naming the bad field."""
        return cls.from_object(_object(body, "slot report"))

    @classmethod
    def from_object(cls, m: dict[str, Any]) -> SlotReport:
        """A report from its decoded JSON object; see :meth:`from_json`."""
        what = "slot report"
        return cls(state=_choice(m, what, "state", State),
                   trace=_field(m, what, "trace", str, optional=True),
                   restart_seq=_field(m, what, "restart_seq", int, optional=True),
                   fenced=_field(m, what, "fenced", bool),
                   stall=None if m.get("stall") is None
                   else TaskStall.from_object(m["stall"], what))


@dataclass(frozen=True, slots=True)
class SlotAnswer:
    """What the slot should do: the command, the task's restart counter (a change
    means "restart": stop this instance and start a new one), and
    ``restart_pending``: a restart was requested after this slot's previous
    process was lost, so a re-run by Spark starts the task at once instead of
    reporting FAILED.

    ``session_key_id`` names the current session key (:func:`signing.key_id`;
    None when the worker has none yet). The key itself (base64, ``session_key``)
    goes only over a TLS channel; over plain HTTP a slot whose key has another
    id reads the new one from the config topic, as workers do.

    ``log_levels``: the levels set through the worker's ``/admin/loggers``, in
    the order to apply them (:mod:`connect_runtime.log_levels`); the slot's
    process applies them before its task starts and whenever they change. On
    the wire, ``[namespace, level]`` pairs.
    """

    command: Command
    restart_seq: int
    session_key: str | None = None
    restart_pending: bool = False
    session_key_id: str | None = None
    log_levels: tuple[LevelSetting, ...] = ()

    @classmethod
    def stop(cls, restart_seq: int = 0) -> SlotAnswer:
        return cls(Command.STOP, restart_seq)

    def to_json(self) -> bytes:
        return orjson.dumps({"command": self.command.value, "restart_seq": self.restart_seq,
                             "session_key": self.session_key,
                             "restart_pending": self.restart_pending,
                             "session_key_id": self.session_key_id,
                             "log_levels": [[s.namespace, s.level] for s in self.log_levels]})

    @classmethod
    def from_json(cls, body: bytes) -> SlotAnswer:
        """Parse an answer; raises :class:`InvalidSlotMessage` naming the bad field."""
        what = "slot answer"
        m = _object(body, what)
        return cls(_choice(m, what, "command", Command), _field(m, what, "restart_seq", int),
                   _field(m, what, "session_key", str, optional=True),
                   bool(_field(m, what, "restart_pending", bool, optional=True)),
                   _field(m, what, "session_key_id", str, optional=True),
                   _log_levels(m, what))


def _log_levels(message: dict[str, Any], what: str) -> tuple[LevelSetting, ...]:
    pairs = _field(message, what, "log_levels", list, optional=True) or []
    if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str)
               and p[1] in LEVELS for p in pairs):
        raise InvalidSlotMessage(
            f"Invalid {what}: 'log_levels' must hold [namespace, level] pairs with a "
            f"level among {', '.join(LEVELS)}, got {pairs!r}")
    return tuple(LevelSetting(namespace, level) for namespace, level in pairs)


# ----------------------------------------------------------- active topics (KIP-558)

@dataclass(frozen=True, slots=True)
class SlotTopics:
    """Topics the slot's task produced to, whose records are durable (committed in
    a transaction, or acknowledged by the broker when not exactly-once), since its
    previous SlotTopics. The worker records those not yet recorded as active.

    A slot sends a topic the first time its task instance makes a record to it
    durable, and after that at most every few seconds while it keeps producing to
    it: a topic whose record a user reset reappears once the task produces to it
    again, as in Kafka Connect.
    """

    topics: frozenset[str]

    def to_json(self) -> bytes:
        return orjson.dumps({"active_topics": sorted(self.topics)})

    @classmethod
    def from_object(cls, message: dict[str, Any]) -> SlotTopics:
        what = "slot topics"
        topics = _field(message, what, "active_topics", list)
        if not all(isinstance(t, str) and t for t in topics):
            raise InvalidSlotMessage(
                f"Invalid {what}: 'active_topics' must hold non-empty strings, got {topics!r}")
        return cls(frozenset(topics))


# ----------------------------------------------------------------------- metrics

def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True, slots=True)
class ErrorTotals:
    """A task's error-handling counts (``connect_runtime.task.error_handler.ErrorCounts``
    of every instance of the slot's task, added up)."""

    record_errors: int = 0
    record_failures: int = 0
    records_skipped: int = 0
    retries: int = 0
    errors_logged: int = 0


ERROR_COUNTS = tuple(ErrorTotals.__dataclass_fields__)


@dataclass(frozen=True, slots=True)
class OffsetCommits:
    """A recently committed source partition: its offset and how many commits wrote it."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None
    commits: int


@dataclass(frozen=True, slots=True)
class TaskMetricsSnapshot:
    """One task's metrics as its slot sends them (built by
    ``connect_runtime.task.metrics.TaskMetrics.snapshot``; that module says what
    each counts). Totals count from the slot's start; the ``txn_size_*`` and
    ``commit_latency_*`` values cover the last minute and are None without a
    commit in it."""

    mode: str  # TaskMode's value: "exactly-once" or "at-least-once"
    poll_total: int
    poll_batches: int
    poll_time_ms_total: float
    poll_time_ms_max: float
    write_total: int
    active_count: int
    active_max: int
    commits: int
    aborts: int
    records_committed: int
    startup_attempts: int
    startup_failures: int
    errors: ErrorTotals = ErrorTotals()
    offsets: tuple[OffsetCommits, ...] = ()
    last_commit_ms: int | None = None
    txn_size_min: int | None = None
    txn_size_max: int | None = None
    txn_size_avg: float | None = None
    commit_latency_ms_p50: float | None = None
    commit_latency_ms_p99: float | None = None

    def to_object(self) -> dict[str, Any]:
        """The JSON object the channel carries (offsets as ``[partition, offset,
        commits]`` triples)."""
        values = {name: getattr(self, name) for name in _SCALARS}
        values["errors"] = {name: getattr(self.errors, name) for name in ERROR_COUNTS}
        values["offsets"] = [[o.partition, o.offset, o.commits] for o in self.offsets]
        return values

    @classmethod
    def from_object(cls, m: Any, what: str = "slot metrics") -> TaskMetricsSnapshot:
        """Check every field the worker reads: a slot of another version, or a bug,
        must not put a string where the collector adds numbers."""
        if not isinstance(m, dict):
            raise InvalidSlotMetrics(f"Invalid {what}: 'metrics' must be an object")
        bad = [name for name in _REQUIRED if not _number(m.get(name))]
        bad += [name for name in _OPTIONAL if m.get(name) is not None and not _number(m[name])]
        errors = m.get("errors")
        if not isinstance(errors, dict) or not all(_number(errors.get(n)) for n in ERROR_COUNTS):
            bad.append("errors")
        offsets = m.get("offsets")
        if not isinstance(offsets, list) or not all(
                isinstance(o, list) and len(o) == 3 and isinstance(o[0], dict)
                and (o[1] is None or isinstance(o[1], dict)) and _number(o[2])
                for o in offsets):
            bad.append("offsets")
        if m.get("mode") not in ("exactly-once", "at-least-once"):  # TaskMode's values
            bad.append("mode")
        if bad:
            raise InvalidSlotMetrics(f"Invalid {what}: bad or missing field(s) {', '.join(bad)}")
        assert isinstance(errors, dict) and isinstance(offsets, list)
        scalars: dict[str, Any] = {name: m.get(name) for name in _SCALARS}
        return cls(**scalars,
                   errors=ErrorTotals(**{name: errors[name] for name in ERROR_COUNTS}),
                   offsets=tuple(OffsetCommits(*o) for o in offsets))


_OPTIONAL = ("last_commit_ms", "txn_size_min", "txn_size_max", "txn_size_avg",
             "commit_latency_ms_p50", "commit_latency_ms_p99")
_SCALARS = tuple(name for name in TaskMetricsSnapshot.__dataclass_fields__
                 if name not in ("errors", "offsets"))
_REQUIRED = tuple(name for name in _SCALARS if name not in _OPTIONAL and name != "mode")


@dataclass(frozen=True, slots=True)
class SlotMetrics:
    """The slot's task metrics, sent in place of a keepalive when they changed."""

    snapshot: TaskMetricsSnapshot

    def to_json(self) -> bytes:
        return orjson.dumps({"metrics": self.snapshot.to_object()})

    @classmethod
    def from_object(cls, message: dict[str, Any]) -> SlotMetrics:
        return cls(TaskMetricsSnapshot.from_object(message.get("metrics")))


def parse_slot_message(body: bytes) -> SlotReport | SlotTopics | SlotMetrics:
    """A non-empty slot -> worker frame: a SlotTopics if it has ``active_topics``, a
    SlotMetrics if it has ``metrics``, else a SlotReport; raises
    :class:`InvalidSlotMessage` if it is none of them."""
    message = _object(body, "slot message")
    if "active_topics" in message:
        return SlotTopics.from_object(message)
    if "metrics" in message:
        return SlotMetrics.from_object(message)
    return SlotReport.from_object(message)
