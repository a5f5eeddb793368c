"""SetSchemaMetadata: set the name and/or version of the key or value schema."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from connect_runtime.api.config_def import ConfigDef, Importance, Type
from connect_runtime.api.schema import Struct
from connect_runtime.transforms.base import TRANSFORMS_PACKAGE, Sided, with_sides
from connect_runtime.transforms.configs import (
    REPLACE_NULL_WITH_DEFAULT,
    define_replace_null_with_default,
)
from connect_runtime.transforms.data import values_of

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord


@with_sides
class SetSchemaMetadata(Sided):
    """Set the schema name, version or both on the record's key or value schema.

    A Struct key/value is rebuilt on the renamed schema. A record without a
    schema is a DataException, unless its key/value is null too (then it passes).
    """

    connect_name = f"{TRANSFORMS_PACKAGE}.SetSchemaMetadata"
    CONFIG_DEF = define_replace_null_with_default(
        ConfigDef()
        .define("schema.name", Type.STRING, None, importance=Importance.HIGH,
                documentation="Schema name to set.")
        .define("schema.version", Type.INT, None, importance=Importance.HIGH,
                documentation="Schema version to set."))

    def configured(self, values: dict[str, Any]) -> None:
        self._name: str | None = values["schema.name"]
        self._version: int | None = values["schema.version"]
        if self._name is None and self._version is None:
            raise self.config_error(None, None, "Neither schema name nor version configured")
        self._with_default: bool = values[REPLACE_NULL_WITH_DEFAULT]

    def apply(self, record: SourceRecord) -> SourceRecord:
        schema, value = self.schema_of(record), self.value_of(record)
        if schema is None:
            if value is None:
                return record
            raise self.data_error(record, f"the {self.part} has no schema to update "
                                  "[updating schema metadata]")
        updated = schema.replace(
            name=self._name if self._name is not None else schema.name,
            version=self._version if self._version is not None else schema.version)
        if isinstance(value, Struct):
            value = Struct(updated, values_of(value, updated.fields, self._with_default))
        return self.updated(record, updated, value)
