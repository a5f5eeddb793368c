"""ConfigDef pieces the transforms share: prefixed keys, Connect's validators, Java's split.

A transform's keys are defined without prefix (``field``) and live in the
connector config under ``transforms.<alias>.field``. :func:`prefixed_def` makes
the definitions with full names, so every parse error and validation message
names the key the user actually wrote.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.config_def import (
    ConfigDef,
    ConfigKey,
    Importance,
    Type,
    Validator,
    to_config_string,
)
from connect_runtime.errors import ConfigException
from connect_runtime.transforms import java_regex


def prefixed_def(config_def: ConfigDef, prefix: str) -> ConfigDef:
    """``config_def`` with every key (and dependent) named ``prefix + name``."""
    if not prefix:
        return config_def
    out = ConfigDef()
    out.config_keys = {prefix + name: prefixed_key(key, prefix)
                       for name, key in config_def.config_keys.items()}
    return out


def prefixed_key(key: ConfigKey, prefix: str, **changes: Any) -> ConfigKey:
    """One key renamed ``prefix + name`` (display name kept, as Connect's ``embed`` does)."""
    return dataclasses.replace(key, name=prefix + key.name,
                               dependents=tuple(prefix + d for d in key.dependents), **changes)


def parse_prefixed(config_def: ConfigDef, configs: Mapping[str, Any],
                   prefix: str) -> dict[str, Any]:
    """Parse ``configs`` (bare names) with ``config_def``; errors name ``prefix + key``.

    Returns every defined key by its bare name, defaults applied.
    """
    full = prefixed_def(config_def, prefix)
    parsed = full.parse({prefix + name: value for name, value in configs.items()})
    return {name[len(prefix):]: value for name, value in parsed.items()}


def java_split(text: str, separator: str) -> list[str]:
    """Java's ``String.split`` with a literal separator: trailing empty parts are dropped."""
    if text == "":
        return [""]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


@dataclass(frozen=True)
class NonEmptyList:
    """Connect's ``NonEmptyListValidator``: a list with at least one element. None passes
    (required-ness is the job of ``NO_DEFAULT``)."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and len(value) == 0:
            raise ConfigException("Empty list", name=name, value=value)

    def __str__(self) -> str:
        return "non-empty list"


@dataclass(frozen=True)
class JavaRegex:
    """Connect's ``RegexValidator``: a Java regular expression this runtime can run."""

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            java_regex.compile_java(value)
        except ConfigException as e:
            raise ConfigException(f"Invalid regex: {e}", name=name, value=value) from None

    def __str__(self) -> str:
        return "valid regex"


@dataclass(frozen=True)
class AllOf:
    """Connect's ``CompositeValidator``: every validator, in order."""

    validators: tuple[Validator, ...]

    @classmethod
    def of(cls, *validators: Validator) -> AllOf:
        return cls(tuple(validators))

    def __call__(self, name: str, value: Any) -> None:
        for validator in self.validators:
            validator(name, value)

    def __str__(self) -> str:
        return ", ".join(str(v) for v in self.validators)


@dataclass(frozen=True)
class Described:
    """A validator given as a function, with the description the docs show
    (Connect's ``LambdaValidator``)."""

    check: Any  # Callable[[str, Any], None]; Any keeps the dataclass hashable and simple
    description: str

    def __call__(self, name: str, value: Any) -> None:
        if value is not None:
            self.check(name, value)

    def __str__(self) -> str:
        return self.description


def unique(items: Iterable[str]) -> list[str]:
    """``items`` without repeats, first occurrence kept (Connect's LinkedHashSet)."""
    return list(dict.fromkeys(items))


REPLACE_NULL_WITH_DEFAULT = "replace.null.with.default"


def define_replace_null_with_default(config_def: ConfigDef) -> ConfigDef:
    """Connect's ``replace.null.with.default`` key, shared by most field transforms."""
    return config_def.define(
        REPLACE_NULL_WITH_DEFAULT, Type.BOOLEAN, True, importance=Importance.MEDIUM,
        documentation="Whether to replace fields that have a default value and that are "
        "null to the default value. When set to true, the default value is used, otherwise "
        "null is used.")


def reason(exc: ConfigException) -> str:
    """What a ConfigException says, without its ``Invalid value v for configuration k:`` lead."""
    text = str(exc)
    if exc.name is not None:
        _, found, rest = text.partition(f"for configuration {exc.name}: ")
        if found and text.startswith("Invalid value "):
            return rest
    return text


def connect_message(exc: ConfigException) -> str:
    """``exc``'s message in Connect's words, ``Invalid value v for configuration k: why``,
    as the validate endpoint shows it (the value as Connect renders it)."""
    if exc.name is None:
        return str(exc)
    shown = "null" if exc.value is None else to_config_string(exc.value)
    return f"Invalid value {shown} for configuration {exc.name}: {reason(exc)}"
