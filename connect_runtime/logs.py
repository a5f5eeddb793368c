"""The log formats of a worker and its task processes: Connect-like text lines,
or JSON lines on request, with the connector and task a line is about.

``connect-runtime worker --log-format json`` (or ``CONNECT_LOG_FORMAT=json``; the
option wins; default ``text``) makes every line the worker's Python code logs one
JSON object (docs/operations.md, "Logs"). The task processes on Spark executors
log in the worker's format too: their slot configures it (``TaskSpec.log_format``).
Lines from Spark's JVM and what processes ``print`` keep their own format.

Context: like Kafka Connect's MDC ``connector.context``, a line logged while a
:class:`LogContext` is in force carries the connector and task it is about: the
text format puts ``[orders|task-0] `` (or ``[orders|worker] `` for the connector
itself, on the worker) before the message, the JSON format adds ``connector``
and ``task`` fields. Any logger gets it, so connector authors just use
``logging.getLogger(__name__)``. A task process is in its task's context for as
long as its slot runs (:func:`process_log_context`: every thread of it). A
process hosting several tasks of a connector (``tasks.per.process``) runs each
on a thread in that task's context (:func:`log_context`), and the threads the
runtime starts for a task carry it on (:func:`thread_in_context`); a thread the
task's own code starts has the process's context, ``[orders|tasks-0,1,2] ``. The
worker is in a connector's only while it calls that connector's methods, on the
calling thread (:func:`log_context`).

Lifecycle lines (a connector created, a task started, producers fenced...)
carry their facts as ``extra`` fields of the log record::

    log.info("task %s-%d started ...", c, t, extra={"event": "task_started",
             "connector": c, "task": t, "generation": g})

The text format shows the message only; the JSON format adds the fields named in
:data:`EVENT_FIELDS`, and only those (libraries put extras of their own on records).
A failure's line quotes :func:`trace_headline` of its trace, not the whole trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from connect_runtime.errors import ConfigException

LOG_FORMAT_ENV = "CONNECT_LOG_FORMAT"
LOG_FORMATS = ("text", "json")
# Kafka Connect's connect-log4j.properties pattern, "[%d] %p %X{connector.context}%m (%c:%L)%n",
# without the line number.
TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(connector_context)s%(message)s (%(name)s)"
EVENT_FIELDS = ("event", "connector", "task", "generation", "tasks", "producers", "restart",
                "attempt", "host", "pid", "worker", "epoch", "automatic", "call", "file")
"""The ``extra`` fields a JSON line carries when a record has them (docs/operations.md)."""

_QUIET_LOGGERS = ("py4j", "httpx", "httpcore", "uvicorn.access")


@dataclass(frozen=True, slots=True)
class LogContext:
    """Whose work a line is part of: task ``task`` of ``connector``, or with
    ``task`` None the connector itself (its instance, on the worker), or with
    ``shared`` the tasks that share one process (a line none of them is named in)."""

    connector: str
    task: int | None = None
    shared: tuple[int, ...] = ()

    @property
    def prefix(self) -> str:
        """Kafka Connect's ``connector.context``: ``[orders|task-0] ``, ``[orders|worker] ``;
        ours for a shared process, ``[orders|tasks-0,1,2] ``."""
        if self.shared:
            scope = "tasks-" + ",".join(str(t) for t in self.shared)
        else:
            scope = "worker" if self.task is None else f"task-{self.task}"
        return f"[{self.connector}|{scope}] "


# The calling thread's (asyncio task's) context: the worker's, around calls into
# a connector instance. contextvars, not threading.local: Starlette's
# run_in_threadpool carries it into the threads it runs blocking work on.
_thread_context: ContextVar[LogContext | None] = ContextVar("connect_log_context", default=None)
# A task process's context, for every thread in it (its task's own threads, the
# slot channel's, librdkafka callbacks). Written only by the thread running the
# slot (process_log_context), read by any: Spark runs each task in a Python
# process of its own, and a reused process runs its tasks one after another.
_process_context: LogContext | None = None


@contextlib.contextmanager
def log_context(context: LogContext) -> Iterator[None]:
    """Lines the calling thread logs inside the block carry ``context``."""
    token = _thread_context.set(context)
    try:
        yield
    finally:
        _thread_context.reset(token)


@contextlib.contextmanager
def process_log_context(context: LogContext) -> Iterator[None]:
    """Lines any thread of this process logs inside the block carry ``context``
    (unless the thread is in a :func:`log_context` of its own). Only for a
    process that works for that one task meanwhile: a slot's."""
    global _process_context
    _process_context = context
    try:
        yield
    finally:
        _process_context = None


def thread_in_context(target: Callable[..., object], *, name: str,
                      args: tuple[object, ...] = ()) -> threading.Thread:
    """A daemon thread (not started) that runs ``target(*args)`` in the calling
    thread's :func:`log_context`: a new thread does not inherit contextvars, and
    in a process shared by several tasks a helper thread of one task must log as
    that task."""
    context = contextvars.copy_context()
    return threading.Thread(target=context.run, args=(target, *args), name=name, daemon=True)


def current_log_context() -> LogContext | None:
    """The context a line logged now, on this thread, carries."""
    return _thread_context.get() or _process_context


class ContextFilter(logging.Filter):
    """Puts the current :class:`LogContext` on each record a handler emits:
    ``connector_context`` (the text format's prefix, "" without one), and
    ``connector`` and ``task`` unless the record has its own (a lifecycle line's
    ``extra``). A handler's filter, so it sees every record the handler emits,
    whichever logger it came from."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = current_log_context()
        if context is None:
            record.connector_context = ""
            return True
        record.connector_context = context.prefix
        record.__dict__.setdefault("connector", context.connector)
        if context.task is not None:
            record.__dict__.setdefault("task", context.task)
        return True


class JsonLinesFormatter(logging.Formatter):
    """One JSON object per record, on one line: ``ts`` (ISO 8601, UTC, ms),
    ``level``, ``logger``, ``message``, the :data:`EVENT_FIELDS` the record has,
    and ``exc`` (the formatted traceback) when it carries an exception.

    The output is ASCII whatever the message holds (``json.dumps`` escapes
    newlines, quotes and non-ASCII characters): a log shipper splitting on
    newlines gets whole objects, and a stream whose encoding is not UTF-8 cannot
    mangle a line into invalid JSON.
    """

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in EVENT_FIELDS:
            value = record.__dict__.get(key)
            if value is not None:
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exc"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def trace_headline(trace: str | None) -> str:
    """The line of a status trace that says what happened, for a one-line log.

    A Python traceback's first line ("Traceback (most recent call last):") says
    nothing: its exception line does (of the last traceback, when exceptions are
    chained: the one raised last). Any other trace's first line is its headline.
    """
    lines = [line for line in (trace or "").splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (")]
    if starts:
        # Frames are indented; the exception line is the first line that is not.
        for line in lines[starts[-1] + 1:]:
            if not line[0].isspace():
                return line
    return lines[0] if lines else ""


def log_format(option: str | None, environ: Mapping[str, str]) -> str:
    """The format to use: ``option`` (``--log-format``, already checked) if given,
    else ``CONNECT_LOG_FORMAT``, else ``text``. Raises :class:`ConfigException`
    naming the variable for a value that is neither ``text`` nor ``json``."""
    if option is not None:
        return option
    value = environ.get(LOG_FORMAT_ENV, "").strip()
    if not value:
        return "text"
    if value.lower() not in LOG_FORMATS:
        raise ConfigException(f"{LOG_FORMAT_ENV}={value!r} is not a log format: use "
                              f"{' or '.join(LOG_FORMATS)} (or pass --log-format)")
    return value.lower()


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Send the root logger's records to stderr in ``log_format`` (``text`` or
    ``json``), with their :class:`LogContext`. Like :func:`logging.basicConfig`,
    a no-op once the root logger has handlers.

    The worker's CLI calls it first thing; a task slot calls it in its Spark
    Python worker, whose root logger has no handler (Python would print only
    warnings and errors, as bare messages)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLinesFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT, defaults={"connector_context": ""}))
    handler.addFilter(ContextFilter())
    logging.basicConfig(level=level, handlers=[handler])
    if log_format == "json":
        # Python warnings (a library's DeprecationWarning, say) would otherwise be
        # printed as bare text lines between the JSON ones.
        logging.captureWarnings(True)
    for quiet in _QUIET_LOGGERS:
        logging.getLogger(quiet).setLevel(logging.WARNING)


def process_log_format() -> str:
    """The format this process logs in: ``json`` if a handler of the root logger
    writes JSON lines (:func:`configure_logging`), else ``text``. The leader puts
    it in its task specs, so that task processes log as the worker does."""
    json_lines = any(isinstance(h.formatter, JsonLinesFormatter)
                     for h in logging.getLogger().handlers)
    return "json" if json_lines else "text"
