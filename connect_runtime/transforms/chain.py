"""The transformation chain a task runs every record through, built from the connector config.

Configuration, as in Kafka Connect::

    transforms=mask,route            aliases, applied in this order
    transforms.mask.type=...         the class (see registry)
    transforms.mask.<key>=...        the transformation's own keys
    transforms.mask.predicate=p      optional: apply only to records p matches
    transforms.mask.negate=true      optional: ... only to records p does not match
    predicates=p
    predicates.p.type=...
    predicates.p.<key>=...

Invariants:

* Stages run in the order of ``transforms``; a stage whose predicate says no
  passes the record on unchanged; a stage returning None drops the record and
  the chain stops there (the caller still advances its source offset).
* :meth:`TransformationChain.apply` catches nothing: with ``run`` every stage
  (its predicate's ``test`` and its transformation's ``apply``, as one step,
  like Connect's ``TransformationStage``) runs as ``run(stage_label, thunk)``,
  so the task's retry/tolerance operator sees each failure with the stage
  that raised it.
* :meth:`TransformationChain.from_config` raises ConfigException naming the
  offending key for an unknown or missing type, a predicate alias not listed
  in ``predicates``, ``negate`` without ``predicate``, a version pin that does
  not match, or a plugin's bad config. Nothing is left open when it raises.
* Every stage has its own instances (predicates too, as in Connect), made,
  configured and closed on the executor that runs the task: the chain is never
  pickled.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from connect_runtime.api.config_def import (
    ConfigDef,
    Importance,
    Type,
    originals_with_prefix,
    parse_type,
)
from connect_runtime.errors import ConfigException
from connect_runtime.transforms import registry
from connect_runtime.transforms.base import Bundled, stage_label
from connect_runtime.transforms.configs import parse_prefixed, reason, unique
from connect_runtime.transforms.registry import PREDICATE, TRANSFORMATION, PluginKind

if TYPE_CHECKING:
    from connect_runtime.api.record import SourceRecord

T = TypeVar("T")

PREDICATE_KEY = "predicate"
NEGATE_KEY = "negate"
PLUGIN_VERSION_KEY = "plugin.version"

IMPLICIT_TRANSFORM_KEYS = (
    ConfigDef()
    .define(PREDICATE_KEY, Type.STRING, None, importance=Importance.MEDIUM,
            documentation="The alias of a predicate used to determine whether to apply this "
            "transformation.")
    .define(NEGATE_KEY, Type.BOOLEAN, False, importance=Importance.MEDIUM,
            documentation="Whether the configured predicate should be negated."))
"""The keys every transformation has (Connect's ``TransformationStage`` keys)."""


@dataclass(frozen=True)
class Stage:
    """One transformation, with the predicate that gates it (if any)."""

    alias: str
    label: str  # "transform 'mask' (org.apache.kafka.connect.transforms.MaskField$Value)"
    transformation: Any  # a base.Transformation
    predicate: Any = None  # a base.Predicate, or None
    negate: bool = False

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        """The transformed record (or None), or ``record`` if the predicate says no."""
        if self.predicate is None or bool(self.predicate.test(record)) != self.negate:
            return cast("SourceRecord | None", self.transformation.apply(record))
        return record

    def close(self) -> None:
        for plugin in (self.transformation, self.predicate):
            if plugin is not None:
                plugin.close()


@dataclass
class TransformationChain:
    """The stages of one task, in order (see the module docstring)."""

    stages: list[Stage] = field(default_factory=list)

    @classmethod
    def from_config(cls, connector_config: Mapping[str, str]) -> TransformationChain:
        """Build and configure every stage of ``connector_config`` (ConfigException naming
        the key on any problem; stages built so far are closed first)."""
        config = {k: v for k, v in connector_config.items() if v is not None}
        aliases = _aliases(config, TRANSFORMATION)
        predicates = _aliases(config, PREDICATE)
        for alias in predicates:  # as Connect: listed predicates are checked even if unused
            _check_predicate_config(config, alias)
        chain = cls()
        try:
            for alias in aliases:
                chain.stages.append(_stage(config, alias, predicates))
        except BaseException:
            chain.close()
            raise
        return chain

    def apply(self, record: SourceRecord,
              run: Callable[[str, Callable[[], T]], T] | None = None) -> SourceRecord | None:
        """``record`` through every stage; None if one dropped it. Catches nothing."""
        current = record
        for stage in self.stages:
            if run is None:
                result = stage.apply(current)
            else:
                thunk = functools.partial(stage.apply, current)
                result = cast("SourceRecord | None",
                              run(stage.label, cast("Callable[[], T]", thunk)))
            if result is None:
                return None
            current = result
        return current

    def close(self) -> None:
        """Close every stage's plugins; the first error is raised after all were tried."""
        errors = []
        for stage in self.stages:
            try:
                stage.close()
            except Exception as e:
                errors.append(e)
        if errors:
            raise errors[0]

    def __bool__(self) -> bool:
        return bool(self.stages)

    def __len__(self) -> int:
        return len(self.stages)


def _aliases(config: Mapping[str, str], kind: PluginKind) -> list[str]:
    raw = config.get(kind.config_key)
    aliases: list[str] = parse_type(kind.config_key, raw, Type.LIST) if raw else []
    if len(unique(aliases)) != len(aliases):
        raise ConfigException("Duplicate alias provided.", name=kind.config_key, value=raw)
    return aliases


def _stage(config: Mapping[str, str], alias: str, predicates: list[str]) -> Stage:
    prefix = TRANSFORMATION.prefix(alias)
    own = originals_with_prefix(config, prefix)
    implicit = parse_prefixed(IMPLICIT_TRANSFORM_KEYS, own, prefix)
    predicate_alias, negate = implicit[PREDICATE_KEY], implicit[NEGATE_KEY]
    if NEGATE_KEY in own and predicate_alias is None:
        raise ConfigException(f"Config '{prefix}{NEGATE_KEY}' was provided but there is no "
                              f"config '{prefix}{PREDICATE_KEY}' defining a predicate to be "
                              "negated.", name=prefix + NEGATE_KEY, value=own[NEGATE_KEY])
    if predicate_alias is not None and predicate_alias not in predicates:
        raise ConfigException(
            f"Predicate {predicate_alias!r} is not listed in 'predicates' (listed: "
            f"{', '.join(predicates) or 'none'})", name=prefix + PREDICATE_KEY,
            value=predicate_alias)
    configs = {k: v for k, v in own.items() if k not in (PREDICATE_KEY, NEGATE_KEY)}
    transformation = _plugin(config, TRANSFORMATION, alias, configs)
    if predicate_alias is None:
        return Stage(alias, _label(TRANSFORMATION, alias, transformation), transformation)
    try:
        predicate = _plugin(config, PREDICATE, predicate_alias,
                            originals_with_prefix(config, PREDICATE.prefix(predicate_alias)))
    except BaseException:
        transformation.close()
        raise
    return Stage(alias, _label(TRANSFORMATION, alias, transformation), transformation,
                 predicate, negate)


def _check_predicate_config(config: Mapping[str, str], alias: str) -> None:
    """A listed predicate's type resolves and its keys parse (names the full key if not)."""
    prefix = PREDICATE.prefix(alias)
    cls = _resolve(config, PREDICATE, prefix)
    # Made only to ask for its keys, as Connect does: never configured, so not closed.
    plugin = registry.instantiate(cls, prefix + "type")
    parse_prefixed(registry.config_def_of(plugin), originals_with_prefix(config, prefix), prefix)


def _resolve(config: Mapping[str, str], kind: PluginKind, prefix: str) -> type:
    type_key = prefix + "type"
    name = config.get(type_key)
    if name is None or not name.strip():
        raise ConfigException(f'Missing required configuration "{type_key}" which has no '
                              "default value.", name=type_key)
    cls = registry.resolve(kind, name, type_key)
    _check_version(config, prefix + PLUGIN_VERSION_KEY, cls)
    return cls


def _check_version(config: Mapping[str, str], key: str, cls: type) -> None:
    """KIP-891: a pinned version must be the installed one (there is one version here)."""
    wanted = config.get(key)
    installed = registry.version_of(cls)
    if wanted is None or wanted.strip() == installed:
        return
    range_ = wanted.strip() if wanted.strip()[:1] in "[(" else f"[{wanted.strip()}]"
    raise ConfigException(f"Plugin {registry.listed_name(cls)} not found that matches the "
                          f"version range {range_}, available versions: [{installed}]",
                          name=key, value=wanted)


def _plugin(config: Mapping[str, str], kind: PluginKind, alias: str,
            configs: dict[str, str]) -> Any:
    """Make, bind and configure the plugin of ``alias``; ConfigExceptions name full keys."""
    prefix = kind.prefix(alias)
    cls = _resolve(config, kind, prefix)
    plugin = registry.instantiate(cls, prefix + "type")
    # Every plugin's own keys are checked against its ConfigDef first, as Connect
    # does, so even a user plugin's bad value is reported under its full key.
    parse_prefixed(registry.config_def_of(plugin), configs, prefix)
    if isinstance(plugin, Bundled):
        plugin.bind(alias, prefix)
    try:
        _configure(plugin, configs, prefix)
    except BaseException:
        _close_quietly(plugin)  # it may hold what configure opened before failing
        raise
    return plugin


def _configure(plugin: Any, configs: dict[str, str], prefix: str) -> None:
    try:
        plugin.configure(dict(configs))
    except ConfigException as e:
        if e.name is None or e.name.startswith(prefix):
            raise
        # A plugin naming its bare key: name the key the user wrote instead.
        raise ConfigException(reason(e), name=prefix + e.name, value=e.value) from e
    except Exception as e:  # a user plugin's own failure: say where it comes from
        raise ConfigException(f"{registry.listed_name(type(plugin))}.configure failed: "
                              f"{type(e).__name__}: {e}", name=prefix + "type",
                              value=registry.listed_name(type(plugin))) from e


def _close_quietly(plugin: Any) -> None:
    # The configure error is the one worth reporting.
    with contextlib.suppress(Exception):
        plugin.close()


def _label(kind: PluginKind, alias: str, plugin: Any) -> str:
    word = "transform" if kind is TRANSFORMATION else "predicate"
    return stage_label(word, alias, registry.listed_name(type(plugin)))
