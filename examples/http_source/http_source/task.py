"""The HTTP source task: reads its streams page by page and resumes where it committed.

What a task stores with every record (flat dicts of primitives, as the
framework requires; they are JSON in the offsets topic):

* source partition ``{"stream": "<name>"}``: one per stream;
* source offset ``{"after": <id>}``: the ``after`` parameter of the *next*
  request, which is the id of the event the record carries. A restarted task
  asks for ``?after=<last committed id>`` and gets exactly the events after it:
  none lost, none repeated.

Each record: key the stream name (so a stream's events keep their order in one
Kafka partition), value an :class:`Event` (its Connect schema, named
``http_source.Event``, is derived from the dataclass), timestamp the event's
``created_at``.

With ``transaction.boundary=connector`` the task ends each transaction with the
last event of an upstream batch (``end_of_batch``), so ``read_committed``
consumers see whole batches or nothing. Otherwise it leaves the boundaries to
the framework (``poll``: one transaction per poll; ``interval``: one per
``transaction.boundary.interval.ms``).

A request that fails (the feed is down, or answers 5xx) is logged and retried
after ``poll.interval.ms``; the offset does not move, so nothing is skipped. A
4xx answer or a malformed event fails the task with an error naming the stream,
but for a 409: the upstream batch the task was reading page by page was rolled
back and written again. With ``transaction.boundary=connector`` its first pages
are still in the open transaction, so the task rewinds it
(``TransactionContext.rewind_transaction``): a new instance reads the whole
batch again from the last committed offset. Under the other boundaries those
pages are committed already (consumers were never promised whole batches
there), so the task reads on from where it is.

Logging is plain :mod:`logging` under the module's name: the worker adds the
connector and task to each line, and ``/admin/loggers`` sets the level
(``http_source`` to DEBUG shows every page fetched).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

import httpx

from connect_runtime import (
    ConnectError,
    DataException,
    InvalidOffsetException,
    Schema,
    SourceRecord,
    SourceTask,
    TransactionContext,
    connect_schema,
)
from http_source import __version__
from http_source.config import (
    BATCH_SIZE,
    POLL_INTERVAL_MS,
    TASK_CONFIG_DEF,
    TASK_STREAMS,
    TOPIC,
    URL,
)

log = logging.getLogger(__name__)

STREAM_FIELD = "stream"
AFTER_FIELD = "after"
# A feed that has not answered by then is treated as down: retried at the next poll.
REQUEST_TIMEOUT_S = 10.0


@connect_schema("http_source.Event", version=1)
@dataclass(frozen=True, slots=True)
class Event:
    """One event of a stream, as written to Kafka (its schema: ``schema_of(Event)``)."""

    id: int
    stream: str
    kind: str
    amount: Annotated[Decimal, Schema.decimal(2)]
    created_at: datetime
    end_of_batch: bool

    @classmethod
    def from_json(cls, stream: str, item: Any) -> Event:
        """Parse one event of the feed; DataException names the stream and the event."""
        try:
            event = cls(item["id"], stream, item["kind"], Decimal(item["amount"]),
                        datetime.fromisoformat(item["created_at"]), item["end_of_batch"])
        except (KeyError, TypeError, ValueError, ArithmeticError) as e:
            raise DataException(f"Stream {stream!r} sent a malformed event {item!r}: "
                                f"{type(e).__name__}: {e}") from None
        if type(event.id) is not int:
            raise DataException(f"Stream {stream!r} sent an event whose id is not an integer: "
                                f"{item!r}")
        return event


class RolledBack(Exception):
    """The feed rolled back the batch the task is reading (its 409): read it again."""


def source_partition(stream: str) -> dict[str, str]:
    """The source partition of ``stream``."""
    return {STREAM_FIELD: stream}


def source_offset(event_id: int) -> dict[str, int]:
    """The source offset stored with event ``event_id``: read after it next time."""
    return {AFTER_FIELD: event_id}


def resume_after(stream: str, offset: Mapping[str, object] | None) -> int:
    """Where to resume ``stream`` from its committed ``offset``: 0 if there is none.

    Anything but ``{"after": <int >= 0>}`` raises InvalidOffsetException naming the
    stream: guessing would lose or repeat events.
    """
    if offset is None:
        return 0
    after = offset.get(AFTER_FIELD)
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InvalidOffsetException(
            f"Stream {stream!r} has the committed offset {dict(offset)!r}; expected "
            f"{{{AFTER_FIELD!r}: <event id >= 0>}}")
    return after


class HttpSourceTask(SourceTask):
    """Polls its streams in turn (see the module docstring).

    ``stop`` may come from another thread while ``poll`` waits: it only sets an
    event. There is nothing to close: each request opens its own connection.
    """

    def __init__(self) -> None:
        # Cheap and opens nothing: the framework also builds one on the leader.
        self._stopping = threading.Event()
        self._after: dict[str, int] = {}
        self._streams: list[str] = []
        self._cursor = 0
        self._idle = 0
        self._mid_batch = False
        self._txn: TransactionContext | None = None

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        values = TASK_CONFIG_DEF.parse(config)
        self._url: str = values[URL].rstrip("/")
        self._topic: str = values[TOPIC]
        self._limit: int = values[BATCH_SIZE]
        self._wait_s: float = values[POLL_INTERVAL_MS] / 1000
        self._streams = values[TASK_STREAMS]
        self._txn = self.context.transaction_context()  # None unless boundary=connector
        committed = self.context.offset_storage_reader.offsets(
            [source_partition(stream) for stream in self._streams])
        self._after = {stream: resume_after(stream, offset)
                       for stream, (_, offset) in zip(self._streams, committed, strict=True)}
        log.info("Reading %s from %s, after event ids %s", ", ".join(self._streams),
                 self._url, self._after)

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set():
            return None
        stream = self._streams[self._cursor]
        try:
            events = self._fetch(stream)
        except RolledBack as e:  # a 409: see _rolled_back
            self._rolled_back(e)
            return None
        if not events:
            self._idle += 1
            if not self._mid_batch:
                self._next_stream()
            if events is None or self._idle >= len(self._streams):
                self._idle = 0
                self._stopping.wait(self._wait_s)  # a failed request, or nothing new anywhere
            return None
        self._idle = 0
        self._after[stream] = events[-1].id
        records = [self._record(event) for event in events]
        if self._txn is not None:
            # transaction.boundary=connector: commit right after the last complete batch.
            ends = [record for record, event in zip(records, events, strict=True)
                    if event.end_of_batch]
            if ends:
                self._txn.commit_transaction(ends[-1])
            # Stay on this stream while its batch is open: another stream's records
            # would otherwise join the transaction that holds part of the batch.
            self._mid_batch = not events[-1].end_of_batch
        if not self._mid_batch:
            self._next_stream()
        return records

    def _rolled_back(self, error: RolledBack) -> None:
        """The batch being read was rolled back upstream: give up what was read of it."""
        if self._txn is None:  # its first pages are committed already: read on
            log.warning("%s; without transaction.boundary=connector the events already "
                        "sent stay, reading on", error)
            return
        # The open transaction holds the batch's first pages: give it up. After this
        # poll a new instance of this task reads the batch again from the committed offset.
        log.info("%s; rewinding the open transaction", error)
        self._txn.rewind_transaction()

    def _fetch(self, stream: str) -> list[Event] | None:
        """The next page of ``stream``: [] if there is nothing new, None if the request
        failed; RolledBack if the batch being read was rolled back (a 409)."""
        url = f"{self._url}/streams/{stream}/events"
        try:
            response = httpx.get(url, params={"after": self._after[stream], "limit": self._limit},
                                 timeout=REQUEST_TIMEOUT_S)
        except httpx.TransportError as e:
            log.warning("Stream %r: GET %s failed (%s); retrying", stream, url, e)
            return None
        if response.status_code >= 500:
            log.warning("Stream %r: GET %s answered %d; retrying", stream, response.url,
                        response.status_code)
            return None
        if response.status_code == 409:
            raise RolledBack(f"Stream {stream!r}: GET {response.url} answered 409: "
                             f"{response.text[:200]}")
        if response.status_code != 200:
            raise ConnectError(f"Stream {stream!r}: GET {response.url} answered "
                               f"{response.status_code}: {response.text[:200]}")
        try:
            items = response.json()["events"]
        except (ValueError, KeyError, TypeError) as e:
            raise DataException(f"Stream {stream!r}: GET {response.url} did not answer "
                                f"{{\"events\": [...]}}: {response.text[:200]!r}") from e
        events = [Event.from_json(stream, item) for item in items]
        previous = self._after[stream]
        for event in events:
            if event.id <= previous:  # the offset would then not say where to resume
                raise DataException(f"Stream {stream!r}: event {event.id} came after event "
                                    f"{previous}; ids must increase")
            previous = event.id
        log.debug("Stream %r: %d new event(s) after %d", stream, len(events),
                  self._after[stream])
        return events

    def _record(self, event: Event) -> SourceRecord:
        return SourceRecord(
            source_partition(event.stream), source_offset(event.id), self._topic,
            key=event.stream, value=event,
            timestamp=int(event.created_at.timestamp() * 1000))

    def _next_stream(self) -> None:
        self._cursor = (self._cursor + 1) % len(self._streams)

    def stop(self) -> None:
        self._stopping.set()
