"""Declared connectors: the leader makes the config topic match a set of connector files.

The files come from ``declared.connectors.dir`` (a directory; the Helm chart's
``connectors:`` values become a ConfigMap mounted there) or from standalone
mode's command line. Their format is :mod:`connect_runtime.config.connector_files`.

One pass (:meth:`DeclaredConnectors.reconcile_once`), on the leader only:

1. Scan the files. A file that does not parse, or that declares a connector
   another file declares too, is reported (file, key or line) and changes nothing.
2. For each good file: create its connector, or rewrite its config when it
   differs, after validating it exactly as ``POST /connectors`` does; a config
   that fails validation is reported with its keys and changes nothing. The
   config and an ownership record (``declared-connector-<name>`` in the config
   topic) go in one transaction. A file's ``state`` is then enforced;
   ``initial_state`` only applies at creation.
3. Delete every connector a file owned whose file is gone or now declares
   another connector. A broken file keeps what it owned: a typo never deletes.

Connectors created by REST are left alone unless a file names one (it then
takes it over). REST writes to a file's connector are refused (409: change the
file), and so are pause/resume/stop when the file declares a ``state``.

Passes run every ``declared.connectors.poll.interval.ms`` and when this worker
becomes leader. A failed validation is not retried until the file changes, so
a broken file costs one validation, not one per pass, and is logged once.
Ownership: one thread (this class's) runs passes; the report it publishes is
replaced whole under ``_lock``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from connect_runtime.cluster.herder_api import HERDER_LOGGER
from connect_runtime.cluster.herder_reads import validate_for_worker
from connect_runtime.config.connector_files import (
    DeclaredConnector,
    DirectoryScan,
    FileError,
    ParsedFiles,
    load_connector_file,
    load_connector_files,
    scan_directory,
)
from connect_runtime.config.validation import ConfigInfos, format_validation_errors
from connect_runtime.config.worker_config import WorkerConfig
from connect_runtime.errors import ConfigException, ConnectError
from connect_runtime.protocol.states import TargetState
from connect_runtime.storage.config_store import ClusterConfigState, DeclaredOwner

log = logging.getLogger(HERDER_LOGGER)

TARGETS = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED,
           "STOPPED": TargetState.STOPPED}

APPLIED, INVALID = "APPLIED", "INVALID"


class ConnectorFiles(Protocol):
    """Where the files come from."""

    description: str

    def scan(self) -> DirectoryScan: ...


class DirectoryFiles:
    """``declared.connectors.dir``: files are named by their name in it."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.description = f"declared.connectors.dir={directory}"
        self._parsed = ParsedFiles()  # the scanning thread's

    def scan(self) -> DirectoryScan:
        return scan_directory(self.directory, self._parsed)


class CommandLineFiles:
    """Standalone mode's files, named by their absolute paths."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = tuple(os.path.abspath(p) for p in paths)
        self.description = "the standalone command line"

    def scan(self) -> DirectoryScan:
        good: list[DeclaredConnector] = []
        errors: list[FileError] = []
        for path in self.paths:
            try:
                good.append(load_connector_file(path))
            except ConfigException as e:
                errors.append(FileError(path, str(e)))
        return DirectoryScan(tuple(good), tuple(errors), frozenset(self.paths))


@dataclass(frozen=True, slots=True)
class FileReport:
    """What the last pass made of one file: APPLIED (its connector matches it) or
    INVALID (``error`` says why, naming the key or line)."""

    file: str
    connector: str | None
    status: str
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "connector": self.connector, "status": self.status,
                "error": self.error}


@dataclass(frozen=True, slots=True)
class DeclaredReport:
    source: str
    files: tuple[FileReport, ...] = ()
    last_pass_ms: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "last_pass_ms": self.last_pass_ms,
                "files": [f.to_dict() for f in self.files]}


@dataclass(frozen=True, slots=True)
class DeclaredWrites:
    """The herder's parts a pass uses (late-bound, like the herder's others)."""

    snapshot: Callable[[], ClusterConfigState]
    validate: Callable[[dict[str, str]], ConfigInfos]
    put: Callable[[str, dict[str, str], TargetState | None, DeclaredOwner], None]
    set_target: Callable[[str, TargetState], None]
    delete: Callable[[str], None]
    is_leader: Callable[[], bool]


def validation_error(validate: Callable[[dict[str, str]], ConfigInfos],
                     declared: DeclaredConnector) -> str | None:
    """Why ``declared``'s config would be refused by ``POST /connectors``, or None."""
    try:
        infos = validate({**declared.config, "name": declared.name})
    except ConnectError as e:  # no connector.class, an unknown class, ...
        return f"{declared.file}: {e}"
    if infos.error_count:
        return f"{declared.file}: {format_validation_errors(infos)}"
    return None


class DeclaredConnectors:
    """The reconcile thread for connector files (see the module docstring)."""

    def __init__(self, files: ConnectorFiles, writes: DeclaredWrites, interval_s: float,
                 stopping: threading.Event) -> None:
        self._files = files
        self._writes = writes
        self._interval_s = interval_s
        self._stopping = stopping
        self._wake = threading.Event()
        # file -> (digest, error) of a validation that failed: not retried until
        # the file changes. The thread's own.
        self._failed: dict[str, tuple[str, str]] = {}
        self._logged: set[tuple[str, str]] = set()
        self._lock = threading.Lock()  # guards _report
        self._report = DeclaredReport(files.description)
        self._thread = threading.Thread(target=self._run, name="declared-connectors",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def report(self) -> DeclaredReport:
        with self._lock:
            return self._report

    def _run(self) -> None:
        while not self._stopping.is_set():
            if self._writes.is_leader():
                try:
                    self.reconcile_once()
                except Exception:
                    log.exception("reconciling the declared connectors (%s) failed; retrying "
                                  "in %.0f s", self._files.description, self._interval_s)
            # Until it leads, look often: a standalone worker applies its files
            # as soon as it is elected, not one interval later.
            self._wake.wait(self._interval_s if self._writes.is_leader() else 0.5)
            self._wake.clear()

    def reconcile_once(self) -> DeclaredReport:
        """One pass; returns (and publishes) its report. Raises what Kafka raises."""
        try:
            scan = self._files.scan()
        except ConfigException as e:  # the directory itself is unreadable
            self._log_once(self._files.description, str(e))
            return self._publish([FileReport(self._files.description, None, INVALID, str(e))])
        snap = self._writes.snapshot()
        reports = [self._broken(e) for e in scan.errors]
        reports += [self._apply(d, snap) for d in scan.connectors]
        self._delete_orphans(scan, snap)
        return self._publish(reports)

    def _publish(self, reports: list[FileReport]) -> DeclaredReport:
        report = DeclaredReport(self._files.description,
                                tuple(sorted(reports, key=lambda r: r.file)),
                                int(time.time() * 1000))
        with self._lock:
            self._report = report
        return report

    def _log_once(self, file: str, message: str) -> None:
        if (file, message) not in self._logged:
            self._logged.add((file, message))
            log.error("connector file %s not applied: %s", file, message,
                      extra={"event": "declared_file_invalid", "file": file})

    def _broken(self, error: FileError) -> FileReport:
        self._log_once(error.file, error.message)
        return FileReport(error.file, None, INVALID, error.message)

    def _apply(self, d: DeclaredConnector, snap: ClusterConfigState) -> FileReport:
        config = {**d.config, "name": d.name}
        current = snap.connector_config(d.name)
        owner = DeclaredOwner(d.file, d.state)
        if current != config or snap.declared_by(d.name) != owner:
            failed = self._failed.get(d.file)
            if failed is not None and failed[0] == d.digest:
                return FileReport(d.file, d.name, INVALID, failed[1])
            error = validation_error(self._writes.validate, d)
            if error is not None:
                self._failed[d.file] = (d.digest, error)
                self._log_once(d.file, error)
                return FileReport(d.file, d.name, INVALID, error)
            self._failed.pop(d.file, None)
            target = TARGETS[d.state or d.initial_state or "RUNNING"] if current is None \
                else None
            self._writes.put(d.name, config, target, owner)
            log.info("connector %s %s from %s", d.name,
                     "created" if current is None else "reconfigured", d.file,
                     extra={"event": "declared_connector_applied", "connector": d.name,
                            "file": d.file})
        if d.state is not None and current is not None \
                and snap.target_state(d.name) != TARGETS[d.state].value:
            self._writes.set_target(d.name, TARGETS[d.state])
            log.info("connector %s set to %s, as %s declares", d.name, d.state, d.file,
                     extra={"event": "declared_connector_applied", "connector": d.name,
                            "file": d.file})
        return FileReport(d.file, d.name, APPLIED)

    def _delete_orphans(self, scan: DirectoryScan, snap: ClusterConfigState) -> None:
        declared = {d.name for d in scan.connectors}
        broken = {e.file for e in scan.errors}
        for name, owner in sorted(snap.declared().items()):
            if name in declared or owner.file in broken:
                continue
            self._writes.delete(name)
            log.info("connector %s deleted: %s no longer declares it", name, owner.file,
                     extra={"event": "declared_connector_deleted", "connector": name,
                            "file": owner.file})


def check_connector_files(config: WorkerConfig, paths: Sequence[str]) -> None:
    """Standalone mode, before the worker starts: parse and validate every file as
    the leader will, raising a ConfigException that names the file and the key.
    Plugins must be registered (``plugin.path``) first."""
    for declared in load_connector_files(paths):
        error = validation_error(
            lambda connector_config: validate_for_worker(config, None, connector_config),
            declared)
        if error is not None:
            raise ConfigException(error)


def files_source(directory: str | None, paths: Sequence[str]) -> ConnectorFiles | None:
    """The worker's connector files: the command line's (standalone), else the
    directory's, else none."""
    if paths:
        return CommandLineFiles(paths)
    # A missing directory is not fatal: a pod may see its volume late. Each pass
    # reports it (and deletes nothing) until it appears.
    return DirectoryFiles(directory) if directory else None
