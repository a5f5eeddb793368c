"""A user's own transformation and predicate, written against nothing but the contract."""

from __future__ import annotations

import dataclasses
from typing import Any

from connect_runtime import ConfigDef, ConfigException, Importance, SourceRecord, Type

closed: list[str] = []  # what close() was called on, in order


class UpperCaseField:
    """Upper-cases one string field of a dict value."""

    def __init__(self) -> None:
        self.field = ""

    @staticmethod
    def config_def() -> ConfigDef:
        return ConfigDef().define("field", Type.STRING, importance=Importance.HIGH,
                                  documentation="The field to upper-case.")

    def configure(self, configs: dict[str, str]) -> None:
        self.field = configs["field"]
        if self.field == "forbidden":
            raise ConfigException("this field may not be changed", name="field",
                                  value=self.field)
        if self.field == "explode":
            raise RuntimeError("boom")

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value = dict(record.value)
        value[self.field] = value[self.field].upper()
        return dataclasses.replace(record, value=value)

    def close(self) -> None:
        closed.append(f"UpperCaseField({self.field})")

    def version(self) -> str:
        return "2.5"


class IsEven:
    """True for records whose value's ``n`` is even."""

    def configure(self, configs: dict[str, str]) -> None:
        self.field = configs.get("field", "n")

    def test(self, record: SourceRecord) -> bool:
        return bool(record.value[self.field] % 2 == 0)

    def close(self) -> None:
        closed.append("IsEven")


class Failing:
    """A transformation that fails on every record."""

    def configure(self, configs: dict[str, Any]) -> None:
        pass

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        raise ValueError(f"cannot handle {record.topic}")

    def close(self) -> None:
        raise RuntimeError("close failed")


class NotAPlugin:
    """Neither a transformation nor a predicate."""
