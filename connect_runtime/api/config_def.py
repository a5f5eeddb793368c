"""Declaring, parsing and validating configuration keys, the Kafka Connect way.

A :class:`ConfigDef` is an ordered set of :class:`ConfigKey` definitions. It turns
the ``dict[str, str]`` a user submits into typed values (:meth:`ConfigDef.parse`,
which raises on the first problem) or into one :class:`ConfigValue` per key with
every problem collected (:meth:`ConfigDef.validate`, which never raises for a bad
value). The latter feeds the REST ``/config/validate`` endpoint, so its messages
and the ``to_dict`` / ``to_info_dict`` shapes match Kafka Connect's JSON.

Invariants:

* A key defined with ``default=NO_DEFAULT`` is required. ``default=None`` means
  optional with a null default. A value of ``None`` in the submitted props counts
  as "not set": the default applies, or the key is reported missing.
* Defaults are parsed with the key's type and checked by its validator when the
  key is defined, so a bad default fails at import time, not on a user request.
* Parsed types: BOOLEAN -> bool, STRING/CLASS/PASSWORD -> str (trimmed),
  INT/LONG -> int (32/64-bit range), DOUBLE -> float, LIST -> list[str].
  CLASS values stay names; whoever uses them (plugins, converters) loads them.
* PASSWORD values are kept as given but never rendered: ``to_dict``,
  ``to_info_dict`` and every error message show ``[hidden]``.
* Validators accept ``None`` (an unset optional key); required-ness is the job
  of ``NO_DEFAULT``, not of validators.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol

from connect_runtime.errors import ConfigException


class Type(Enum):
    """The type of a configuration value; ``value`` is the Connect name."""

    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    LIST = "LIST"
    CLASS = "CLASS"
    PASSWORD = "PASSWORD"


class Importance(Enum):
    """How much a user needs to care about a configuration key (for docs and UIs)."""

    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


class Width(Enum):
    """How wide a UI field for the value should be (Connect's ConfigDef.Width)."""

    NONE = "NONE"
    SHORT = "SHORT"
    MEDIUM = "MEDIUM"
    LONG = "LONG"


class _NoDefault(Enum):
    # An Enum member is a singleton that survives pickling and deepcopy, so
    # ``key.default is NO_DEFAULT`` stays true for copied definitions.
    NO_DEFAULT = "NO_DEFAULT"

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT = _NoDefault.NO_DEFAULT
"""Default of a required key: parsing fails if the key is not set."""

HIDDEN = "[hidden]"

_INT_RANGE = {Type.INT: (-(2**31), 2**31 - 1), Type.LONG: (-(2**63), 2**63 - 1)}
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Connect splits lists on commas and eats the whitespace around them.
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


class Validator(Protocol):
    """Checks one value. ``str(validator)`` describes the rule for the docs.

    ``__call__`` raises :class:`ConfigException` (with ``name`` and ``value``) if
    ``value`` is invalid. It receives the parsed value, or ``None`` when an
    optional key is unset, and must accept ``None``.
    """

    def __call__(self, name: str, value: Any) -> None: ...

    def __str__(self) -> str: ...


# ---------------------------------------------------------------------------
# Validators


@dataclass(frozen=True)
class Range:
    """A number within ``[min, max]`` (inclusive; either bound optional). None passes."""

    min: float | None = None
    max: float | None = None

    @classmethod
    def at_least(cls, min: float) -> Range:
        """Values ``>= min``, no upper bound."""
        return cls(min, None)

    @classmethod
    def between(cls, min: float, max: float) -> Range:
        """Values with ``min <= value <= max`` (both ends included)."""
        return cls(min, max)

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigException("Value must be a number", name=name, value=value)
        if self.min is not None and value < self.min:
            raise ConfigException(f"Value must be at least {self.min}", name=name, value=value)
        if self.max is not None and value > self.max:
            raise ConfigException(f"Value must be no more than {self.max}", name=name,
                                  value=value)

    def __str__(self) -> str:
        low = "..." if self.min is None else f"{self.min},..."
        high = "" if self.max is None else f",{self.max}"
        return f"[{low}{high}]"


@dataclass(frozen=True)
class ValidString:
    """One of a fixed set of strings, compared case-sensitively. None passes."""

    valid: tuple[str, ...]

    @classmethod
    def in_(cls, *valid: str) -> ValidString:
        """Exactly one of ``valid`` (case-sensitive)."""
        return cls(tuple(valid))

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value not in self.valid:
            raise ConfigException(f"String must be one of: {', '.join(self.valid)}",
                                  name=name, value=value)

    def __str__(self) -> str:
        return f"[{', '.join(self.valid)}]"


@dataclass(frozen=True)
class CaseInsensitiveValidString:
    """One of a fixed set of strings, ignoring case. None passes."""

    valid: tuple[str, ...]

    @classmethod
    def in_(cls, *valid: str) -> CaseInsensitiveValidString:
        """One of ``valid``, compared case-insensitively."""
        return cls(tuple(valid))

    def __call__(self, name: str, value: Any) -> None:
        if value is None:
            return
        folded = {v.casefold() for v in self.valid}
        if not isinstance(value, str) or value.casefold() not in folded:
            raise ConfigException(
                f"String must be one of (case insensitive): {', '.join(self.valid)}",
                name=name, value=value)

    def __str__(self) -> str:
        return f"(case insensitive) [{', '.join(self.valid)}]"


@dataclass(frozen=True)
class NonEmptyString:
    """A string that is not empty after trimming. None passes."""

    def __call__(self, name: str, value: Any) -> None:
        if value is not None and value == "":
            raise ConfigException("String must be non-empty", name=name, value=value)

    def __str__(self) -> str:
        return "non-empty string"


# ---------------------------------------------------------------------------
# Parsing and rendering values


def _invalid(name: str, value: Any, reason: str, type: Type | None) -> ConfigException:
    """A ConfigException worded like Connect's: ``Invalid value v for configuration n: r``.

    ``errors.ConfigException`` renders values with ``repr``; the validate endpoint
    is a wire format, so values are rendered the way Connect shows them.
    """
    shown = "null" if value is None else to_config_string(value, type)
    exc = ConfigException(f"Invalid value {shown} for configuration {name}: {reason}")
    exc.name, exc.value = name, value
    return exc


def _reworded(exc: ConfigException, key: ConfigKey) -> ConfigException:
    """Re-render a validator's ConfigException in Connect's wording, hiding passwords."""
    if exc.name is None:
        return exc
    prefix = f"Invalid value {exc.value!r} for configuration {exc.name}: "
    message = str(exc)
    if not message.startswith(prefix):
        return exc
    return _invalid(exc.name, exc.value, message[len(prefix):], key.type)


def _parse_int(name: str, value: Any, type: Type) -> int:
    low, high = _INT_RANGE[type]
    width = "32-bit integer" if type is Type.INT else "64-bit integer (long)"
    if isinstance(value, str):
        trimmed = value.strip()
        if not _INTEGER.fullmatch(trimmed) or not low <= int(trimmed) <= high:
            raise _invalid(name, value, f"Not a number of type {type.value}", type)
        return int(trimmed)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(name, value, f"Expected value to be a {width}, but it was a "
                       f"{_type_name(value)}", type)
    if not low <= value <= high:
        raise _invalid(name, value, f"Expected value to be a {width}, but it is out of range",
                       type)
    return value


def _parse_double(name: str, value: Any) -> float:
    if isinstance(value, str):
        trimmed = value.strip()
        try:
            # float() also takes "1_000"; Java's parseDouble does not.
            if "_" in trimmed:
                raise ValueError(trimmed)
            return float(trimmed)
        except ValueError:
            raise _invalid(name, value, "Not a number of type DOUBLE", Type.DOUBLE) from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _invalid(name, value, f"Expected value to be a double, but it was a "
                       f"{_type_name(value)}", Type.DOUBLE)
    return float(value)


def _parse_boolean(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        folded = value.strip().lower()
        if folded in ("true", "false"):
            return folded == "true"
    raise _invalid(name, value, "Expected value to be either true or false", Type.BOOLEAN)


def _parse_list(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        trimmed = value.strip()
        return _LIST_SEPARATOR.split(trimmed) if trimmed else []
    if isinstance(value, list | tuple):
        return [str(item) for item in value]
    raise _invalid(name, value, "Expected a comma separated list.", Type.LIST)


def _parse_class(name: str, value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    raise _invalid(name, value, "Expected a Class instance or class name.", Type.CLASS)


def _type_name(value: Any) -> str:
    return type(value).__name__


def originals_with_prefix(configs: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The keys of ``configs`` that start with ``prefix``, with it stripped (Connect's
    ``originalsWithPrefix``): a converter's or a transform's own sub-config."""
    return {k[len(prefix):]: v for k, v in configs.items() if k.startswith(prefix)}


def parse_type(name: str, value: Any, type: Type) -> Any:
    """Convert ``value`` (a string, or already the right Python type) to ``type``.

    ``None`` stays ``None``. Raises :class:`ConfigException` naming ``name``.
    """
    if value is None:
        return None
    if type in (Type.INT, Type.LONG):
        return _parse_int(name, value, type)
    if type is Type.DOUBLE:
        return _parse_double(name, value)
    if type is Type.BOOLEAN:
        return _parse_boolean(name, value)
    if type is Type.LIST:
        return _parse_list(name, value)
    if type is Type.CLASS:
        return _parse_class(name, value)
    if isinstance(value, str):  # STRING and PASSWORD: Connect trims both
        return value.strip()
    raise _invalid(name, value, f"Expected value to be a string, but it was a "
                   f"{_type_name(value)}", type)


def to_config_string(value: Any, value_type: Type | None = None) -> str | None:
    """Render a parsed value the way Connect's REST API shows it (None stays None).

    Booleans are ``true``/``false``, lists are comma-joined, classes are their
    qualified names, and PASSWORD values are ``[hidden]``. Without ``value_type``
    the rendering follows the Python type of ``value``.
    """
    if value is None:
        return None
    if value_type is Type.PASSWORD:
        return HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ",".join(str(to_config_string(v)) for v in value)
    if isinstance(value, type):
        return f"{value.__module__}.{value.__qualname__}"
    return str(value)


# ---------------------------------------------------------------------------
# Keys, values, definitions


@dataclass(frozen=True)
class ConfigKey:
    """The definition of one configuration key.

    ``default`` is already parsed to ``type`` (or is ``NO_DEFAULT``: required).
    ``order_in_group`` is -1 and ``group`` None when the key is not grouped.
    """

    name: str
    type: Type
    default: Any = NO_DEFAULT
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    documentation: str = ""
    group: str | None = None
    order_in_group: int = -1
    width: Width = Width.NONE
    display_name: str | None = None
    dependents: tuple[str, ...] = ()

    def has_default(self) -> bool:
        """False when the key was defined with ``NO_DEFAULT``: it is then required."""
        return self.default is not NO_DEFAULT

    def to_info_dict(self) -> dict[str, Any]:
        """Connect's ConfigKeyInfo JSON for this key (``/connector-plugins/.../config``)."""
        required = not self.has_default()
        return {
            "name": self.name,
            "type": self.type.value,
            "required": required,
            "default_value": None if required else to_config_string(self.default, self.type),
            "importance": self.importance.value,
            "documentation": self.documentation,
            "group": self.group,
            "width": self.width.value,
            "display_name": self.display_name if self.display_name is not None else self.name,
            "dependents": list(self.dependents),
            "order": self.order_in_group,
        }


@dataclass
class ConfigValue:
    """The validation result for one key: its parsed value and any error messages.

    ``value`` is the parsed value (None if unset or unparseable). A key is valid
    iff ``errors`` is empty.
    """

    name: str
    value: Any = None
    recommended_values: list[Any] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    visible: bool = True

    def add_error_message(self, message: str) -> None:
        """Record a problem with this value; validation reports it under the key's name."""
        self.errors.append(message)

    def to_dict(self, value_type: Type | None = None) -> dict[str, Any]:
        """Connect's ConfigValueInfo JSON. Pass the key's ``value_type`` to hide passwords."""
        return {
            "name": self.name,
            "value": to_config_string(self.value, value_type),
            "recommended_values": [to_config_string(v, value_type)
                                   for v in self.recommended_values],
            "errors": list(self.errors),
            "visible": self.visible,
        }


@dataclass
class Config:
    """What ``SourceConnector.validate`` returns: one ConfigValue per key."""

    config_values: list[ConfigValue]


class ConfigDef:
    """An ordered set of key definitions; ``define`` calls chain.

    ``config_keys`` maps name -> :class:`ConfigKey` in definition order. Keys
    listed as ``dependents`` must be defined by the time the def is used.
    """

    def __init__(self) -> None:
        self.config_keys: dict[str, ConfigKey] = {}

    def define(
        self,
        name: str,
        type: Type,
        default: Any = NO_DEFAULT,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        documentation: str = "",
        *,
        group: str | None = None,
        order_in_group: int = -1,
        width: Width = Width.NONE,
        display_name: str | None = None,
        dependents: Iterable[str] = (),
    ) -> ConfigDef:
        """Add a key; returns ``self``. Raises ConfigException for a duplicate or a bad default."""
        if name in self.config_keys:
            raise ConfigException(f"Configuration {name} is defined twice.")
        if default is not NO_DEFAULT:
            default = parse_type(name, default, type)
        key = ConfigKey(name, type, default, validator, importance, documentation, group,
                        order_in_group, width, display_name or name, tuple(dependents))
        if validator is not None and key.has_default():
            self._run_validator(key, default)
        self.config_keys[name] = key
        return self

    def names(self) -> list[str]:
        """Key names in the order they were defined."""
        return list(self.config_keys)

    def groups(self) -> list[str]:
        """Group names in order of first appearance."""
        return list(dict.fromkeys(k.group for k in self.config_keys.values() if k.group))

    def merged(self, other: ConfigDef) -> ConfigDef:
        """A new def with this def's keys, then ``other``'s.

        A name defined in both with different definitions raises ConfigException.
        """
        out = ConfigDef()
        out.config_keys = dict(self.config_keys)
        for name, key in other.config_keys.items():
            if name in out.config_keys and out.config_keys[name] != key:
                raise ConfigException(f"Configuration {name} is defined twice, differently.")
            out.config_keys[name] = key
        return out

    def parse_value(self, key: str | ConfigKey, raw: Any) -> Any:
        """Parse and validate one raw value for ``key`` (a name or a ConfigKey).

        ``raw=None`` means unset: the default, or ConfigException if required.
        """
        if isinstance(key, str):
            if key not in self.config_keys:
                raise ConfigException(f"Unknown configuration {key}")
            key = self.config_keys[key]
        if raw is None:
            if not key.has_default():
                error = ConfigException(_missing(key.name))
                error.name = key.name  # the message is Connect's; the key is for callers
                raise error
            value = _copy(key.default)
        else:
            value = parse_type(key.name, raw, key.type)
        if key.validator is not None:
            self._run_validator(key, value)
        return value

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Every defined key -> its parsed value (defaults applied). Unknown keys are ignored.

        Raises ConfigException naming the first key (in definition order) that is
        missing, of the wrong type, or rejected by its validator.
        """
        undefined = self._undefined_dependents()
        if undefined:
            raise ConfigException("Some configurations are referred to as dependents but "
                                  f"not defined: {', '.join(undefined)}")
        return {name: self.parse_value(key, props.get(name))
                for name, key in self.config_keys.items()}

    def validate(self, props: Mapping[str, Any]) -> list[ConfigValue]:
        """One ConfigValue per defined key, in definition order; never raises for bad values."""
        results = [self._validate_key(key, props.get(key.name))
                   for key in self.config_keys.values()]
        for name in self._undefined_dependents():
            results.append(ConfigValue(name, errors=[
                f"{name} is referred in the dependents, but not defined."], visible=False))
        return results

    def _validate_key(self, key: ConfigKey, raw: Any) -> ConfigValue:
        result = ConfigValue(key.name)
        value: Any = None
        if raw is not None:
            try:
                value = parse_type(key.name, raw, key.type)
            except ConfigException as e:
                result.add_error_message(str(e))
        elif key.has_default():
            value = _copy(key.default)
        else:
            result.add_error_message(_missing(key.name))
        if key.validator is not None:
            try:
                self._run_validator(key, value)
            except ConfigException as e:
                result.add_error_message(str(e))
        result.value = value
        return result

    @staticmethod
    def _run_validator(key: ConfigKey, value: Any) -> None:
        assert key.validator is not None
        try:
            key.validator(key.name, value)
        except ConfigException as e:
            raise _reworded(e, key) from None

    def _undefined_dependents(self) -> list[str]:
        wanted = (d for key in self.config_keys.values() for d in key.dependents)
        return sorted({d for d in wanted if d not in self.config_keys})

    def __repr__(self) -> str:
        return f"ConfigDef({', '.join(self.config_keys)})"


def _missing(name: str) -> str:
    return f'Missing required configuration "{name}" which has no default value.'


def _copy(default: Any) -> Any:
    # Parsed LIST defaults are shared by every parse; hand out copies so a caller
    # mutating its result cannot change the definition.
    return list(default) if isinstance(default, list) else default
