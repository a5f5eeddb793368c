"""Config providers (KIP-297, KIP-421): secrets referred to by ``${provider:[path:]key}``.

A worker names its providers as Kafka Connect's do::

    config.providers=file,env
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.file.param.allowed.paths=/etc/connect/secrets
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.env.param.allowlist.pattern=DB_.*

and a connector config says
``"db.password": "${file:/etc/connect/secrets/db.properties:password}"``.

Invariants (docs/security.md has the user's side, docs/architecture.md decision 51 the why):

* Variables are found with Kafka's ``ConfigTransformer`` pattern
  (:data:`VARIABLE_PATTERN`): ``${provider:key}`` has an empty path,
  ``${provider:path:key}`` splits at the *first* colon after the provider, so a key
  may hold colons and a path may not. Each (provider, path) is asked once per
  resolution, for all the keys wanted from it, as Kafka does.
* The config topic and the REST API hold what the user submitted (the
  placeholders). Values are resolved only where they are used: on the worker
  that starts the connector and on the executor that starts a task
  (``TaskSpec.config_providers`` carries the provider settings, never a value).
* Kafka leaves a variable it cannot resolve as it is. Here, in a connector config,
  it is an error on that key (:attr:`Resolution.errors`): a provider not in
  ``config.providers``, a missing file, key or variable, a path outside
  ``allowed.paths``. In the worker config an unknown provider name is left as
  it is (Spark's own ``${env:...}`` syntax may be meant), a configured one
  that cannot answer is an error.
* No message built here quotes a resolved value: errors name the key, the
  variable (``${file:/path:key}``, which is not secret) and the reason.

A provider is any class with this contract (:class:`ConfigProvider`)::

    class VaultProvider:
        def configure(self, params: dict[str, str]) -> None: ...      # the .param.* keys
        def get(self, path: str, keys: set[str]) -> dict[str, str]: ...

``get`` returns the values it has; a key it leaves out is reported missing. It
raises :class:`~connect_runtime.errors.ConfigException` when it cannot answer for
``path``; ``configure`` raises it with ``name`` set to the param at fault. A
provider is named in ``config.providers.<name>.class`` by its import path
(``module.Class``), or, for the three built-ins, by Kafka's class name (or its
simple name, or the simple name without ``ConfigProvider``, as Connect's plugin
aliases allow).
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, runtime_checkable

from connect_runtime.errors import ConfigException
from connect_runtime.java_properties import parse_properties
from connect_runtime.transforms.java_regex import compile_java

CONFIG_PROVIDERS_CONFIG = "config.providers"
_PARAM = ".param."

VARIABLE_PATTERN = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
"""Kafka's ``ConfigTransformer.DEFAULT_PATTERN``: ``${provider:[path:]key}``."""

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
ENV_VAR_PROVIDER = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
DIRECTORY_PROVIDER = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ALLOWED_PATHS_CONFIG = "allowed.paths"
ALLOWLIST_PATTERN_CONFIG = "allowlist.pattern"


@runtime_checkable
class ConfigProvider(Protocol):
    """What a config provider does (see the module docstring for the contract)."""

    def configure(self, params: dict[str, str]) -> None:
        """Take the ``config.providers.<name>.param.*`` settings (prefix stripped)."""

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        """The values of ``keys`` at ``path`` ("" when the variable has none) that exist."""
        ...


@dataclass(frozen=True)
class Variable:
    """One ``${provider:[path:]key}`` occurrence; ``text`` is the whole variable."""

    text: str
    provider: str
    path: str
    key: str


def find_variables(value: str) -> list[Variable]:
    """The variables in ``value``, left to right."""
    return [Variable(m.group(0), m.group(1), m.group(3) or "", m.group(4))
            for m in VARIABLE_PATTERN.finditer(value)]


def keys_with_variables(config: Mapping[str, str | None]) -> frozenset[str]:
    """The keys of ``config`` whose value holds at least one variable."""
    return frozenset(k for k, v in config.items()
                     if isinstance(v, str) and VARIABLE_PATTERN.search(v))


def reverse_transform(raw_connector_config: Mapping[str, str],
                      task_configs: Iterable[Mapping[str, str]]) -> list[dict[str, str]]:
    """Task configs as the config topic must hold them (Connect's
    ``AbstractHerder.reverseTransform``): a task key whose name is a key of the
    connector's raw config holding a variable gets that raw value back, so the
    resolved secret a connector copied into its task configs is not written.

    A connector that puts a secret under a key of its own choosing defeats this,
    in Connect as here: the task config holds the value it was given.
    """
    variable_keys = keys_with_variables(raw_connector_config)
    out = []
    for config in task_configs:
        reversed_config = dict(config)
        for key in variable_keys & reversed_config.keys():
            reversed_config[key] = raw_connector_config[key]
        out.append(reversed_config)
    return out


# ---------------------------------------------------------------------------
# The built-in providers, as Kafka 4.1's


class AllowedPaths:
    """KIP-993's ``allowed.paths``: a comma-separated list of absolute, existing paths.

    Unset or empty allows every path. A path is allowed when, normalised (``..``
    folded, lexically, as Java's ``Path.normalize``), it is one of them or lies
    under one (whole path components, as Java's ``Path.startsWith``). Entries are
    not trimmed, as in Kafka: ``"/a, /b"`` names the relative path ``" /b"`` and is
    refused.
    """

    def __init__(self, value: str | None) -> None:
        self.paths: list[PurePosixPath] | None = None
        if not value:
            return
        self.paths = []
        for entry in value.split(","):
            normal = PurePosixPath(os.path.normpath(entry)) if entry else PurePosixPath(".")
            if not normal.is_absolute():
                raise ConfigException(f"Path {entry} is not absolute", name=ALLOWED_PATHS_CONFIG,
                                      value=value)
            if not os.path.exists(normal):
                raise ConfigException(f"Path {normal} does not exist", name=ALLOWED_PATHS_CONFIG,
                                      value=value)
            self.paths.append(normal)

    def check(self, path: str) -> Path:
        """``path`` to open; ConfigException if ``allowed.paths`` does not cover it."""
        if self.paths is None:
            return Path(path)
        normal = PurePosixPath(os.path.normpath(path))
        if not any(normal == allowed or allowed in normal.parents for allowed in self.paths):
            raise ConfigException(f"the path {path} is not in {ALLOWED_PATHS_CONFIG} of this "
                                  "config provider")
        return Path(normal)


class _PathProvider:
    """What the file and directory providers share: the ``allowed.paths`` param."""

    def __init__(self) -> None:
        self._allowed = AllowedPaths(None)

    def configure(self, params: dict[str, str]) -> None:
        self._allowed = AllowedPaths(params.get(ALLOWED_PATHS_CONFIG))


def _unreadable(error: OSError | UnicodeDecodeError) -> str:
    """Why a secret file could not be read, without its content."""
    if isinstance(error, UnicodeDecodeError):
        return "not UTF-8 text"
    return error.strerror or type(error).__name__


class FileConfigProvider(_PathProvider):
    """``${file:/path/to/file.properties:key}``: a key of a Java properties file.

    Param ``allowed.paths`` (KIP-993). The file is read (UTF-8) at each resolution,
    so a rotated secret is picked up by the next connector or task start.
    """

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        if not path:
            return {}
        file = self._allowed.check(path)
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigException(f"Could not read properties from file {path}: "
                                  f"{_unreadable(e)}") from None
        # quote_lines=False: a malformed line of a secrets file stays out of the message.
        data = parse_properties(text, path, quote_lines=False)
        return {key: data[key] for key in keys if key in data}


class EnvVarConfigProvider:
    """``${env:NAME}``: an environment variable of this process (worker or executor).

    Param ``allowlist.pattern`` (KIP-887, a Java regex that must match the whole
    name; default: every variable). The environment is read when the provider is
    created, as Kafka's is. A variable with a path is refused, as in Kafka.
    """

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self._environ = dict(os.environ if environ is None else environ)
        self._visible = dict(self._environ)

    def configure(self, params: dict[str, str]) -> None:
        pattern = params.get(ALLOWLIST_PATTERN_CONFIG)
        if pattern is None:
            self._visible = dict(self._environ)
            return
        try:
            regex = compile_java(pattern)
        except ConfigException as e:
            raise ConfigException(f"not a regular expression: {e}",
                                  name=ALLOWLIST_PATTERN_CONFIG, value=pattern) from None
        self._visible = {k: v for k, v in self._environ.items() if regex.fullmatch(k)}

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        if path:
            raise ConfigException("Path is not supported for EnvVarConfigProvider, invalid "
                                  f"value '{path}'")
        return {key: self._visible[key] for key in keys if key in self._visible}


class DirectoryConfigProvider(_PathProvider):
    """``${directory:/path/to/dir:name}``: the whole content (UTF-8, trailing newline
    included, as Kafka reads it) of the regular file ``name`` in a directory, the
    layout of a mounted Kubernetes Secret. Param ``allowed.paths`` (KIP-993).

    Names are matched against the directory's listing, so ``name`` can never
    reach outside it.
    """

    def get(self, path: str, keys: set[str]) -> dict[str, str]:
        if not path:
            return {}
        directory = self._allowed.check(path)
        if not directory.is_dir():
            raise ConfigException(f"the path {path} is not a directory")
        out: dict[str, str] = {}
        try:
            for entry in directory.iterdir():
                if entry.name in keys and entry.is_file():
                    out[entry.name] = entry.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigException(f"Could not read the files of directory {path}: "
                                  f"{_unreadable(e)}") from None
        return out


def _aliases(java_name: str) -> list[str]:
    """Connect's plugin aliases: the class name, its simple name, and the simple
    name without the ``ConfigProvider`` suffix."""
    simple = java_name.rsplit(".", 1)[1]
    return [java_name, simple, simple.removesuffix("ConfigProvider")]


_BUILT_IN_NAMES = (FILE_PROVIDER, ENV_VAR_PROVIDER, DIRECTORY_PROVIDER)
BUILT_IN_PROVIDERS: dict[str, type[Any]] = {
    alias: cls for java_name, cls in zip(
        _BUILT_IN_NAMES, (FileConfigProvider, EnvVarConfigProvider, DirectoryConfigProvider),
        strict=True)
    for alias in _aliases(java_name)}
"""Built-in provider classes by every name a worker config may give them."""


# ---------------------------------------------------------------------------
# Settings (what the worker config says, shipped to executors) and instances


@dataclass(frozen=True)
class ProviderSetting:
    """One named provider: its class name and ``param.*`` settings (prefix stripped)."""

    name: str
    class_name: str
    params: dict[str, str] = field(default_factory=dict)

    @property
    def class_key(self) -> str:
        return f"{CONFIG_PROVIDERS_CONFIG}.{self.name}.class"

    def instantiate(self) -> ConfigProvider:
        """A configured instance; ConfigException naming the worker key at fault."""
        cls = _provider_class(self.class_key, self.class_name)
        try:
            provider = cls()
            provider.configure(dict(self.params))
        except ConfigException as e:
            if e.name is None:
                raise ConfigException(str(e), name=self.class_key, value=self.class_name) from e
            param = f"{CONFIG_PROVIDERS_CONFIG}.{self.name}{_PARAM}{e.name}"
            raise ConfigException(_reason(e), name=param, value=e.value) from e
        except Exception as e:
            raise ConfigException(f"the config provider failed to start: {type(e).__name__}: "
                                  f"{e}", name=self.class_key, value=self.class_name) from e
        if not isinstance(provider, ConfigProvider):
            raise ConfigException("not a config provider: it needs configure(params) and "
                                  "get(path, keys)", name=self.class_key, value=self.class_name)
        return provider


def _reason(error: ConfigException) -> str:
    """A named ConfigException's message without its "Invalid value ..." lead."""
    lead = f"Invalid value {error.value!r} for configuration {error.name}: "
    return str(error).removeprefix(lead)


def _provider_class(key: str, class_name: str) -> type[Any]:
    built_in = BUILT_IN_PROVIDERS.get(class_name)
    if built_in is not None:
        return built_in
    module_name, _, attr = class_name.rpartition(".")
    try:
        if not module_name:
            raise ImportError(f"no module in {class_name!r}")
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise ConfigException(
            "Could not load config provider class or one of its dependencies: it is neither "
            f"a built-in ({', '.join(_BUILT_IN_NAMES)}) nor an importable module.Class ({e})",
            name=key, value=class_name) from None
    if not isinstance(cls, type):
        raise ConfigException("not a class", name=key, value=class_name)
    return cls


@dataclass(frozen=True)
class ConfigProviders:
    """The worker's ``config.providers`` settings: plain data, picklable, so a
    :class:`~connect_runtime.protocol.task_spec.TaskSpec` carries them to executors,
    which build their own instances. Params may hold credentials of a provider
    (a vault token): no repr shows them."""

    settings: tuple[ProviderSetting, ...] = field(default=(), repr=False)

    @classmethod
    def from_worker_config(cls, originals: Mapping[str, str]) -> ConfigProviders:
        """The providers ``config.providers`` lists, each with its ``.class`` and
        ``.param.*`` keys. A listed name without a class is a ConfigException
        naming ``config.providers.<name>.class`` (Kafka skips such a name, and
        every variable using it would then stay unresolved)."""
        listed = originals.get(CONFIG_PROVIDERS_CONFIG, "").strip()
        names = [n for n in re.split(r"\s*,\s*", listed) if n] if listed else []
        settings = []
        for name in dict.fromkeys(names):
            class_key = f"{CONFIG_PROVIDERS_CONFIG}.{name}.class"
            class_name = (originals.get(class_key) or "").strip()
            if not class_name:
                raise ConfigException(f"{CONFIG_PROVIDERS_CONFIG} names '{name}', which needs "
                                      "a class", name=class_key, value=class_name or None)
            prefix = f"{CONFIG_PROVIDERS_CONFIG}.{name}{_PARAM}"
            params = {k[len(prefix):]: v for k, v in originals.items()
                      if k.startswith(prefix) and len(k) > len(prefix)}
            settings.append(ProviderSetting(name, class_name, params))
        return cls(tuple(settings))

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.settings]

    def instantiate(self) -> ConfigResolver:
        """A resolver over fresh, configured instances; ConfigException naming the
        worker key of the first provider that cannot be loaded or configured."""
        return ConfigResolver({s.name: s.instantiate() for s in self.settings})


# ---------------------------------------------------------------------------
# Resolution


@dataclass(frozen=True)
class Resolution:
    """The outcome of resolving one config.

    ``values``: the config with every resolvable variable replaced (a variable that
    could not be resolved stays as written). ``errors``: key -> why its
    variables could not be resolved (messages quote variables, never values).
    ``secrets``: every value a provider supplied, for redaction.
    ``variable_keys``: the keys whose submitted value holds a variable.
    """

    values: dict[str, str]
    errors: dict[str, list[str]]
    secrets: frozenset[str]
    variable_keys: frozenset[str]

    def raise_for_errors(self) -> None:
        """ConfigException naming the first key (in config order) that has an error."""
        for key, messages in self.errors.items():
            error = ConfigException(f"Configuration {key}: {'; '.join(messages)}")
            error.name = key  # the message names it; the value is not shown on purpose
            raise error


class ConfigResolver:
    """Resolves variables with a fixed set of named provider instances.

    Instances are shared by callers (REST threads, the reconcile thread): the
    built-ins keep no state between calls beyond their settings.
    """

    def __init__(self, providers: Mapping[str, ConfigProvider]) -> None:
        self.providers = dict(providers)

    def resolve(self, config: Mapping[str, str | None], *,
                unknown_providers_ok: bool = False) -> Resolution:
        """Replace the variables of ``config``'s values (see :class:`Resolution`).

        ``unknown_providers_ok`` leaves a variable of a provider not configured
        here as it is, without an error (the worker config's rule).
        """
        wanted: dict[tuple[str, str], set[str]] = {}
        found: dict[str, list[Variable]] = {}
        for key, value in config.items():
            if isinstance(value, str):
                variables = find_variables(value)
                if variables:
                    found[key] = variables
                    for var in variables:
                        wanted.setdefault((var.provider, var.path), set()).add(var.key)
        answers, failures = self._ask(wanted)
        values = {k: v for k, v in config.items() if v is not None}
        errors: dict[str, list[str]] = {}
        secrets: set[str] = set()
        for key, variables in found.items():
            text = str(config[key])
            for var in variables:
                reason = self._why_unresolved(var, answers, failures, unknown_providers_ok)
                if reason:
                    errors.setdefault(key, []).append(f"cannot resolve {var.text}: {reason}")
            values[key] = VARIABLE_PATTERN.sub(
                lambda m: self._replacement(m, answers, secrets), text)
        return Resolution(values, errors, frozenset(secrets), frozenset(found))

    def _ask(self, wanted: dict[tuple[str, str], set[str]]
             ) -> tuple[dict[tuple[str, str], dict[str, str]], dict[tuple[str, str], str]]:
        """One ``get`` per (provider, path), as Kafka's transformer makes."""
        answers: dict[tuple[str, str], dict[str, str]] = {}
        failures: dict[tuple[str, str], str] = {}
        for (name, path), keys in wanted.items():
            provider = self.providers.get(name)
            if provider is None:
                continue
            try:
                data = provider.get(path, set(keys))
            except ConfigException as e:
                failures[(name, path)] = str(e)
                continue
            except Exception as e:  # a user provider's bug: say so, with its type
                failures[(name, path)] = f"the config provider failed: {type(e).__name__}: {e}"
                continue
            answers[(name, path)] = {k: v for k, v in (data or {}).items()
                                     if isinstance(k, str) and isinstance(v, str)}
        return answers, failures

    def _why_unresolved(self, var: Variable, answers: dict[tuple[str, str], dict[str, str]],
                        failures: dict[tuple[str, str], str],
                        unknown_providers_ok: bool) -> str | None:
        where = (var.provider, var.path)
        if var.provider not in self.providers:
            if unknown_providers_ok:
                return None
            configured = ", ".join(self.providers) or "none"
            return (f"no config provider named '{var.provider}' in {CONFIG_PROVIDERS_CONFIG} "
                    f"of this worker (configured: {configured})")
        if where in failures:
            return failures[where]
        if var.key not in answers.get(where, {}):
            at = f" at path {var.path}" if var.path else ""
            return f"config provider '{var.provider}' has no value for key '{var.key}'{at}"
        return None

    @staticmethod
    def _replacement(match: re.Match[str], answers: dict[tuple[str, str], dict[str, str]],
                     secrets: set[str]) -> str:
        found = answers.get((match.group(1), match.group(3) or ""), {}).get(match.group(4))
        if found is None:
            return match.group(0)  # Kafka leaves what it cannot resolve as written
        secrets.add(found)
        return found


NO_PROVIDERS = ConfigResolver({})
"""A resolver with no provider: every variable is an unknown provider's."""
