"""The worker's log formats: Connect-like text lines, or JSON lines on request.

``connect-runtime worker --log-format json`` (or ``CONNECT_LOG_FORMAT=json``; the
option wins; default ``text``) makes every line the worker's Python code logs one
JSON object (docs/operations.md, "Logs"). Lines from Spark's JVM and from task
processes on executors are not the worker's and keep their own format.

Lifecycle lines (a connector created, a task started, producers fenced...)
carry their facts as ``extra`` fields of the log record::

    log.info("task %s-%d started ...", c, t, extra={"event": "task_started",
             "connector": c, "task": t, "generation": g})

The text format shows the message only; the JSON format adds the fields named in
:data:`EVENT_FIELDS`, and only those (libraries put extras of their own on records).
A failure's line quotes :func:`trace_headline` of its trace, not the whole trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from connect_runtime.errors import ConfigException

LOG_FORMAT_ENV = "CONNECT_LOG_FORMAT"
LOG_FORMATS = ("text", "json")
TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
EVENT_FIELDS = ("event", "connector", "task", "generation", "tasks", "producers", "restart",
                "attempt", "host", "pid", "worker", "epoch", "automatic")
"""The ``extra`` fields a JSON line carries when a record has them (docs/operations.md)."""

_QUIET_LOGGERS = ("py4j", "httpx", "httpcore", "uvicorn.access")


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
    ``json``). Like :func:`logging.basicConfig`, a no-op once the root logger
    has handlers."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonLinesFormatter() if log_format == "json"
                         else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])
    if log_format == "json":
        # Python warnings (a library's DeprecationWarning, say) would otherwise be
        # printed as bare text lines between the JSON ones.
        logging.captureWarnings(True)
    for quiet in _QUIET_LOGGERS:
        logging.getLogger(quiet).setLevel(logging.WARNING)
