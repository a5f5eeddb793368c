"""The HTTP source's configuration keys, shared by the connector and its tasks.

:data:`CONFIG_DEF` is what users set; it drives validation (``PUT
/connector-plugins/.../config/validate`` and every create or update) and the
plugin's config listing. :data:`TASK_CONFIG_DEF` adds the key the connector
sets for each task. Both parse ``dict[str, str]`` into typed values and raise
:class:`ConfigException` naming the first bad key.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from connect_runtime import ConfigDef, ConfigException, Importance, NonEmptyString, Range, Type

URL = "url"
STREAMS = "streams"
TOPIC = "topic"
BATCH_SIZE = "batch.size"
POLL_INTERVAL_MS = "poll.interval.ms"
TASK_STREAMS = "task.streams"

_STREAM_NAME = re.compile(r"[A-Za-z0-9._-]+")


class HttpUrl:
    """An absolute ``http://`` or ``https://`` URL without a query. None passes."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.query:
            raise ConfigException("Must be an http:// or https:// URL without a query, "
                                  "such as http://127.0.0.1:8000", name=name, value=value)

    def __str__(self) -> str:
        return "http:// or https:// URL"


class StreamNames:
    """A non-empty list of distinct stream names (letters, digits, ``.``, ``_``, ``-``).

    Distinct because each stream is a source partition, and exactly-once needs
    every source partition read by one task only. None passes.
    """

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if not value:
            raise ConfigException("List at least one stream", name=name, value=value)
        bad = [s for s in value if not _STREAM_NAME.fullmatch(s)]
        if bad:
            raise ConfigException(f"Not a stream name: {', '.join(map(repr, bad))}",
                                  name=name, value=value)
        twice = sorted({s for s in value if value.count(s) > 1})
        if twice:
            raise ConfigException(f"Listed more than once: {', '.join(twice)}",
                                  name=name, value=value)

    def __str__(self) -> str:
        return "non-empty list of distinct stream names"


CONFIG_DEF = (
    ConfigDef()
    .define(URL, Type.STRING, validator=HttpUrl(), importance=Importance.HIGH,
            documentation="Base URL of the event feed, e.g. http://127.0.0.1:8000.")
    .define(STREAMS, Type.LIST, validator=StreamNames(), importance=Importance.HIGH,
            documentation="Streams to read. Each is one source partition, read by one task.")
    .define(TOPIC, Type.STRING, validator=NonEmptyString(), importance=Importance.HIGH,
            documentation="Topic to write the events to, keyed by stream name.")
    .define(BATCH_SIZE, Type.INT, 100, Range.between(1, 1000), Importance.MEDIUM,
            "Most events asked for in one request (the feed's limit parameter).")
    .define(POLL_INTERVAL_MS, Type.INT, 1000, Range.at_least(10), Importance.MEDIUM,
            "How long to wait before asking again when no stream had new events, "
            "or after a failed request.")
)

TASK_CONFIG_DEF = CONFIG_DEF.merged(
    ConfigDef().define(TASK_STREAMS, Type.LIST, validator=StreamNames(),
                       documentation="The streams of one task (set by the connector).")
)
