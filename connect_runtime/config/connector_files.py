"""Connector files: connectors declared in files rather than created by REST calls.

Two places read them: ``connect-runtime standalone worker.properties a.properties
b.json ...`` (Kafka Connect's ``connect-standalone`` shape) and a distributed
worker's ``declared.connectors.dir``, which the leader reconciles
(:mod:`connect_runtime.cluster.declared_connectors`). A file is one connector, in
one of the forms Kafka Connect's standalone mode reads (KIP-980):

* ``.properties``: the connector's config; ``name`` is mandatory.
* ``.json``, a flat object of strings: the same, as JSON.
* ``.json``, the body of ``POST /connectors``: ``{"name": ..., "config": {...},
  "initial_state": "RUNNING|PAUSED|STOPPED"}``, plus one key of ours, ``"state"``:
  the target state the file *declares* (enforced on every pass, where
  ``initial_state`` only applies when the connector is created).

Invariants: parsing reads the file and nothing else (no plugin, no Kafka); every
error is a :class:`ConfigException` whose message starts with the file's path and
names the key or line at fault. Config values are strings, as in Connect (JSON
numbers and booleans are written as Java would print them).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connect_runtime.errors import ConfigException
from connect_runtime.java_properties import parse_properties

__all__ = [
    "STATES",
    "DeclaredConnector",
    "DirectoryScan",
    "FileError",
    "load_connector_file",
    "load_connector_files",
    "scan_directory",
]

STATES = ("RUNNING", "PAUSED", "STOPPED")
_REQUEST_FIELDS = ("name", "config", "initial_state", "state")
FILE_SUFFIXES = (".properties", ".json")
# A connector's config must fit in one config-topic record (1 MB by default):
# a larger file cannot be applied, so it is not read either.
MAX_FILE_BYTES = 1_000_000


@dataclass(frozen=True, slots=True)
class DeclaredConnector:
    """One connector file, parsed. ``file`` is how the file is named in reports and
    in the config topic's ownership record: its path as given (standalone) or its
    name inside the directory (``declared.connectors.dir``). ``digest`` changes
    whenever the file's bytes do."""

    file: str
    name: str
    config: dict[str, str]
    state: str | None = None
    initial_state: str | None = None
    digest: str = ""


@dataclass(frozen=True, slots=True)
class FileError:
    """A file that could not be parsed (or that clashes with another): why, with
    the file and the key or line named."""

    file: str
    message: str


@dataclass(frozen=True, slots=True)
class DirectoryScan:
    """Every connector file of a directory: the parsed ones, the broken ones, and
    the names of all of them (a broken file still holds on to what it declared
    before: its connector is never deleted while the file exists)."""

    connectors: tuple[DeclaredConnector, ...]
    errors: tuple[FileError, ...]
    files: frozenset[str]


def _string_value(file: str, key: str, value: Any) -> str:
    if isinstance(value, bool):  # before int: bool is an int in Python
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return json.dumps(value)
    raise ConfigException(f"{file}: config key '{key}' must be a string, not "
                          f"{'null' if value is None else type(value).__name__}")


def _string_map(file: str, data: dict[str, Any]) -> dict[str, str]:
    return {str(k): _string_value(file, str(k), v) for k, v in data.items()}


def _state(file: str, body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or value.upper() not in STATES:
        raise ConfigException(f"{file}: '{key}' must be one of {', '.join(STATES)}, "
                              f"not {json.dumps(value)}")
    return value.upper()


def _from_request(file: str, body: dict[str, Any], digest: str) -> DeclaredConnector:
    unknown = [key for key in body if key not in _REQUEST_FIELDS]
    if unknown:
        raise ConfigException(f"{file}: unknown key(s) {', '.join(repr(k) for k in unknown)}; "
                              f"a connector file holds {', '.join(_REQUEST_FIELDS)}")
    name, config = body.get("name"), body.get("config")
    if not isinstance(config, dict):
        raise ConfigException(f"{file}: 'config' must be an object of strings")
    config = _string_map(file, config)
    if not isinstance(name, str) or not name.strip():
        name = config.get("name")
    if not name or not name.strip():
        raise ConfigException(f"{file}: the connector has no 'name'")
    if config.setdefault("name", name) != name:
        raise ConfigException(f"{file}: the name in 'config' ({config['name']}) is not the "
                              f"connector's 'name' ({name})")
    return DeclaredConnector(file, name, config, _state(file, body, "state"),
                             _state(file, body, "initial_state"), digest)


def _from_config(file: str, config: dict[str, str], digest: str) -> DeclaredConnector:
    name = config.get("name", "")
    if not name.strip():
        raise ConfigException(f"{file}: the connector config is missing the mandatory "
                              f"'name' key")
    return DeclaredConnector(file, name, config, digest=digest)


def _parse_json(file: str, text: str, digest: str) -> DeclaredConnector:
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigException(f"{file}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from e
    if not isinstance(body, dict):
        raise ConfigException(f"{file}: a connector file holds a JSON object, not "
                              f"{type(body).__name__}")
    if isinstance(body.get("config"), dict):
        return _from_request(file, body, digest)
    return _from_config(file, _string_map(file, body), digest)


def _unreadable(file: str, error: OSError) -> ConfigException:
    return ConfigException(f"{file}: cannot read the connector file: {error.strerror}")


def load_connector_file(path: str | Path, label: str | None = None) -> DeclaredConnector:
    """Parse one connector file; ``label`` names it in errors (default: ``path``).

    JSON when the name ends in ``.json`` or the text starts with ``{`` (Connect's
    standalone mode tries JSON first), Java properties otherwise.
    """
    file = label if label is not None else str(path)
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            # Never more than one byte past the limit: the file may grow meanwhile.
            data = f.read(MAX_FILE_BYTES + 1) if size <= MAX_FILE_BYTES else b""
    except OSError as e:
        raise _unreadable(file, e) from e
    if max(size, len(data)) > MAX_FILE_BYTES:
        raise ConfigException(f"{file}: the connector file is {max(size, len(data))} bytes, "
                              f"over the {MAX_FILE_BYTES} a connector file may have")
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigException(f"{file}: not UTF-8 text (byte {e.start})") from e
    if str(path).endswith(".json") or text.lstrip().startswith("{"):
        return _parse_json(file, text, digest)
    return _from_config(file, parse_properties(text, file), digest)


def load_connector_files(paths: Sequence[str]) -> list[DeclaredConnector]:
    """Standalone mode's files, in order. Raises on the first bad file, and when two
    files declare the same connector."""
    declared = [load_connector_file(path) for path in paths]
    seen: dict[str, str] = {}
    for d in declared:
        if d.name in seen:
            raise ConfigException(f"{d.file}: connector {d.name} is already declared by "
                                  f"{seen[d.name]}")
        seen[d.name] = d.file
    return declared


class ParsedFiles:
    """What each connector file parsed to, reused while the file is unchanged (its
    size, modification and change times and inode): a directory is scanned every
    few seconds, and a large file parsed on every scan cost most of a core.

    Owned by the one thread that scans (the declared connectors' loop).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[tuple[int, ...], DeclaredConnector | str]] = {}

    def load(self, path: Path, label: str) -> DeclaredConnector:
        """:func:`load_connector_file`, or what it gave for the same file before."""
        try:
            st = os.stat(path)
        except OSError as e:
            raise _unreadable(label, e) from e
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        seen = self._entries.get(str(path))
        if seen is None or seen[0] != key:
            try:
                result: DeclaredConnector | str = load_connector_file(path, label)
            except ConfigException as e:
                result = str(e)  # a message: re-raising one exception grows its traceback
            seen = self._entries[str(path)] = (key, result)
        if isinstance(seen[1], str):
            raise ConfigException(seen[1])
        return seen[1]

    def keep_only(self, paths: set[str]) -> None:
        """Forget the files no longer there."""
        for gone in self._entries.keys() - paths:
            del self._entries[gone]


def scan_directory(directory: str | Path, cache: ParsedFiles | None = None) -> DirectoryScan:
    """Every ``*.properties`` and ``*.json`` file directly in ``directory``;
    ``cache`` reuses what unchanged files parsed to before.

    Hidden names are skipped: a Kubernetes ConfigMap volume holds ``..data`` and
    timestamped directories beside the symlinks that are its keys. Two files that
    declare the same connector are both errors (neither applies).
    """
    parsed_files = cache if cache is not None else ParsedFiles()
    root = Path(directory)
    try:
        names = sorted(os.listdir(root))
    except OSError as e:
        raise ConfigException(f"cannot list declared.connectors.dir {root}: {e.strerror}",
                              ) from e
    parsed: list[DeclaredConnector] = []
    errors: list[FileError] = []
    files: set[str] = set()
    for name in names:
        if name.startswith(".") or not name.endswith(FILE_SUFFIXES) \
                or not (root / name).is_file():
            continue
        files.add(name)
        try:
            parsed.append(parsed_files.load(root / name, name))
        except ConfigException as e:
            errors.append(FileError(name, str(e)))
    parsed_files.keep_only({str(root / name) for name in files})
    by_name: dict[str, list[DeclaredConnector]] = {}
    for d in parsed:
        by_name.setdefault(d.name, []).append(d)
    good = []
    for d in parsed:
        clash = [o.file for o in by_name[d.name] if o is not d]
        if clash:
            errors.append(FileError(d.file, f"{d.file}: connector {d.name} is also declared "
                                            f"by {', '.join(clash)}; neither file applies"))
        else:
            good.append(d)
    return DirectoryScan(tuple(good), tuple(errors), frozenset(files))
