"""The bundled predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, NonEmptyString, Type
from connect_runtime.errors import ConfigException
from connect_runtime.transforms.base import PREDICATES_PACKAGE, Bundled
from connect_runtime.transforms.configs import AllOf, JavaRegex
from connect_runtime.transforms.java_regex import compile_java

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord


class BundledPredicate(Bundled):
    """Base of the bundled predicates: ``test`` instead of ``apply``."""

    kind = "predicate"

    def test(self, record: SourceRecord) -> bool:
        raise NotImplementedError


class TopicNameMatches(BundledPredicate):
    """True for records whose whole topic name matches ``pattern`` (a Java regex)."""

    connect_name = f"{PREDICATES_PACKAGE}.TopicNameMatches"
    CONFIG_DEF = ConfigDef().define(
        "pattern", Type.STRING, validator=AllOf.of(NonEmptyString(), JavaRegex()),
        importance=Importance.MEDIUM,
        documentation="A Java regular expression for matching against the name of a "
        "record's topic.")

    def configured(self, values: dict[str, Any]) -> None:
        try:
            self._pattern = compile_java(values["pattern"])
        except ConfigException as e:
            raise self.config_error("pattern", values["pattern"], "entry must be a "
                                    f"Java-compatible regular expression: {e}") from None

    def test(self, record: SourceRecord) -> bool:
        return record.topic is not None and self._pattern.fullmatch(record.topic) is not None


class HasHeaderKey(BundledPredicate):
    """True for records with at least one header named ``name``."""

    connect_name = f"{PREDICATES_PACKAGE}.HasHeaderKey"
    CONFIG_DEF = ConfigDef().define(
        "name", Type.STRING, validator=NonEmptyString(), importance=Importance.MEDIUM,
        documentation="The header name.")

    def configured(self, values: dict[str, Any]) -> None:
        self._name: str = values["name"]

    def test(self, record: SourceRecord) -> bool:
        return any(name == self._name for name, _ in record.headers or ())


class RecordIsTombstone(BundledPredicate):
    """True for tombstones: records whose value is null."""

    connect_name = f"{PREDICATES_PACKAGE}.RecordIsTombstone"

    def test(self, record: SourceRecord) -> bool:
        return record.value is None
