"""Transforms that choose a record's topic, or drop it: RegexRouter, TimestampRouter, Filter."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type
from connect_runtime.errors import ConfigException
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Bundled
from connect_runtime.transforms.configs import JavaRegex
from connect_runtime.transforms.java_regex import Replacement, compile_java, replace_first
from connect_runtime.transforms.simple_date_format import SimpleDateFormat

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord


class RegexRouter(Bundled):
    """Rename the topic of records whose whole topic matches ``regex``.

    The new topic is Java's ``Matcher.replaceFirst(replacement)``: ``$1`` and
    ``${name}`` insert groups (see :mod:`.java_regex`). Other records pass unchanged.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.RegexRouter"
    CONFIG_DEF = (
        ConfigDef()
        .define("regex", Type.STRING, validator=JavaRegex(), importance=Importance.HIGH,
                documentation="Regular expression to use for matching.")
        .define("replacement", Type.STRING, importance=Importance.HIGH,
                documentation="Replacement string."))

    def configured(self, values: dict[str, Any]) -> None:
        self._regex = compile_java(values["regex"])
        try:
            self._replacement = Replacement.parse(values["replacement"], self._regex)
        except ConfigException as e:
            raise self.config_error("replacement", values["replacement"], str(e)) from None

    def apply(self, record: SourceRecord) -> SourceRecord:
        if not self._regex.fullmatch(record.topic):
            return record
        topic = replace_first(self._regex, record.topic, self._replacement)
        return dataclasses.replace(record, topic=topic)


class TimestampRouter(Bundled):
    """Set the topic from ``topic.format`` with the original topic and the record timestamp.

    ``${topic}`` and ``${timestamp}`` are replaced; the timestamp is formatted
    with ``timestamp.format`` (a Java ``SimpleDateFormat`` pattern) in UTC. A
    record without a timestamp is a DataException.
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.TimestampRouter"
    CONFIG_DEF = (
        ConfigDef()
        .define("topic.format", Type.STRING, "${topic}-${timestamp}",
                importance=Importance.HIGH, documentation="Format string which can contain "
                "<code>${topic}</code> and <code>${timestamp}</code> as placeholders for the "
                "topic and timestamp, respectively.")
        .define("timestamp.format", Type.STRING, "yyyyMMdd", importance=Importance.HIGH,
                documentation="Format string for the timestamp that is compatible with "
                "<code>java.text.SimpleDateFormat</code>."))

    def configured(self, values: dict[str, Any]) -> None:
        self._topic_format: str = values["topic.format"]
        try:
            self._timestamp_format = SimpleDateFormat(values["timestamp.format"])
        except ConfigException as e:
            raise self.config_error("timestamp.format", values["timestamp.format"],
                                    str(e)) from None

    def apply(self, record: SourceRecord) -> SourceRecord:
        if record.timestamp is None:
            raise self.data_error(record, "the record has no timestamp")
        formatted = self._timestamp_format.format(record.timestamp)
        # Replaced in this order, as Connect does: a topic containing "${timestamp}" gets it too.
        topic = self._topic_format.replace("${topic}", record.topic)
        return dataclasses.replace(record, topic=topic.replace("${timestamp}", formatted))


class Filter(Bundled):
    """Drop every record; meant to be used with a predicate (``transforms.<alias>.predicate``)."""

    connect_name = f"{TRANSFORMS_PACKAGE}.Filter"

    def apply(self, record: SourceRecord) -> None:
        return None
