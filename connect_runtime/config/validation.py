"""Pre-flight validation of a connector config: Kafka Connect's ConfigInfos.

``validate_connector_config`` is what ``POST /connectors``, ``PUT
/connectors/{name}/config`` and ``PUT /connector-plugins/{type}/config/validate``
run before anything is written to the config topic. It

1. validates the framework keys (``connector_config_def``: Connect 4.1's keys,
   with the installed plugin versions and the worker's converters as defaults,
   as Connect shows them), refuses values of keys whose feature this runtime
   lacks (``unsupported_value``) and checks KIP-891's ``*.plugin.version`` pins;
2. runs KIP-618's exactly-once checks (see ``_check_exactly_once`` and
   ``_check_transaction_boundary``);
3. adds, per alias of ``transforms`` and ``predicates``, the keys of that
   transformation or predicate (``connect_runtime.transforms.validation``, like
   Connect's ``ConnectorConfig.enrich``), and, for a ``key.converter`` /
   ``value.converter`` / ``header.converter`` the connector config names, that
   converter's own keys under its prefix (``value.converter.schema.registry.url``):
   each checked by its definition, then the converter configured with them, so a
   problem only the whole set shows (``use.latest.version`` without
   ``auto.register.schemas=false``) lands on the key to change, as Connect's
   ``validateConverterConfig`` reports them;
4. validates the connector's own keys with ``connector.validate(config)`` (run
   before step 2's checks: a message the connector puts on
   ``exactly.once.support`` replaces Connect's generic answer to UNSUPPORTED);
5. merges them like Connect's AbstractHerder: framework keys first, then the
   transforms' and predicates', a connector key with the same name replaces the
   definition in place, and values that match no definition come first with a
   null definition. Errors a connector reports on a framework key it does not
   define are added to that key (its value and recommended values stay).

Config providers (``connect_runtime.security.providers``): steps 1-5 see the
config with its ``${provider:path:key}`` variables resolved, as Connect's
validation does. Unlike Connect, a variable that cannot be resolved (no such
provider, file, key or variable) is an error on its key, and the answer never
shows a resolved value: a key whose submitted value holds a variable shows the
submitted value, and every message is scrubbed of what providers supplied and of
the connector's PASSWORD values (``connect_runtime.security.redaction``).

Nothing a connector does here can escape: an exception from any of its methods
becomes an error message on the key it concerns (``connector.class`` for
``config_def``/``validate``), so the REST caller always gets a ConfigInfos.
``error_count`` counts messages, not keys, as Connect does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from connect_runtime.api.config_def import Config, ConfigDef, ConfigKey, ConfigValue, Type
from connect_runtime.api.connector import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
)
from connect_runtime.config.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    EXACTLY_ONCE_SUPPORT_CONFIG,
    HEADER_CONVERTER_CONFIG,
    KEY_CONVERTER_CONFIG,
    PLUGIN_VERSION_SUFFIX,
    TASKS_PER_PROCESS_AUTO,
    TASKS_PER_PROCESS_CONFIG,
    TOPIC_CREATION_DEFAULT_DEF,
    TRANSACTION_BOUNDARY_CONFIG,
    VALUE_CONVERTER_CONFIG,
    ExactlyOnceSupportLevel,
    TransactionBoundary,
    connector_config_def,
    parse_tasks_per_process,
    unsupported_value,
)
from connect_runtime.converters import (
    converter_config_def,
    converter_version,
    listed_converter_names,
    listed_header_converter_names,
    resolve_converter_class,
    resolve_header_converter_class,
)
from connect_runtime.errors import ConfigException, ConnectorContractException
from connect_runtime.security.providers import NO_PROVIDERS, ConfigResolver, Resolution
from connect_runtime.security.redaction import Redactor, password_keys
from connect_runtime.transforms.configs import prefixed_def
from connect_runtime.transforms.validation import PluginValidation, validate_plugins

log = logging.getLogger(__name__)

EOS_ENABLED = "enabled"

_VALIDATE_ENDPOINT_HINT = (
    "You can also find the above list of errors at the endpoint "
    "`/connector-plugins/{connectorType}/config/validate`"
)


@dataclass
class ConfigInfos:
    """Connect's validation result. ``configs`` pairs each definition (None if the
    value matches no definition) with its value, in response order."""

    name: str
    error_count: int
    groups: list[str]
    configs: list[tuple[ConfigKey | None, ConfigValue]]

    def to_dict(self) -> dict[str, Any]:
        """The JSON body of Connect's ``/config/validate`` response."""
        return {
            "name": self.name,
            "error_count": self.error_count,
            "groups": list(self.groups),
            "configs": [
                {
                    "definition": None if key is None else key.to_info_dict(),
                    "value": value.to_dict(None if key is None else key.type),
                }
                for key, value in self.configs
            ],
        }

    def error_messages(self) -> list[str]:
        """Every error message, in response order."""
        return [msg for _, value in self.configs for msg in value.errors]


def _unexpected(e: Exception) -> str:
    detail = str(e).strip()
    if detail:
        return f"An unexpected error occurred during validation: {detail}"
    return (f"An unexpected error occurred during validation ({type(e).__name__}); "
            "see the worker logs for details.")


def _check_exactly_once(
    connector: SourceConnector, config: dict[str, str], value: ConfigValue, worker_eos: str,
    redactor: Redactor, explained: bool,
) -> None:
    """KIP-618: ``exactly.once.support=required`` needs worker EOS and a SUPPORTED connector.

    The connector is only asked when the worker has EOS enabled: KIP-618 lets
    ``exactly_once_support`` assume that it is. ``explained``: the connector's
    ``validate`` put its own message on ``exactly.once.support``; that says why
    better than Connect's generic answer to UNSUPPORTED, which is then left out.
    """
    if value.errors or ExactlyOnceSupportLevel.parse(value.value) is not (
        ExactlyOnceSupportLevel.REQUIRED
    ):
        return
    if worker_eos != EOS_ENABLED:
        value.add_error_message(
            "This worker does not have exactly-once source support enabled "
            f"(exactly.once.source.support={worker_eos}).")
        return
    try:
        support = connector.exactly_once_support(config)
    except Exception as e:
        redactor.log_exception(log, logging.ERROR, e, "Connector %s failed in "
                               "exactly_once_support", type(connector).__name__)
        value.add_error_message(_unexpected(e))
        return
    if support is ExactlyOnceSupport.SUPPORTED:
        return
    if support is None:
        value.add_error_message(
            "Connect cannot determine whether this connector provides exactly-once "
            "delivery: it does not implement exactly_once_support. Check the "
            "connector's documentation; if it does deliver exactly once, set "
            f'{EXACTLY_ONCE_SUPPORT_CONFIG} to "requested" to skip this check.')
    elif support is ExactlyOnceSupport.UNSUPPORTED:
        if explained:
            return
        value.add_error_message(
            "The connector does not support exactly-once delivery with this configuration.")
    else:
        value.add_error_message(
            f"exactly_once_support returned {support!r}, which is not an ExactlyOnceSupport.")


def _check_transaction_boundary(
    connector: SourceConnector, config: dict[str, str], value: ConfigValue, redactor: Redactor,
) -> None:
    """KIP-618: ``transaction.boundary=connector`` needs a connector that can define them.

    Checked whatever the worker's EOS mode (as Connect does), so a config that
    only works with EOS disabled is not accepted today and broken tomorrow.
    """
    if value.errors or TransactionBoundary.parse(value.value) is not (
        TransactionBoundary.CONNECTOR
    ):
        return
    try:
        support = connector.can_define_transaction_boundaries(config)
    except Exception as e:
        redactor.log_exception(log, logging.ERROR, e, "Connector %s failed in "
                               "can_define_transaction_boundaries", type(connector).__name__)
        value.add_error_message(_unexpected(e))
        return
    if support is ConnectorTransactionBoundaries.SUPPORTED:
        return
    why = ("returned no answer from can_define_transaction_boundaries" if support is None
           else "does not support connector-defined transaction boundaries")
    value.add_error_message(
        f"The connector {why} with this configuration. Set {TRANSACTION_BOUNDARY_CONFIG} "
        "to poll or interval instead.")


def _connector_version(connector: SourceConnector) -> str | None:
    try:
        return str(connector.version())
    except Exception:  # a broken version() must not break validation
        log.warning("Connector %s failed in version()", type(connector).__name__, exc_info=True)
        return None


def _framework_def(connector: SourceConnector, config: dict[str, str],
                   worker_converters: Mapping[str, str]) -> ConfigDef:
    """The framework keys for this validation (see step 1 of the module docstring)."""
    # A worker converter that does not resolve here cannot be a valid default (it
    # would fail define()); the tasks report it, this validation shows no default.
    converters = {key: _resolvable(key, worker_converters.get(key)) for key in _CONVERTER_KEYS}
    versions: dict[str, str | None] = {"connector": _connector_version(connector)}
    for key in _CONVERTER_KEYS:
        effective = config.get(key) or converters[key]
        versions[key] = converter_version(effective) if effective else None
    framework_def = connector_config_def(versions, converters)
    if any(key in config for key in TOPIC_CREATION_DEFAULT_DEF.config_keys):
        framework_def = framework_def.merged(TOPIC_CREATION_DEFAULT_DEF)
    return framework_def


_CONVERTER_KEYS = (KEY_CONVERTER_CONFIG, VALUE_CONVERTER_CONFIG, HEADER_CONVERTER_CONFIG)


def _resolvable(key: str, class_name: str | None) -> str | None:
    if class_name is None:
        return None
    try:
        if key == HEADER_CONVERTER_CONFIG:
            resolve_header_converter_class(class_name, key)
        else:
            resolve_converter_class(class_name, key)
    except ConfigException:
        return None
    return class_name


def _check_framework_values(framework_def: ConfigDef, framework: dict[str, ConfigValue],
                            config: dict[str, str], plugin_classes: Mapping[str, str]) -> None:
    """Unsupported features and KIP-891 version pins, on values that parsed.

    ``plugin_classes`` maps a plugin key (``connector.class``, ``key.converter``,
    ...) to the class it names, for the messages.
    """
    for name, value in framework.items():
        if value.errors:
            continue
        why = unsupported_value(name, value.value)
        if why is not None:
            value.add_error_message(why)
    for plugin_key, class_name in plugin_classes.items():
        version_key = plugin_key.removesuffix(".class") + PLUGIN_VERSION_SUFFIX
        installed = framework_def.config_keys[version_key].default
        version_value = framework[version_key]
        if installed is not None:
            version_value.recommended_values = [installed]
        wanted = config.get(version_key)
        if wanted is None or version_value.errors or wanted.strip() == installed:
            continue
        # Connect reads a bare version as the exact range [v,v]; there is one version here.
        wanted = wanted.strip()
        range_ = wanted if wanted[:1] in "[(" else f"[{wanted},{wanted}]"
        message = (f"Plugin {class_name} not found that matches the version range {range_}, "
                   f"available versions: [{installed or ''}]")
        version_value.add_error_message(message)
        framework[plugin_key].add_error_message(message)


def _connector_own(
    connector: SourceConnector, config: dict[str, str], class_value: ConfigValue,
    redactor: Redactor,
) -> tuple[ConfigDef, list[ConfigValue]]:
    """The connector's ConfigDef and its ``validate`` result; failures land on ``class_value``."""
    try:
        config_def = connector.config_def()
        if not isinstance(config_def, ConfigDef):
            raise ConnectorContractException(
                f"config_def() returned {type(config_def).__name__}, not a ConfigDef")
        result = connector.validate(config)
        if not isinstance(result, Config):
            raise ConnectorContractException(
                f"validate() returned {type(result).__name__}, not a Config")
    except Exception as e:
        redactor.log_exception(log, logging.ERROR, e, "Connector %s failed to validate its "
                               "configuration", type(connector).__name__)
        class_value.add_error_message(_unexpected(e))
        return ConfigDef(), []
    return config_def, list(result.config_values)


def _fold_framework_reports(own_def: ConfigDef, own_values: list[ConfigValue],
                            framework: dict[str, ConfigValue]) -> list[ConfigValue]:
    """``own_values`` without those on framework keys the connector does not define:
    their errors join the framework's value for that key, whose value and
    recommendations stand (a connector reporting on ``exactly.once.support`` creates
    a bare ConfigValue, which would otherwise replace them)."""
    kept = []
    for value in own_values:
        target = framework.get(value.name) if value.name not in own_def.config_keys else None
        if target is None:
            kept.append(value)
            continue
        for message in value.errors:
            if message not in target.errors:
                target.add_error_message(message)
    return kept


def _merge_values(first: ConfigValue, second: ConfigValue) -> ConfigValue:
    """The connector's value wins, but no framework error is lost."""
    errors = first.errors + [e for e in second.errors if e not in first.errors]
    return ConfigValue(second.name, second.value, second.recommended_values, errors,
                       second.visible)


def _generate_result(
    name: str, keys: dict[str, ConfigKey], values: list[ConfigValue], groups: list[str]
) -> ConfigInfos:
    by_name: dict[str, ConfigValue] = {}
    for value in values:
        seen = by_name.get(value.name)
        by_name[value.name] = value if seen is None else _merge_values(seen, value)
    configs: list[tuple[ConfigKey | None, ConfigValue]] = [
        (None, v) for n, v in by_name.items() if n not in keys
    ]
    configs += [(key, by_name.get(n) or ConfigValue(n)) for n, key in keys.items()]
    error_count = sum(len(v.errors) for _, v in configs)
    return ConfigInfos(name, error_count, groups, configs)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


# What a UI offers for each converter key: the built-ins, as listings name them.
_CONVERTER_CHOICES = {KEY_CONVERTER_CONFIG: listed_converter_names(),
                      VALUE_CONVERTER_CONFIG: listed_converter_names(),
                      HEADER_CONVERTER_CONFIG: listed_header_converter_names()}


def validate_connector_config(
    connector: SourceConnector, config: dict[str, str], worker_eos_support: str,
    worker_converters: Mapping[str, str] | None = None,
    resolver: ConfigResolver | None = None, worker_task_cpus: int = 1,
) -> ConfigInfos:
    """Validate ``config`` for ``connector`` (see the module docstring). Never raises
    for a bad config or a misbehaving connector.

    ``worker_eos_support`` is the worker's ``exactly.once.source.support``
    (disabled, preparing or enabled). ``worker_converters`` holds the worker's
    ``key.converter``, ``value.converter`` and ``header.converter``, shown as those
    keys' defaults. ``resolver`` holds the worker's config providers (none if not
    given: then every variable is an error). ``worker_task_cpus`` is the worker's
    ``spark.task.cpus``: above 1, tasks may not share a process.
    """
    resolution = (resolver or NO_PROVIDERS).resolve(config)
    redactor = Redactor(resolution.secrets)
    redactor.add_values(_password_keys(connector), config, resolution.values)
    # In the submitted order, and with its nulls (step 1 reports them).
    resolved = {key: resolution.values.get(key, raw) for key, raw in config.items()}
    infos = _validate_resolved(connector, resolved, worker_eos_support,
                               worker_converters or {}, redactor, worker_task_cpus)
    return _as_submitted(infos, config, resolution, redactor)


def _check_sharing(value: ConfigValue, worker_task_cpus: int) -> None:
    """Tasks that share a process share its cores (the worker refuses the same
    combination in its own config)."""
    if value.errors or value.value is None or worker_task_cpus <= 1:
        return
    wanted = parse_tasks_per_process(value.value)  # valid: no errors
    if wanted is not None and wanted > 1:
        value.add_error_message(
            f"tasks cannot share a process on this worker: its spark.task.cpus="
            f"{worker_task_cpus} gives each task cores of its own; set "
            f"{TASKS_PER_PROCESS_CONFIG}=1, {TASKS_PER_PROCESS_AUTO} or leave it unset")


def _password_keys(connector: SourceConnector) -> frozenset[str]:
    try:
        config_def = connector.config_def()
    except Exception:  # reported by _connector_own, which calls it again
        return frozenset()
    return password_keys(config_def) if isinstance(config_def, ConfigDef) else frozenset()


def _as_submitted(infos: ConfigInfos, submitted: Mapping[str, str], resolution: Resolution,
                  redactor: Redactor) -> ConfigInfos:
    """What the answer may show: a key whose value held a variable shows the
    submitted value, with an error for each variable that did not resolve (a key no
    definition knows gets an entry for them, first, as Connect lists such values),
    and every message is scrubbed."""
    seen = {value.name for _, value in infos.configs}
    unknown: list[tuple[ConfigKey | None, ConfigValue]] = [
        (None, ConfigValue(key, submitted[key])) for key in submitted
        if key in resolution.errors and key not in seen]
    configs = unknown + list(infos.configs)
    for key, value in configs:
        if value.name in resolution.variable_keys:
            shown = submitted[value.name]
            value.value = shown if key is None or key.type is not Type.LIST else [shown]
        value.errors = [redactor.scrub(m) for m in value.errors]
        value.errors += [f"Invalid value for configuration {value.name}: {m}"
                         for m in resolution.errors.get(value.name, [])]
    error_count = sum(len(v.errors) for _, v in configs)
    return ConfigInfos(infos.name, error_count, infos.groups, configs)


def _validate_resolved(
    connector: SourceConnector, config: dict[str, str], worker_eos_support: str,
    worker_converters: Mapping[str, str], redactor: Redactor, worker_task_cpus: int = 1,
) -> ConfigInfos:
    """Steps 1-5 of the module docstring on the resolved ``config``."""
    framework_def = _framework_def(connector, config, worker_converters)
    framework = {v.name: v for v in framework_def.validate(config)}
    for key, raw in config.items():
        if raw is None:  # JSON null can reach us from REST despite the type
            framework.setdefault(key, ConfigValue(key)).add_error_message(
                "Null value can not be supplied as the configuration value.")
    plugin_classes = {CONNECTOR_CLASS_CONFIG: _qualified(type(connector))}
    plugin_classes.update({key: str(framework[key].value) for key in _CONVERTER_KEYS
                           if framework[key].value is not None and not framework[key].errors})
    _check_framework_values(framework_def, framework, config, plugin_classes)
    for key in _CONVERTER_KEYS:
        framework[key].recommended_values = list(_CONVERTER_CHOICES[key])
    own_def, own_values = _connector_own(connector, config, framework[CONNECTOR_CLASS_CONFIG],
                                         redactor)
    explained = any(v.errors for v in own_values if v.name == EXACTLY_ONCE_SUPPORT_CONFIG)
    _check_exactly_once(connector, config, framework[EXACTLY_ONCE_SUPPORT_CONFIG],
                        worker_eos_support, redactor, explained)
    _check_transaction_boundary(connector, config, framework[TRANSACTION_BOUNDARY_CONFIG],
                                redactor)
    _check_sharing(framework[TASKS_PER_PROCESS_CONFIG], worker_task_cpus)
    own_values = _fold_framework_reports(own_def, own_values, framework)

    plugins = validate_plugins(config)
    _validate_converters(config, framework, plugins)
    keys = dict(framework_def.config_keys)
    keys.update(plugins.keys)
    keys.update(own_def.config_keys)
    groups = list(dict.fromkeys(framework_def.groups() + plugins.groups + own_def.groups()))
    class_name = config.get(CONNECTOR_CLASS_CONFIG) or type(connector).__qualname__
    values = list(framework.values()) + plugins.values + own_values
    return _generate_result(class_name, keys, values, groups)


def _validate_converters(config: dict[str, str], framework: dict[str, ConfigValue],
                         out: PluginValidation) -> None:
    """Step 3 for converters: each one the config names (and that resolved) gets its
    keys checked under its prefix, then a dry ``configure``; errors go on the
    prefixed key they name, else on the converter key itself."""
    for key in _CONVERTER_KEYS:
        class_name = config.get(key)
        if not class_name or framework[key].errors:
            continue
        try:
            cls = (resolve_header_converter_class(class_name, key)
                   if key == HEADER_CONVERTER_CONFIG else resolve_converter_class(class_name, key))
        except ConfigException:
            continue
        own_def = converter_config_def(cls)
        if not own_def.config_keys:
            continue
        prefix = key + "."
        embedded = prefixed_def(own_def, prefix)  # names prefixed; groups kept, as Connect
        values = embedded.validate(config)
        out.keys.update(embedded.config_keys)
        out.values += values
        out.groups += [g for g in embedded.groups() if g not in out.groups]
        if any(v.errors for v in values):
            continue
        sub = {k[len(prefix):]: v for k, v in config.items()
               if k.startswith(prefix) and v is not None}
        converter = cls()
        try:
            if key == HEADER_CONVERTER_CONFIG:
                converter.configure(sub)
            else:
                converter.configure(sub, key == KEY_CONVERTER_CONFIG)
        except ConfigException as e:
            by_name = {v.name: v for v in values}
            target = by_name.get(e.name or "") or by_name.get(prefix + (e.name or "")) \
                or framework[key]
            target.add_error_message(str(e))
        except Exception as e:  # a converter's own bug must not break validation
            framework[key].add_error_message(_unexpected(e))
        close = getattr(converter, "close", None)
        if callable(close):
            close()


def format_validation_errors(infos: ConfigInfos) -> str:
    """Connect's message for a rejected config (the body of the REST 400)."""
    lines = [f"Connector configuration is invalid and contains the following "
             f"{infos.error_count} error(s):"]
    lines += infos.error_messages()
    lines.append(_VALIDATE_ENDPOINT_HINT)
    return "\n".join(lines)
