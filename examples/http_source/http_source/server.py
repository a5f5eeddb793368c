"""A tiny event feed to try the HTTP source against: ``python -m http_source.server``.

``GET /streams/<stream>/events?after=<id>&limit=<n>`` answers the events of
``<stream>`` whose id is greater than ``after`` (default 0), oldest first, at
most ``limit`` (default 100, at most 1000) of them::

    {"events": [{"id": 1, "kind": "paid", "amount": "0.37",
                 "created_at": "2026-11-24T06:00:01+00:00", "end_of_batch": false}, ...]}

An unknown stream or path is a 404, a bad parameter a 400, both with
``{"error": "<why>"}``.

The events are made up and the same on every run but for their time: every
stream has the ids 1, 2, 3, ... and its event ``n`` is :func:`event` ``(n, epoch)``,
created ``n`` seconds after the feed's ``--epoch`` (default: when it starts). Recent
times matter: the connector makes ``created_at`` the record's timestamp, and a
broker's time-based retention (``retention.ms``, 7 days by default) deletes records
stamped older than that within minutes of their arrival. They appear ``--rate``
per second per stream from the first request on, up to ``--max-events`` (0: no
end), in upstream *batches*, the way the rows of a database transaction appear
together: a batch ends after every id divisible by 4 or 7 (and after the last
id), and the feed never shows part of a batch.

A reader can still be *inside* a batch: a page of ``limit`` events may end in
the middle of one. With ``--rollback-every K`` (default 0: never), every K-th
batch of a stream is rolled back upstream and written again (the same events,
as a retried database transaction writes them) while a reader is inside it:
the first request that continues inside that batch, ``after`` one of its
events, answers ``409`` with ``{"error": "<why>", "rolled_back": {"first":
<id>, "last": <id>}}``, and the reader must read the batch again from its first
event. Later requests are answered as usual.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

KINDS = ("created", "paid", "shipped")
CENT = Decimal("0.01")
MAX_LIMIT = 1000


def ends_batch(n: int, max_events: int = 0) -> bool:
    """Whether event ``n`` is the last of its upstream batch."""
    return n % 4 == 0 or n % 7 == 0 or n == max_events


def batch_of(n: int, max_events: int = 0) -> tuple[int, int, int]:
    """The batch holding event ``n`` >= 1: ``(index, first id, last id)``, index 1 for
    the batch of event 1."""
    first, last = n, n
    while first > 1 and not ends_batch(first - 1, max_events):
        first -= 1
    while not ends_batch(last, max_events):
        last += 1
    # Batch ends up to ``last``: multiples of 4 or 7, counted once each.
    index = last // 4 + last // 7 - last // 28
    if last == max_events and not (last % 4 == 0 or last % 7 == 0):
        index += 1
    return index, first, last


def event(n: int, epoch: datetime, max_events: int = 0) -> dict[str, Any]:
    """Event ``n`` of any stream of a feed started at ``epoch``, as the feed serves it."""
    amount = (Decimal(n * 37 % 10000) / 100).quantize(CENT)
    return {"id": n, "kind": KINDS[n % 3], "amount": str(amount),
            "created_at": (epoch + timedelta(seconds=n)).isoformat(),
            "end_of_batch": ends_batch(n, max_events)}


class EventFeed:
    """The events every stream shows at this moment (see the module docstring).

    ``rate`` <= 0 shows all ``max_events`` at once; ``epoch`` (default: now, to the
    second) is when event 0 would have been created.
    """

    def __init__(self, streams: Sequence[str], rate: float, max_events: int = 0,
                 epoch: datetime | None = None, rollback_every: int = 0) -> None:
        if rate <= 0 and max_events <= 0:
            raise ValueError("a feed without a rate needs max_events")
        if rollback_every < 0:
            raise ValueError("rollback_every must be >= 0")
        self.epoch = epoch or datetime.now(UTC).replace(microsecond=0)
        self.streams = frozenset(streams)
        self.rate = rate
        self.max_events = max_events
        self.rollback_every = rollback_every
        self._started: float | None = None  # the first request starts the clock
        # Guards _rolled_back: the server answers each request on its own thread.
        self._lock = threading.Lock()
        self._rolled_back: set[tuple[str, int]] = set()  # (stream, last id of the batch)

    def visible(self) -> int:
        """The highest id shown now; the same for every stream. Whole batches only."""
        if self.rate <= 0:
            return self.max_events
        if self._started is None:
            self._started = time.monotonic()
        n = int((time.monotonic() - self._started) * self.rate)
        if self.max_events:
            n = min(n, self.max_events)
        while n > 0 and not ends_batch(n, self.max_events):
            n -= 1
        return n

    def page(self, after: int, limit: int) -> list[dict[str, Any]]:
        """At most ``limit`` events with ids greater than ``after``, oldest first."""
        last = min(self.visible(), after + limit)
        return [self.event(n) for n in range(after + 1, last + 1)]

    def event(self, n: int) -> dict[str, Any]:
        """Event ``n`` of any stream of this feed."""
        return event(n, self.epoch, self.max_events)

    def rollback(self, stream: str, after: int) -> tuple[int, int] | None:
        """``(first, last)`` id of the batch a read of ``stream`` continuing ``after``
        finds rolled back, or None. Each such batch is rolled back once: the first
        time a read continues inside it (``after`` is one of its events but its last)."""
        if self.rollback_every <= 0 or after <= 0 or ends_batch(after, self.max_events):
            return None
        index, first, last = batch_of(after, self.max_events)
        if index % self.rollback_every:
            return None
        with self._lock:
            if (stream, last) in self._rolled_back:
                return None
            self._rolled_back.add((stream, last))
        return first, last

    @property
    def rollbacks(self) -> int:
        """How many batches were rolled back under a reader so far."""
        with self._lock:
            return len(self._rolled_back)


class EventServer(ThreadingHTTPServer):
    """Serves one :class:`EventFeed` over HTTP."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], feed: EventFeed) -> None:
        super().__init__(address, _Handler)
        self.feed = feed

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: EventServer

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if len(parts) != 3 or parts[0] != "streams" or parts[2] != "events":
            self._reply(404, {"error": f"no route {url.path}; use /streams/<stream>/events"})
            return
        if parts[1] not in self.server.feed.streams:
            self._reply(404, {"error": f"no stream {parts[1]!r}; streams: "
                                       f"{', '.join(sorted(self.server.feed.streams))}"})
            return
        query = parse_qs(url.query)
        try:
            after = int(query.get("after", ["0"])[-1])
            limit = int(query.get("limit", ["100"])[-1])
        except ValueError:
            self._reply(400, {"error": "after and limit must be integers"})
            return
        if after < 0 or not 1 <= limit <= MAX_LIMIT:
            self._reply(400, {"error": f"need after >= 0 and 1 <= limit <= {MAX_LIMIT}"})
            return
        rolled_back = self.server.feed.rollback(parts[1], after)
        if rolled_back is not None:
            first, last = rolled_back
            self._reply(409, {"error": f"events {first}..{last} of stream {parts[1]!r} were "
                                       f"rolled back and written again while you read them; "
                                       f"read them again after event {first - 1}",
                              "rolled_back": {"first": first, "last": last}})
            return
        self._reply(200, {"events": self.server.feed.page(after, limit)})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # one line per poll would drown everything else


@contextmanager
def running(feed: EventFeed, host: str = "127.0.0.1", port: int = 0) -> Iterator[EventServer]:
    """Serve ``feed`` from a background thread (port 0: any free port) until the block ends."""
    server = EventServer((host, port), feed)
    # A short poll interval: shutdown() waits for serve_forever to look at its flag.
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="event-feed",
                              daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m http_source.server",
                                     description="Serve a made-up event feed over HTTP.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000, help="0: any free port")
    parser.add_argument("--streams", default="orders,refunds",
                        help="comma-separated stream names (default: orders,refunds)")
    parser.add_argument("--rate", type=float, default=20.0,
                        help="events per second per stream (default: 20)")
    parser.add_argument("--max-events", type=int, default=0,
                        help="events per stream, then no more (default: 0, no end)")
    parser.add_argument("--epoch", type=_utc_time, default=None,
                        help="ISO 8601 time event 0 was created at (default: now)")
    parser.add_argument("--rollback-every", type=int, default=0, metavar="K",
                        help="roll back every K-th batch of a stream while a reader is "
                             "inside it: 409, read it again (default: 0, never)")
    args = parser.parse_args(argv)
    if args.rollback_every < 0:
        parser.error(f"argument --rollback-every: must be >= 0, not {args.rollback_every}")
    feed = EventFeed(args.streams.split(","), args.rate, args.max_events, args.epoch,
                     args.rollback_every)
    server = EventServer((args.host, args.port), feed)
    print(f"Serving streams {args.streams} at {server.url}/streams/<stream>/events "
          f"(epoch {feed.epoch.isoformat()})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def _utc_time(text: str) -> datetime:
    """``--epoch``'s value: an ISO 8601 time, UTC unless it names its offset."""
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


if __name__ == "__main__":
    main()
