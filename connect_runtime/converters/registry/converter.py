"""What the Avro, Protobuf and JSON Schema converters share: the record path.

For a record's key or value with a schema, :meth:`RegistryConverter.from_connect`

1. finds the **plan** of its Connect schema (made once per schema object, at most
   ``max.schemas.per.subject`` kept): the format's schema text, the name
   RecordNameStrategy uses, and an encoder of values;
2. finds the schema **id** for the record's subject (once per plan and subject:
   registered, looked up, or the latest version's with ``use.latest.version``);
3. writes Confluent's frame (:mod:`.wire`) and the encoded value.

A value without a schema: ``bytes`` pass through (the task serialized them); a
``str``, ``bool``, ``int`` or ``float`` gets Connect's inferred schema (STRING,
BOOLEAN, INT64, FLOAT64); a Struct its own; anything else (a dict, a list) is
refused, asking for a schema.

A value that does not fit its schema raises DataException naming the topic,
the record's key or value and the field path; a registry that cannot be reached
raises ServiceUnavailableException naming the URL (:mod:`.client`).
``configure`` never calls the registry.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from connect_runtime.api.config_def import ConfigDef
from connect_runtime.api.schema import Schema, Struct
from connect_runtime.converters.base import BYTES_LIKE, as_bytes
from connect_runtime.converters.registry.client import Registry
from connect_runtime.converters.registry.config import RegistrySettings, parse_settings
from connect_runtime.converters.registry.wire import header
from connect_runtime.errors import DataException

# A schemaless primitive gets the schema Connect's Values.inferSchema gives its Java
# counterpart (a str is a String, an int a Long): a file source's lines are then
# Avro "string"s, as Kafka Connect's (STRING schema) are.
_PRIMITIVE_SCHEMAS: dict[type, Schema] = {
    str: Schema.STRING, bool: Schema.BOOLEAN, int: Schema.INT64, float: Schema.FLOAT64}


@dataclass
class Plan:
    """Everything a converter derives from one Connect schema, once."""

    schema: Schema
    text: str  # the schema as registered
    record_name: str  # for RecordNameStrategy and TopicRecordNameStrategy
    encode: Callable[[Any], bytes]  # a value of ``schema`` -> the payload after the frame
    datum: Callable[[Any], Any] | None = None  # the format's own value, where it has one
    ids: dict[str, int] = field(default_factory=dict)  # subject -> schema id
    # subject -> encoder with the subject's latest schema (use.latest.version)
    latest: dict[str, Callable[[Any], bytes]] = field(default_factory=dict)


class RegistryConverter:
    """The record path of a Schema Registry converter; subclasses give the format."""

    schema_type: ClassVar[str]  # the registry's name of the format: AVRO, PROTOBUF, JSON
    format_name: ClassVar[str]  # for messages: Avro, Protobuf, JSON Schema

    def __init__(self) -> None:
        self._is_key = False
        self._registry: Registry | None = None
        self._settings: RegistrySettings | None = None
        self._plans: dict[int, Plan] = {}

    @staticmethod
    def config_def() -> ConfigDef:
        raise NotImplementedError

    def _configure_format(self, values: Mapping[str, Any]) -> None:
        """Read the format's own keys from the parsed ``values``."""

    def _make_plan(self, schema: Schema) -> Plan:
        raise NotImplementedError

    def _latest_encoder(self, plan: Plan, text: str) -> Callable[[Any], bytes]:
        """An encoder writing values of ``plan`` with the registered schema ``text``."""
        return plan.encode

    def configure(self, configs: dict[str, str], is_key: bool = False) -> None:
        prefix = "key.converter." if is_key else "value.converter."
        settings, values = parse_settings(configs, is_key, prefix, self.config_def())
        self._is_key = is_key
        self._settings = settings
        self._configure_format(values)
        self.close()
        self._registry = Registry(settings)
        self._plans.clear()

    def close(self) -> None:
        """Close the registry client (its HTTP connections)."""
        if self._registry is not None:
            self._registry.close()

    def from_connect(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            if isinstance(value, BYTES_LIKE):
                return as_bytes(value)  # serialized by the task already
            if isinstance(value, Struct):
                schema = value.schema
            else:
                inferred = _PRIMITIVE_SCHEMAS.get(type(value))
                if inferred is None:
                    raise DataException(
                        f"Converting a {type(value).__name__} to {self.format_name} for "
                        f"topic {topic} failed: the record's {self._what} has no schema. "
                        f"Give the record a {self._what}_schema, or a dataclass "
                        f"{self._what} (its schema is derived), or use a schemaless "
                        "converter such as JsonConverter")
                schema = inferred
        plan = self._plan(topic, schema)
        schema_id, encode = self._id(topic, plan)
        try:
            return header(schema_id) + encode(value)
        except DataException:
            raise
        except Exception as e:
            raise DataException(
                f"Converting {type(value).__name__} to {self.format_name} for topic {topic} "
                f"failed: {_explain(schema, value, e, self._what)}") from None

    @property
    def _what(self) -> str:
        return "key" if self._is_key else "value"

    def _plan(self, topic: str, schema: Schema) -> Plan:
        found = self._plans.get(id(schema))
        if found is not None and found.schema is schema:
            return found
        assert self._settings is not None, "configure() first"
        if len(self._plans) >= self._settings.cache_size:
            self._plans.clear()
        try:
            plan = self._make_plan(schema)
        except DataException as e:
            raise DataException(f"Cannot write the record {self._what}s of this schema for "
                                f"topic {topic!r} as {self.format_name}: {e}") from None
        self._plans[id(schema)] = plan
        return plan

    def _id(self, topic: str, plan: Plan) -> tuple[int, Callable[[Any], bytes]]:
        """(schema id, encoder) for ``plan``'s values on ``topic``."""
        registry, settings = self._registry, self._settings
        assert registry is not None and settings is not None
        subject = settings.subject(topic, self._is_key, plan.record_name)
        found = plan.ids.get(subject)
        if found is not None:
            return found, plan.latest.get(subject, plan.encode)
        if settings.use_latest:
            schema_id, text = registry.latest(subject, plan.text, self.schema_type)
            plan.latest[subject] = self._latest_encoder(plan, text)
        else:
            schema_id = registry.schema_id(subject, plan.text, self.schema_type)
        plan.ids[subject] = schema_id
        return schema_id, plan.latest.get(subject, plan.encode)


def _explain(schema: Schema, value: Any, error: Exception, what: str) -> str:
    """``Schema.validate``'s words for a value that does not fit, else the encoder's."""
    try:
        schema.validate(value)
    except DataException as invalid:
        return f"the record's {what}: {invalid}"
    return f"the record's {what}: {type(error).__name__}: {error}"
