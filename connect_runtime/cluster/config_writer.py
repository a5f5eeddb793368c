"""The leader's writes to the config topic: validated, leader-checked, fencing-aware.

Only the leader writes the config topic, through its transactional producer
``connect-cluster-<group.id>`` (a newer leader's ``init_transactions`` fences
it). Every write here checks leadership first (NotLeaderException: the REST
layer forwards the request to the leader), turns a fenced write into a 409 that
says the request was not applied (never a silent drop), and wakes the reconcile
thread, which then acts on what was written.

The writer heals itself: a leader whose store holds no producer (a fenced or
fatal write dropped it) claims one again before its next write, while the
group still assigns it the config topic's partition. A claim that fails
answers that request, and ``/health`` says the leader cannot write
(:attr:`ConfigWriter.cannot_write`) until a claim succeeds.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from connect_runtime.cluster.herder_api import HERDER_LOGGER, ConnectorInfo, ConnectorTaskId
from connect_runtime.cluster.herder_reads import HerderReads
from connect_runtime.cluster.loggers import parse_level
from connect_runtime.cluster.session_keys import SessionKeys
from connect_runtime.config.validation import format_validation_errors
from connect_runtime.errors import (
    AlreadyExistsException,
    BadRequestException,
    ConflictException,
    NotLeaderException,
    ProducerFencedError,
)
from connect_runtime.protocol.states import TargetState
from connect_runtime.storage.config_store import ClusterConfigState, ConfigStore, DeclaredOwner

# Its lines are the herder's lifecycle events (docs/operations.md).
log = logging.getLogger(HERDER_LOGGER)

_INITIAL_STATES = {
    None: TargetState.STARTED, "RUNNING": TargetState.STARTED,
    "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED,
}


def _refuse_declared(snap: ClusterConfigState, name: str, what: str) -> None:
    owner = snap.declared_by(name)
    if owner is not None:
        raise ConflictException(
            f"Cannot {what} connector {name}: connector file {owner.file} declares it; "
            f"change or remove that file instead")


def config_changes(before: dict[str, str], after: dict[str, str]) -> str:
    """Which keys a config update changed, added and removed, for the log: names
    only, since values may be secrets."""
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    parts = [f"{what} {', '.join(keys)}" for what, keys in (
        ("changed", changed), ("added", sorted(after.keys() - before.keys())),
        ("removed", sorted(before.keys() - after.keys()))) if keys]
    return "; ".join(parts) or "no key changed"


class ConfigWriter:
    """Connector configs, target states, session keys and cluster logger levels.

    ``is_leader``: this worker took over as leader (its flag, set by the herder);
    ``is_member_leader``: the group still assigns it the config topic's partition;
    ``wake``: asks the reconcile thread for a pass after a write.
    """

    def __init__(self, config_store: ConfigStore, reads: HerderReads, keys: SessionKeys,
                 is_leader: Callable[[], bool], is_member_leader: Callable[[], bool],
                 wake: Callable[[], None]) -> None:
        self._store = config_store
        self._reads = reads
        self._keys = keys
        self._is_leader = is_leader
        self._is_member_leader = is_member_leader
        self._wake = wake
        self._lock = threading.Lock()  # one write at a time through the one producer
        # Why the last claim of the producer failed; None once one succeeded.
        # Written under _lock, read by /health without it (a str swap is atomic).
        self.cannot_write: str | None = None
        # Per connector name: from "is the name free?" to its config written.
        self._create_locks: dict[str, threading.Lock] = {}
        self._create_locks_guard = threading.Lock()

    def require_leader(self, what: str) -> None:
        if not self._is_leader():
            url = self._store.snapshot().leader_url
            raise NotLeaderException(
                f"Cannot {what}: this worker is not the leader"
                + (f"; the leader is {url}" if url else " and no leader is known"), url)

    def write(self, what: str, write: Callable[[], None]) -> None:
        """A config-topic write by the leader; a fenced write is an error, never a drop."""
        self.require_leader(what)
        with self._lock:
            self._claim_if_dropped()
            try:
                write()
            except ProducerFencedError as e:
                # Another worker claimed connect-cluster-<group.id>: we may be a zombie.
                # The next write claims again if the group still says we lead.
                raise ConflictException(
                    f"Cannot {what}: this worker's config-topic producer was fenced by a "
                    f"newer leader ({e}); the request was not applied. Retry it.") from e
        self._wake()

    def _claim_if_dropped(self) -> None:
        """Claim the config topic's producer again if a failed write dropped it and
        the group still assigns this worker the config topic's partition (else
        claiming would fence the real leader: the write is refused as a
        follower's). Called under ``_lock``."""
        if self._store.has_write_privileges or not self._is_member_leader():
            return
        try:
            self._store.claim_write_privileges()
        except Exception as e:
            self.cannot_write = str(e)
            log.error("the leader cannot write the config topic: claiming its producer "
                      "failed (%s)", e)
            raise
        if self.cannot_write is not None:
            log.info("the leader can write the config topic again")
        self.cannot_write = None

    def rotate_session_key(self) -> None:
        """Write a new session key if the current one is due (KIP-507)."""
        if not self._is_leader():
            return
        key = self._keys.next_key()
        if key is not None:
            self.write("rotate the session key", lambda: self._store.put_session_key(
                key.key, key.algorithm, key.creation_ms))

    def _validate_or_raise(self, config: dict[str, str]) -> None:
        infos = self._reads.validate_connector_config(None, config)
        if infos.error_count:
            raise BadRequestException(format_validation_errors(infos))

    def create_connector(self, name: str, config: dict[str, str],
                         initial_state: str | None = None,
                         before_write: Callable[[dict[str, str]], None] | None = None,
                         ) -> ConnectorInfo:
        """Validate ``config`` and write it with its target state.

        ``before_write(config)`` (writing initial offsets, KIP-995) runs once the
        config is valid and before it is written, so no task of the connector can
        start before it is done; what it raises is the answer, and the config is not
        written. Creates of one name run one at a time: the name is checked free,
        and stays so until the config is written.
        """
        if initial_state not in _INITIAL_STATES:
            raise BadRequestException(f"Invalid initial_state {initial_state!r}; expected "
                                      "RUNNING, PAUSED or STOPPED")
        config = {**config, "name": name}
        with self._create_lock(name):
            if name in self._reads.snapshot(refresh=True).connectors():
                raise AlreadyExistsException(f"Connector {name} already exists")
            self.require_leader(f"create connector {name}")
            self._validate_or_raise(config)
            if before_write is not None:
                before_write(dict(config))
            target = _INITIAL_STATES[initial_state].value
            self.write(f"create connector {name}",
                       lambda: self._store.put_connector_config(name, config, target))
        log.info("connector %s created (%s, target state %s)", name,
                 config.get("connector.class"), target,
                 extra={"event": "connector_created", "connector": name})
        return ConnectorInfo(name, config, [])

    def _create_lock(self, name: str) -> threading.Lock:
        with self._create_locks_guard:
            return self._create_locks.setdefault(name, threading.Lock())

    def put_connector_config(self, name: str,
                             config: dict[str, str]) -> tuple[bool, ConnectorInfo]:
        self.require_leader(f"update the config of connector {name}")
        snap = self._reads.snapshot(refresh=True)
        before = snap.connector_config(name)
        if before is None:
            return True, self.create_connector(name, config)
        _refuse_declared(snap, name, "reconfigure")
        config = {**config, "name": name}
        self._validate_or_raise(config)
        self.write(f"update the config of connector {name}",
                   lambda: self._store.put_connector_config(name, config, None))
        log.info("connector %s reconfigured: %s", name, config_changes(before, config),
                 extra={"event": "connector_reconfigured", "connector": name})
        return False, ConnectorInfo(name, config, [ConnectorTaskId(name, i)
                                                   for i in range(snap.task_count(name))])

    def patch_connector_config(self, name: str, patch: dict[str, str | None]) -> ConnectorInfo:
        current = self._reads.require(self._reads.snapshot(refresh=True), name)
        merged = {k: v for k, v in {**current, **patch}.items() if v is not None}
        if merged.get("name", name) != name:
            raise BadRequestException(f"Connector name configuration ({merged['name']}) "
                                      f"doesn't match connector name in the URL ({name})")
        return self.put_connector_config(name, merged)[1]

    def delete_connector(self, name: str) -> None:
        self.require_leader(f"delete connector {name}")
        snap = self._reads.snapshot(refresh=True)
        self._reads.require(snap, name)
        _refuse_declared(snap, name, "delete")
        self.write(f"delete connector {name}",
                   lambda: self._store.remove_connector_config(name))
        log.info("connector %s deleted", name,
                 extra={"event": "connector_deleted", "connector": name})

    def set_target(self, name: str, target: TargetState, *, declared: bool = False) -> None:
        """Write ``name``'s target state; ``declared``: the connector files' pass is
        the writer, so a file's ``state`` does not refuse it."""
        self.require_leader(f"change the target state of connector {name}")
        snap = self._reads.snapshot(refresh=True)
        self._reads.require(snap, name, "Unknown connector {}")
        owner = snap.declared_by(name)
        if not declared and owner is not None and owner.state is not None:
            raise ConflictException(
                f"Connector {name} is declared by connector file {owner.file} with state "
                f"{owner.state}; change the file's 'state' to change the connector's")
        self.write(f"set connector {name} to {target.value}",
                   lambda: self._store.put_target_state(name, target.value))

    # ----------------------------------------- declared connectors (their files)

    def put_declared(self, name: str, config: dict[str, str], target: TargetState | None,
                     owner: DeclaredOwner) -> None:
        """Create or rewrite a connector a file declares, owned by that file; the
        caller validated ``config`` (see connect_runtime.cluster.declared_connectors)."""
        self.write(f"apply connector file {owner.file}", lambda: self._store.put_connector_config(
            name, config, None if target is None else target.value, declared_by=owner))

    def delete_declared(self, name: str) -> None:
        """Delete a connector whose file is gone."""
        self.write(f"delete connector {name}", lambda: self._store.remove_connector_config(name))

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """Leader only, like every config-topic write here (followers forward it).

        Connect lets any worker write this record; one writer keeps the rule that
        only the leader's fenced producer writes the config topic, and a client
        sees the same 204 either way. The level is checked first, so a bad one
        answers 404 on the worker that received it, without a hop.
        """
        name = parse_level(level)
        self.write(f"set the level of logging namespace {namespace}",
                   lambda: self._store.put_logger_level(namespace, name))
