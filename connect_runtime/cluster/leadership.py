"""Whether this worker leads the cluster, and the takeover and step-down that change it.

Group membership decides who leads (the member assigned partition 0 of the
config topic) and calls :meth:`Leadership.take_over` and :meth:`Leadership.step_down`
from one thread, one at a time. Taking over fences the previous leader's
config-topic producer (``init_transactions`` of ``connect-cluster-<group.id>``)
before this worker writes or acts; stepping down stops every task and connector
instance (through the reconcile thread) before write privileges are given up.

``lock`` is held during a takeover and by every reconcile pass, so a pass never
interleaves with a change of leadership; :attr:`Leadership.leader` and
:attr:`Leadership.epoch` are only written under it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from connect_runtime.cluster.herder_api import HERDER_LOGGER
from connect_runtime.cluster.herder_reads import READ_TIMEOUT_S
from connect_runtime.cluster.metrics import WorkerCounters
from connect_runtime.cluster.spark_runner import SparkTaskRunner
from connect_runtime.storage.config_store import ConfigStore

# The leadership lines are the herder's lifecycle events (docs/operations.md).
log = logging.getLogger(HERDER_LOGGER)


@dataclass(frozen=True)
class LeadershipActions:
    """What a change of leadership does besides flipping the flag."""

    rotate_session_key: Callable[[], None]
    """On takeover: write a new session key if the current one is due."""
    release: Callable[[], None]
    """On step-down: stop every task and connector instance; returns when done."""
    wake: Callable[[], None]
    """After a takeover: ask the reconcile thread for a pass."""
    is_member_leader: Callable[[], bool]
    """Whether the group still assigns this worker the config topic's partition."""


class Leadership:
    """This worker's leadership flag, with the lock that guards it."""

    def __init__(self, config_store: ConfigStore, runner: SparkTaskRunner,
                 counters: WorkerCounters, worker_id: str, worker_url: str,
                 started: threading.Event, stopping: threading.Event,
                 actions: LeadershipActions) -> None:
        self._store = config_store
        self._runner = runner
        self._counters = counters
        self._worker_id = worker_id
        self._worker_url = worker_url
        self._started = started
        self._stopping = stopping
        self._actions = actions
        self.lock = threading.Lock()
        self.leader = False
        self.epoch = -1
        """The offset of this worker's latest ``leader`` record in the config topic (-1:
        it never led): set before :attr:`leader` turns true, read by the writers of
        statuses (``status_store.status_generation``)."""

    def is_leader(self) -> bool:
        return self.leader

    def leader_epoch(self) -> int:
        return self.epoch

    def leader_url(self) -> str | None:
        return self._worker_url if self.leader else self._store.snapshot().leader_url

    def take_over(self) -> None:
        """This worker won partition 0 of the config topic.

        ``init_transactions`` of ``connect-cluster-<group.id>`` fences the previous
        leader, then the leader publishes its URL and takes over reconciliation
        (connector instances and Spark jobs). Retries until done or demoted.
        """
        with self.lock:
            while self._actions.is_member_leader() and not self._stopping.is_set():
                try:
                    self._store.claim_write_privileges()
                    self._started.wait()
                    self._store.read_to_end(READ_TIMEOUT_S)
                    # The leader record first: from the moment this worker says it
                    # leads, its reads show its predecessor's statuses as stale
                    # (``status_store.as_seen_under_leader``), and the statuses it
                    # writes carry its epoch.
                    self._store.put_leader(self._worker_url, self._worker_id)
                    # The leader record's offset (the write read it back): each
                    # takeover's is larger, so it orders elections across logs.
                    epoch = self._store.snapshot().leader_epoch
                    self.epoch = epoch
                    self.leader = True
                    self._counters.leadership_changed()
                    self._actions.rotate_session_key()
                    if self._runner.per_leader:
                        self._runner.start_in_background()  # submit() waits for it
                    log.info("elected leader of the cluster: worker %s (%s) took over, leader "
                             "epoch %d", self._worker_id, self._worker_url, epoch,
                             extra={"event": "leader_elected", "worker": self._worker_id,
                                    "epoch": epoch})
                    break
                except Exception:
                    self.leader = False
                    log.exception("could not take over as leader; retrying")
                    self._store.relinquish_write_privileges()
                    time.sleep(1.0)
        self._actions.wake()

    def resign(self, group_instance_id: str | None) -> None:
        """The worker is stopping: a leader says what happens to its role."""
        if not self.leader:
            return
        after = (f"its place in the group (group.instance.id {group_instance_id}) waits "
                 f"session.timeout.ms for its restart, then another worker takes over"
                 if group_instance_id else
                 "another worker takes over once it has left the group")
        log.info("worker %s (%s) resigns as leader: it is stopping; %s", self._worker_id,
                 self._worker_url, after,
                 extra={"event": "leadership_lost", "worker": self._worker_id})

    def step_down(self) -> None:
        """This worker lost partition 0: stop hosting, stop writing."""
        with self.lock:  # waits for a reconcile pass in progress
            led = self.leader
            if led:
                self._counters.leadership_changed()
            self.leader = False  # no pass starts from now on
        self._actions.release()
        if self._runner.per_leader:
            self._runner.shutdown()  # releases this application's executors
        self._store.relinquish_write_privileges()
        if led and not self._stopping.is_set():  # a stopping leader said so when it stopped
            log.info("worker %s (%s) is no longer the leader: its tasks and connectors "
                     "stopped, config writes relinquished", self._worker_id, self._worker_url,
                     extra={"event": "leadership_lost", "worker": self._worker_id})
        else:
            log.info("stepped down: tasks and connectors stopped, config writes relinquished")
