"""The keys ``PUT /connector-plugins/<c>/config/validate`` reports for transforms and predicates.

Like Kafka Connect's ``ConnectorConfig.enrich``: for every alias listed in
``transforms`` (then ``predicates``), in order, the definitions and values of

* ``<prefix>type`` (order 0; CLASS, required; recommended values: every plugin
  of the kind) and ``<prefix>plugin.version`` (order 1; KIP-891, defaulting to the
  installed version);
* the plugin's own keys, and for a transformation the implicit ``predicate`` and
  ``negate``, from order 2 in Connect's sort (required first, then by
  importance, then by name), with full names (``transforms.<alias>.<key>``);

all in the group ``Transforms: <alias>`` / ``Predicates: <alias>``. Errors sit
on the key they concern. Beyond Connect, which accepts such configs and fails
the task later, two more problems are reported here: a ``predicate`` alias not
listed in ``predicates`` (on ``<prefix>predicate``), and what a bundled plugin's
``configure`` refuses (``InsertField`` with nothing to insert, ``HeaderFrom``
with lists of different lengths, ...; on the key it names). User plugins are
not configured here (their ``configure`` may have side effects), as in Connect.
Nothing here raises for a bad config.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from connect_runtime.api.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigKey,
    ConfigValue,
    Importance,
    Type,
    Width,
    originals_with_prefix,
    parse_type,
)
from connect_runtime.errors import ConfigException
from connect_runtime.transforms import registry
from connect_runtime.transforms.base import Bundled
from connect_runtime.transforms.chain import (
    IMPLICIT_TRANSFORM_KEYS,
    NEGATE_KEY,
    PLUGIN_VERSION_KEY,
    PREDICATE_KEY,
)
from connect_runtime.transforms.configs import connect_message, prefixed_key, unique
from connect_runtime.transforms.registry import PREDICATE, TRANSFORMATION, PluginKind

log = logging.getLogger(__name__)

_IMPORTANCE_ORDER = list(Importance)


@dataclass
class PluginValidation:
    """The definitions (in response order), values and groups validation adds."""

    keys: dict[str, ConfigKey] = field(default_factory=dict)
    values: list[ConfigValue] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)


def validate_plugins(config: Mapping[str, str | None]) -> PluginValidation:
    """Definitions and values of every listed alias's keys (see the module docstring)."""
    out = PluginValidation()
    predicates = _listed(config, PREDICATE)
    for kind in (TRANSFORMATION, PREDICATE):
        for alias in _listed(config, kind):
            keys, values = _alias(config, kind, alias, predicates)
            out.keys.update((k.name, k) for k in keys)
            out.values += values
            out.groups.append(f"{kind.group}: {alias}")
    return out


def _listed(config: Mapping[str, str | None], kind: PluginKind) -> list[str]:
    """The unique aliases of ``transforms`` / ``predicates``; none if it does not parse
    (the framework's own validation reports that)."""
    try:
        return unique(parse_type(kind.config_key, config.get(kind.config_key), Type.LIST) or [])
    except ConfigException:
        return []


def _alias(config: Mapping[str, str | None], kind: PluginKind, alias: str,
           predicates: list[str]) -> tuple[list[ConfigKey], list[ConfigValue]]:
    prefix, group = kind.prefix(alias), f"{kind.group}: {alias}"
    type_key = ConfigKey(prefix + "type", Type.CLASS, NO_DEFAULT, None, Importance.HIGH,
                         f"Class for the '{alias}' {kind.title.lower()}.", group, 0,
                         Width.LONG, f"{kind.title} type for {alias}")
    type_value = ConfigValue(type_key.name,
                             recommended_values=list(registry.known_plugins(kind)))
    cls = _resolved(config.get(type_key.name), kind, type_value)
    version_key, version_value = _version(config, kind, alias, group, cls)
    keys, values = [type_key, version_key], [type_value, version_value]
    if kind is TRANSFORMATION:
        _check_negate(config, prefix, type_value)
    plugin = None if cls is None else _instance(cls, kind, type_value)
    if plugin is None:
        return keys, values
    own = _embedded(_plugin_def(plugin, kind), prefix, group)
    own_values = own.validate(config)
    if kind is TRANSFORMATION:
        _check_predicate_listed(config, prefix, predicates, own_values)
    if isinstance(plugin, Bundled) and not any(v.errors for v in [type_value, *own_values]):
        _dry_run(plugin, config, alias, prefix, [type_value, *own_values])
    return keys + list(own.config_keys.values()), values + own_values


def _resolved(raw: str | None, kind: PluginKind, value: ConfigValue) -> type | None:
    if raw is None:
        value.add_error_message(f'Missing required configuration "{value.name}" which has '
                                "no default value.")
        return None
    try:
        cls = registry.resolve(kind, raw, value.name)
    except ConfigException as e:
        value.add_error_message(connect_message(e))
        other = registry.find(raw)  # a class of the other kind: show it, as Connect does
        value.value = None if other is None else registry.listed_name(other[1])
        return None
    value.value = registry.listed_name(cls)
    return cls


def _version(config: Mapping[str, str | None], kind: PluginKind, alias: str, group: str,
             cls: type | None) -> tuple[ConfigKey, ConfigValue]:
    """KIP-891's ``<prefix>plugin.version``: the installed version is the default and the
    only one a pin may name."""
    installed = None if cls is None else registry.version_of(cls)
    key = ConfigKey(kind.prefix(alias) + PLUGIN_VERSION_KEY, Type.STRING, installed, None,
                    Importance.HIGH, f"Version of the '{alias}' {kind.title.lower()}.", group,
                    1, Width.LONG, f"{kind.title} version for {alias}")
    wanted = config.get(key.name)
    value = ConfigValue(key.name, wanted if wanted is not None else installed,
                        [installed] if installed is not None else [])
    if cls is not None and wanted is not None and wanted.strip() != installed:
        range_ = wanted.strip() if wanted.strip()[:1] in "[(" else f"[{wanted.strip()}]"
        value.add_error_message(f"Plugin {registry.listed_name(cls)} not found that matches "
                                f"the version range {range_}, available versions: "
                                f"[{installed}]")
    return key, value


def _check_negate(config: Mapping[str, str | None], prefix: str, value: ConfigValue) -> None:
    if prefix + NEGATE_KEY in config and prefix + PREDICATE_KEY not in config:
        value.add_error_message(f"Config '{prefix}{NEGATE_KEY}' was provided but there is no "
                                f"config '{prefix}{PREDICATE_KEY}' defining a predicate to be "
                                "negated.")


def _instance(cls: type, kind: PluginKind, value: ConfigValue) -> Any:
    try:
        return registry.instantiate(cls, value.name)
    except ConfigException as e:
        value.add_error_message(f"Error getting config definition from {kind.title}: "
                                f"{e}")
        return None


def _plugin_def(plugin: Any, kind: PluginKind) -> ConfigDef:
    """The plugin's keys; for a transformation with the implicit ``predicate`` and
    ``negate``, which mask the plugin's own keys of those names (as in Connect)."""
    try:
        own = registry.config_def_of(plugin)
    except Exception as e:  # a broken plugin must not break validation
        log.warning("%s.config_def() failed: %s", type(plugin).__name__, e)
        own = ConfigDef()
    if kind is not TRANSFORMATION:
        return own
    merged = ConfigDef()
    merged.config_keys = dict(IMPLICIT_TRANSFORM_KEYS.config_keys)
    for name, key in own.config_keys.items():
        if name in merged.config_keys:
            log.warning("Transformer config %s is masked by implicit config of that name", name)
            continue
        merged.config_keys[name] = key
    return merged


def _embedded(plugin_def: ConfigDef, prefix: str, group: str) -> ConfigDef:
    """Connect's ``ConfigDef.embed``: sorted, prefixed, grouped, numbered from 2."""
    groups = plugin_def.groups()

    def sort_key(key: ConfigKey) -> tuple[Any, ...]:
        return (key.group is not None, groups.index(key.group) if key.group else 0,
                key.order_in_group, key.has_default(), _IMPORTANCE_ORDER.index(key.importance),
                key.name)

    out = ConfigDef()
    for order, key in enumerate(sorted(plugin_def.config_keys.values(), key=sort_key), 2):
        embedded = prefixed_key(key, prefix, order_in_group=order,
                                group=group + (f": {key.group}" if key.group else ""))
        out.config_keys[embedded.name] = embedded
    return out


def _check_predicate_listed(config: Mapping[str, str | None], prefix: str,
                            predicates: list[str], values: list[ConfigValue]) -> None:
    alias = config.get(prefix + PREDICATE_KEY)
    if alias is None or alias.strip() in predicates:
        return
    value = next(v for v in values if v.name == prefix + PREDICATE_KEY)
    value.add_error_message(f"Predicate {alias.strip()!r} is not listed in 'predicates' "
                            f"(listed: {', '.join(predicates) or 'none'})")


def _dry_run(plugin: Bundled, config: Mapping[str, str | None], alias: str, prefix: str,
             values: list[ConfigValue]) -> None:
    """Configure a bundled plugin (pure) to catch what its keys alone cannot show."""
    own = {k: v for k, v in originals_with_prefix(config, prefix).items() if v is not None}
    plugin.bind(alias, prefix)
    try:
        plugin.configure(own)
    except ConfigException as e:
        target = next((v for v in values if v.name == e.name), values[0])
        target.add_error_message(connect_message(e) if e.name else str(e))
    finally:
        plugin.close()
