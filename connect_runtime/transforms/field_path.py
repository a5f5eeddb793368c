"""KIP-821 field paths (``field.syntax.version``): a field name, or a dotted path into nested data.

``V1`` (the default) reads the whole text as one field name. ``V2`` splits it on
dots into steps; a step wrapped in backticks may contain dots (``\\`foo.bar\\`.baz``
is the field ``baz`` of the field ``foo.bar``); a backtick that is not at a
step's edge is part of the name; inside a wrapped step, a backslash before a
backtick that would close it keeps the backtick in the name. A wrapped step
whose closing backtick is missing is a ConfigException.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.config_def import CaseInsensitiveValidString, ConfigDef, Importance, Type
from connect_runtime.api.schema import Field, Schema, Struct
from connect_runtime.errors import ConfigException, DataException

FIELD_SYNTAX_VERSION = "field.syntax.version"


class FieldSyntaxVersion(enum.Enum):
    """How a field path is read: V1 one name, V2 dotted steps with backtick quoting."""

    V1 = "V1"
    V2 = "V2"

    @classmethod
    def parse(cls, value: str) -> FieldSyntaxVersion:
        return cls(value.strip().upper())


def define_field_syntax_version(config_def: ConfigDef) -> ConfigDef:
    """Connect's ``field.syntax.version`` key (KIP-821)."""
    return config_def.define(
        FIELD_SYNTAX_VERSION, Type.STRING, "V1", CaseInsensitiveValidString.in_("V1", "V2"),
        Importance.HIGH,
        "Defines the version of the syntax to access fields. If set to `V1`, then the field "
        "paths are limited to access the elements at the root level of the struct or map. If "
        "set to `V2`, the syntax will support accessing nested elements. To access nested "
        "elements, dotted notation is used. If dots are already included in the field name, "
        "then backtick pairs can be used to wrap field names containing dots. E.g. to access "
        "the subfield `baz` from a field named \"foo.bar\" in a struct/map the following "
        "format can be used to access its elements: \"`foo.bar`.baz\".")


@dataclass(frozen=True)
class FieldPath:
    """The steps to one field; ``text`` is the path as configured."""

    text: str
    steps: tuple[str, ...]

    @classmethod
    def parse(cls, text: str, version: FieldSyntaxVersion) -> FieldPath:
        """ConfigException (naming no key: the caller knows it) for an unclosed backtick."""
        if version is FieldSyntaxVersion.V1:
            return cls(text, (text,))
        return cls(text, tuple(_steps_v2(text)))

    def field_from(self, schema: Schema) -> Field | None:
        """The field at this path in a STRUCT schema, or None."""
        current = schema
        for step in self.steps[:-1]:
            found = current.field(step)
            if found is None:
                return None
            current = found.schema
        return current.field(self.steps[-1]) if self.steps else None

    def value_from_struct(self, struct: Struct, with_default: bool) -> Any:
        """The value at this path (None if a step is missing or null)."""
        current = struct
        for step in self.steps[:-1]:
            if current.schema.field(step) is None:
                return None
            nested = current.get(step)
            if nested is None:
                return None
            if not isinstance(nested, Struct):
                raise DataException("Only Struct objects supported for [nested field access], "
                                    f"found: {type(nested).__name__}")
            current = nested
        last = self.steps[-1]
        if current.schema.field(last) is None:
            return None
        return current.get(last) if with_default else current[last]

    def value_from_map(self, data: Mapping[str, Any]) -> Any:
        """The value at this path in nested dicts (None if a step is missing or null)."""
        current = data
        for step in self.steps[:-1]:
            nested = current.get(step)
            if nested is None:
                return None
            if not isinstance(nested, Mapping):
                raise DataException("Only dict values supported in absence of schema for "
                                    f"[nested field access], found: {type(nested).__name__}")
            current = nested
        return current.get(self.steps[-1])


def _steps_v2(path: str) -> list[str]:
    steps: list[str] = []
    i = 0
    while i < len(path):
        if path[i] != "`":
            dot = path.find(".", i)
            end = len(path) if dot < 0 else dot
            steps.append(path[i:end])
            i = end + 1
        else:
            step, i = _wrapped_step(path, i)
            steps.append(step)
    if path.endswith("."):
        steps.append("")
    return steps


def _wrapped_step(path: str, opening: int) -> tuple[str, int]:
    """The step wrapped by the backtick at ``opening``; (name, index after its dot)."""
    name: list[str] = []
    start = i = opening + 1
    while True:
        i = path.find("`", i)
        if i < 0:
            raise _incomplete(path, opening)
        escaped = path[i - 1] == "\\"
        if i == len(path) - 1:  # the last character closes the step
            if escaped:
                raise _incomplete(path, opening)
            name.append(path[start:i])
            return "".join(name), i + 1
        if path[i + 1] != ".":  # not at the step's edge: part of the name
            i += 1
            continue
        if escaped:  # \` before a dot: a literal backtick, keep looking
            name.append(path[start:i - 1] + "`")
            i += 1
            start = i
            continue
        name.append(path[start:i])
        return "".join(name), i + 2


def _incomplete(path: str, opening: int) -> ConfigException:
    return ConfigException(f"Incomplete backtick pair in path: [{path}], consider adding a "
                           f"backslash before backtick at position {opening} to escape it")
